// engine/cli/app.cpp — the command table and app_main, which parses a command line (its flags: cli/flags.cpp's
// table) and runs the command's function (in its command file; here run, predict, paths, gpus, models, ops); every
// error ends as "neusight: <where>: <what>".
#include "cli/app.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "cli/flags.h"
#include "cli/graph_run.h"
#include "cli/git_version.h"
#include "cli/kernels_cmd.h"
#include "cli/models_cmd.h"
#include "cli/paths.h"
#include "cli/scale_cmd.h"
#include "cli/search_cmd.h"
#include "cli/serve_cmd.h"
#include "cli/report.h"
#include "core/cluster_spec.h"
#include "ingest/opgraph.h"
#include "ingest/measurement.h"
#include "core/roofline.h"
#include "core/text.h"
#include "core/tile_model.h"
#include "ingest/trace.h"
#include "lua/script_limits.h"
#include "lua/session.h"

namespace ns {
namespace fs = std::filesystem;

namespace {

// The list-valued flags, one entry each: the flag, a comparison row's JSON key and table column for it (its value in a
// finished forecast is scripts/neusight/report.lua row()'s `key`), whether its values are integers. The order is the
// rows' column order and the order the combinations are enumerated in (the last varies fastest).
struct list_flag {
  const char* key;
  const char* column;
  std::string forecast_flags::* flag;
  bool integer;
};
const std::vector<list_flag>& list_flags() {
  using F = forecast_flags;
  static const std::vector<list_flag> flags = {
      {"model", "model", &F::model, false},       {"gpu", "gpu", &F::gpu, false},
      {"mode", "mode", &F::mode, false},          {"dtype", "dtype", &F::dtype, false},
      {"batch", "batch", &F::batch, true},        {"seq", "seq", &F::seq, true},
      {"context", "context", &F::context, true},  {"dp", "dp", &F::dp, true},
      {"tp", "tp", &F::tp, true},                 {"pp", "pp", &F::pp, true},
      {"ep", "ep", &F::ep, true},                 {"microbatches", "mb", &F::microbatches, true},
      {"recompute", "recompute", &F::recompute, false}, {"zero", "zero", &F::zero, true}};
  return flags;
}

session_options session_options_make(const common_flags& c) {
  // --calibrate fits against the raw forecast
  return session_options_for(c.ops_dirs, c.scripts_dirs, c.gpus_dirs, c.verbose, !c.no_calibration && c.calibrate.empty());
}

workload_overrides overrides_make(const forecast_flags& f) {
  workload_overrides o;
  if (!f.model.empty()) o["model"] = f.model;
  if (!f.gpu.empty()) o["gpu"] = f.gpu;
  if (!f.mode.empty()) o["mode"] = f.mode;
  if (!f.optimizer.empty()) o["optimizer"] = f.optimizer;
  if (!f.optimizer_impl.empty()) o["optimizer_impl"] = f.optimizer_impl;
  if (!f.dtype.empty()) o["dtype"] = f.dtype;
  if (!f.precision.empty()) o["precision"] = f.precision;
  if (!f.attention.empty()) o["attention"] = f.attention;
  if (!f.kv_dtype.empty()) o["kv_dtype"] = f.kv_dtype;
  if (!f.weight_dtype.empty()) o["weight_dtype"] = f.weight_dtype;
  if (!f.experts.empty()) o["experts"] = f.experts;
  if (!f.router_skew.empty()) o["router_skew"] = f.router_skew;  // a factor's decimal string: workload.lua makes it a number
  // the integer flags hold one validated value here (a comparison calls this once per combination)
  auto integer = [](const std::string& v) { return workload_value(int64_t(std::stoll(v))); };
  if (!f.batch.empty()) o["batch"] = integer(f.batch);
  if (!f.lora_rank.empty()) o["lora_rank"] = integer(f.lora_rank);
  if (!f.lora_targets.empty()) o["lora_targets"] = f.lora_targets;
  if (!f.seq.empty()) o["seq"] = integer(f.seq);
  if (!f.context.empty()) o["context"] = integer(f.context);
  if (!f.launch.empty()) o["launch"] = f.launch;
  if (f.flash_attention) o["fusion"] = std::string("flash_attention");
  else if (f.fusion) o["fusion"] = true;
  if (!f.dp.empty()) o["parallel.dp"] = integer(f.dp);
  if (!f.tp.empty()) o["parallel.tp"] = integer(f.tp);
  if (!f.pp.empty()) o["parallel.pp"] = integer(f.pp);
  if (!f.ep.empty()) o["parallel.ep"] = integer(f.ep);
  if (!f.microbatches.empty()) o["parallel.microbatches"] = integer(f.microbatches);
  if (!f.schedule.empty()) o["parallel.schedule"] = f.schedule;
  if (f.virtual_stages > 0) o["parallel.virtual_stages"] = f.virtual_stages;
  if (f.bucket_mb > 0) o["parallel.bucket_mb"] = f.bucket_mb;
  if (!f.overlap_grad_reduce.empty()) o["parallel.overlap_grad_reduce"] = f.overlap_grad_reduce == "on";
  if (!f.kernels.empty()) o["parallel.kernels"] = f.kernels;
  if (!f.cluster.empty()) o["parallel.cluster"] = f.cluster;
  if (!f.recompute.empty()) o["parallel.recompute"] = f.recompute;
  if (f.sequence_parallel) o["parallel.sequence_parallel"] = true;
  if (f.distributed_optimizer) o["parallel.distributed_optimizer"] = true;
  // a stage's digit as an integer; anything else as typed, for parallel/config.lua's error (--zero: 0, 1, 2 or 3 …)
  if (!f.zero.empty())
    o["parallel.zero"] = f.zero.size() == 1 && f.zero[0] >= '0' && f.zero[0] <= '9' ? integer(f.zero)
                                                                                     : workload_value(f.zero);
  return o;
}

// One forecast, finished (session::finished: the forecast, the parallel timeline, the warnings, the figures, and the
// GPU, source and launch mode it ran with), and where it goes. What the report shows of its workload stays in Lua
// (scripts/neusight/report.lua, session::forecast_render).
struct forecast_done : session::finished {
  // A comparison's row (run_compare): its figures sit beside the row's inputs, latency_ms, warnings and error, so a
  // workload's own figure may not take those names; a single forecast's figures have an object of their own.
  bool comparison_row = false;
};

// The names a comparison row holds besides the figures (a workload's own figures may not take them there); "" for a
// single forecast.
const std::string& row_keys_of(const forecast_done& out) {
  static const std::string none, keys = [] {
    std::string k = "gpu_file,latency_ms,warnings,error";
    for (const auto& lf : list_flags()) k += std::string(",") + lf.key;  // every row has every input
    return k;
  }();
  return out.comparison_row ? keys : none;
}

// What the pipeline (scripts/neusight/pipeline.lua) made of the forecast (the row's own flag stays).
void forecast_take(session::finished&& f, forecast_done& out) { static_cast<session::finished&>(out) = std::move(f); }

std::unique_ptr<predictor> predictor_for(session& s, const forecast_flags& f) {
  auto pred = s.predictor_make(f.predictor, f.weights.empty() ? data_root_find() / "weights" : fs::path(f.weights));
  pred->memo_enable(!memo_disabled());
  return pred;
}

// The single forecast as scripts/neusight/report.lua renders it (session::forecast_render) in --format, and the
// --report page of its JSON.
void report_emit(session& s, const common_flags& c, const forecast_done& d, const std::string& predictor) {
  const std::string format = c.format == "json" || c.format == "csv" ? c.format : "table";
  std::vector<std::string> formats = {format};
  if (!c.report_html.empty() && format != "json") formats.push_back("json");  // the page's input
  const auto texts = s.forecast_render(d.state, *d.fc, d.gpu, predictor, d.warnings, d.figs, formats);
  // --report: the page is rendered first (a script error writes nothing), written after the normal output.
  const std::string html = c.report_html.empty() ? "" : s.render("neusight.html", "render", texts.back());
  emit(texts.front(), c.output);
  if (!c.report_html.empty()) emit(html, c.report_html);
}

// A workload (a script, or the command line alone) forecast with `f`'s single values, as scripts/neusight/pipeline.lua
// forecast drives it: what `predict` / `run` print and what each comparison row holds. `pred` is made on first use,
// after the workload has loaded.
void forecast_workload(session& s, std::unique_ptr<predictor>& pred, const forecast_flags& f, const std::string& script,
                       forecast_done& out, bool say) {
  session::workload_request req;
  req.script = script, req.overrides = overrides_make(f);
  req.predictor_make = [&]() -> const predictor& {
    if (!pred) pred = predictor_for(s, f);
    return *pred;
  };
  forecast_take(s.forecast_workload(std::move(req), {f.overhead, row_keys_of(out), say}), out);
}

// The file's [decode_factors] for a measurement of one phase whose fit is `factors` (its [factors] are `factors` in
// every case): weights/PHASE_CALIBRATION_RULE.md, the rule serve's fit_serve (scripts/neusight/calibration.lua) applies
// to a TPOT or TTFT alone. A decode step's fit is [decode_factors] too (and [factors]: no prefill was measured; the
// rule's 2026-11-28 outcome); any other phase's leaves [decode_factors] empty, and decode steps keep their forecast.
// `decode` nullopt: the measurement does not say which phase it holds (a profiler trace without hf_trace.py's "mode"):
// no [decode_factors] table, and [factors] apply to every forecast (engine/core/calibration.h).
static std::optional<std::map<std::string, double>> phase_decode_factors(std::optional<bool> decode,
                                                                         const std::map<std::string, double>& factors) {
  if (!decode) return std::nullopt;
  return *decode ? factors : std::map<std::string, double>{};
}

// --calibrate FILE: the workload forecast without any calibration, the measurement of FILE, and the factors
// scripts/neusight/calibration.lua fits, written beside the GPU's file for later forecasts. Decode steps are
// calibrated from a decode step only (as serve --calibrate's phases): a decode workload's factors are the file's
// [decode_factors] too, any other workload's leave them empty (a prefill's or a training step's bias is its
// compute-bound GEMMs', not a decode step's; weights/PHASE_CALIBRATION_RULE.md).
// A parallel run's latency is its timeline's, whose pipeline bubbles and overlaps do not scale with the kernel times a
// factor corrects: the fit forecasts the workload (`f`, `script`) again with the factors it tries (r.forecast_with), so
// that the calibrated figure it reports is what the next forecast gives.
int run_calibrate(session& s, const common_flags& c, const forecast_flags& f, const std::string& script,
                  std::unique_ptr<predictor>& pred_made, const forecast_done& d) {
  const predictor& pred = *pred_made;
  const measurement m = measurement_load(c.calibrate, measurement_use::predict);
  const double measured_ms = *m.latency_ms;  // measurement_load checked it
  const fs::path path = calibration_path(d.gpu);
  if (path.empty()) throw error("--calibrate: " + d.gpu.name + " was not read from a file: nowhere to keep a calibration");
  const double latency_s = d.latency_s();
  figure_inputs in = {{"latency_s", latency_s}, {"measured_s", measured_ms / 1e3}, {"measurement", m.source},
                      {"parallel", d.parallel.has_value()}};
  family_inputs_add(in, d.fc->seconds_by_family(d.gpu), pred, d.gpu.vendor);
  // a parallel run's floor is its busiest device's kernels' (the timeline's device_floor_s), not the graph's
  if (d.parallel) in.insert(in.end(), d.parallel->figures.begin(), d.parallel->figures.end());
  // r.forecast_with(factors) -> the workload's latency (seconds) forecast with them, as the file keeps them (to its
  // digits, [decode_factors] as written below): what the next forecast on the GPU applies
  const session::figures_callback forecast_with{"forecast_with", [&](const std::map<std::string, double>& factors) {
    const auto decode = phase_decode_factors(d.decode, factors);
    s.calibration_set(d.gpu.name, calibration_parse(calibration_text(d.gpu, factors, decode, {}, {}),
                                                    "scripts/neusight/calibration.lua fit()'s factors", d.gpu));
    struct uncalibrate {  // after the forecast, or its error: a calibration's forecast starts from the uncalibrated one
      session& s;
      const std::string& gpu;
      ~uncalibrate() { s.calibration_set(gpu, std::nullopt); }
    } const after{s, d.gpu.name};
    forecast_done again;
    forecast_workload(s, pred_made, f, script, again, false);
    return again.latency_s();
  }};
  const figures fit = s.figures_call("neusight.calibration", "fit", in, d.gpu, pred.uncertainty(d.gpu.vendor), {},
                                     &forecast_with);
  const std::map<std::string, double> factors = figure_factors(fit);
  std::optional<double> calibrated_ms;
  for (const auto& x : fit.fields)
    if (x.key == "calibrated_ms") calibrated_ms = figure_number(x.value);
  if (factors.empty()) throw error("scripts/neusight/calibration.lua fit(): no factor.<family> fields");
  for (const auto& w : fit.warnings) std::fprintf(stderr, "neusight: warning: %s\n", w.c_str());
  const std::string config = s.forecast_summary(d.state);  // the workload in a line (scripts/neusight/report.lua)
  std::vector<std::pair<std::string, std::variant<std::string, double>>> facts = {
      {"measurement", m.source}, {"measured_ms", measured_ms}, {"forecast_ms", latency_s * 1e3},
      {"workload", config}};
  if (!d.fc->g.model.empty()) facts.emplace_back("model", d.fc->g.model);  // the reader refuses an empty one
  facts.emplace_back("predictor", pred.name());
  // the weights it read (session::weights_fitted): another weights root's forecasts skip the file
  if (auto w = s.weights_fitted(d.gpu); !w.empty()) facts.emplace_back("weights", w);
  // the whole model's parameters, when known (scripts/neusight/report.lua model_params): what later forecasts tell
  // the measured model by; written whole
  if (const auto n = s.forecast_model_params(d.state, d.fc->params_total())) facts.emplace_back("model_params", *n);
  if (!m.note.empty()) facts.emplace_back("note", m.note);
  // each phase from its own measurement (phase_decode_factors)
  const std::map<std::string, double>& other_factors = factors;
  const std::map<std::string, double> decode_factors = *phase_decode_factors(d.decode, factors);
  const std::string where = calibration_write(d.gpu, path, other_factors, decode_factors, "`neusight predict … --calibrate " + m.source + "`", c.output, facts);
  if (c.format == "json") {
    nlohmann::ordered_json j;
    j["gpu"] = d.gpu.name;
    j["calibration_file"] = where;
    j["measurement"] = m.source;
    j["workload"] = config;
    j["model"] = d.fc->g.model;  // what the calibration file records as the measured model
    j["measured_ms"] = measured_ms;
    j["forecast_ms"] = latency_s * 1e3;
    j["calibrated_ms"] = calibrated_ms ? nlohmann::ordered_json(*calibrated_ms) : nlohmann::ordered_json(nullptr);
    j["factors"] = other_factors;
    j["decode_factors"] = decode_factors;
    std::vector<std::string> warnings = d.warnings;  // the workload's (said on stderr above), then the fit's
    warnings.insert(warnings.end(), fit.warnings.begin(), fit.warnings.end());
    j["warnings"] = warnings;
    emit(j.dump(2) + "\n", c.output);
  } else {
    std::string out = fmt::format("calibrated {} from {} ({})\n", d.gpu.name, m.source, config);
    for (const auto& line : fit.lines) out += line + "\n";
    if (!d.decode) out += "decode steps: not calibrated (a measured decode step calibrates them)\n";
    else out += "prefills, training steps and other forecasts: corrected by the decode step's factors too (no "
                "prefill was measured; a measured prefill or training step calibrates them by their own)\n";
    out += "written to " + where + "\n";
    emit(out, c.output);
  }
  return 0;
}

// --calibrate TRACE.json: a PyTorch-profiler Chrome trace measured on the GPU. Its GEMM and attention ops (those
// scripts/neusight/scale.lua builds kernels for) give each kernel family's measured and predicted time on that GPU;
// scripts/neusight/calibration.lua fit_trace() turns them into factors, written beside the GPU's file.
int run_calibrate_trace(session& s, const common_flags& c, const forecast_flags& f) {
  const gpu_spec gpu = s.gpu(f.gpu);
  const fs::path path = calibration_path(gpu);
  if (path.empty()) throw error("--calibrate: " + gpu.name + " was not read from a file: nowhere to keep a calibration");
  const trace tr = trace_load(c.calibrate);
  if (tr.format != trace_format::chrome_json)
    throw error(c.calibrate + ": --calibrate reads a PyTorch-profiler Chrome trace (.json) or a TOML measurement (" +
                std::string(trace_format_name(tr.format)) + " given)");
  std::vector<std::string> warnings;
  if (!trace_device_check(tr, c.calibrate, [&](const std::string& name) { return s.gpu(name); }, gpu, "--gpu", nullptr))
    warnings.push_back(c.calibrate + ": the trace does not name its GPU (" + tr.origin_unknown + "): taken as " + gpu.name);
  std::map<std::string, size_t> not_built;
  std::vector<kernel_instance> ks = trace_kernels(s, tr, not_built);
  for (const auto& [kind, n] : not_built)
    warnings.push_back(fmt::format("{} '{}' ops had missing or unsupported input shapes or element types: not used", n, kind));
  if (ks.empty())
    throw error(c.calibrate + ": no GEMM or attention op with input shapes in the trace (record it with "
                "record_shapes=True, e.g. scripts/collect/hf_trace.py): nothing to calibrate");
  auto pred = predictor_for(s, f);
  s.tiles_select(ks, gpu);
  const std::vector<double> sec = pred->predict(ks, gpu);
  // Each op's measured GPU time goes to the family of its dominant kernel, as do its predicted kernels.
  struct op_forecast {
    size_t top = 0;          // its longest predicted kernel
    double top_s = -1, s = 0;  // that kernel's seconds, and all its kernels'
  };
  std::map<size_t, op_forecast> by_op;  // op index → its kernels' forecast
  for (size_t i = 0; i < ks.size(); ++i) {
    op_forecast& o = by_op[ks[i].node];
    o.s += sec[i];
    if (sec[i] > o.top_s) o.top = i, o.top_s = sec[i];
  }
  std::vector<kernel_instance> dominant;
  std::vector<double> measured;
  std::vector<double> predicted;
  for (const auto& [op, o] : by_op) {
    double m = 0;
    for (const auto& k : tr.ops[op].kernels) m += k.duration_ns / 1e9;
    if (!(m > 0)) continue;
    dominant.push_back(ks[o.top]);
    predicted.push_back(o.s);
    measured.push_back(m);
  }
  graph g;  // one node per op (count 1): forecast's family sums weigh kernels by their node's replication
  g.nodes.resize(dominant.size());
  for (size_t i = 0; i < dominant.size(); ++i) dominant[i].node = i;
  const forecast pf = forecast_make(g, dominant, predicted), mf = forecast_make(g, dominant, measured);
  // steps: the profiled steps the trace holds (its ops each once per step): the times it prints are per step
  figure_inputs in = {{"measurement", c.calibrate}, {"ops", double(dominant.size())}, {"steps", double(tr.steps)}};
  // the phase the trace holds, when its metadata says (hf_trace.py's "mode"): a decode step's factors are the file's
  // [decode_factors] too, by the rule of a measurement of one phase (phase_decode_factors)
  std::optional<bool> decode;
  if (!tr.mode.empty()) decode = tr.mode == "decode";
  const std::vector<family_time> forecast_families = pf.seconds_by_family(gpu), measured_families = mf.seconds_by_family();
  family_inputs_add(in, forecast_families, *pred, gpu.vendor);
  for (const auto& ft : measured_families) in.emplace_back("measured_s." + ft.family, ft.seconds);
  const figures fit = s.figures_call("neusight.calibration", "fit_trace", in, gpu, pred->uncertainty(gpu.vendor));
  const std::map<std::string, double> factors = figure_factors(fit);
  if (factors.empty()) throw error("scripts/neusight/calibration.lua fit_trace(): no factor.<family> fields");
  warnings.insert(warnings.end(), fit.warnings.begin(), fit.warnings.end());
  for (const auto& w : warnings) std::fprintf(stderr, "neusight: warning: %s\n", w.c_str());
  double m_total = 0, p_total = 0;
  for (size_t i = 0; i < measured.size(); ++i) m_total += measured[i], p_total += predicted[i];
  const double per_step = 1e3 / double(tr.steps);  // seconds over the trace → ms per profiled step
  std::vector<std::pair<std::string, std::variant<std::string, double>>> facts = {
      {"measurement", c.calibrate}, {"trace_device", tr.origin_device}, {"ops", double(dominant.size())},
      {"steps", double(tr.steps)}, {"measured_ms", m_total * per_step}, {"forecast_ms", p_total * per_step},
      {"predictor", pred->name()}};
  if (auto w = s.weights_fitted(gpu); !w.empty()) facts.emplace_back("weights", w);  // the weights it read
  if (!tr.mode.empty()) facts.emplace_back("trace_mode", tr.mode);
  // the families too little measured for a factor (fit_trace's evidence rule): they keep their forecasts
  std::string skipped;
  if (const figure_value* v = figure_find(fit, "skipped"); v && std::holds_alternative<std::string>(*v))
    skipped = std::get<std::string>(*v), facts.emplace_back("skipped", skipped);
  const auto decode_factors = phase_decode_factors(decode, factors);
  const std::string where =
      calibration_write(gpu, path, factors, decode_factors, "`neusight predict --gpu … --calibrate " + c.calibrate + "` (a profiler trace)", c.output, facts);
  if (c.format == "json") {
    nlohmann::ordered_json j;
    j["gpu"] = gpu.name;
    j["calibration_file"] = where;
    j["measurement"] = c.calibrate;
    j["trace_device"] = tr.origin_device;
    j["ops"] = dominant.size();
    j["steps"] = tr.steps;  // the times below are per step
    j["measured_ms"] = m_total * per_step;
    j["forecast_ms"] = p_total * per_step;
    j["factors"] = factors;
    if (!tr.mode.empty()) j["mode"] = tr.mode;
    // null: the trace does not say its phase, and [factors] apply to decode steps too
    j["decode_factors"] = decode_factors ? nlohmann::ordered_json(*decode_factors) : nlohmann::ordered_json(nullptr);
    j["skipped"] = skipped;
    nlohmann::ordered_json fams = nlohmann::ordered_json::object();
    for (const auto& ft : forecast_families) fams[ft.family]["forecast_ms"] = ft.seconds * per_step;
    for (const auto& ft : measured_families) fams[ft.family]["measured_ms"] = ft.seconds * per_step;
    j["families"] = fams;
    j["warnings"] = warnings;
    emit(j.dump(2) + "\n", c.output);
  } else {
    std::string out = fmt::format("calibrated {} from the trace {} ({} ops{})\n", gpu.name, c.calibrate, dominant.size(),
                                  tr.steps > 1 ? fmt::format(" over {} profiled steps", tr.steps) : "");
    for (const auto& line : fit.lines) out += line + "\n";
    if (!decode_factors) out += "a decode step's kernels: corrected by these factors too (the trace does not say its phase)\n";
    else if (decode_factors->empty()) out += "a decode step's kernels: not calibrated (" + std::string(tr.mode == "inference" ? "an " : "a ") + tr.mode +
                                           " trace; a measured decode step calibrates them)\n";
    else out += "prefills, training steps and other forecasts: corrected by the decode step's factors too (no "
                "prefill was measured; a measured prefill or training step calibrates them by their own)\n";
    out += "written to " + where + "\n";
    emit(out, c.output);
  }
  return 0;
}

int run_forecast(const common_flags& c, const forecast_flags& f, const std::string& script) {
  session s(session_options_make(c));
  std::unique_ptr<predictor> pred;
  forecast_done d;
  if (!c.calibrate.empty() && calibrate_from_trace(c.calibrate)) {
    if (!script.empty() || !f.model.empty())
      throw error("--calibrate " + c.calibrate + " fits from the trace's own kernels: give predict --gpu only, without "
                  "a workload or --model");
    return run_calibrate_trace(s, c, f);
  }
  // the workload's warnings go to stderr as predict prints them, calibrating too: a measurement of a workload the
  // forecast does not know all of (a quantization_config, a soft-capping sdpa drops) is fitted knowingly
  forecast_workload(s, pred, f, script, d, true);
  if (!c.calibrate.empty()) return run_calibrate(s, c, f, script, pred, d);
  report_emit(s, c, d, f.predictor);
  return 0;
}

// A comparison: one forecast per combination of the list-valued flags, in one session (expansions, tiles and
// predictions are shared), rendered as rows. A value that names nothing (unknown GPU or model, a misspelled dtype) stops
// the run before anything is forecast; a combination that cannot be forecast (batch not divisible by dp ×
// microbatches, a layout a builder refuses) becomes a row with its error.
int run_compare(const common_flags& c, const forecast_flags& f, const std::string& script) {
  if (!c.calibrate.empty())
    throw error("--calibrate fits one measured workload: give single values, not lists (" + c.calibrate + ")");
  const session_options o = session_options_make(c);
  session s(o);
  // --gpu: each GPU file once (a typo throws here); the rows' label of each GPU, as given (scripts/neusight/compare.lua
  // gpu_labels: its name, or "NAME (as given)" for GPUs of different files that share a name)
  const std::vector<std::string> gpus_given = list_split(f.gpu);
  std::map<std::string, const gpu_spec*> gpus;  // each item's GPU, resolved once
  gpu_list_once(gpus_given, [&](const std::string& g) { return gpus[g] = &s.gpu(g); },
                [&](const gpu_spec& g) { return s.calibration_of(g); });
  std::vector<std::string> gpu_names;
  for (const auto& g : gpus_given) gpu_names.push_back(gpus.at(g)->name);
  const std::vector<std::string> labels = s.gpu_labels(gpus_given, gpu_names);
  std::map<std::string, std::string> gpu_labels;
  for (size_t i = 0; i < gpus_given.size(); ++i) gpu_labels.emplace(gpus_given[i], labels[i]);
  // the other lists: each value once by its one name too (--dtype bf16,BF16: two equal rows), as compare.lua resolves
  // spellings (the command line refused the same text twice)
  for (const auto& lf : list_flags()) {
    const auto values = list_split(f.*lf.flag);
    if (values.size() < 2) continue;
    if (const std::string why = s.compare_repeated(lf.key, values); !why.empty()) throw error(why);
  }
  std::vector<forecast_flags> combos{f};
  for (const auto& lf : list_flags()) {
    const auto member = lf.flag;
    const auto values = list_split(f.*member);
    if (values.size() < 2) continue;
    std::vector<forecast_flags> next;
    for (const auto& base : combos)
      for (const auto& v : values) {
        next.push_back(base);
        next.back().*member = v;
      }
    combos = std::move(next);
  }
  // A --mode list of decode and another mode (prefill,decode): --seq is the others' prompt and --context decode's cache,
  // and workload.lua refuses each in the other's mode, so no such list could run both rows. Each row takes what its
  // mode reads: a decode row --context, or without one the prompt (--seq) it follows as its cache, and no --seq; the
  // others no --context. Rows that come out alike (a --seq list beside one --context) are one.
  if (const auto modes = list_split(f.mode);
      modes.size() > 1 && std::find(modes.begin(), modes.end(), "decode") != modes.end()) {
    std::vector<forecast_flags> phased;
    std::vector<workload_overrides> seen;
    for (auto one : combos) {
      if (one.mode == "decode") {
        if (one.context.empty()) one.context = one.seq;
        one.seq.clear();
      } else {
        one.context.clear();
      }
      const workload_overrides key = overrides_make(one);
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
      seen.push_back(key);
      phased.push_back(std::move(one));
    }
    combos = std::move(phased);
  }
  for (const auto& one : combos) s.workload_check(overrides_make(one));  // typos stop here, before any forecast
  // and so do the values no row changes that the rows would resolve each (as search resolves them): --predictor and
  // --cluster (a misspelled one was every row's error, exit 0)
  std::unique_ptr<predictor> pred = predictor_for(s, f);
  if (!f.cluster.empty()) cluster_resolve(o.data_root / "gpus" / "clusters", f.cluster);
  std::vector<session::compare_input> inputs;
  for (const auto& lf : list_flags()) inputs.push_back({lf.key, lf.column, lf.integer});
  const run_state cmp = s.compare_begin(inputs, script.empty() ? "command line" : script);  // the rows: scripts/neusight/compare.lua
  size_t failed = 0;  // rows with an error: when every row has one, nothing was forecast (exit 1)
  for (const auto& one : combos) {
    try {
      forecast_done d;
      d.comparison_row = true;
      forecast_workload(s, pred, one, script, d, false);
      gpu_spec shown = d.gpu;  // the row's gpu cell: report.lua row() reads the name
      if (const auto gl = gpu_labels.find(one.gpu); gl != gpu_labels.end()) shown.name = gl->second;
      s.compare_add(cmp, d.state, shown, d.latency_s() * 1e3, d.figs, d.warnings);
    } catch (const std::exception& ex) {
      std::vector<std::string> given;  // the inputs as given (the GPU by its label)
      for (const auto& lf : list_flags()) {
        const std::string& v = one.*lf.flag;
        const auto gl = lf.flag == &forecast_flags::gpu ? gpu_labels.find(v) : gpu_labels.end();
        given.push_back(gl != gpu_labels.end() ? gl->second : v);
      }
      std::string why = ex.what();
      if (const size_t nl = why.find('\n'); nl != std::string::npos) why.resize(nl);
      // the row's GPU file: the one --gpu gave (resolved above; a single --gpu keeps its spaces in the combination),
      // none when the script names it
      const auto item = list_split(one.gpu);
      const auto g = item.size() == 1 ? gpus.find(item.front()) : gpus.end();
      s.compare_add_error(cmp, given, why, g == gpus.end() ? std::string() : g->second->source);
      ++failed;
    }
  }
  const std::string html = c.report_html.empty() ? "" : s.compare_render(cmp, "html");
  emit(s.compare_render(cmp, c.format == "json" ? "json" : c.format == "csv" ? "csv" : "table"), c.output);
  if (!c.report_html.empty()) emit(html, c.report_html);
  if (failed == combos.size()) {  // the rows say why; a comparison of nothing is no success (it exited 0)
    std::fprintf(stderr, "neusight: no combination could be forecast (%zu of %zu failed: see the rows' errors)\n",
                 failed, combos.size());
    return 1;
  }
  return 0;
}

bool is_comparison(const forecast_flags& f) {
  for (const auto& lf : list_flags())
    if (list_split(f.*lf.flag).size() > 1) return true;
  return false;
}

// predict --graph: the reference's own decomposition, replicated over the layers, no Lua rules involved.
int run_graph(const common_flags& c, const forecast_flags& f, const graph_flags& gf) {
  session s(session_options_make(c));
  opgraph og = opgraph_load(gf.file, s.costing(), {true, s.rule_kernels()});
  opgraph_check_supported(og);
  std::string gpu_note;  // a short name several GPUs answer to: which it was taken as (gpu_catalog::resolve)
  const gpu_spec gpu = s.gpus().resolve(f.gpu, gpu_note);
  const std::string mode = !f.mode.empty() ? f.mode : og.tag ? og.tag->mode : "";
  if (mode.empty())
    throw error(og.source + ": the file name carries no -inf-/-train- tag: pass --mode train or --mode inference");
  if (mode == "prefill" || mode == "decode")
    throw error("predict --graph: --mode " + mode + " needs a model built with a KV cache (--model), not a reference graph");
  graph_run r;
  r.mode = mode, r.layers = gf.layers, r.batch = og.tag ? og.tag->batch : 0, r.seq = og.tag ? og.tag->seq : 0;
  r.launch = f.launch.empty() ? "eager" : f.launch, r.overhead = f.overhead;
  r.warnings = og.warnings;
  if (!gpu_note.empty()) r.warnings.push_back(gpu_note);
  r.forward_only_warning = true;
  std::unique_ptr<predictor> pred;
  forecast_done d;
  forecast_take(graph_forecast(s, og, gpu, [&]() -> const predictor& { return *(pred = predictor_for(s, f)); },
                               std::move(r)),
                d);
  report_emit(s, c, d, f.predictor);
  return 0;
}

// A workload script: the path as given when it exists, else (relative paths) the bundled file of that name, so
// that `neusight run examples/gpt3_train.lua` works from any folder with the installed binary.
std::string script_resolve(const std::string& script) {
  std::error_code ec;
  if (fs::is_regular_file(script, ec)) return script;
  if (fs::exists(script, ec)) throw error(script + ": not a regular file");
  const fs::path p(script);
  if (p.is_relative()) {
    const fs::path bundled = data_root_find() / p;
    if (fs::is_regular_file(bundled, ec)) return bundled.string();
    throw error(text_no_such_file(script) + " (nor " + bundled.string() + " among the bundled files)");
  }
  throw error(text_no_such_file(script));
}

int run_paths(const common_flags& c, const std::string& which) {
  const fs::path root = data_root_find();
  if (!which.empty()) {  // one folder, nothing else: for $(neusight paths scripts) in a shell
    emit((which == "data" ? root : which == "readme" ? root / "README.md" : root / which).string() + "\n", "");
    return 0;
  }
  session s(session_options_make(c));
  std::string out = fmt::format("{:<13} {}\n", "data", root.string());
  for (const char* d : {"gpus", "ops", "scripts", "weights", "examples"})
    out += fmt::format("{:<13} {}\n", d, (root / d).string());
  out += fmt::format("{:<13} {}\n", "readme", (root / "README.md").string());  // the manual (installed beside them)
  // A search path without the bundled folder (NEUSIGHT_OPS_PATH / NEUSIGHT_SCRIPTS_PATH with no ";;" to splice it
  // in) says so: every op or module it does not hold is then unknown.
  const auto search_line = [&](const char* label, const std::vector<fs::path>& dirs, const char* bundled,
                               const char* flag, const char* env) {
    std::string path;
    bool has_bundled = false;
    for (const auto& d : dirs) {
      path += (path.empty() ? "" : ":") + d.string();
      std::error_code ec;
      has_bundled = has_bundled || fs::equivalent(d, root / bundled, ec);
    }
    std::string line = fmt::format("{:<13} {}   (first hit wins: {}, {}, the bundled {}/)\n", label, path, flag, env, bundled);
    if (!has_bundled)
      line += fmt::format("{:<13} the bundled {}/ is not searched: {} has no \";;\" to splice it in\n", "", bundled, env);
    return line;
  };
  out += search_line("op search", s.ops_search_path(), "ops", "--ops", "NEUSIGHT_OPS_PATH");
  out += search_line("script search", s.scripts_search_path(), "scripts", "--scripts", "NEUSIGHT_SCRIPTS_PATH");
  if (const gpu_catalog gpus = s.gpus(); !gpus.user_dirs().empty()) {  // --gpus-dir, NEUSIGHT_GPUS_PATH
    std::string path;
    for (const auto& d : gpus.user_dirs()) path += d.path.string() + ":";
    out += fmt::format("{:<13} {}   (first hit wins: --gpus-dir, NEUSIGHT_GPUS_PATH, the bundled gpus/)\n", "gpu search",
                       path + gpus.dir().string());
  }
  emit(out, "");
  return 0;
}

int run_gpus(const common_flags& c) {
  if (c.format == "csv") throw error("gpus: --format csv is not offered (table or json)");
  session s(session_options_make(c));  // each file's architecture as the tile rules know it (session::gpu_checker)
  const auto gpus = s.gpus().load_all();
  emit(c.format == "json" ? gpus_json(gpus) : gpus_table(gpus), c.output);
  return 0;
}

// `neusight models`: the presets with family, parameter count and source (scripts/neusight/catalog.lua).
int run_models(const common_flags& c) {
  session s(session_options_make(c));
  const session::lua_report r = s.report("neusight.catalog", "models");
  emit(c.format == "json" ? r.json : c.format == "csv" ? r.csv : r.table, c.output);
  return 0;
}

int run_ops(const common_flags& c) {
  session_options so = session_options_make(c);
  so.verbose_op_shadows = false;  // the table below names them
  session s(so);
  std::string out;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& e : s.ops_list()) {
    std::string doc, err;
    std::vector<std::pair<std::string, std::string>> attrs;
    try {
      op_entry loaded = s.op_load(e.name);
      doc = std::move(loaded.doc), attrs = std::move(loaded.attrs);
    } catch (const std::exception& ex) {
      err = ex.what();
    }
    out += fmt::format("{:<16} {:<28} {}\n", e.name, e.file, err.empty() ? doc : "ERROR: " + err);
    if (c.verbose) {
      for (const auto& sh : e.shadows) out += fmt::format("{:<16}   shadows {}\n", "", sh);
      // the node attrs the rule reads (besides scripts/neusight/rules.lua node_attrs, which any node may set)
      for (const auto& [name, what] : attrs) out += fmt::format("{:<16}   attrs.{}  {}\n", "", name, what);
    }
    nlohmann::ordered_json o = {{"op", e.name}, {"file", e.file}, {"doc", doc}, {"shadows", e.shadows}};
    if (c.verbose) {
      nlohmann::ordered_json a = nlohmann::ordered_json::object();
      for (const auto& [name, what] : attrs) a[name] = what;
      o["attrs"] = std::move(a);
    }
    if (!err.empty()) o["error"] = err;  // a rule that does not load: listed with why
    list.push_back(std::move(o));
  }
  emit(c.format == "json" ? list.dump(2) + "\n" : out, c.output);
  return 0;
}

// --report FILE: an HTML page, never in the regular file -o writes (the page replaced the report without a word; a
// device or FIFO both write to, /dev/null, is written in place) nor in a file named as another format (x.json held
// HTML).
void report_page_check(const std::string& output, const std::string& page) {
  if (page.empty()) return;
  const std::string ext = text_lower(fs::path(page).extension().string());
  if (ext == ".json" || ext == ".csv" || ext == ".txt")  // -o suggested when not given already
    throw CLI::ValidationError("--report", "'" + page + "': --report writes an HTML page; use -o for JSON, CSV or a "
                               "table" + (output.empty() ? " (e.g. -o " + page + ")" : "") + ", --report for a .html file");
  // only a regular file -o replaces, or one that does not exist yet, is one file the page would replace: a device,
  // FIFO or socket (-o /dev/null --report /dev/null) is written in place (emit_kind_of); a folder is emit's error
  if (emit_kind_of(output) != emit_kind::file) return;
  std::error_code e1, e2;
  const fs::path a = fs::weakly_canonical(output, e1), b = fs::weakly_canonical(page, e2);
  if (!e1 && !e2 && a == b)
    throw CLI::ValidationError("--report", "'" + page + "' is the file -o writes too (" + output + "): the page would "
                               "replace the report; give them different files");
}

// "a", "a and b", "a, b and c".
std::string and_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return out;
}

