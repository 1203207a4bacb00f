// engine/ingest/trace.h — measured traces (ops, their kernels, measured times) read from three formats.
//
// Formats, auto-detected by trace_load():
//   chrome_json  PyTorch profiler (Kineto) Chrome-trace JSON export. Kernel events ("cat": "kernel") carry
//                args grid, block, "registers per thread", "shared memory" and dur (µs); "External id" links a
//                kernel to the cpu_op that launched it, which is attributed to its outermost enclosing op
//                (same pid/tid, time containment). Ranges "autograd::engine::evaluate_function: X" make one
//                backward op named X (accumulate for AccumulateGrad); other outermost cpu_ops are forward ops.
//                A backward op takes the input shapes and types of the forward op with its "Sequence number"
//                (the innermost forward cpu_op carrying it: the one whose autograd node the backward runs).
//                Kernels without a launching op go to trace::unattributed.
//   wavescale    spec §7.3: a manifest {"format": "wavescale-trace/1", "ops": "ops.csv", "kernels": ...}
//                plus the two CSV files it names (relative to the manifest).
//   label_csv    the shared data's per-op label CSV (label/<GPU>/<model>-<mode>-<seq>-<batch>.csv): fx nodes
//                with Name, op, target, input_shapes, output_shape, fw_latency, bw_latency, acc_latency (ms).
//                Each row yields up to three ops, one per non-zero latency column; no kernels.
// Every malformed input throws ns::error "<file>:<line>: <what>".
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/wave_scaling.h"

namespace ns {

enum class trace_phase { forward, backward, accumulate, optimizer, other };
std::string_view trace_phase_name(trace_phase p);

struct trace_kernel {
  std::string name;
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  int64_t registers = 0;      // per thread
  int64_t shared_bytes = 0;   // static + dynamic per block
  double duration_ns = 0;
  std::optional<double> dram_read_bytes, dram_write_bytes;
  std::optional<double> flop_eff_pct;  // SinglePrecisionFLOPEfficiency, percent
  std::optional<double> flops_sp;      // explicit FP32 FLOP count (corrected mode)

