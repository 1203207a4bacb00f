// tests/core/test_model_fidelity.cpp — our Lua model builders (scripts/neusight/models/) against the reference's traced
// operator graphs (../shared/data/neusight/opgraph): the same kernels per layer and outside it, the same total FLOPs.
//
// For every single-GPU, non-fusion graph of the models below, the imported graph (engine/core/opgraph.h) and our
// graph for the same model, mode, batch and sequence (workload → session::expand, optimizer "none") are compared:
//   * kernels of ONE transformer layer (imported: the traced layer rows; ours: nodes with a non-empty layer),
//     as multisets per phase — GEMM/BMM by (b, m, n, k), vector kernels by (name, rows, hidden), memory
//     kernels by their bytes;
//   * the same multiset for everything outside the layer (embeddings, masks, final norm, heads);
//   * the total FLOPs of the whole model (layers replicated by the config's count) within 0.5 %.
// Our training loss (op cross_entropy and its "loss.*" shift copy) is excluded: the reference traces none.
// Known, documented differences are excluded by the named exceptions below, never by a tolerance.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>

#include "core/gpu_spec.h"
#include "core/opgraph.h"
#include "lua/session.h"
#include "test_util.h"

using namespace ns;
namespace fs = std::filesystem;

namespace {

const char* const fidelity_models[] = {"gpt2_large", "gpt3_xl", "gpt3_27", "bert_large", "opt_13"};

// Relative tolerance on the whole model's FLOPs: the exceptions below move at most a vocabulary-sized
// accumulation or a (batch, hidden) activation, far below it.
const double flops_rel_tol = 0.005;

enum class side { reference, ours };

// A kernel one side has and the other lacks for a documented reason.
struct fidelity_exception {
  const char* name;
  const char* model_prefix;  // the rule applies to models whose name starts with this ("" = all)
  side where;
  std::function<bool(const node&, const kernel_instance&)> matches;
};

bool all_single_elements(const node& n) {
  if (shape_numel(n.output) != 1) return false;
  for (const auto& s : n.inputs)
    if (shape_numel(s) != 1) return false;
  return true;
}

const std::vector<fidelity_exception>& exceptions() {
  static const std::vector<fidelity_exception> list = {
      // The trace records indexing of size() results (Python ints: batch_size, seq_len, …) as getitem rows
      // with MEM((1,), (1,)) kernels. They run on the host, not the GPU; our builders emit no node for them.
      {"host_getitem", "", side::reference,
       [](const node& n, const kernel_instance&) { return n.op == "getitem" && all_single_elements(n); }},
      // GPT-2/3 and OPT lm_head is a bias-free Linear (weight tied to the token embedding), yet the reference's
      // Linear decomposition always accumulates a bias gradient VECadd(1, V). We accumulate only the weight.
      {"lm_head_bias_grad", "gpt", side::reference,
       [](const node& n, const kernel_instance& ki) {
         return n.name == "lm_head" && ki.ph == phase::accumulate && ki.k.rows == 1 && ki.k.hidden == n.output.back();
       }},
      {"lm_head_bias_grad", "opt", side::reference,
       [](const node& n, const kernel_instance& ki) {
         return n.name == "lm_head" && ki.ph == phase::accumulate && ki.k.rows == 1 && ki.k.hidden == n.output.back();
       }},
      // BertPooler's activation is nn.Tanh. The reference classifies by node name and 'bert_pooler_activation'
      // contains '_act', its ReLU pattern: VECrelu (bw VECrelu). Ours is a tanh: VECtanh (bw VECmulu + VECaddu).
      {"bert_pooler_tanh", "bert", side::reference,
       [](const node& n, const kernel_instance&) { return n.name == "bert_pooler_activation"; }},
      {"bert_pooler_tanh", "bert", side::ours,
       [](const node& n, const kernel_instance&) { return n.name == "pooler.activation"; }},
  };
  return list;
}

// Our training loss: not traced by the reference.
bool is_loss(const node& n) { return n.op == "cross_entropy" || n.name.rfind("loss.", 0) == 0; }

std::string kernel_key(const kernel_instance& ki) {
  std::ostringstream o;
  o << phase_name(ki.ph) << ":";
  const kernel& k = ki.k;
  switch (k.kind) {
    case kernel_kind::gemm: o << "Linear(" << k.m << "," << k.n << "," << k.k << ")"; break;
    case kernel_kind::bmm: o << "BMM(" << k.b << "," << k.m << "," << k.n << "," << k.k << ")"; break;
    case kernel_kind::memory: o << "MEM[" << std::llround(k.bytes) << " B]"; break;
    default: o << k.name << "(" << k.rows << "," << k.hidden << ")"; break;
  }
  return o.str();
}

using multiset = std::map<std::string, int64_t>;

struct region_kernels {
  multiset layer, rest;
};

struct side_result {
  region_kernels kernels;
  double flops = 0;                          // whole model, layers replicated
  std::map<std::string, size_t> excepted;    // exception name → kernels dropped
};

// Sorts kernels into the layer / outside-layer multisets, dropping excepted ones (counted by name).
side_result collect(const std::string& model, side where, const graph& g, const std::vector<kernel_instance>& kernels,
                    const std::function<bool(size_t)>& in_layer, int64_t layers) {
  side_result r;
  for (const auto& ki : kernels) {
    const node& n = g.nodes[ki.node];
    if (where == side::ours && is_loss(n)) continue;
    r.flops += ki.k.flops * double(in_layer(ki.node) ? layers : 1);
    const fidelity_exception* hit = nullptr;
    for (const auto& e : exceptions())
      if (e.where == where && model.rfind(e.model_prefix, 0) == 0 && e.matches(n, ki)) hit = &e;
    if (hit) {
      ++r.excepted[hit->name];
      continue;
    }
    ++(in_layer(ki.node) ? r.kernels.layer : r.kernels.rest)[kernel_key(ki)];
  }
  return r;
}

// One line per kernel key whose count differs ("ours only: key xN" / "reference only: key xN"); "" when equal.
std::string multiset_diff(const multiset& reference, const multiset& ours) {
  std::ostringstream o;
  std::map<std::string, int64_t> delta;
  for (const auto& [k, n] : ours) delta[k] += n;
  for (const auto& [k, n] : reference) delta[k] -= n;
  for (const auto& [k, n] : delta)
    if (n != 0) o << "\n    " << (n > 0 ? "ours only: " : "reference only: ") << k << " x" << std::llabs(n);
  return o.str();
}

}  // namespace