// What the command `sc` (the one given) lacks of its required flags, all of them at once (CLI11 stops at the first):
// the table's required flags (cli/flags.cpp .required(), in its order; a positional as "the NAME argument"), then the
// flags a command requires in some cases only: serve's lengths and arrivals unless --requests-file gives each
// request's, predict's model unless --graph (or a --calibrate trace) stands for it. "" when nothing is missing, else
// "missing A, B and C" with what the conditional ones are required without.
std::string missing_required(CLI::App* sc, bool trace_calibration) {
  std::vector<std::string> missing;
  for (const CLI::Option* o : sc->get_options())
    if (o->get_required() && o->count() == 0)
      missing.push_back(o->get_lnames().empty() && o->get_snames().empty() ? "the " + o->get_name() + " argument"
                                                                            : o->get_name());
  const auto given = [&](const char* name) { return sc->get_option(name)->count() > 0; };
  std::string why;
  if (sc->get_name() == "serve" && !given("--requests-file")) {
    for (const char* name : {"--input-len", "--output-len"})
      if (!given(name)) missing.push_back(name);
    if (!given("--batch") && !given("--rate")) missing.push_back("--batch (static batch) or --rate (arrivals)");
    if (!missing.empty() && (!given("--input-len") || !given("--output-len") || (!given("--batch") && !given("--rate"))))
      why = " (--input-len, --output-len and --batch or --rate are required without --requests-file)";
  }
  // predict: the model (or a graph) and the GPU; a graph's file name carries the mode, batch and sequence, a --model
  // (a preset, config.json or model file: only its model is read) needs --mode, --batch and --seq (not where every
  // --mode is decode: one new token per sequence; --context where it is). Said here, exit 2, as every command's missing flags; before, those
  // of a given --model were the workload's error (exit 1; scripts/neusight/workload.lua normalize keeps that check)
  if (sc->get_name() == "predict" && !trace_calibration) {
    const bool model = given("--model");
    if (!model && !given("--graph")) missing.insert(missing.begin(), "--model (or --graph)");
    if (!given("--gpu")) missing.push_back("--gpu");
    if (model) {
      bool decode_only = given("--mode");
      for (const std::string& v : sc->get_option("--mode")->results())
        for (const std::string& m : list_split(v))
          if (m != "decode") decode_only = false;
      for (const char* name : {"--mode", "--batch"})
        if (!given(name)) missing.push_back(name);
      if (!decode_only && !given("--seq")) missing.push_back("--seq");
      // and every decode row its cache's length: --context (a mixed --mode list's decode row takes --seq's prompt as
      // its cache without one: run_compare). It was the workload's error, exit 1, where a missing --seq was exit 2
      if (decode_only && !given("--context")) missing.push_back("--context");
    }
  }
  return missing.empty() ? "" : "missing " + and_list(missing) + why;
}