  int64_t blocks() const { return grid[0] * grid[1] * grid[2]; }
  int64_t threads_per_block() const { return block[0] * block[1] * block[2]; }
};

using trace_shape = std::vector<int64_t>;

struct trace_op {
  int64_t id = -1;          // op_id (wavescale), row/event order otherwise
  std::string name;         // fx node name, aten name, or backward node name
  std::string kind;         // op kind: aten name ("aten::addmm"), fx target ("add", "view"), op_name
  trace_phase phase = trace_phase::forward;
  // Measured time of this op pass in ms: label CSV latency column; wavescale wall_ns/1e6; chrome: the sum of
  // its kernels' durations (GPU time). Unset when the source has none.
  std::optional<double> measured_ms;
  std::vector<trace_shape> input_shapes;     // empty when unknown
  // Element type of each input as the trace names it ("float", "c10::BFloat16", "Scalar"; chrome "Input type");
  // empty for a trace without types (wavescale); in a chrome trace one per input, "" where none is recorded.
  std::vector<std::string> input_types;
  // Value of each non-tensor input as text ("True", "0.125"; chrome "Concrete Inputs"), "" for tensors; empty when
  // unknown.
  std::vector<std::string> input_values;
  // Chrome backward ops: the forward op that created the autograd node (same "Sequence number", innermost such
  // op of the forward pass, e.g. "aten::mm" for MmBackward0); input_shapes/input_types are that op's. Empty when
  // the trace does not link them.
  std::string forward_kind;
  std::optional<trace_shape> output_shape;
  std::vector<trace_kernel> kernels;         // launch order
};

enum class trace_format { chrome_json, wavescale, label_csv };
std::string_view trace_format_name(trace_format f);

struct trace {
  trace_format format = trace_format::wavescale;
  std::string source;         // file it was read from
  // e.g. "V100", "Tesla_V100-PCIE-32GB"; empty when unknown. Chrome traces: the deviceProperties entry whose id is
  // the kernels' args.device (the only entry when they carry none); kernels of several devices are an error.
  std::string origin_device;
  std::string origin_unknown;  // Chrome traces without an origin_device: why ("no deviceProperties", …)
  std::vector<trace_op> ops;
  std::vector<trace_kernel> unattributed;  // kernels no op claims (op_id -1, no External id match)
  // Chrome traces: from the first kernel's start to the last kernel's end, and the time inside it that no kernel
  // covers (the union of the kernels' intervals subtracted: launch gaps, host-side work, synchronisation), in ms.
  std::optional<double> gpu_span_ms, gpu_idle_ms;
  // Chrome traces: the time some kernel ran (the union of their intervals, span − idle) in ms; when the kernels' summed
  // durations exceed it they overlapped (concurrent streams). The streams the kernels name (args.stream; 0 when
  // none do). Chrome and wavescale traces: the kernels with 'dur' (wavescale 'duration_ns') 0; a trace of nothing but
  // them is refused.
  std::optional<double> gpu_busy_ms;
  size_t kernel_streams = 0, zero_duration_kernels = 0;
  // Chrome traces: the GPU's memory copies and sets ("cat" gpu_memcpy / gpu_memset; Memcpy / Memset in older
  // profilers), which are no kernels (no launch grid to wave-scale): how many and their summed 'dur' in ms. They are
  // not scaled and not in any op's time; the caller says so (neusight scale: a warning and JSON `not_scaled`).
  size_t copy_events = 0;
  double copy_ms = 0;
  // Chrome traces with ProfilerStep#N ranges: the ops with kernels that start in none of them (a warm-up or another
  // iteration the profiler did not mark, work before the first step()) and their kernels' ms. They are in the totals;
  // the caller says so.
  size_t outside_steps_ops = 0;
  double outside_steps_ms = 0;
  // Chrome traces: the profiled steps the trace holds (every op of each), and what says so (steps_source, empty for
  // 1 by default): the "steps" of scripts/collect/hf_trace.py's metadata (the trace's top-level "neusight" key, or
  // its sidecar <trace>.meta.json), else the ProfilerStep#N ranges torch.profiler's step() marks, else the
  // Optimizer.step calls of a training trace. A note when two of them disagree (the first one counts).
  int64_t steps = 1;
  std::string steps_source, steps_note;
  // Chrome traces: what scripts/collect/hf_trace.py's metadata says of the profiled step, when it does: its "mode"
  // ("decode", "prefill", "train", …; empty when not said) and "step_ms_mean", the step as CUDA events measured it
  // outside the profiler (ms; kernels, launches and host work together).
  std::string mode;
  std::optional<double> step_ms;
};

// Detects the format from the content (JSON with "traceEvents" or a top-level array → chrome; JSON with a
// "format" starting "wavescale-trace/" → wavescale; otherwise CSV with a fw_latency column → label).
trace_format trace_detect(const std::filesystem::path& file);
trace_format trace_detect_text(std::string_view text, const std::string& source);
trace trace_load(const std::filesystem::path& file);

// Per format. `source` is the name used in messages. For label CSVs, `device` is the origin (trace_load uses
// the parent folder name, e.g. "Tesla_V100-PCIE-32GB").
// `sidecar`: the text and name of scripts/collect/hf_trace.py's <trace>.meta.json, whose "steps" counts when the trace
// has no "neusight" metadata of its own (trace::steps); trace_load reads it when it exists.
struct trace_sidecar {
  std::string text, source;
};
trace trace_parse_chrome(std::string_view json_text, const std::string& source, const trace_sidecar& sidecar = {});
trace trace_load_wavescale(const std::filesystem::path& manifest);
// A wavescale manifest's text; `read(name)` returns the text of a CSV file it names (as written in the manifest)
// and the name shown in messages. trace_load_wavescale reads them relative to the manifest's folder.
using trace_file_reader = std::function<std::pair<std::string, std::string>(const std::string& name)>;
trace trace_parse_wavescale(std::string_view manifest_text, const std::string& source, const trace_file_reader& read);
trace trace_parse_label_csv(std::string_view csv_text, const std::string& source, const std::string& device);

// A measured trace kernel as wave scaling's launch (core/wave_scaling.h).
wave_kernel wave_kernel_of(const trace_kernel& k);

}  // namespace ns