TEST_CASE("model fidelity: builders reproduce the reference's traced graphs (bert, opt, gpt)", "[models][opgraph]") {
  const fs::path dir = (ns_test::source_dir / ".." / "shared" / "data" / "neusight" / "opgraph").lexically_normal();
  if (!fs::is_directory(dir)) {
    WARN("skipped: " << dir.string() << " not found (the shared NeuSight data is not part of a clone)");
    return;
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto tag = opgraph_tag_parse(e.path().stem().string());
    if (!tag || !tag->option.empty() || e.path().extension() != ".csv") continue;  // fusion / dp / tp / pp
    if (std::find(std::begin(fidelity_models), std::end(fidelity_models), tag->model) != std::end(fidelity_models))
      files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() == 20);  // 4 graphs per model

  session_options o;
  o.data_root = ns_test::source_dir;
  session s(o);
  const gpu_spec gpu = gpu_catalog(ns_test::source_dir / "gpus").resolve("A100-PCIE-40GB");

  std::map<std::string, size_t> exceptions_used;
  std::ostringstream summary;
  for (const auto& file : files) {
    const std::string stem = file.stem().string();
    INFO("graph " << file.string());
    opgraph og = opgraph_load(file.string());
    REQUIRE(og.tag);
    REQUIRE(og.layer);
    REQUIRE(og.unsupported.empty());
    const auto layers = opgraph_config_layers(og);
    REQUIRE(layers);
    const bool training = og.tag->mode == "train";

    const workload w = s.workload_load("", {{"model", og.tag->model},
                                            {"gpu", std::string("A100-PCIE-40GB")},
                                            {"mode", og.tag->mode},
                                            {"batch", og.tag->batch},
                                            {"seq", og.tag->seq},
                                            {"optimizer", std::string("none")}});
    const expansion e = s.expand(w.g, gpu, training);
    CHECK(e.fallback_ops.empty());
    // Our layer nodes carry count = the config's layer count.
    for (const auto& n : w.g.nodes) {
      INFO("node " << n.name);
      CHECK(n.count == (n.layer.empty() ? 1 : *layers));
    }

    const auto ref_in_layer = [&](size_t i) { return i >= og.layer->first && i <= og.layer->second; };
    const auto ours_in_layer = [&](size_t i) { return !w.g.nodes[i].layer.empty(); };
    const side_result ref = collect(og.tag->model, side::reference, og.g, opgraph_kernels(og, training),
                                    ref_in_layer, *layers);
    const side_result ours = collect(og.tag->model, side::ours, w.g, e.kernels, ours_in_layer, *layers);

    const std::string layer_diff = multiset_diff(ref.kernels.layer, ours.kernels.layer);
    const std::string rest_diff = multiset_diff(ref.kernels.rest, ours.kernels.rest);
    INFO("kernels of one layer differ:" << layer_diff);
    CHECK(layer_diff.empty());
    INFO("kernels outside the layer differ:" << rest_diff);
    CHECK(rest_diff.empty());
    const double rel = std::fabs(ours.flops - ref.flops) / ref.flops;
    INFO("total FLOPs: reference " << ref.flops << ", ours " << ours.flops << " (relative " << rel << ")");
    CHECK(rel < flops_rel_tol);

    size_t layer_kernels = 0;
    for (const auto& [k, n] : ref.kernels.layer) layer_kernels += size_t(n);
    summary << "\n  " << stem << ": " << layer_kernels << " layer kernels matched, FLOPs rel. diff " << rel
            << ", exceptions:";
    std::map<std::string, size_t> used = ref.excepted;
    for (const auto& [name, n] : ours.excepted) used[name] += n;
    for (const auto& [name, n] : used) {
      summary << " " << name << " x" << n;
      exceptions_used[name] += n;
    }
  }
  // Every exception must still be needed: a stale one would hide a future regression.
  for (const auto& ex : exceptions()) {
    INFO("exception '" << ex.name << "' no longer matches any kernel: remove it");
    CHECK(exceptions_used.count(ex.name) == 1);
  }
  WARN("model fidelity: " << files.size() << " reference graphs compared" << summary.str());
}
