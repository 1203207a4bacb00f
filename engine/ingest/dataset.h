// engine/ingest/dataset.h — kernel micro-benchmark rows (NeuSight CSV format) as kernels with measured latency.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/gpu_spec.h"
#include "core/graph.h"
#include "core/tile_model.h"

namespace ns {

struct bench_row {
  std::string where;        // file:line
  std::string device;       // the CSV's Device string
  const gpu_spec* gpu = nullptr;
  size_t gpu_index = 0;     // of gpu in bench_data::gpus
  std::string op;           // OPName
  family fam = family::bmm;
  kernel k;                 // dims, dtype (fp32 unless a Dtype column says otherwise), flops, bytes
  double latency_ms = 0;
  std::string kernel_name;  // the launched library kernel
  int64_t grid_x = 0, grid_y = 0, grid_z = 0;
  // The measured kernel's KV-cache dtype where it is not the compute dtype (an AIConfigurator kv_cache_dtype fp8 row):
  // eval kernels scores such rows in a cell of their own, "<family>/kv_<kv_cache>". `k` is the kernel a forecast with
  // that cache builds: decode reads K and V at the cache's size (k.kv_dtype), prefill prices attention at the compute
  // dtype (k.kv_dtype empty).
  std::string kv_cache;
};

struct bench_data {
  std::vector<bench_row> rows;
  std::vector<gpu_spec> gpus;                // resolved devices (rows point into this)
  std::map<std::string, size_t> skipped;     // reason → rows
  std::map<std::string, std::string> skipped_first;  // reason → "<file>:<line>" of its first row, where known
  std::vector<std::string> files;
  // Rows read from tables whose Synthetic column is set (scripts/collect/convert.py writes the note of a manifest not
  // measured on a GPU, such as tests/fixtures/collect's): how many, and the first such table's note and file:line.
  size_t synthetic_rows = 0;
  std::string synthetic_note, synthetic_first;
  // The device strings of skipped rows that no GPU file names ("unknown device"), once each, in the order read.
  std::vector<std::string> unknown_devices;
};

// What the rows are read for. `evaluate` (eval kernels) also reads rows of kernels a forecast prices but the shipped
// weights never trained on: prefill and decode attention over an fp8 KV cache (an AIConfigurator kv_cache_dtype fp8
// row, bench_row::kv_cache "fp8"). `train` skips them, counted, so that training on the same files stays as it was.
// Every reader below takes it without a default: a caller that forgot it trained on rows meant for evaluation alone.
enum class bench_use { train, evaluate };

// The OPName → family map of the data (ln → layernorm, add/addu/… → elementwise); nullopt for others.
std::optional<family> bench_family(const std::string& op);

// Reads CSV files and folders (recursively, *.csv). Devices resolve through the GPU catalogue's aliases.
// Rows of other families than `only` (if given), of `exclude_gpus`, of unknown devices or with bad
// numbers are skipped and counted by reason, never silently dropped. Malformed CSV throws with file:line.
// FLOPs and bytes come from `cost` (session::costing(): neusight.kernels, as forecasts compute them).
// A CSV Device string → its GPU, or nullopt for an unknown device (the row is skipped and counted).
using bench_device_resolver = std::function<std::optional<gpu_spec>(const std::string& device)>;

// One CSV text (`source` names it in messages), read as bench_load reads each file, devices resolved by `resolve`.
// FLOPs and bytes are not filled in (bench_load's `cost` does that).
bench_data bench_parse(std::string_view csv_text, const std::string& source, const bench_device_resolver& resolve,
                       bench_use use, std::optional<family> only = std::nullopt);

// Devices resolve through `gpus`: the bundled GPUs and the user's GPU files (--gpu FILE); `exclude_gpus` name GPUs of
// either.
bench_data bench_load(const std::vector<std::string>& paths, gpu_data_resolver& gpus, const kernel_costing& cost,
                      bench_use use, std::optional<family> only, const std::vector<std::string>& exclude_gpus = {});
// The bundled GPUs alone.
bench_data bench_load(const std::vector<std::string>& paths, const gpu_catalog& catalog, const kernel_costing& cost,
                      bench_use use, std::optional<family> only, const std::vector<std::string>& exclude_gpus = {});

}  // namespace ns
