// engine/cli/scale_cmd.cpp — the hybrid of issue 6. Per-op label traces: each measured op time is scaled by the
// ratio of the tile predictor's forecasts for its kernels on the two GPUs (rule: scripts/neusight/scale.lua).
// Chrome-trace JSON and wavescale traces (launch data per kernel): scale.lua's kind_route sends kernel-varying ops
// (GEMM/BMM, fused attention; backward ops with their forward op's shapes) to that ratio, with our kernels built by
// scale.lua kernels() from the op's input shapes, and every other op to Habitat's wave scaling of each measured
// kernel plus the pass overhead carried over (spec method-habitat.md §1.7, §1.8, §4.2), where a sub-wave kernel that
// scale.lua sub_wave_streams() says fills every SM moves with the bandwidth as a multi-wave one does. Both ratio paths apply
// physics per kernel (scale.lua destination()): a resource that does not bind a kernel on either GPU cannot move it.
#include "cli/scale_cmd.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>

#include "cli/flags.h"
#include "cli/paths.h"
#include "cli/report.h"
#include "ingest/label.h"
#include "ingest/opgraph.h"
#include "core/forecast.h"
#include "core/roofline.h"
#include "core/text.h"
#include "core/tile_model.h"
#include "ingest/trace.h"
#include "core/wave_scaling.h"
#include "lua/session.h"