// Each command of this file, as the command table runs it (after parsing): run, predict, paths, gpus, models, ops.
int run_command(flag_targets& t, int, char**) {
  const std::string file = script_resolve(t.get<raw_flags>().script);
  const auto& c = t.get<common_flags>();
  const auto& f = t.get<forecast_flags>();
  return is_comparison(f) ? run_compare(c, f, file) : run_forecast(c, f, file);
}
int predict_command(flag_targets& t, int, char**) {
  const auto& c = t.get<common_flags>();
  const auto& f = t.get<forecast_flags>();
  if (!t.get<graph_flags>().file.empty()) return run_graph(c, f, t.get<graph_flags>());
  return is_comparison(f) ? run_compare(c, f, "") : run_forecast(c, f, "");
}
int paths_command(flag_targets& t, int, char**) { return run_paths(t.get<common_flags>(), t.get<raw_flags>().paths_which); }
int gpus_command(flag_targets& t, int, char**) { return run_gpus(t.get<common_flags>()); }
int models_command(flag_targets& t, int, char**) { return run_models(t.get<common_flags>()); }
int ops_command(flag_targets& t, int, char**) { return run_ops(t.get<common_flags>()); }

// --report FILE.html of the command `bit` (run, predict, serve): "" when not given.
const std::string& report_page_of(unsigned bit, flag_targets& t) {
  return bit == cmd::serve ? t.get<serve_flags>().report_html : t.get<common_flags>().report_html;
}

