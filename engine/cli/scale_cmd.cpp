// engine/cli/scale_cmd.cpp — the hybrid of issue 6 for per-op label traces: each measured op time is scaled by
// the ratio of the tile predictor's forecasts for its kernels on the two GPUs (rule: scripts/neusight/scale.lua).
#include "cli/scale_cmd.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/paths.h"
#include "cli/report.h"
#include "core/opgraph.h"
#include "core/roofline.h"
#include "core/text.h"
#include "core/tile_model.h"
#include "core/trace.h"
#include "lua/session.h"

namespace ns {
namespace fs = std::filesystem;

namespace {

constexpr phase phases[3] = {phase::forward, phase::backward, phase::accumulate};

}  // namespace

int scale_main(const scale_flags& f) {
  const auto root = data_root_find();
  session_options so;
  so.data_root = root;
  session s(so);
  const gpu_catalog catalog(root / "gpus");
  const gpu_spec from = catalog.resolve(f.from), to = catalog.resolve(f.to);
  const trace tr = trace_load(f.trace);
  if (tr.format != trace_format::label_csv)
    throw error(f.trace + ": `scale` reads per-op label traces (label/<GPU>/<tag>.csv) for now; this is a " +
                std::string(trace_format_name(tr.format)) + " trace");

  const fs::path trace(f.trace);
  const fs::path gpath = !f.graph.empty() ? fs::path(f.graph)
                                          : trace.parent_path().parent_path().parent_path() / "opgraph" /
                                                (trace.stem().string() + ".csv");
  if (!fs::exists(gpath))
    throw error(f.trace + ": no operator graph for this trace at " + gpath.generic_string() +
                " (pass --graph opgraph/<tag>.csv)");
  opgraph og = opgraph_load(gpath.string());
  opgraph_check_supported(og);
  std::vector<std::string> warnings;
  const int64_t layers = opgraph_layers(og, f.layers, warnings);
  opgraph_replicate(og, layers);
  const bool training = og.tag && og.tag->mode == "train";

  std::vector<kernel_instance> k_from = opgraph_kernels(og, training), k_to = k_from;
  s.tiles_select(k_from, from);
  s.tiles_select(k_to, to);
  const auto pred = predictor_make("neusight", f.weights.empty() ? root / "weights" : fs::path(f.weights));
  const std::vector<double> sec_from = pred->predict(k_from, from), sec_to = pred->predict(k_to, to);

  // Per (node, phase): predicted ms on both GPUs and the family of the dominant kernel.
  struct node_phase {
    double from_ms = 0, to_ms = 0, top = -1;
    std::string family = "none";
  };
  std::map<std::pair<size_t, int>, node_phase> pred_by;
  for (size_t i = 0; i < k_from.size(); ++i) {
    auto& np = pred_by[{k_from[i].node, int(k_from[i].ph)}];
    np.from_ms += sec_from[i] * 1e3;
    np.to_ms += sec_to[i] * 1e3;
    if (sec_from[i] > np.top) np.top = sec_from[i], np.family = std::string(kernel_kind_name(k_from[i].k.kind));
  }
  std::map<std::string, size_t> node_of;
  for (size_t i = 0; i < og.g.nodes.size(); ++i) node_of.emplace(og.g.nodes[i].name, i);

  std::vector<session::scale_item> items;
  std::vector<std::pair<size_t, int>> where;  // (node, phase) of each item
  std::map<std::string, size_t> skipped;
  for (const auto& op : tr.ops) {
    const int p = op.phase == trace_phase::forward ? 0 : op.phase == trace_phase::backward ? 1
                : op.phase == trace_phase::accumulate ? 2 : -1;
    if (p < 0 || !op.measured_ms || *op.measured_ms <= 0 || (!training && p > 0)) continue;
    const auto it = node_of.find(op.name);
    if (it == node_of.end()) {
      ++skipped["op not in the graph " + gpath.filename().string()];
      continue;
    }
    const auto pb = pred_by.find({it->second, int(phases[p])});
    session::scale_item item;
    item.name = op.name;
    item.op = og.g.nodes[it->second].op;
    item.phase = std::string(phase_name(phases[p]));
    item.measured_ms = *op.measured_ms;
    item.family = "none";
    if (pb != pred_by.end()) item.from_ms = pb->second.from_ms, item.to_ms = pb->second.to_ms, item.family = pb->second.family;
    items.push_back(std::move(item));
    where.push_back({it->second, int(phases[p])});
  }
  const std::vector<double> scaled = s.scale_apply(items, from, to);

  double origin = 0, total = 0, ph_total[3] = {0, 0, 0};
  using json = nlohmann::ordered_json;
  json ops = json::array();
  for (size_t i = 0; i < items.size(); ++i) {
    const double count = double(og.g.nodes[where[i].first].count);
    origin += items[i].measured_ms * count;
    total += scaled[i] * count;
    ph_total[where[i].second] += scaled[i] * count;
    ops.push_back({{"name", items[i].name}, {"op", items[i].op}, {"phase", items[i].phase}, {"count", count},
                   {"family", items[i].family}, {"origin_ms", items[i].measured_ms * count},
                   {"scaled_ms", scaled[i] * count},
                   {"predicted_from_ms", items[i].from_ms * count}, {"predicted_to_ms", items[i].to_ms * count}});
  }
  for (const auto& [why, n] : skipped) warnings.push_back(fmt::format("skipped {} rows: {}", n, why));
  for (const auto& w : warnings) std::fprintf(stderr, "neusight: warning: %s\n", w.c_str());

  if (f.format == "json") {
    json j;
    j["trace"] = f.trace;
    j["graph"] = gpath.generic_string();
    j["from"] = from.name;
    j["to"] = to.name;
    j["mode"] = training ? "train" : "inference";
    j["layers"] = layers;
    j["origin_ms"] = origin;
    j["latency_ms"] = total;
    j["forward_ms"] = ph_total[0];
    j["backward_ms"] = ph_total[1] + ph_total[2];  // includes gradient accumulation, as in `predict`
    j["warnings"] = warnings;
    j["ops"] = std::move(ops);
    emit(j.dump(2) + "\n", f.output);
    return 0;
  }
  std::string out = fmt::format("trace     {}  ({}, {} layers)\nscaled    {} → {}\n\n", f.trace,
                                training ? "train" : "inference", layers, from.name, to.name);
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return scaled[a] * double(og.g.nodes[where[a].first].count) > scaled[b] * double(og.g.nodes[where[b].first].count);
  });
  out += fmt::format("{:<40} {:<10} {:>5} {:>12} {:>12} {:>8}\n", "op (largest 25)", "phase", "count", "origin ms",
                     "scaled ms", "ratio");
  for (size_t n = 0; n < std::min<size_t>(25, order.size()); ++n) {
    const size_t i = order[n];
    const double count = double(og.g.nodes[where[i].first].count);
    out += fmt::format("{:<40} {:<10} {:>5} {:>12.4f} {:>12.4f} {:>8.3f}\n", items[i].name.substr(0, 40),
                       items[i].phase, count, items[i].measured_ms * count, scaled[i] * count,
                       items[i].measured_ms > 0 ? scaled[i] / items[i].measured_ms : 0.0);
  }
  out += fmt::format("\norigin ({})   {:>12.3f} ms\nforward        {:>12.3f} ms\nbackward       {:>12.3f} ms\n"
                     "end to end     {:>12.3f} ms\n",
                     from.name, origin, ph_total[0], ph_total[1] + ph_total[2], total);
  emit(out, f.output);
  return 0;
}

}  // namespace ns