namespace ns {
namespace fs = std::filesystem;

namespace {

constexpr phase phases[3] = {phase::forward, phase::backward, phase::accumulate};
using json = nlohmann::ordered_json;

// One output row: times are totals over the op's replication `count`.
struct scale_row {
  std::string name, op, phase, family, method;
  std::string dtype;  // of the dominant kernel of a ratio op; empty otherwise
  std::string physics;  // how scale.lua destination() moved the dominant kernel of a ratio op
  int bucket = 0;  // 0 forward, 1 backward (and accumulate), 2 optimizer, 3 other
  double count = 1, origin_ms = 0, scaled_ms = 0;
  std::optional<double> measured_ms;  // label CSVs with a measured end-to-end time: the op's own time (origin_ms is its share)
  size_t sub_wave = 0, sub_wave_moved = 0;  // wave ops: kernels under one wave on both GPUs, those moved by bandwidth
  std::optional<double> pred_from_ms, pred_to_ms;
};

struct scale_report {
  std::string graph, mode;  // graph: empty for traces scaled without one
  int64_t layers = 0;       // 0: not replicated
  std::vector<scale_row> rows;
  std::vector<std::string> warnings;
  std::optional<double> span_ms, idle_ms, busy_ms;  // Chrome traces: the origin's GPU span, its idle and busy parts (trace.h)
  // Chrome traces with hf_trace.py's metadata: the step as CUDA events measured it on the origin, outside the profiler
  // (trace::step_ms; already per step)
  std::optional<double> step_ms;
  // Label CSVs: the label file whose measured time is the origin (scale_label_origin), and what the per-op times sum to
  // on the origin and scaled.
  struct measured_origin {
    std::string file;
    double e2e_ms = 0, ops_origin_ms = 0, ops_latency_ms = 0;
    bool by_phase = false;  // forward and backward shares of fw_latency and bwall_latency apart
  };
  std::optional<measured_origin> label;
  // Chrome traces of several profiled steps (trace::steps): the ops of every step are listed, the totals are per step
  int64_t steps = 1;
  std::string steps_source;
  // Chrome traces: GPU time left out of every total (trace.h): memory copies and sets (no kernels) and kernels no op
  // launched (NCCL kernels without an External id, kernels of a replayed CUDA graph), counted over the trace, their ms
  // summed over it (reported per step, as the totals)
  size_t copies = 0, unattributed = 0;
  double copies_ms = 0, unattributed_ms = 0;
};

// Table or JSON of a scaled trace; shared by every trace format. A measured step whose kernels run less than
// scripts/neusight/scale.lua kernel_share_min of it is launch- or host-bound: warned of.
int scale_emit(session& s, const scale_flags& f, const gpu_spec& from, const gpu_spec& to, const scale_report& r) {
  double origin = 0, total = 0, ph_total[4] = {0, 0, 0, 0};
  json ops = json::array();
  for (const auto& row : r.rows) {
    origin += row.origin_ms;
    total += row.scaled_ms;
    ph_total[row.bucket] += row.scaled_ms;
    json o = {{"name", row.name}, {"op", row.op}, {"phase", row.phase}, {"count", row.count},
              {"family", row.family}, {"method", row.method}, {"origin_ms", row.origin_ms},
              {"scaled_ms", row.scaled_ms}};
    if (!row.dtype.empty()) o["dtype"] = row.dtype;
    if (!row.physics.empty()) o["physics"] = row.physics;
    if (row.measured_ms) o["measured_ms"] = *row.measured_ms;
    if (row.pred_from_ms) o["predicted_from_ms"] = *row.pred_from_ms;
    if (row.pred_to_ms) o["predicted_to_ms"] = *row.pred_to_ms;
    if (row.sub_wave) o["sub_wave"] = {{"kernels", row.sub_wave}, {"bandwidth_scaled", row.sub_wave_moved}};
    ops.push_back(std::move(o));
  }
  // The share of the origin's time each rule moved (the ops' `method`), in the order ratio, wave, keep
  std::vector<std::pair<std::string, std::pair<size_t, double>>> by_rule;
  for (const char* rule : {"ratio", "wave", "keep"})
    if (std::any_of(r.rows.begin(), r.rows.end(), [&](const scale_row& row) { return row.method == rule; }))
      by_rule.push_back({rule, {0, 0.0}});
  for (const auto& row : r.rows) {
    auto it = std::find_if(by_rule.begin(), by_rule.end(), [&](const auto& e) { return e.first == row.method; });
    if (it == by_rule.end()) it = by_rule.insert(by_rule.end(), {row.method, {0, 0.0}});
    ++it->second.first, it->second.second += row.origin_ms;
  }
  // A trace of several steps: every total is one step's, the mean of the steps (the ops listed are every step's).
  const double per_step = 1.0 / double(r.steps);
  origin *= per_step, total *= per_step;
  for (double& t : ph_total) t *= per_step;
  std::optional<double> span, idle, busy;
  if (r.span_ms) span = *r.span_ms * per_step;
  if (r.idle_ms) idle = *r.idle_ms * per_step;
  if (r.busy_ms) busy = *r.busy_ms * per_step;
  // the measured step (its metadata's, per step already) and the share of it the origin's kernels ran
  std::optional<double> share;
  std::vector<std::string> warnings = r.warnings;
  if (r.step_ms) {
    share = origin / *r.step_ms;
    if (const double share_min = s.scale_kernel_share_min(); *share < share_min)
      warnings.push_back(fmt::format(
          "{}: its kernels ran {:.3f} ms of the {:.3f} ms step measured on {} ({:.0f} %, under {:.0f} %): the step is "
          "launch- or host-bound, and the kernel time scaled here does not forecast it on {}", f.trace, origin,
          *r.step_ms, from.name, 100 * *share, 100 * share_min, to.name));
  }

  for (const auto& w : warnings) std::fprintf(stderr, "neusight: warning: %s\n", w.c_str());
  if (f.format == "json") {
    json j;
    j["trace"] = f.trace;
    if (!r.graph.empty()) j["graph"] = r.graph;
    j["from"] = from.name;
    j["to"] = to.name;
    j["predictor"] = f.predictor;
    j["mode"] = r.mode;
    if (r.layers > 0) j["layers"] = r.layers;
    if (!r.steps_source.empty()) {  // the totals below are per step; ops[] lists every step's ops
      j["steps"] = r.steps;
      j["steps_source"] = r.steps_source;
    }
    j["origin_ms"] = origin;
    j["latency_ms"] = total;  // the kernel time, scaled (kernel_ms)
    j["kernel_ms"] = total;
    if (r.step_ms) {  // the step measured on the origin (kernels, launches, host work) and its kernels' share
      j["origin_step_ms"] = *r.step_ms;
      j["origin_kernel_share"] = *share;
    }
    if (r.label) {  // origin_ms is the label's measured time; what the per-op times sum to beside it
      j["origin_measured"] = {{"label", r.label->file}, {"e2e_ms", r.label->e2e_ms},
                              {"shares", r.label->by_phase ? "fw_latency, bwall_latency" : "e2e_latency"},
                              {"ops_origin_ms", r.label->ops_origin_ms}, {"ops_latency_ms", r.label->ops_latency_ms}};
    }
    json rules = json::object();  // per rule: its ops, their origin time (per step) and its share of origin_ms
    for (const auto& [rule, n] : by_rule)
      rules[rule] = {{"ops", n.first}, {"origin_ms", n.second * per_step},
                     {"share", origin > 0 ? n.second * per_step / origin : 0.0}};
    j["rules"] = std::move(rules);
    j["forward_ms"] = ph_total[0];
    j["backward_ms"] = ph_total[1];  // includes gradient accumulation, as in `predict`
    j["optimizer_ms"] = ph_total[2];  // the optimizer step, as in `predict`
    if (ph_total[3] > 0) j["other_ms"] = ph_total[3];  // wavescale ops of pass 'other'
    if (idle) {
      // the gaps between kernels (launches, host work) carried over unscaled: what a step takes with them
      j["origin_span_ms"] = *span;
      if (busy) j["origin_busy_ms"] = *busy;  // some kernel running: less than origin_ms when they overlapped
      j["idle_ms"] = *idle;
      j["latency_with_idle_ms"] = total + *idle;
    }
    if (r.copies || r.unattributed)  // GPU time in no total: counts over the trace, ms per step
      j["not_scaled"] = {{"copies", r.copies}, {"copies_ms", r.copies_ms * per_step},
                         {"unattributed_kernels", r.unattributed}, {"unattributed_ms", r.unattributed_ms * per_step}};
    j["warnings"] = warnings;
    j["ops"] = std::move(ops);
    emit(j.dump(2) + "\n", f.output);
    return 0;
  }
  std::string out = r.layers > 0 ? fmt::format("trace     {}  ({}, {})\n", f.trace, r.mode, text_count(size_t(r.layers), "layer"))
                                 : fmt::format("trace     {}  ({})\n", f.trace, r.mode);
  out += fmt::format("scaled    {} → {}{}\n", from.name, to.name,
                     f.predictor == "neusight" ? "" : " (ratios of the " + f.predictor + " predictor)");
  if (r.steps > 1)
    out += fmt::format("steps     {} ({}): the totals are per step, their mean; the ops listed are every step's\n",
                       r.steps, r.steps_source);
  out += "\n";
  std::vector<size_t> order(r.rows.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return r.rows[a].scaled_ms > r.rows[b].scaled_ms; });
  out += fmt::format("{:<40} {:<10} {:>5} {:<6} {:>12} {:>12} {:>8}\n", "op (largest 25)", "phase", "count",
                     "method", "origin ms", "scaled ms", "ratio");
  for (size_t n = 0; n < std::min<size_t>(25, order.size()); ++n) {
    const auto& row = r.rows[order[n]];
    out += fmt::format("{:<40} {:<10} {:>5} {:<6} {:>12.4f} {:>12.4f} {:>8.3f}\n", row.name.substr(0, 40), row.phase,
                       row.count, row.method, row.origin_ms, row.scaled_ms,
                       row.origin_ms > 0 ? row.scaled_ms / row.origin_ms : 0.0);
  }
  out += fmt::format("\norigin ({})   {:>12.3f} ms\n", from.name, origin);
  if (r.label)
    out += fmt::format("               measured end to end: {}\n"
                       "               its per-op times sum to {:.3f} ms ({:+.1f} %), scaled {:.3f} ms: each op's share of "
                       "the measured time{} is scaled\n",
                       r.label->file, r.label->ops_origin_ms, 100 * (r.label->ops_origin_ms / r.label->e2e_ms - 1),
                       r.label->ops_latency_ms, r.label->by_phase ? " (forward and backward apart)" : "");
  {
    std::string line;
    for (const auto& [rule, n] : by_rule)
      line += fmt::format("{}{} {:.1f} % ({})", line.empty() ? "" : ", ", rule,
                          origin > 0 ? 100 * n.second * per_step / origin : 0.0, text_count(size_t(n.first), "op"));
    out += "rules          " + line + "  (share of the origin's time each moved)\n";
  }
  out += fmt::format("forward        {:>12.3f} ms\nbackward       {:>12.3f} ms\noptimizer      {:>12.3f} ms\n", ph_total[0],
                     ph_total[1], ph_total[2]);
  if (ph_total[3] > 0) out += fmt::format("other          {:>12.3f} ms\n", ph_total[3]);
  out += fmt::format("kernel time    {:>12.3f} ms\n", total);
  if (r.step_ms)
    out += fmt::format("measured step  {:>12.3f} ms   (on {}, CUDA events outside the profiler: its kernels ran {:.0f} % "
                       "of it; not scaled)\n", *r.step_ms, from.name, 100 * *share);
  if (idle)
    out += fmt::format("with idle      {:>12.3f} ms   (+ {:.3f} ms of the origin's {:.3f} ms GPU span that no kernel covers: "
                       "launch gaps and host work as profiled, which the profiler's own overhead widens; carried over unscaled)\n",
                       total + *idle, *idle, *span);
  emit(out, f.output);
  return 0;
}

// The origin of a label CSV: its label file's measured time (label/<GPU>/<tag>.json beside it), not the sum of its
// per-op times. NeuSight timed each op alone, each with its own launch and synchronisation, which the end-to-end run
// overlaps: over the 61 label CSVs of the shared data the per-op sum is -41 % to +54 % off the measured time
// (inference -8 % to +54 %; A100 GPT-2 Large inference, 36 layers: 794 vs 536 ms). Each op keeps its share of the
// measured time (shares of fw_latency and bwall_latency apart for a training label that gives both) and that share
// moves by the op's ratio, so scaling to the origin's own GPU gives back the measurement; the per-op sums are reported
// beside it. Without a label file, or with one measured with another layer count than the trace is scaled with
// (--layers), the origin stays the per-op sum, with a warning.
void scale_label_origin(scale_report& rep, const std::string& trace, int64_t layers, bool training) {
  const std::string file = fs::path(trace).replace_extension(".json").string();
  const std::string per_op = "the origin is the sum of the per-op times, which NeuSight timed one op at a time: in its "
                             "labels they are -41 % to +54 % off the measured end-to-end time";
  if (!fs::is_regular_file(file)) {
    rep.warnings.push_back(trace + ": no label file " + file + " beside it (its measured end-to-end time): " + per_op);
    return;
  }
  const label_times l = label_read(file);
  if (l.num_layer != layers) {
    rep.warnings.push_back(fmt::format("{}: measured with {}, the trace is scaled with {}: its end-to-end time "
                                       "does not apply, and {}", file, text_count(size_t(l.num_layer), "layer"), layers,
                                       per_op));
    return;
  }
  double ops_origin = 0, ops_latency = 0, by[2] = {0, 0};
  for (const auto& row : rep.rows) ops_origin += row.origin_ms, ops_latency += row.scaled_ms, by[row.bucket ? 1 : 0] += row.origin_ms;
  if (!(ops_origin > 0)) return;  // no op measured: nothing to share the time among
  const bool by_phase = training && l.fw_ms > 0 && l.bwall_ms > 0 && by[0] > 0 && by[1] > 0 &&
                        std::abs(l.fw_ms + l.bwall_ms - l.e2e_ms) <= 1e-3 * l.e2e_ms;
  for (auto& row : rep.rows) {
    const double factor = !by_phase ? l.e2e_ms / ops_origin : row.bucket ? l.bwall_ms / by[1] : l.fw_ms / by[0];
    row.measured_ms = row.origin_ms;
    row.origin_ms *= factor, row.scaled_ms *= factor;
  }
  rep.label = scale_report::measured_origin{file, l.e2e_ms, ops_origin, ops_latency, by_phase};
}

// The predictor both scaling paths take the ratio of: --predictor (the tile predictor by default; a built-in or a Lua
// predictor, session::predictor_make) with --weights or the bundled weights.
std::unique_ptr<predictor> scale_predictor(session& s, const scale_flags& f, const fs::path& root) {
  return s.predictor_make(f.predictor, f.weights.empty() ? root / "weights" : fs::path(f.weights));
}

// Predicted seconds of `ks` on the origin and on the destination, the latter through scale.lua's destination(),
// which applies physics per kernel from its roofline terms on both GPUs.
struct pair_seconds {
  std::vector<double> from, to;
  std::vector<std::string> rule;  // per kernel: how destination() moved it
  std::vector<std::string> warnings;  // the predictor's of both runs, once each (cli/paths.h predictor_warnings)
};
pair_seconds predict_pair(session& s, const predictor& pred, const std::vector<kernel_instance>& ks,
                          const gpu_spec& from, const gpu_spec& to) {
  auto run = [&](const gpu_spec& g) {
    std::vector<kernel_instance> tiled = ks;
    s.tiles_select(tiled, g);
    return pred.predict(tiled, g);
  };
  pair_seconds out;
  predictor_warnings said;
  out.from = run(from);
  said.take(pred);
  const std::vector<double> to_s = run(to);
  said.take(pred);
  out.warnings = said.said(s);
  // What predict says of a forecast on each GPU beyond the predictor's data (scripts/neusight/uncertainty.lua warnings:
  // out of distribution, weights not monotone there): the ratio is of the forecasts on both, so both GPUs are asked
  // (scaling from an H200 or to a B200 reads the weights outside their training GPUs), each warning said once
  for (const auto& [g, secs] : {std::pair<const gpu_spec*, const std::vector<double>*>{&from, &out.from}, {&to, &to_s}}) {
    std::map<std::string, std::pair<double, double>> by;  // family -> (Σ s, Σ s²)
    double total = 0;
    for (size_t i = 0; i < ks.size(); ++i) {
      const auto fam = ks[i].k.seconds ? std::nullopt : family_of(ks[i].k);
      auto& a = by[fam ? std::string(family_name(*fam)) : std::string("other")];
      a.first += (*secs)[i], a.second += (*secs)[i] * (*secs)[i], total += (*secs)[i];
    }
    std::vector<family_time> families;
    for (const auto& [name, a] : by)
      if (a.first > 0) families.push_back({name, a.first, a.first * a.first / a.second, 0, "", 0});
    if (!(total > 0)) continue;
    figure_inputs in = {{"latency_s", total}};
    family_inputs_add(in, families, pred, g->vendor);
    for (auto& w : s.figures_call("neusight.uncertainty", "warnings", in, *g, pred.uncertainty(g->vendor)).warnings)
      if (std::find(out.warnings.begin(), out.warnings.end(), w) == out.warnings.end()) out.warnings.push_back(std::move(w));
  }
  // scripts/neusight/scale.lua destination(k, from, to) per kernel: k its predicted seconds and roofline terms (compute
  // and memory seconds) on both GPUs and the GPU file key of the peak its compute runs on (core/roofline.h
  // roofline_peak_key); back: the destination seconds and the rule that gave them (a string or nil)
  const std::string& file = s.module_display("neusight.scale");
  for (size_t i = 0; i < ks.size(); ++i) {
    const kernel& k = ks[i].k;
    const nlohmann::json item = {{"peak", roofline_peak_key(k)},
                                 {"from_s", out.from[i]},
                                 {"to_s", to_s[i]},
                                 {"compute_from_s", roofline_compute_seconds(k, from)},
                                 {"memory_from_s", roofline_memory_seconds(k, from)},
                                 {"compute_to_s", roofline_compute_seconds(k, to)},
                                 {"memory_to_s", roofline_memory_seconds(k, to)}};
    const auto r = s.call("neusight.scale", "destination", {item, &from, &to}, 2,
                          "while scaling a kernel in " + file + " destination()");
    if (!r[0].is_number() || !(r[0].get<double>() >= 0) || !std::isfinite(r[0].get<double>()))
      throw error(file + ": destination() must return a finite number of seconds >= 0");
    if (!r[1].is_null() && !r[1].is_string())
      throw error(file + ": destination()'s second result (the rule) must be a string or nil");
    out.to.push_back(r[0].get<double>());
    out.rule.push_back(r[1].is_null() ? std::string() : r[1].get<std::string>());
  }
  return out;
}

// Chrome-trace JSON and wavescale traces: per op, ratio or wave scaling (see the file comment).
int scale_measured(const scale_flags& f, session& s, const fs::path& root, const trace& tr, const gpu_spec& from,
                   const gpu_spec& to, std::vector<std::string> warnings) {
  scale_report rep;
  rep.warnings = std::move(warnings);  // the origin's (scale_main)
  rep.mode = std::any_of(tr.ops.begin(), tr.ops.end(), [](const trace_op& op) { return op.phase != trace_phase::forward; })
                 ? "train" : "inference";
  // Both GPUs' wave-scaling limits, made at the first op that is wave-scaled: a trace whose ops all take the ratio
  // scales between GPUs that wave scaling cannot use (AMD: no CUDA occupancy limits); one op that needs it says so.
  std::optional<std::pair<wave_gpu, wave_gpu>> wave_gpus;
  auto waves_for = [&](const trace_op& op) -> const std::pair<wave_gpu, wave_gpu>& {
    if (!wave_gpus) {
      try {
        wave_gpus.emplace(wave_gpu_from_spec(from), wave_gpu_from_spec(to));
      } catch (const error& e) {
        throw error(fmt::format("scale {} → {}: op '{}'{} takes Habitat's wave scaling of its measured kernels (an op "
                                "the predictor's ratio does not cover), which needs the CUDA occupancy limits of both "
                                "GPUs: {}", from.name, to.name, op.name, op.kind == op.name ? "" : " (" + op.kind + ")",
                                e.what()));
      }
      // a cc the occupancy table lacks borrows a lower cc's allocation rules: said once per GPU (a trace scaled to
      // its own GPU file names it once)
      for (const auto& [spec, wave] : {std::pair{&from, &wave_gpus->first}, std::pair{&to, &wave_gpus->second}}) {
        std::string w = occupancy_rules_warning(*spec, wave->limits);
        if (!w.empty() && std::find(rep.warnings.begin(), rep.warnings.end(), w) == rep.warnings.end())
          rep.warnings.push_back(std::move(w));
      }
    }
    return *wave_gpus;
  };
  wave_options wopt;
  wopt.variant = f.wave_variant == "paper" ? wave_variant::paper_waves : wave_variant::code;
  wopt.zero_occupancy = zero_occupancy_policy::small_kernel;  // a kernel that fits nowhere: sub-wave, not a crash

  // Ratio ops: our kernels (scale.lua kernels()) on both GPUs, predicted in one batch.
  std::map<std::string, size_t> fallback;
  const std::vector<kernel_instance> k_from = trace_kernels(s, tr, fallback);
  std::vector<std::vector<size_t>> kernels_of(tr.ops.size());
  for (size_t k = 0; k < k_from.size(); ++k) kernels_of[k_from[k].node].push_back(k);
  pair_seconds sec;
  if (!k_from.empty()) {
    const auto pred = scale_predictor(s, f, root);
    sec = predict_pair(s, *pred, k_from, from, to);
    rep.warnings.insert(rep.warnings.end(), sec.warnings.begin(), sec.warnings.end());
  }

  size_t skipped = 0;
  // scale.lua wave_unpriced_of(): wave-scaled ops whose kernels the wave rule does not price (collectives, attention
  // libraries), per kind: ops, their origin ms and the first op's name — said, never priced silently
  std::map<std::string, std::tuple<size_t, double, std::string>> unpriced;
  for (size_t i = 0; i < tr.ops.size(); ++i) {
    const trace_op& op = tr.ops[i];
    double kernels_ms = 0;
    for (const auto& k : op.kernels) kernels_ms += k.duration_ns / 1e6;
    if (!op.measured_ms && op.kernels.empty()) {
      ++skipped;
      continue;
    }
    scale_row row;
    row.name = op.name;
    row.op = op.kind;
    row.phase = std::string(trace_phase_name(op.phase));
    row.bucket = op.phase == trace_phase::forward                                             ? 0
                 : op.phase == trace_phase::backward || op.phase == trace_phase::accumulate ? 1
                 : op.phase == trace_phase::optimizer                                       ? 2
                                                                                            : 3;
    row.origin_ms = op.measured_ms ? *op.measured_ms : kernels_ms;
    // §1.8: what the pass took beyond its kernels is carried over unscaled.
    const double overhead = op.kernels.empty() ? 0.0 : std::max(0.0, row.origin_ms - kernels_ms);
    if (!kernels_of[i].empty()) {
      double p_from = 0, p_to = 0, top = -1;
      for (const size_t k : kernels_of[i]) {
        p_from += sec.from[k], p_to += sec.to[k];
        if (sec.from[k] > top)
          top = sec.from[k], row.family = std::string(kernel_kind_name(k_from[k].k.kind)), row.dtype = k_from[k].k.dtype,
          row.physics = sec.rule[k];
      }
      row.method = "ratio";
      row.pred_from_ms = p_from * 1e3;
      row.pred_to_ms = p_to * 1e3;
      const double measured = op.kernels.empty() ? row.origin_ms : kernels_ms;
      row.scaled_ms = overhead + (p_from > 0 ? measured * p_to / p_from : measured);
    } else if (op.kernels.empty()) {
      row.method = "keep";  // no GPU kernels: host time, kept
      row.family = "none";
      row.scaled_ms = row.origin_ms;
    } else {
      row.method = "wave";
      row.family = "none";
      const auto& [w_from, w_to] = waves_for(op);
      {
        std::vector<std::string> names;
        for (const auto& k : op.kernels) names.push_back(k.name);
        const std::string& file = s.module_display("neusight.scale");
        const auto what = s.call("neusight.scale", "wave_unpriced_of", {nlohmann::json(names)}, 1,
                                 "while checking a wave-scaled op's kernels in " + file + " wave_unpriced_of()");
        if (what[0].is_string()) {
          auto& [n, ms, first] = unpriced[what[0].get<std::string>()];
          if (n++ == 0) first = op.name;
          ms += row.origin_ms;
        } else if (!what[0].is_null()) {
          throw error(file + ": wave_unpriced_of() must return a string or nil");
        }
      }
      // Habitat keeps a kernel under one wave on both GPUs; scale.lua sub_wave_streams() says which of them stream
      // through every SM, whose memory-bound share then moves with the bandwidth as a multi-wave kernel's does (the
      // paper form already moves it).
      std::vector<wave_result> res;
      std::vector<nlohmann::json> subs;  // scale.lua sub_wave_streams(k, from, to)'s k, per sub-wave kernel
      std::vector<size_t> sub_at;
      for (const auto& k : op.kernels) {
        res.push_back(wave_scale(wave_kernel_of(k), w_from, w_to, wopt));
        const wave_result& r = res.back();
        if (!r.sub_wave || r.method == wave_method::paper_waves) continue;
        subs.push_back({{"blocks", k.blocks()},
                        {"threads_per_block", k.threads_per_block()},
                        {"wave_from", r.wave_origin},
                        {"wave_to", r.wave_dest},
                        {"duration_ms", k.duration_ns / 1e6}});
        sub_at.push_back(res.size() - 1);
      }
      if (!subs.empty()) {
        // whether its memory-bound share moves with the bandwidth ratio (true) or it keeps Habitat's sub-wave time
        const std::string& file = s.module_display("neusight.scale");
        for (size_t n = 0; n < subs.size(); ++n) {
          const auto streams = s.call("neusight.scale", "sub_wave_streams", {subs[n], &from, &to}, 1,
                                      "while scaling a sub-wave kernel in " + file + " sub_wave_streams()");
          if (!streams[0].is_boolean()) throw error(file + ": sub_wave_streams() must return a boolean");
          if (!streams[0].get<bool>()) continue;
          wave_result& r = res[sub_at[n]];
          r.duration_ns *= wave_memory_factor(w_from, w_to, r.gamma.value_or(1.0));
          ++row.sub_wave_moved;
        }
        row.sub_wave = subs.size();
      }
      double scaled_ns = 0;
      for (const auto& r : res) scaled_ns += r.duration_ns;
      row.scaled_ms = overhead + scaled_ns / 1e6;
    }
    rep.rows.push_back(std::move(row));
  }
  for (const auto& [kind, n] : fallback)
    rep.warnings.push_back(fmt::format("{} '{}' {} routed to the ratio had missing or unsupported input shapes or element types: "
                                       "wave-scaled instead", n, kind, n == 1 ? "op" : "ops"));
  if (skipped) rep.warnings.push_back(fmt::format("skipped {} without kernels or a measured time", text_count(skipped, "op")));
  // GPU time no op carries: said with its time (JSON not_scaled), never dropped from the totals unsaid
  const std::string per = tr.steps > 1 ? " per step" : "";
  const double steps = double(tr.steps);
  for (const auto& [what, u] : unpriced) {
    const auto& [n, ms, first] = u;
    rep.warnings.push_back(fmt::format("{}: {} ({:.4f} ms{}, e.g. '{}') launched {}: wave scaling moves {} by the "
                                       "memory bandwidth ratio (or keeps {} under one wave), which does not price {}",
                                       f.trace, text_count(n, "wave-scaled op"), ms / steps, per, first, what,
                                       n == 1 ? "it" : "them", n == 1 ? "it" : "them", n == 1 ? "it" : "them"));
  }
  if (!tr.unattributed.empty()) {
    rep.unattributed = tr.unattributed.size();
    for (const auto& k : tr.unattributed) rep.unattributed_ms += k.duration_ns / 1e6;
    rep.warnings.push_back(fmt::format("{}: {} launched by no op ({:.4f} ms{}: collectives, CUDA-graph "
                                       "replays, kernels outside the profiled ops) {} not scaled and {} not in "
                                       "origin_ms or latency_ms", f.trace, text_count(rep.unattributed, "kernel"),
                                       rep.unattributed_ms / steps, per, rep.unattributed == 1 ? "was" : "were",
                                       rep.unattributed == 1 ? "is" : "are"));
  }
  if (tr.outside_steps_ops)
    rep.warnings.push_back(fmt::format("{}: {} with kernels ({:.4f} ms) {} outside every ProfilerStep# range (a "
                                       "warm-up or an iteration the profiler did not mark, work before the first step()): "
                                       "{} in the totals, which count {}", f.trace, text_count(tr.outside_steps_ops, "op"),
                                       tr.outside_steps_ms, tr.outside_steps_ops == 1 ? "starts" : "start",
                                       tr.outside_steps_ops == 1 ? "it is" : "they are",
                                       text_count(size_t(tr.steps), "step")));
  if (tr.copy_events) {
    rep.copies = tr.copy_events, rep.copies_ms = tr.copy_ms;
    rep.warnings.push_back(fmt::format("{}: {} (gpu_memcpy, gpu_memset: {:.4f} ms{}) {}: not scaled and not in "
                                       "origin_ms or latency_ms (idle_ms counts {})",
                                       f.trace, text_count(rep.copies, "memory copy or set", "memory copies and sets"),
                                       rep.copies_ms / steps, per, rep.copies == 1 ? "is no kernel" : "are no kernels",
                                       rep.copies == 1 ? "it" : "them"));
  }
  rep.span_ms = tr.gpu_span_ms, rep.idle_ms = tr.gpu_idle_ms, rep.busy_ms = tr.gpu_busy_ms, rep.step_ms = tr.step_ms;
  rep.steps = tr.steps, rep.steps_source = tr.steps_source;
  if (!tr.steps_note.empty()) rep.warnings.push_back(tr.steps_note);
  if (tr.zero_duration_kernels)
    rep.warnings.push_back(fmt::format("{}: {} '{}' 0 and count 0 ms on both GPUs", f.trace,
                                       text_count(tr.zero_duration_kernels, "kernel") +
                                           (tr.zero_duration_kernels == 1 ? " has" : " have"),
                                       tr.format == trace_format::wavescale ? "duration_ns" : "dur"));
  if (tr.gpu_busy_ms) {
    // Kernels of one stream run one after another; on several streams they may run at once, and the sum of their times
    // (what is scaled, as Habitat sums them) then exceeds the time the GPU ran any.
    double summed_ns = 0;
    for (const auto& op : tr.ops)
      for (const auto& k : op.kernels) summed_ns += k.duration_ns;
    for (const auto& k : tr.unattributed) summed_ns += k.duration_ns;
    const double summed = summed_ns / 1e6, busy = *tr.gpu_busy_ms;
    if (summed > busy * 1.01)
      rep.warnings.push_back(fmt::format(
          "{}: kernels overlap in time{}: their durations sum to {:.3f} ms, but some kernel ran during "
          "{:.3f} ms only (origin_busy_ms); origin_ms and latency_ms are sums of kernel times, as if the kernels ran "
          "one after another, so the step may take less than latency_ms",
          f.trace, tr.kernel_streams > 1 ? fmt::format(" (concurrent streams: {})", tr.kernel_streams) : "", summed,
          busy));
  }
  return scale_emit(s, f, from, to, rep);
}

}  // namespace

