// engine/core/forecast.cpp — aggregation of kernel latencies (no overlap on one GPU: kernels run in order).
#include "core/forecast.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/text.h"
#include "core/tile_model.h"

namespace ns {

double forecast::total() const {
  double t = 0;
  for (double s : phase_seconds) t += s;
  return t;
}

double forecast::flops_total() const {
  double f = 0;
  for (const auto& ki : kernels) f += ki.k.flops * double(g.nodes[ki.node].count);
  return f;
}

double forecast::phase_flops(phase p) const {
  double f = 0;
  for (const auto& ki : kernels)
    if (ki.ph == p) f += ki.k.flops * double(g.nodes[ki.node].count);
  return f;
}

namespace {

// `who` names node n in an error: the caller's words (session.cpp: its script's line), else "node '<name>'".
std::string node_who(const node& n, const std::string* who) { return who ? *who : "node '" + n.name + "'"; }

// A node's attrs.model_flops_share (forecast::phase_model_flops): 1 without it, an error unless a number in (0, 1].
double model_flops_share(const node& n, const std::string* who) {
  const auto it = n.attrs.find("model_flops_share");
  if (it == n.attrs.end()) return 1;
  const double* v = std::get_if<double>(&it->second);
  if (!v || !(*v > 0 && *v <= 1))
    throw error(node_who(n, who) + ": attrs.model_flops_share must be a number in (0, 1] (the share of its " +
                "forward and backward FLOPs that is the model's work)");
  return *v;
}

// A node's attrs.<key> (forecast::phase_model_flops: model_flops_copies, model_flops_shards,
// model_flops_weight_copies): 1 without it, an error
// unless a number >= 1 (below 1e9), a whole one when `whole` (`what` says what it counts).
double model_flops_ranks(const node& n, const char* key, bool whole, const char* what, const std::string* who) {
  const auto it = n.attrs.find(key);
  if (it == n.attrs.end()) return 1;
  const double* v = std::get_if<double>(&it->second);
  if (!v || !(*v >= 1 && *v < 1e9 && (!whole || *v == std::floor(*v))))
    throw error(node_who(n, who) + ": attrs." + key + " must be a " + (whole ? "whole " : "") + "number >= 1 (" +
                what + ")");
  return *v;
}

// Copies may be fractional: a node whose parts several ranks run alike in different numbers (Megatron's linear_qkv
// with a key/value head shared by tp / num_key_value_heads ranks: scripts/neusight/nodes.lua qkv) counts its work
// over the ranks on average.
constexpr const char* copies_what =
    "the tensor-parallel ranks that run the same node on the same data, on average over its work";
constexpr const char* shards_what = "the expert-parallel ranks that hold its other parts";
// A node whose rows the tensor-parallel ranks split (sequence parallelism) while each holds its weights whole (a router
// under Megatron's token dispatcher): the ranks accumulate the same parameters' gradients alike.
constexpr const char* weight_copies_what =
    "the tensor-parallel ranks that hold its weights whole and accumulate their gradient alike";

// attrs.model_flops_weight_copies of node n, whose model_flops_copies is `copies`: both above 1 is an error (a node
// every rank runs on the same data has no rows split, and its copies already count its gradient once: divided by
// both, the accumulation would count 1 / tp of once).
double model_flops_weight_copies(const node& n, double copies, const std::string* who) {
  const double w = model_flops_ranks(n, "model_flops_weight_copies", true, weight_copies_what, who);
  if (w > 1 && copies > 1)
    throw error(node_who(n, who) + ": attrs.model_flops_weight_copies and attrs.model_flops_copies exclude each " +
                "other (copies: ranks that run the node on the same data, whose rows are not split)");
  return w;
}

}  // namespace

void node_model_flops_check(const node& n, const std::string& who) {
  model_flops_share(n, &who);
  const double copies = model_flops_ranks(n, "model_flops_copies", false, copies_what, &who);
  model_flops_ranks(n, "model_flops_shards", true, shards_what, &who);
  model_flops_weight_copies(n, copies, &who);
}

double forecast::phase_model_flops(phase p) const {
  const bool rows = p == phase::forward || p == phase::backward;
  double f = 0;
  for (const auto& ki : kernels)
    if (ki.ph == p) {
      const node& n = g.nodes[ki.node];
      const double copies = model_flops_ranks(n, "model_flops_copies", false, copies_what, nullptr);
      const bool acc = p == phase::accumulate;
      const double shards = acc ? model_flops_ranks(n, "model_flops_shards", true, shards_what, nullptr) : 1.0;
      const double weights = acc ? model_flops_weight_copies(n, copies, nullptr) : 1.0;
      f += ki.k.flops * double(n.count) * (rows ? model_flops_share(n, nullptr) : 1.0) * shards / (copies * weights);
    }
  return f;
}

double graph::params_total() const {
  double p = 0;
  for (const auto& n : nodes)
    if (!n.optimizer) p += n.params * double(n.count);
  return p;
}

double forecast::params_total() const { return g.params_total(); }

namespace {
// forecast::seconds_by_family, the floors on `floors_on` when given.
std::vector<family_time> family_times(const forecast& fc, const gpu_spec* floors_on) {
  struct acc {
    double sum = 0, squares = 0, floor = 0, most = 0;
  };
  std::map<family, acc> by;
  acc other;
  for (size_t i = 0; i < fc.kernels.size(); ++i) {
    const kernel& k = fc.kernels[i].k;
    const auto fam = k.seconds ? std::nullopt : family_of(k);
    acc& a = fam ? by[*fam] : other;
    a.sum += fc.seconds(i), a.squares += fc.seconds(i) * fc.seconds(i);
    if (floors_on) a.floor += roofline_floor_seconds(k, *floors_on) * double(fc.g.nodes[fc.kernels[i].node].count);
    if (fam) a.most = std::max(a.most, family_range_value(*fam, k));
  }
  std::vector<family_time> out;
  auto add = [&](std::string name, const acc& a, std::string_view input) {
    if (a.sum > 0) out.push_back({std::move(name), a.sum, a.sum * a.sum / a.squares, a.floor, std::string(input), a.most});
  };
  for (const auto& [f, a] : by) add(std::string(family_name(f)), a, family_range_input(f));
  add("other", other, "");
  return out;
}
}  // namespace

std::vector<family_time> forecast::seconds_by_family() const { return family_times(*this, nullptr); }

std::vector<family_time> forecast::seconds_by_family(const gpu_spec& gpu) const { return family_times(*this, &gpu); }

void family_floor_inputs_add(figure_inputs& in, const std::vector<family_time>& families) {
  for (const auto& f : families)
    if (f.floor_seconds > 0) in.emplace_back("floor_s." + f.family, f.floor_seconds);
}

void family_inputs_add(figure_inputs& in, const std::vector<family_time>& families, const predictor& pred,
                       const std::string& vendor) {
  for (const auto& f : families) {
    in.emplace_back("family_s." + f.family, f.seconds);
    in.emplace_back("family_n." + f.family, f.kernels);
    if (f.family != "other" && !pred.models_family(vendor, f.family)) in.emplace_back("roofline." + f.family, true);
    if (!f.range_input.empty() && f.range_most > 0) in.emplace_back("longest." + f.family + "." + f.range_input, f.range_most);
  }
  family_floor_inputs_add(in, families);
}


forecast forecast_make(graph g, std::vector<kernel_instance> kernels, std::vector<double> seconds_each) {
  forecast f{std::move(g), std::move(kernels), std::move(seconds_each), {}};
  for (size_t i = 0; i < f.kernels.size(); ++i) f.phase_seconds[size_t(f.kernels[i].ph)] += f.seconds(i);
  return f;
}

}  // namespace ns
