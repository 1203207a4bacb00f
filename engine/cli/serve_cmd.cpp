// engine/cli/serve_cmd.cpp — `neusight serve`: flags in, scripts/neusight/serve.lua does the rest, the report out
// as JSON (every number), CSV (one `field,value` row per number, dotted paths) or serve.lua's table.
#include "cli/serve_cmd.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cli/flags.h"
#include "cli/paths.h"
#include "cli/report.h"
#include "core/calibration.h"
#include "core/roofline.h"
#include "core/text.h"
#include "ingest/measurement.h"
#include "lua/session.h"

namespace ns {
namespace fs = std::filesystem;

namespace {

// "/ttft_ms/p50" → "ttft_ms.p50"
std::string dotted(const std::string& pointer) {
  std::string out;
  for (size_t i = 1; i < pointer.size(); ++i) {
    if (pointer[i] == '/') out += '.';
    else if (pointer[i] == '~' && i + 1 < pointer.size()) out += pointer[++i] == '1' ? '/' : '~';
    else out += pointer[i];
  }
  return out;
}

// --calibrate FILE: the static batch forecast without any calibration (serve.lua calibration_inputs: its TTFT, TPOT
// and their kernel families), the measured ttft_ms / tpot_ms of FILE, and the factors scripts/neusight/calibration.lua
// fit_serve() fits (each phase from its own measurement: [factors], and [decode_factors] for decode steps), written
// beside the GPU's file for later forecasts (predict, search, serve). The measurement is
// read first: a bad file stops the run before any forecast, and nothing is written on any error.
int serve_calibrate(session& s, const serve_flags& f, const predictor& pred, const workload_overrides& opts) {
  const measurement m = measurement_load(f.calibrate, measurement_use::serve);
  if (!f.rate.empty())
    throw error("--calibrate needs a static batch (--batch N): with --rate the TTFT and TPOT are percentiles over "
                "queueing requests, not one phase forecast each; measure the model at a fixed batch to calibrate");
  const gpu_spec gpu = s.gpu(f.gpu.front());
  const fs::path path = calibration_path(gpu);
  if (path.empty()) throw error("--calibrate: " + gpu.name + " was not read from a file: nowhere to keep a calibration");
  figure_inputs in = s.serve_calibration_inputs(opts, pred);
  std::string workload, model;
  std::optional<double> ttft_s, tpot_s, model_params;
  // the fields read here each have one type: a --scripts serve.lua that gives another is told which, not aborted
  auto wrong = [](const std::string& k, const char* want, const figure_value& v) {
    const char* got = std::holds_alternative<std::string>(v) ? "a string"
                      : std::holds_alternative<bool>(v)        ? "a boolean"
                                                               : "a number";
    return error("scripts/neusight/serve.lua: calibration_inputs: '" + k + "' must be " + want + " (got " + got + ")");
  };
  auto text = [&](const std::string& k, const figure_value& v) {
    if (const auto* t = std::get_if<std::string>(&v)) return *t;
    throw wrong(k, "a string", v);
  };
  auto number = [&](const std::string& k, const figure_value& v) {
    if (const auto x = figure_number(v)) return *x;
    throw wrong(k, "a number", v);
  };
  for (const auto& [k, v] : in) {
    if (k == "workload") workload = text(k, v);
    if (k == "model") model = text(k, v);
    if (k == "model_params") model_params = number(k, v);  // tp 1: the whole model's
    if (k == "ttft_s") ttft_s = number(k, v);
    if (k == "tpot_s") tpot_s = number(k, v);
  }
  in.emplace_back("measurement", m.source);
  if (m.ttft_ms) in.emplace_back("measured_ttft_s", *m.ttft_ms / 1e3);
  if (m.tpot_ms) in.emplace_back("measured_tpot_s", *m.tpot_ms / 1e3);
  const figures fit = s.figures_call("neusight.calibration", "fit_serve", in, gpu, pred.uncertainty(gpu.vendor));
  const std::map<std::string, double> factors = figure_factors(fit);
  // a decode step's own, as fit_serve says it fitted them (decode_fitted: false, decode steps keep their forecast, an
  // empty [decode_factors])
  std::optional<std::map<std::string, double>> decode_factors = figure_factors(fit, "decode_factor.");
  if (const figure_value* fitted = figure_find(fit, "decode_fitted")) {
    const bool* said = std::get_if<bool>(fitted);
    if (!said) throw error("scripts/neusight/calibration.lua fit_serve(): decode_fitted must be a boolean");
    if (*said == decode_factors->empty())
      throw error(std::string("scripts/neusight/calibration.lua fit_serve(): decode_fitted is ") +
                  (*said ? "true, but it gave no decode_factor.<family> fields" : "false, but it gave decode_factor.<family> fields"));
  } else if (decode_factors->empty() && m.tpot_ms) {
    // An older --scripts calibration.lua, from before decode_fitted, still works as it did: one that fits one set for
    // both phases gives no decode_factor fields for a measured TPOT, and its factors then apply to decode steps (no
    // [decode_factors]). Only here is the set's emptiness read.
    decode_factors.reset();
  }
  std::map<std::string, double> calibrated;  // ttft / tpot → ms
  for (const auto& x : fit.fields) {
    const std::optional<double> v = figure_number(x.value);
    if (!v) continue;
    if (x.key == "calibrated_ttft_ms") calibrated["ttft"] = *v;
    if (x.key == "calibrated_tpot_ms") calibrated["tpot"] = *v;
  }
  // [factors] are the TTFT's fit, empty when only a TPOT was measured (its decode_factor.<family> fields then)
  if (factors.empty() && !(decode_factors && !decode_factors->empty()))
    throw error("scripts/neusight/calibration.lua fit_serve(): no factor.<family> or decode_factor.<family> fields");
  for (const auto& w : fit.warnings) std::fprintf(stderr, "neusight: warning: %s\n", w.c_str());
  std::vector<std::pair<std::string, std::variant<std::string, double>>> facts = {{"measurement", m.source}};
  if (m.ttft_ms) facts.emplace_back("measured_ttft_ms", *m.ttft_ms);
  if (ttft_s) facts.emplace_back("forecast_ttft_ms", *ttft_s * 1e3);
  if (m.tpot_ms) facts.emplace_back("measured_tpot_ms", *m.tpot_ms);
  if (tpot_s) facts.emplace_back("forecast_tpot_ms", *tpot_s * 1e3);
  facts.emplace_back("workload", workload);
  if (!model.empty()) facts.emplace_back("model", model);
  if (model_params) facts.emplace_back("model_params", *model_params);  // whole (forecast_model_params)
  facts.emplace_back("predictor", pred.name());
  if (auto w = s.weights_fitted(gpu); !w.empty()) facts.emplace_back("weights", w);  // the weights it read
  if (!m.note.empty()) facts.emplace_back("note", m.note);
  const std::string where =
      calibration_write(gpu, path, factors, decode_factors, "`neusight serve … --calibrate " + m.source + "`", f.output, facts);
  if (f.format == "json") {
    auto value = [](std::optional<double> x) { return x ? nlohmann::ordered_json(*x) : nlohmann::ordered_json(nullptr); };
    auto ms = [](std::optional<double> s) { return s ? std::optional<double>(*s * 1e3) : std::nullopt; };
    auto fitted = [&](const char* k) {
      const auto it = calibrated.find(k);
      return it == calibrated.end() ? std::nullopt : std::optional<double>(it->second);
    };
    nlohmann::ordered_json j;
    j["gpu"] = gpu.name;
    j["calibration_file"] = where;
    j["measurement"] = m.source;
    j["workload"] = workload;
    j["model"] = model;  // what the calibration file records as the measured model
    j["measured_ttft_ms"] = value(m.ttft_ms);
    j["forecast_ttft_ms"] = value(ms(ttft_s));
    j["calibrated_ttft_ms"] = value(fitted("ttft"));
    j["measured_tpot_ms"] = value(m.tpot_ms);
    j["forecast_tpot_ms"] = value(ms(tpot_s));
    j["calibrated_tpot_ms"] = value(fitted("tpot"));
    j["factors"] = factors;
    j["decode_factors"] = decode_factors ? nlohmann::ordered_json(*decode_factors) : nlohmann::ordered_json(nullptr);
    j["warnings"] = fit.warnings;
    emit(j.dump(2) + "\n", f.output);
  } else {
    std::string out = fmt::format("calibrated {} from {} ({})\n", gpu.name, m.source, workload);
    for (const auto& line : fit.lines) out += line + "\n";
    out += "written to " + where + "\n";
    emit(out, f.output);
  }
  return 0;
}

}  // namespace

int serve_main(const serve_flags& f) {
  // --gpu, --tp, --batch and --rate take lists (--sweep); --model does not: a comma is a list, not a preset name
  if (f.model.find(',') != std::string::npos && !fs::exists(f.model))
    throw error("--model " + f.model + ": serve takes one model (lists are for --gpu, --tp, --batch, --rate with "
                "--sweep); run serve once per model");
  // --calibrate fits against the raw forecast
  const session_options o =
      session_options_for(f.ops_dirs, f.scripts_dirs, f.gpus_dirs, f.verbose, !f.no_calibration && f.calibrate.empty());
  session s(o);
  const auto pred = s.predictor_make(f.predictor, o.data_root / "weights");
  pred->memo_enable(o.memo);

  workload_overrides opts{{"model", f.model}, {"predictor", f.predictor}};
  for (const auto& [k, v] : {std::pair{"dtype", &f.dtype}, {"kv_dtype", &f.kv_dtype}, {"weight_dtype", &f.weight_dtype}, {"launch", &f.launch}, {"attention", &f.attention}, {"experts", &f.experts},
                             {"kernels", &f.kernels}, {"input_len", &f.input_len}, {"output_len", &f.output_len}})
    if (!v->empty()) opts[k] = *v;
  for (const auto& [k, v] : {std::pair{"requests", f.requests}, {"chunked_prefill", f.chunked_prefill},
                             {"max_batch", f.max_batch}, {"max_batched_tokens", f.max_batched_tokens},
                             {"block_size", f.block_size}})
    if (v != 0) opts[k] = v;
  if (f.seed) opts["seed"] = *f.seed;
  if (f.burstiness > 0) opts["burstiness"] = f.burstiness;
  if (!f.requests_file.empty()) {
    // serve.lua parses it (scripts/neusight/arrivals.lua): its text, read here as every input file is, and its name
    // for the messages (FILE:LINE)
    opts["requests_file"] = f.requests_file;
    opts["requests_text"] = text_file_read(f.requests_file, f.requests_file, text_file_max_data);
  }
  if (f.time_scale > 0) opts["time_scale"] = f.time_scale;
  if (f.gpu_memory_utilization != 0) opts["gpu_memory_utilization"] = f.gpu_memory_utilization;

  if (!f.calibrate.empty()) {
    if (!f.gpu.empty()) opts["gpu"] = f.gpu.front();
    if (!f.tp.empty()) opts["tp"] = f.tp.front();
    if (!f.batch.empty()) opts["batch"] = f.batch.front();
    return serve_calibrate(s, f, *pred, opts);
  }
  session::serve_report r;
  if (f.sweep) {
    session::option_lists lists;
    auto put = [&](const char* k, const auto& values) {
      if (values.empty()) return;
      auto& l = lists[k];
      for (const auto& v : values) l.emplace_back(v);
    };
    // each GPU file once, as predict's comparisons (a name that resolves to nothing is the sweep's to report)
    gpu_list_once(f.gpu, [&](const std::string& q) -> const gpu_spec* {
      try {
        return &s.gpu(q);
      } catch (const error&) {
        return nullptr;
      }
    }, [&](const gpu_spec& g) { return s.calibration_of(g); });
    put("gpu", f.gpu), put("tp", f.tp), put("batch", f.batch), put("rate", f.rate);
    if (f.ttft_ms > 0) opts["ttft_ms"] = f.ttft_ms;
    if (f.tpot_ms > 0) opts["tpot_ms"] = f.tpot_ms;
    r = s.serve_sweep(opts, lists, *pred);
  } else {
    // one value each (the command line refuses lists without --sweep)
    if (!f.gpu.empty()) opts["gpu"] = f.gpu.front();
    if (!f.tp.empty()) opts["tp"] = f.tp.front();
    if (!f.batch.empty()) opts["batch"] = f.batch.front();
    if (!f.rate.empty()) opts["rate"] = f.rate.front();
    r = s.serve(opts, *pred);
  }
  // the page first: a failing page script leaves neither file written
  const std::string html = f.report_html.empty() ? "" : s.render("neusight.html", "render_serve", r.json);
  // the report's warnings on stderr, as predict says its own, unless the table that lists them goes to the terminal
  if (f.format != "table" || !f.output.empty()) {
    const nlohmann::json doc = nlohmann::json::parse(r.json);
    if (const auto w = doc.find("warnings"); w != doc.end() && w->is_array())
      for (const auto& x : *w)
        if (x.is_string()) std::fprintf(stderr, "neusight: warning: %s\n", x.get<std::string>().c_str());
  }
  if (f.format == "json") {
    emit(r.json, f.output);
  } else if (f.format == "csv" && !r.csv.empty()) {
    emit(r.csv, f.output);
  } else if (f.format == "csv") {
    std::string out = "field,value\n";
    const nlohmann::json flat = nlohmann::json::parse(r.json).flatten();  // keep it alive while iterating
    for (const auto& [path, v] : flat.items())
      out += csv_field(dotted(path)) + "," + csv_field(v.is_string() ? v.get<std::string>() : v.dump()) + "\n";
    emit(out, f.output);
  } else {
    emit(r.table, f.output);
  }
  if (!f.report_html.empty()) emit(html, f.report_html);
  if (f.sweep) {
    // no combination could run (each one's row says why: scripts/neusight/sweep.lua): the report is written, as every
    // sweep's, and the command fails, since no setting answers the question (one that runs but misses the targets is
    // an answer: exit 0)
    const nlohmann::json j = nlohmann::json::parse(r.json);
    const int64_t combinations = j.value("combinations", int64_t(0)), errors = j.value("errors", int64_t(0));
    if (combinations > 0 && errors == combinations)
      throw error(fmt::format("serve: no setting could run: each of the {} combinations has its reason in its row",
                              combinations));
  }
  return 0;
}

int serve_command(flag_targets& t, int, char**) {
  serve_flags& vflags = t.get<serve_flags>();
  const raw_flags& raw = t.get<raw_flags>();
  vflags.gpu = list_split(raw.serve_gpu);
  for (const auto& v : list_split(raw.serve_tp)) vflags.tp.push_back(std::stoll(v));
  for (const auto& v : list_split(raw.serve_batch)) vflags.batch.push_back(std::stoll(v));
  for (const auto& v : list_split(raw.serve_rate)) vflags.rate.push_back(std::stod(v));
  return serve_main(report_into(vflags, t.get<common_flags>()));
}

}  // namespace ns