std::vector<kernel_instance> trace_kernels(session& s, const trace& tr, std::map<std::string, size_t>& not_built) {
  // Per op, scripts/neusight/scale.lua route_of(kind): "wave" ops are not built here; the others' kernels(op) — op as
  // the trace has it (kind, forward: the forward op a backward op runs the node of, phase, inputs' shapes, types and
  // values), nil when its shapes are missing or not understood. FLOPs and bytes are filled.
  const std::string& file = s.module_display("neusight.scale");
  std::vector<kernel_instance> out;
  for (size_t i = 0; i < tr.ops.size(); ++i) {
    const trace_op& op = tr.ops[i];
    const auto route = s.call("neusight.scale", "route_of", {nlohmann::json(op.kind)}, 1,
                              "while routing op kind '" + op.kind + "' in " + file);
    const std::string r = route[0].is_string() ? route[0].get<std::string>() : std::string();
    if (r != "ratio" && r != "wave")
      throw error(file + ": route_of() must return \"ratio\" or \"wave\" (kind '" + op.kind + "')");
    if (r == "wave") continue;
    const nlohmann::json arg = {{"kind", op.kind},
                                {"forward", op.forward_kind},
                                {"phase", std::string(trace_phase_name(op.phase))},
                                {"inputs", op.input_shapes},
                                {"types", op.input_types},
                                {"values", op.input_values}};
    const auto built = s.call("neusight.scale", "kernels", {arg}, 1,
                              "while building the kernels of op '" + op.kind + "' in " + file);
    if (built[0].is_null()) {
      ++not_built[op.kind];
      continue;
    }
    const std::string where = file + ": kernels() for op '" + op.kind + "'";
    const std::vector<kernel> ks = s.kernels_of(built[0], where);
    if (ks.empty()) throw error(where + " returned an empty list (return nil when the op is not understood)");
    for (const kernel& k : ks) out.push_back({i, phase::forward, k});
  }
  return out;
}