// The commands, in --help's order: where each sits (nullptr: the top level; else the command above it), what --help
// says of it, its bit in cli/flags.cpp's table (the flags it takes) and the function in its command file that runs it.
struct command_entry {
  const char* parent;
  const char* name;
  const char* about;
  unsigned bit;
  int (*run)(flag_targets& t, int argc, char** argv);
};
const std::vector<command_entry>& command_table() {
  static const std::vector<command_entry> commands = {
      {nullptr, "run", "Evaluate a workload script (examples/*.lua)", cmd::run, run_command},
      {nullptr, "predict", "Forecast a built-in model or a reference operator graph without writing a script",
       cmd::predict, predict_command},
      {nullptr, "paths", "Print where the bundled GPUs, op rules, scripts, weights and examples are read from",
       cmd::paths, paths_command},
      {nullptr, "gpus", "List the known GPUs and their key specs", cmd::gpus, gpus_command},
      {nullptr, "models", "List the model presets with their family, parameter count and source", cmd::models,
       models_command},
      {nullptr, "ops", "List operator rules: op name → resolved file (first hit wins)", cmd::ops, ops_command},
      {nullptr, "train", "Train the tile predictor of one kernel family from micro-benchmark CSVs", cmd::train,
       train_command},
      {"eval", "kernels", "MAPE per GPU x family on micro-benchmark CSV rows", cmd::eval_kernels, eval_kernels_command},
      {"eval", "models", "End-to-end APE per GPU against measured labels (label/<GPU>/<tag>.json)", cmd::eval_models,
       eval_models_command},
      {nullptr, "scale", "Scale a trace measured on one GPU to another GPU (hybrid with the tile predictor)", cmd::scale,
       scale_command},
      {nullptr, "search", "Forecast every dp x tp x pp layout of N GPUs and rank those that fit in memory", cmd::search,
       search_command},
      {nullptr, "serve",
       "Serving latency and throughput of an LLM: a static batch (--batch) or continuous batching of "
       "Poisson or bursty arrivals (--rate, --requests, --burstiness) or a recorded trace (--requests-file), "
       "simulated in scripts/neusight/serve.lua from prefill/decode "
       "forecasts; --sweep runs every GPU x tp x batch|rate combination and picks the cheapest that meets "
       "--ttft-ms and --tpot-ms (scripts/neusight/sweep.lua)",
       cmd::serve, serve_command},
  };
  return commands;
}
// The parent commands (eval): what --help says of them.
const char* parent_about(const std::string& name) {
  return name == "eval" ? "Compare forecasts with measurements" : "";
}

