// engine/cli/serve_cmd.cpp — `neusight serve`: flags in, scripts/neusight/serve.lua does the rest, the report out
// as JSON (every number), CSV (one `field,value` row per number, dotted paths) or serve.lua's table.
#include "cli/serve_cmd.h"

#include <nlohmann/json.hpp>

#include "cli/paths.h"
#include "cli/report.h"
#include "core/roofline.h"
#include "lua/session.h"

namespace ns {

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

}  // namespace

int serve_main(const serve_flags& f) {
  const session_options o = session_options_for(f.ops_dirs, f.scripts_dirs, f.verbose, !f.no_calibration);
  session s(o);
  const auto pred = s.predictor_make(f.predictor, o.data_root / "weights");
  pred->memo_enable(o.memo);

  workload_overrides opts{{"model", f.model}, {"predictor", f.predictor}};
  for (const auto& [k, v] : {std::pair{"dtype", &f.dtype}, {"kv_dtype", &f.kv_dtype}, {"weight_dtype", &f.weight_dtype}, {"launch", &f.launch}, {"attention", &f.attention}, {"experts", &f.experts},
                             {"input_len", &f.input_len}, {"output_len", &f.output_len}})
    if (!v->empty()) opts[k] = *v;
  for (const auto& [k, v] : {std::pair{"requests", f.requests}, {"chunked_prefill", f.chunked_prefill},
                             {"max_batch", f.max_batch}, {"max_batched_tokens", f.max_batched_tokens},
                             {"block_size", f.block_size}})
    if (v != 0) opts[k] = v;
  if (f.seed >= 0) opts["seed"] = f.seed;
  if (f.gpu_memory_utilization != 0) opts["gpu_memory_utilization"] = f.gpu_memory_utilization;

  session::serve_report r;
  if (f.sweep) {
    session::option_lists lists;
    auto put = [&](const char* k, const auto& values) {
      if (values.empty()) return;
      auto& l = lists[k];
      for (const auto& v : values) l.emplace_back(v);
    };
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
  return 0;
}

}  // namespace ns