namespace {

// The GPU that `name`, a name a trace or its folder carries, names; nullopt when `resolve` refuses it (no GPU file
// names it, or several do). The one place a resolver's error is caught: gpu_catalog::resolve (and session::gpu, which
// calls it) says so only by throwing, with close matches for a flag's value, while a trace's name is a hint that the
// callers word themselves (an error that names the trace, a warning, or no hint at all).
std::optional<gpu_spec> gpu_named_by(const gpu_resolver& resolve, const std::string& name) {
  try {
    return resolve(name);
  } catch (const error&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<gpu_spec> trace_recorded_on(const trace& tr, const std::string& file, const gpu_resolver& resolve,
                                          const gpu_spec* aliases_of) {
  if (tr.format == trace_format::label_csv || tr.origin_device.empty()) return std::nullopt;
  if (auto gpu = gpu_named_by(resolve, tr.origin_device)) return gpu;
  throw error(file + ": the trace was recorded on '" + tr.origin_device + "', which no GPU file names: " +
              (aliases_of ? "add its torch.cuda.get_device_name() string to the aliases of " + aliases_of->source +
                                " if it is that GPU"
                          : std::string("add it to the aliases of the GPU file of that GPU")));
}

bool trace_device_check(const trace& tr, const std::string& file, const gpu_resolver& resolve, const gpu_spec& given,
                        const std::string& flag, std::vector<std::string>* warnings) {
  if (tr.format == trace_format::label_csv || tr.origin_device.empty()) return false;
  if (gpu_spec_named(given, tr.origin_device)) return true;  // the given file's own name or alias (a user's GPU file)
  // a GPU no file names: refused without `warnings` (trace_recorded_on's error), else the flag's is taken, as it says
  const std::optional<gpu_spec> origin =
      warnings ? gpu_named_by(resolve, tr.origin_device) : trace_recorded_on(tr, file, resolve, &given);
  if (!origin) {
    warnings->push_back(file + ": the trace was recorded on '" + tr.origin_device + "', which no GPU file names: taken " +
                       "as " + given.name + " (" + flag + "); add that name to the aliases of " + given.source +
                       " if it is that GPU");
    return true;
  }
  if (origin->name != given.name)
    throw error(file + ": the trace was recorded on " + origin->name + " ('" + tr.origin_device + "'), not on " +
                given.name + " (" + flag + ")");
  return true;
}

std::optional<std::pair<std::string, std::string>> scale_flag_unused(const scale_flags& f) {
  if (f.graph.empty() && f.layers <= 0) return std::nullopt;
  trace_format format;
  try {
    format = trace_detect(f.trace);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (format == trace_format::label_csv) return std::nullopt;
  const std::string what = format == trace_format::chrome_json ? "a Chrome-trace JSON" : "a wavescale trace";
  if (!f.graph.empty())
    return std::pair{std::string("--graph"), "'" + f.graph + "' has no effect on " + what + " (" + f.trace +
                                                 "): its ops carry their own shapes; --graph names the operator graph "
                                                 "of a per-op label CSV"};
  return std::pair{std::string("--layers"), std::to_string(f.layers) + " has no effect on " + what + " (" + f.trace +
                                                "): it holds every layer it measured; --layers replicates the "
                                                "operator graph of a per-op label CSV"};
}

int scale_main(const scale_flags& f) {
  const session_options so = session_options_for(f.ops_dirs, f.scripts_dirs, f.gpus_dirs, f.verbose);
  session s(so);
  const auto root = so.data_root;
  const gpu_catalog catalog = s.gpus();
  const gpu_resolver resolve = [&](const std::string& name) { return catalog.resolve(name); };
  std::string to_note, from_note;  // a short name several GPUs answer to: which it was taken as (gpu_catalog::resolve)
  const gpu_spec to = catalog.resolve(f.to, to_note);
  const trace tr = trace_load(f.trace);
  // The origin: --from, checked against the GPU the trace names; without --from, that GPU. A label CSV names none,
  // but its folder is named after the GPU in NeuSight's data (label/<GPU>/…): a folder that names another known GPU
  // than --from is a warning only, as a user's own folder may be named anything.
  std::vector<std::string> origin_warnings;
  if (!to_note.empty()) origin_warnings.push_back("--to: " + to_note);
  std::optional<gpu_spec> folder_gpu;
  if (tr.format == trace_format::label_csv && !tr.origin_device.empty()) folder_gpu = gpu_named_by(resolve, tr.origin_device);
  gpu_spec from;
  if (!f.from.empty()) {
    from = catalog.resolve(f.from, from_note);
    if (!from_note.empty()) origin_warnings.push_back("--from: " + from_note);
    trace_device_check(tr, f.trace, resolve, from, "--from", &origin_warnings);
    if (folder_gpu && folder_gpu->name != from.name)
      origin_warnings.push_back(f.trace + ": its folder '" + tr.origin_device + "' names " + folder_gpu->name +
                                ", not " + from.name + " (--from): scaled from " + from.name + " as --from says");
  } else if (auto named = trace_recorded_on(tr, f.trace, resolve, nullptr)) {
    from = *named;
  } else if (folder_gpu) {
    from = *folder_gpu;
  } else {
    throw error(f.trace + ": the trace does not name the GPU it was recorded on" +
                (tr.format == trace_format::label_csv && !tr.origin_device.empty()
                     ? " (its folder '" + tr.origin_device + "' names no GPU file)"
                     : std::string(tr.format == trace_format::chrome_json ? " (" + tr.origin_unknown + ")"
                                   : tr.format == trace_format::wavescale   ? " (no origin_gpu in its manifest)"
                                                                            : "")) +
                ": give it with --from");
  }
  if (tr.format != trace_format::label_csv) return scale_measured(f, s, root, tr, from, to, std::move(origin_warnings));

  const fs::path trace = fs::absolute(f.trace).lexically_normal();  // x.csv in its folder has a parent too
  const fs::path gpath = !f.graph.empty() ? fs::path(f.graph)
                                          : trace.parent_path().parent_path().parent_path() / "opgraph" /
                                                (trace.stem().string() + ".csv");
  if (!fs::exists(gpath))
    throw error(f.trace + ": no operator graph for this trace at " + gpath.generic_string() +
                " (pass --graph opgraph/<tag>.csv)");
  opgraph og = opgraph_load(gpath.string(), s.costing(), {true, s.rule_kernels()});
  opgraph_check_supported(og);
  std::vector<std::string> warnings = std::move(origin_warnings);
  const int64_t layers = opgraph_layers(og, f.layers, warnings);
  opgraph_replicate(og, layers);
  const bool training = og.tag && og.tag->mode == "train";

  const std::vector<kernel_instance> k_from = opgraph_kernels(og, training);
  const auto pred = scale_predictor(s, f, root);
  const pair_seconds sec = predict_pair(s, *pred, k_from, from, to);
  warnings.insert(warnings.end(), sec.warnings.begin(), sec.warnings.end());
  const std::vector<double>&sec_from = sec.from, &sec_to = sec.to;

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

  // scripts/neusight/scale.lua scale(item, from, to)'s items: one measured op, its kernels' predicted times on both
  // GPUs (family: of the op's dominant kernel, "none" without kernels)
  std::vector<nlohmann::json> items;
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
    const bool predicted = pb != pred_by.end();
    items.push_back({{"name", op.name},
                     {"op", og.g.nodes[it->second].op},
                     {"phase", std::string(phase_name(phases[p]))},
                     {"family", predicted ? pb->second.family : std::string("none")},
                     {"measured_ms", *op.measured_ms},
                     {"from_ms", predicted ? pb->second.from_ms : 0.0},
                     {"to_ms", predicted ? pb->second.to_ms : 0.0}});
    where.push_back({it->second, int(phases[p])});
  }
  std::vector<double> scaled;
  std::vector<std::string> rules;
  const std::string& file = s.module_display("neusight.scale");
  for (const auto& item : items) {
    const std::string name = item["name"].get<std::string>();
    const auto r = s.call("neusight.scale", "scale", {item, &from, &to}, 2,
                          "while scaling op '" + name + "' (" + item["phase"].get<std::string>() + ") in " + file);
    if (!r[0].is_number() || !(r[0].get<double>() >= 0) || !std::isfinite(r[0].get<double>()))
      throw error(file + ": scale() must return a finite number >= 0 (op '" + name + "')");
    // its rule (scale.lua M.route: "ratio", or "keep" for an op kept as measured); nil: "ratio", as before it said
    if (!r[1].is_null() && !(r[1].is_string() && (r[1] == "ratio" || r[1] == "keep")))
      throw error(file + ": scale()'s second result (the rule) must be \"ratio\", \"keep\" or nil (op '" + name + "')");
    scaled.push_back(r[0].get<double>());
    rules.push_back(r[1].is_string() ? r[1].get<std::string>() : std::string("ratio"));
  }

  scale_report rep;
  rep.graph = gpath.generic_string();
  rep.mode = training ? "train" : "inference";
  rep.layers = layers;
  rep.warnings = std::move(warnings);
  for (size_t i = 0; i < items.size(); ++i) {
    const double count = double(og.g.nodes[where[i].first].count);
    scale_row row;
    row.name = items[i]["name"].get<std::string>();
    row.op = items[i]["op"].get<std::string>();
    row.phase = items[i]["phase"].get<std::string>();
    row.family = items[i]["family"].get<std::string>();
    row.method = rules[i];
    row.bucket = where[i].second == int(phase::forward) ? 0 : 1;
    row.count = count;
    row.origin_ms = items[i]["measured_ms"].get<double>() * count;
    row.scaled_ms = scaled[i] * count;
    row.pred_from_ms = items[i]["from_ms"].get<double>() * count;
    row.pred_to_ms = items[i]["to_ms"].get<double>() * count;
    rep.rows.push_back(std::move(row));
  }
  for (const auto& [why, n] : skipped) rep.warnings.push_back(fmt::format("skipped {}: {}", text_count(n, "row"), why));
  scale_label_origin(rep, f.trace, layers, training);
  return scale_emit(s, f, from, to, rep);
}

int scale_command(flag_targets& t, int, char**) {
  return scale_main(report_into(t.get<scale_flags>(), t.get<common_flags>()));
}

}  // namespace ns
