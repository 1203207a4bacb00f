// engine/cli/report.h — a forecast rendered as a table (people), JSON or CSV (scripts).
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/figures.h"
#include "core/forecast.h"
#include "core/gpu_spec.h"
#include "lua/session.h"

namespace ns {

struct report_meta {
  std::string source;  // workload script or "command line"
  std::string model, predictor, mode, optimizer, dtype;
  int64_t batch = 0, seq = 0;
  const gpu_spec* gpu = nullptr;
  std::vector<std::string> warnings;
  std::optional<int64_t> layers;  // replication of the traced layer, for imported graphs (predict --graph)
  std::optional<parallel_report> parallel;    // parallel runs: the timeline's report; latency = its iteration
  std::string precision = "pure";             // precision recipe (scripts/neusight/precision.lua)
  std::string optimizer_impl;                 // "fused" | "foreach"; "" without an optimizer
  state_report state;                         // the model state (scripts/neusight/precision.lua state_report)
  int64_t context = 0;                        // mode "decode": tokens already in each KV cache
  std::optional<double> kv_cache_bytes;       // serving phases: the KV cache per GPU (scripts/neusight/workload.lua)
  std::string launch = "eager";               // "eager" | "graph" (scripts/neusight/launch.lua)
  std::optional<figures> figs;                // scripts/neusight/figures.lua of this forecast (JSON `figures`, table)
  // Memory per GPU as scripts/neusight/memory.lua reports it (session::memory()): memory_gb, the `memory` object,
  // table lines, a warning when it does not fit, per-stage parts of a parallel run. Null: not computed (--graph).
  nlohmann::ordered_json memory;
  // Quantised KV cache / weights (scripts/neusight/workload.lua): "" = the compute dtype; JSON shows them only when
  // they differ from it, so a default run's JSON is unchanged.
  std::string kv_dtype, weight_dtype;
  // Mixtures of experts: the parameters a token touches, on the graph's scope as `params` (scripts/neusight/workload.lua
  // active_params); absent for dense models.
  std::optional<double> active_params;
  std::string experts;  // mixtures of experts: "loop" or "grouped" (workload.lua); "" for dense models
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

std::string report_json(const forecast& f, const report_meta& m);
std::string report_csv(const forecast& f, const report_meta& m);
std::string report_table(const forecast& f, const report_meta& m);

// Writes the whole text at once: to stdout, or to a file through a temporary + rename (never half-written).
void emit(const std::string& text, const std::string& output);

std::string gpus_table(const std::vector<gpu_spec>& gpus);
std::string gpus_json(const std::vector<gpu_spec>& gpus);

// Writes `gpu`'s calibration file (core/calibration.h calibration_text) at `path`, with a header naming `by` (the
// command that fitted it) and `facts` (what was measured); returns the path as messages show it. predict's and serve's
// --calibrate.
std::string calibration_write(const gpu_spec& gpu, const std::filesystem::path& path,
                              const std::map<std::string, double>& factors, const std::string& by,
                              const std::vector<std::pair<std::string, std::variant<std::string, double>>>& facts);

}  // namespace ns
