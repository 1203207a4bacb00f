// engine/cli/report.h — a forecast rendered as a table (people), JSON or CSV (scripts).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/forecast.h"
#include "core/gpu_spec.h"
#include "core/timeline.h"

namespace ns {

struct report_meta {
  std::string source;  // workload script or "command line"
  std::string model, predictor, mode, optimizer, dtype;
  int64_t batch = 0, seq = 0;
  const gpu_spec* gpu = nullptr;
  std::vector<std::string> warnings;
  std::optional<int64_t> layers;  // replication of the traced layer, for imported graphs (predict --graph)
  std::optional<parallel_timeline> timeline;  // parallel runs: the per-device timeline; latency = its iteration
  std::string precision = "pure";             // precision recipe (scripts/neusight/precision.lua)
  std::string optimizer_impl;                 // "fused" | "foreach"; "" without an optimizer
  state_layout state;                         // model-state bytes per parameter of the recipe
  int64_t context = 0;                        // mode "decode": tokens already in each KV cache
  std::optional<double> kv_cache_bytes;       // serving phases: the KV cache per GPU (scripts/neusight/workload.lua)
  // Memory per GPU as scripts/neusight/memory.lua reports it (session::memory()): memory_gb, the `memory` object,
  // table lines, a warning when it does not fit, per-stage parts of a parallel run. Null: not computed (--graph).
  nlohmann::ordered_json memory;
};

// The run does not fit in the GPU's memory: m.memory's memory_gb (state + saved activations + temporary + workspace +
// KV cache of the fullest GPU) above gpu.mem_gb, with Lua's wording; without m.memory, model state alone. Empty when it
// fits. The table says it in its memory lines; the JSON carries these in `warnings`.
std::vector<std::string> report_memory_warnings(const forecast& f, const report_meta& m);

std::string report_json(const forecast& f, const report_meta& m);
std::string report_csv(const forecast& f, const report_meta& m);
std::string report_table(const forecast& f, const report_meta& m);

// Writes the whole text at once: to stdout, or to a file through a temporary + rename (never half-written).
void emit(const std::string& text, const std::string& output);

std::string gpus_table(const std::vector<gpu_spec>& gpus);
std::string gpus_json(const std::vector<gpu_spec>& gpus);

}  // namespace ns