// "neusight eval models" less "neusight ": the command as its messages name it.
std::string command_words(CLI::App& app, CLI::App* sc) {
  std::string command = sc->get_name();
  for (CLI::App* a = sc->get_parent(); a && a != &app; a = a->get_parent()) command = a->get_name() + " " + command;
  return command;
}

// Megatron-LM's flags (megatron/training/arguments.py) for settings predict, run and search take under other names:
// a Megatron-LM user's first guesses. `how` says where the meaning differs; `ours` empty: no counterpart, `how` says
// what the flag sets.
struct megatron_name {
  const char* megatron;
  const char* ours;
  const char* how;
};
const megatron_name megatron_names[] = {
    {"--tensor-model-parallel-size", "--tp", ""},
    {"--pipeline-model-parallel-size", "--pp", ""},
    {"--expert-model-parallel-size", "--ep", " (it divides --dp: the experts spread over data-parallel ranks)"},
    {"--virtual-pipeline-model-parallel-size", "--virtual-stages", " (model chunks per device; --schedule interleaved)"},
    {"--num-layers-per-virtual-pipeline-stage", "--virtual-stages",
     " (model chunks per device, layers / (pp x Megatron-LM's layers per chunk); --schedule interleaved)"},
    {"--micro-batch-size", "--microbatches",
     ", the number of microbatches per iteration, not their size: the micro-batch size is --batch / (--dp x "
     "--microbatches)"},
    {"--global-batch-size", "--batch", " (the global batch, sequences per iteration)"},
    {"--seq-length", "--seq", ""},
    {"--use-distributed-optimizer", "--distributed-optimizer", ""},
    {"--recompute-activations", "--recompute selective", ""},
    {"--recompute-granularity", "--recompute", " (none, selective or full)"},
    {"--moe-grouped-gemm", "--experts grouped", ""},
    {"--bf16", "--dtype bf16", ""},
    {"--fp16", "--dtype fp16", ""},
    // no counterpart: said so, not "did you mean" a near name
    {"--context-parallel-size", "",
     "context parallelism (each sequence split over ranks in attention), which is not modelled (README: Parallel "
     "training)"},
};

