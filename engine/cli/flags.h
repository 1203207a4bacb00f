// engine/cli/flags.h — the command line's flags, each declared once (flags.cpp) with the commands it applies to
// (llama.cpp's common/arg.cpp): a command registers exactly the flags the table gives it, so a flag is never advertised
// where it is ignored, and its name, help and checks are written in one place.
#pragma once
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "cli/kernels_cmd.h"
#include "cli/models_cmd.h"
#include "cli/scale_cmd.h"
#include "cli/search_cmd.h"
#include "cli/serve_cmd.h"

namespace CLI {
class App;
}

namespace ns {

// The commands, one bit each: a flag's entry names the set it applies to.
namespace cmd {
enum : unsigned {
  run = 1u << 0,
  predict = 1u << 1,
  paths = 1u << 2,
  gpus = 1u << 3,
  models = 1u << 4,
  ops = 1u << 5,
  train = 1u << 6,
  eval_kernels = 1u << 7,
  eval_models = 1u << 8,
  scale = 1u << 9,
  search = 1u << 10,
  serve = 1u << 11,
};
// the commands that write a report (--format, -o), and those of them that write a table or JSON but no CSV
constexpr unsigned reports = run | predict | gpus | models | ops | eval_kernels | eval_models | scale | search | serve;
constexpr unsigned no_csv = gpus | ops | eval_models | scale;
}  // namespace cmd

// Flags every command that opens a session takes (the search paths, -v, the script limits), and the report flags.
struct common_flags {
  std::vector<std::string> ops_dirs;
  std::vector<std::string> scripts_dirs;
  std::vector<std::string> gpus_dirs;  // --gpus-dir (cli/paths.h session_options_for)
  bool traceback = false;
  bool verbose = false;
  std::string format = "table";
  std::string output;
  std::string report_html;  // --report FILE.html (run, predict): the page of neusight.html, beside the normal output
  std::string calibrate;     // --calibrate FILE (run, predict): fit the GPU's calibration from a measurement of FILE
  bool no_calibration = false;  // --no-calibration (run, predict): ignore the GPU's calibration file
  int64_t script_budget = -1, script_memory = -1;  // -1: NEUSIGHT_SCRIPT_* or the built-in limit
  double script_timeout = -1;
};

// run and predict. Flags that take a comma-separated list on the command line (model, gpu, mode, dtype, recompute and
// the integers) are kept as typed; one value is today's single forecast, several make a comparison (one row per
// combination).
struct forecast_flags {
  std::string gpu, mode, optimizer, optimizer_impl, dtype, precision, attention, model;
  std::string batch, seq, context;
  std::string kv_dtype, weight_dtype;  // --kv-dtype / --weight-dtype: quantised KV cache / weights (serving phases)
  std::string experts;                 // --experts loop|grouped: workload field `experts` (MoE models)
  std::string router_skew;             // --router-skew uniform|balanced|F: workload field `router_skew` (MoE models)
  std::string lora_rank, lora_targets;  // --lora-rank R / --lora-targets q,v: workload fields (scripts/neusight/lora.lua)
  std::string predictor = "neusight";
  std::string weights;                // --weights DIR: weights root instead of the bundled weights/
  std::string overhead = "default";  // --overhead on|off; "default": scripts/neusight/overhead.lua decides
  std::string launch;                 // --launch eager|graph: workload field `launch` (scripts/neusight/launch.lua)
  bool fusion = false;                // --fusion: workload field fusion = true (scripts/neusight/fusion.lua)
  bool flash_attention = false;       // --flash-attention: fusion = "flash_attention"
  // --dp/--tp/--pp/--microbatches/--schedule: fields of the workload's `parallel` table (scripts/neusight/parallel.lua)
  std::string dp, tp, pp, microbatches, ep;
  std::string schedule, kernels, cluster, recompute;
  int64_t virtual_stages = 0;       // --virtual-stages: model chunks per device (interleaved schedule); 0 = the default
  double bucket_mb = 0;             // --bucket-mb: gradient bucket size; 0 = the default
  std::string overlap_grad_reduce;  // --overlap-grad-reduce on|off; "" = the default (on)
  std::string zero;                 // --zero N: ZeRO stage (parallel.zero; scripts/neusight/parallel/config.lua checks it)
  bool sequence_parallel = false, distributed_optimizer = false;
};

struct graph_flags {
  std::string file;    // predict --graph: a reference operator graph (opgraph/<tag>.csv)
  int64_t layers = 0;  // --layers; 0 = from the model config
};

// Values kept as typed and converted after parsing.
struct raw_flags {
  std::string script;                 // run's workload script
  std::string list_word;              // ops [list]
  std::string paths_which;            // paths [data|gpus|ops|scripts|weights|examples]: that folder alone
  std::string hidden = "64,64,64";    // train --hidden
  std::string serve_gpu, serve_tp, serve_batch, serve_rate;  // serve: lists with --sweep, split after parsing
};

// Where the parsed values go: one flag struct per command (and the common ones), as the table's entries bind them.
struct flag_targets {
  std::tuple<common_flags, forecast_flags, graph_flags, raw_flags, train_flags, eval_kernels_flags, eval_models_flags,
             scale_flags, search_flags, serve_flags>
      parts;
  template <class S>
  S& get() {
    return std::get<S>(parts);
  }
};

// Registers on `app` every flag of the table that applies to `command` (one cmd:: bit), bound to `t`, in the table's
// order, then the relations between them (needs, excludes). Returns `app`.
CLI::App* flags_add(CLI::App* app, unsigned command, flag_targets& t);

// The names of the flags that set a workload field on `command` (the table's .workload() uses: --model, --gpu, --batch,
// …, the parallel layout), in the table's order.
std::vector<std::string> workload_flag_names(unsigned command);

// The checks of the command `command` (one cmd:: bit; `sc` its CLI11 command, parsed) that relate its flags' values,
// after CLI11's own (throws CLI::ValidationError or CLI::RequiresError, a usage error): serve's arrival options and
// lists, scale's flags that its inputs leave unused, predict's workload flags beside --calibrate TRACE.json.
void flags_check(CLI::App* sc, unsigned command, flag_targets& t);

// Whether the parse failed on a flag's path that names nothing (--graph, --trace, --weights, --ops, --scripts,
// --gpus-dir): an input error (exit 1), as a missing `run FILE` is, not a usage error (flags.cpp existing_dir).
bool flag_path_missing();

// --calibrate FILE is a profiler trace (a .json file), not a TOML measurement.
bool calibrate_from_trace(const std::string& file);

// What a command's own flag struct takes from the common flags: the search paths and -v (paths_into), and for a
// command that writes a report, the format and -o too (report_into).
template <class F>
F& paths_into(F& f, const common_flags& c) {
  f.ops_dirs = c.ops_dirs;
  f.scripts_dirs = c.scripts_dirs;
  f.gpus_dirs = c.gpus_dirs;
  f.verbose = c.verbose;
  return f;
}
template <class F>
F& report_into(F& f, const common_flags& c) {
  f.format = c.format;
  f.output = c.output;
  return paths_into(f, c);
}

// "1, 8,32" → {"1", "8", "32"}; "" → {}.
std::vector<std::string> list_split(const std::string& text);

}  // namespace ns
