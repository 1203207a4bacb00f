// engine/cli/report.h — what the commands print besides a single forecast (scripts/neusight/report.lua renders that):
// comparisons, the GPU list, the figures' inputs; and emit(), which writes any report.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/figures.h"
#include "core/forecast.h"
#include "core/gpu_spec.h"
#include "lua/session.h"

namespace ns {

// What the engine itself reads of a forecast's workload: the figures' inputs, a comparison row's inputs, the
// calibration's note, the launch mode and the warnings it gathers. The report renders from Lua
// (scripts/neusight/report.lua, session::forecast_render), which holds the rest of the workload's fields.
struct report_meta {
  std::string source;  // workload script or "command line"
  std::string model, mode, dtype;
  int64_t batch = 0, seq = 0;
  const gpu_spec* gpu = nullptr;
  std::vector<std::string> warnings;
  std::optional<parallel_report> parallel;    // parallel runs: the timeline's report; latency = its iteration
  state_report state;                         // the model state (scripts/neusight/precision.lua state_report)
  int64_t context = 0;                        // mode "decode": tokens already in each KV cache
  std::optional<double> kv_cache_bytes;       // serving phases: the KV cache per GPU (scripts/neusight/workload.lua)
  std::string launch = "eager";               // "eager" | "graph" (scripts/neusight/launch.lua)
  std::optional<figures> figs;                // scripts/neusight/figures.lua of this forecast
  // Memory per GPU as scripts/neusight/memory.lua reports it (session::memory()): memory_gb and fits for the figures, a
  // warning when it does not fit. Null: not computed (--graph).
  nlohmann::ordered_json memory;
};

// What scripts/neusight/figures.lua compute() is given of a forecast (after the timeline is in `m`): latency, the
// graph's FLOPs by phase, memory per GPU, the layout, the dtype's dense peak.
figure_inputs report_figure_inputs(const forecast& f, const report_meta& m);

// A figure value as JSON (monostate → null).
nlohmann::ordered_json figure_json(const figure_value& v);
// A figure value as a CSV cell (monostate → empty; numbers exactly, %.17g).
std::string figure_csv(const figure_value& v);
std::string csv_field(const std::string& s);

// The run does not fit in the GPU's memory: m.memory's memory_gb (state + saved activations + temporary + workspace +
// KV cache of the fullest GPU) above gpu.mem_gb, with Lua's wording; without m.memory, model state alone. Empty when it
// fits. The table says it in its memory lines; the JSON carries these in `warnings`.
std::vector<std::string> report_memory_warnings(const forecast& f, const report_meta& m);

// One row of a comparison (predict with list-valued flags): its inputs, latency_ms and figures in order, then
// `warnings` — or its inputs and `error`. `column` is the table header (empty: JSON and CSV only), `cell` the table text.
struct compare_cell {
  std::string key, column;
  figure_value value;
  std::string cell;
};
using compare_row = std::vector<compare_cell>;
// How many leading cells of every row are its inputs (model … recompute): the table shows those that differ between
// rows as columns and the others once above it.
constexpr size_t compare_input_cells = 13;

// The comparison as a table (format "table"), JSON {"rows": [...]} or CSV (one line per row, the union of the rows'
// keys as columns).
std::string report_compare(const std::vector<compare_row>& rows, const std::string& format, const std::string& source);

// Writes the whole text at once: to stdout, or to a file through a temporary + rename (never half-written).
void emit(const std::string& text, const std::string& output);

std::string gpus_table(const std::vector<gpu_spec>& gpus);
std::string gpus_json(const std::vector<gpu_spec>& gpus);

}  // namespace ns