// A first word that names no subcommand (`neusight predcit`, `neusight eval kernel`): said so, with close matches,
// rather than CLI11's "A subcommand is required" (or the word taken as a positional of nothing); and a long option the
// command does not have (`--dtpye bf16`, `--input_len 10`): said so, with the closest of the command's own option
// names, rather than CLI11's "arguments were not expected" or a later "--input-len is required". Every subcommand, one
// place: the names are the command's options and those of the commands above it. An option's value is skipped as
// CLI11 reads it (`-o --weird.json`, `--model-arg --x`): a known option given without `=` takes the next min(type size,
// items expected) words whatever they look like; a flag takes none. Returns 2 when it said one, else 0.
int unknown_word_say(CLI::App& app, int argc, char** argv) {
  CLI::App* level = &app;
  auto subs = [](CLI::App* a) { return a->get_subcommands([](CLI::App*) { return true; }); };
  for (int i = 1; i < argc && level; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-' || subs(level).empty()) break;
    std::vector<std::string> names;
    CLI::App* next = nullptr;
    for (CLI::App* c : subs(level)) {
      names.push_back(c->get_name());
      if (c->get_name() == word) next = c;
    }
    if (!next) {
      const std::string where = level == &app ? "neusight" : "neusight " + level->get_name();
      std::fprintf(stderr, "neusight: unknown subcommand '%s'%s; `%s --help` lists them\n", word.c_str(),
                   text_did_you_mean(word, names).c_str(), where.c_str());
      return 2;
    }
    level = next;
  }
  if (level == &app) return 0;
  std::vector<std::string> names;
  for (CLI::App* a = level; a; a = a->get_parent())
    for (const CLI::Option* o : a->get_options())
      for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
  auto option_find = [&](const std::string& name) -> const CLI::Option* {
    for (CLI::App* a = level; a; a = a->get_parent())
      for (const CLI::Option* o : a->get_options())
        if (o->check_name(name)) return o;
    return nullptr;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;  // what follows is positional
    if (arg.size() < 2 || arg[0] != '-' || arg == "-") continue;
    const bool is_long = arg.compare(0, 2, "--") == 0;
    if (!is_long && arg.size() != 2) continue;  // -xVALUE carries its value; bundled short flags stay CLI11's
    const std::string name = is_long ? arg.substr(0, arg.find('=')) : arg;
    if (const CLI::Option* o = option_find(name)) {
      if (name.size() == arg.size() && o->get_items_expected_max() > 0)
        i += std::max(0, std::min(o->get_type_size_min(), o->get_items_expected_min()));
      continue;
    }
    if (!is_long) continue;  // an unknown short option: CLI11 says so
    const std::string command = command_words(app, level);
    // an option of other commands (`serve --pp 2`): this command does not model it; said so, naming them, rather
    // than a near name that means something else (--pp → --tp)
    std::string others;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      if (sub == level) continue;
      for (const CLI::Option* o : sub->get_options())
        if (o->check_name(name)) {
          others += (others.empty() ? "" : ", ") + sub->get_name();
          break;
        }
    }
    if (!others.empty()) {
      std::fprintf(stderr, "neusight: %s has no %s option (%s %s it; `neusight %s --help` lists this command's)\n",
                   command.c_str(), name.c_str(), others.c_str(),
                   others.find(',') == std::string::npos ? "has" : "have", command.c_str());
      return 2;
    }
    // Megatron-LM's name of a setting this command takes (`--micro-batch-size`): said with ours and how it differs,
    // not a near name that means something else (the closest, --microbatches, is the count, not the size)
    for (const megatron_name& m : megatron_names) {
      if (name != m.megatron) continue;
      const std::string ours = m.ours;
      // a setting without a counterpart is said on the commands that take parallel layouts
      if (!option_find(ours.empty() ? "--sequence-parallel" : ours.substr(0, ours.find(' ')))) break;
      if (ours.empty())
        std::fprintf(stderr, "neusight: unknown option '%s' (Megatron-LM's flag): it sets %s; `neusight %s --help` "
                     "lists the options\n", name.c_str(), m.how, command.c_str());
      else
        std::fprintf(stderr, "neusight: unknown option '%s' (Megatron-LM's flag): %s takes %s%s; `neusight %s "
                     "--help` lists them\n", name.c_str(), command.c_str(), m.ours, m.how, command.c_str());
      return 2;
    }
    std::fprintf(stderr, "neusight: unknown option '%s'%s; `neusight %s --help` lists them\n", name.c_str(),
                 text_did_you_mean(name, names).c_str(), command.c_str());
    return 2;
  }
  return 0;
}

// Every missing required flag of the command `sc` given (nullptr: none), at once (missing_required): after CLI11's
// parse (which stops at the first it finds missing) or its checks of the values given (a value refused is said first,
// as CLI11 does). Returns 2 when it said so, else 0.
int missing_say(CLI::App& app, CLI::App* sc, const common_flags& common) {
  const bool trace_calibration = !common.calibrate.empty() && calibrate_from_trace(common.calibrate);
  const std::string missing = sc ? missing_required(sc, trace_calibration) : "";
  if (missing.empty()) return 0;
  std::fprintf(stderr, "neusight: command line: %s; `neusight %s --help` lists the flags\n", missing.c_str(),
               command_words(app, sc).c_str());
  return 2;
}

// The flag of `app` or a command under it given more often than it takes: CLI11 refuses one (MultiOptionPolicy::Throw,
// its default) with ArgumentMismatch, whose fields are only its text; the option itself says it. nullptr: none.
const CLI::Option* given_too_often(CLI::App& app) {
  for (const CLI::Option* o : app.get_options())
    if (o->get_multi_option_policy() == CLI::MultiOptionPolicy::Throw &&
        o->count() > size_t(std::max(o->get_items_expected_max(), 1)))
      return o;
  for (CLI::App* sc : app.get_subcommands([](CLI::App*) { return true; }))
    if (const CLI::Option* o = given_too_often(*sc)) return o;
  return nullptr;
}

// -o out.json / out.csv: the format follows the extension unless --format was given. -o out.html would get a table or
// JSON under an HTML name: refused, naming --report (the page). Returns 2 when it refused, else 0.
int output_format_set(CLI::App* sc, unsigned bit, common_flags& common) {
  if (!(bit & cmd::reports) || common.output.empty()) return 0;
  const std::string ext = text_lower(fs::path(common.output).extension().string());
  if (ext == ".html" || ext == ".htm") {
    const bool has_page = sc->get_option_no_throw("--report") != nullptr;
    std::fprintf(stderr, "neusight: -o %s: -o writes the report as a table, JSON or CSV, not HTML%s\n",
                 common.output.c_str(), has_page ? ("; the HTML page is --report " + common.output).c_str()
                                                 : (" (" + sc->get_name() + " has no HTML page)").c_str());
    return 2;
  }
  if (sc->get_option("--format")->count() > 0) return 0;
  const std::string want = ext == ".json" ? "json" : ext == ".csv" ? "csv" : "";
  if (want.empty()) return 0;
  if (want == "csv" && (bit & cmd::no_csv)) {
    std::fprintf(stderr, "neusight: -o %s: %s writes a table or JSON, not CSV (pass --format table to write a table)\n",
                 common.output.c_str(), sc->get_name().c_str());
    return 2;
  }
  common.format = want;
  return 0;
}

}  // namespace

int app_main(int argc, char** argv) {
  CLI::App app{"neusight — forecast deep-learning training and inference latency on GPUs you do not have"};
  app.set_version_flag("--version", std::string("neusight ") + NEUSIGHT_VERSION + " (" + git_version() + ")");
  app.footer("The manual: README.md beside the bundled files (`neusight paths readme` prints its path): every command, "
             "workloads and model functions, op rules, script modules, Lua predictors, GPU and cluster files.");
  app.require_subcommand(1);
  flag_targets t;
  common_flags& common = t.get<common_flags>();
  std::vector<std::pair<CLI::App*, const command_entry*>> commands;  // each command takes the flags the table gives it
  std::map<std::string, CLI::App*> parents;                         // eval
  for (const command_entry& c : command_table()) {
    CLI::App*& parent = parents[c.parent ? c.parent : ""];
    if (!parent) parent = c.parent ? app.add_subcommand(c.parent, parent_about(c.parent))->require_subcommand(1) : &app;
    commands.emplace_back(flags_add(parent->add_subcommand(c.name, c.about), c.bit, t), &c);
  }
  if (const int code = unknown_word_say(app, argc, argv)) return code;
  const auto given = [&]() -> std::pair<CLI::App*, const command_entry*> {  // the command given
    for (const auto& sc : commands)
      if (*sc.first) return sc;
    return {nullptr, nullptr};
  };
  try {
    try {
      app.parse(argc, argv);
    } catch (const CLI::RequiredError&) {
      if (const int code = missing_say(app, given().first, common)) return code;
      throw;  // no command given, …: CLI11's words
    }
    if (const int code = missing_say(app, given().first, common)) return code;
    report_page_check(common.output, report_page_of(given().second->bit, t));
    flags_check(given().first, given().second->bit, t);  // the relations between its flags' values
  } catch (const CLI::ParseError& e) {
    // a flag given twice: CLI11 says "--gpu: At Most 1 required but received 2"; say what happened and what to do
    // (the values go in one flag; a list, where the flag takes one, is one comma-separated value)
    if (dynamic_cast<const CLI::ArgumentMismatch*>(&e))
      if (const CLI::Option* o = given_too_often(app); o && o->get_name().rfind("--", 0) == 0) {
        const std::string flag = o->get_name();
        std::fprintf(stderr,
                     "neusight: command line: %s given %zu times: give it once (where it takes a list, as one "
                     "comma-separated value: %s A,B)\n",
                     flag.c_str(), o->count(), flag.c_str());
        return 2;
      }
    // a flag's path that names nothing: an input error, said and exited as a missing `run FILE` is
    if (dynamic_cast<const CLI::ValidationError*>(&e) && flag_path_missing()) {
      std::fprintf(stderr, "neusight: %s\n", e.what());
      return 1;
    }
    const int code = app.exit(e);  // prints help/version or the usage error
    return code == 0 ? 0 : 2;       // CLI11 uses 1xx codes per error kind; we promise 2 for every usage error
  }
  const auto [sc, command] = given();
  if (const int code = output_format_set(sc, command->bit, common)) return code;
  script_limits_set(common.script_budget, common.script_memory, common.script_timeout);
  try {
    // the report's and the page's folders, before anything is forecast, printed or written (--calibrate's file)
    emit_check(common.output);
    emit_check(report_page_of(command->bit, t));
    return command->run(t, argc, argv);
  } catch (const script_error& e) {
    std::fprintf(stderr, "neusight: %s\n", text_cap(e.what(), 8192).c_str());
    if (common.traceback && !e.traceback.empty()) std::fprintf(stderr, "%s\n", text_cap(e.traceback, 16384).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "neusight: %s\n", text_cap(e.what(), 8192).c_str());
    return 1;
  }
}

}  // namespace ns
