// engine/cli/app.cpp — subcommands run, predict, gpus, ops, train, eval; every error ends as "neusight: <where>: <what>".
#include "cli/app.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "cli/kernels_cmd.h"
#include "cli/models_cmd.h"
#include "cli/paths.h"
#include "cli/scale_cmd.h"
#include "cli/search_cmd.h"
#include "cli/serve_cmd.h"
#include "cli/report.h"
#include "core/opgraph.h"
#include "core/roofline.h"
#include "core/text.h"
#include "core/tile_model.h"
#include "core/trace.h"
#include "lua/script_limits.h"
#include "lua/session.h"

namespace ns {
namespace fs = std::filesystem;

namespace {

// --predictor: a built-in or a Lua predictor (session::predictor_make resolves and checks the name).
std::string predictor_help() {
  std::string builtins;
  for (const auto& n : predictor_names()) builtins += (builtins.empty() ? "" : ", ") + n;
  return "Kernel latency predictor: " + builtins +
         ", or a Lua predictor: NAME (neusight/predictors/NAME.lua on the script search path, e.g. roofline_derated) "
         "or a .lua file";
}

struct common_flags {
  std::vector<std::string> ops_dirs;
  std::vector<std::string> scripts_dirs;
  bool traceback = false;
  bool verbose = false;
  std::string format = "table";
  std::string output;
  std::string report_html;  // --report FILE.html (run, predict, serve): the page of neusight.html, beside the normal output
  std::string calibrate;     // --calibrate FILE (run, predict, serve): fit the GPU's calibration from a measurement of FILE
  bool no_calibration = false;  // --no-calibration: ignore the GPU's calibration file
  int64_t script_budget = -1, script_memory = -1;  // -1: NEUSIGHT_SCRIPT_* or the built-in limit
  double script_timeout = -1;
};

// Flags that take a comma-separated list on the command line (model, gpu, mode, dtype, recompute and the integers) are
// kept as typed; one value is today's single forecast, several make a comparison (one row per combination).
struct forecast_flags {
  std::string gpu, mode, optimizer, optimizer_impl, dtype, precision, attention, model;
  std::string batch, seq, context;
  std::string kv_dtype, weight_dtype;  // --kv-dtype / --weight-dtype: quantised KV cache / weights (serving phases)
  std::string experts;                 // --experts loop|grouped: workload field `experts` (MoE models)
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
  bool sequence_parallel = false, distributed_optimizer = false;
};

struct graph_flags {
  std::string file;    // predict --graph: a reference operator graph (opgraph/<tag>.csv)
  int64_t layers = 0;  // --layers; 0 = from the model config
};

// "1, 8,32" → {"1", "8", "32"}; "" → {}.
std::vector<std::string> list_split(const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (true) {
    const size_t end = std::min(text.find(',', start), text.size());
    std::string item = text.substr(start, end - start);
    const size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    out.push_back(a == std::string::npos ? std::string() : item.substr(a, b - a + 1));
    if (end == text.size()) break;
    start = end + 1;
  }
  return out;
}

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
      {"recompute", "recompute", &F::recompute, false}};
  return flags;
}

// Every item of a comma-separated list is a positive integer.
CLI::Validator positive_list() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        for (const auto& item : list_split(v)) {
          const bool digits = !item.empty() && item.size() <= 18 &&
                              std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; });
          if (!digits || std::stoll(item) < 1)
            return "Value " + item + " is not a positive integer" + (v.find(',') != std::string::npos ? " (in " + v + ")" : "");
        }
        return {};
      },
      "");
}

// Every item of a comma-separated list is one of `choices`.
CLI::Validator member_list(std::vector<std::string> choices) {
  std::string shown;
  for (const auto& c : choices) shown += (shown.empty() ? "" : ",") + c;
  return CLI::Validator(
      [choices, shown](std::string& v) -> std::string {
        for (const auto& item : list_split(v))
          if (std::find(choices.begin(), choices.end(), item) == choices.end())
            return "Value " + item + " not in {" + shown + "}";
        return {};
      },
      "{" + shown + "}[,…]");
}

// A positive integer, one value (CLI::PositiveNumber's message names a range of doubles).
CLI::Validator positive_integer() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        if (v.find(',') != std::string::npos) return "Value " + v + " is not a positive integer (one value, not a list)";
        return positive_list()(v);
      },
      "");
}

// Every item of a comma-separated list is a finite number (its sign and range are the script's to check).
CLI::Validator number_list() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        for (const auto& item : list_split(v)) {
          char* end = nullptr;
          const double d = item.empty() ? 0 : std::strtod(item.c_str(), &end);
          if (item.empty() || end != item.c_str() + item.size() || !std::isfinite(d))
            return "Value " + item + " is not a number" + (v.find(',') != std::string::npos ? " (in " + v + ")" : "");
        }
        return {};
      },
      "");
}

// Items of a list flag are not empty ("--gpu h100,", "--dtype ,bf16").
CLI::Validator nonempty_list() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        for (const auto& item : list_split(v))
          if (item.empty()) return "an empty item in the list '" + v + "'";
        return {};
      },
      "");
}

session_options session_options_make(const common_flags& c) {
  // --calibrate fits against the raw forecast
  return session_options_for(c.ops_dirs, c.scripts_dirs, c.verbose, !c.no_calibration && c.calibrate.empty());
}

void add_common(CLI::App* cmd, common_flags& c, bool with_format,
                const std::vector<std::string>& formats = {"table", "json", "csv"}) {
  cmd->add_option("--ops", c.ops_dirs, "Directory of op rules searched before the bundled ops/ (repeatable)")
      ->type_name("DIR");
  cmd->add_option("--scripts", c.scripts_dirs,
                  "Directory of Lua modules searched before the bundled scripts/ (repeatable): DIR/neusight/launch.lua "
                  "replaces module neusight.launch")
      ->type_name("DIR")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            std::error_code ec;
            if (!fs::is_directory(v, ec)) return "no such directory: " + v;
            return {};
          },
          "DIR"));
  cmd->add_flag("--traceback", c.traceback, "Print the Lua traceback of script errors");
  cmd->add_flag("-v,--verbose", c.verbose, "Report op and script files that shadow others, and other details");
  const char* lim = "Script limits (per call into a Lua script; 0: no limit)";
  cmd->add_option("--script-budget", c.script_budget,
                  "Lua instructions a script may run per call (default " + std::to_string(script_budget_default) +
                      ", or NEUSIGHT_SCRIPT_BUDGET)")
      ->type_name("N")->check(CLI::NonNegativeNumber)->group(lim);
  cmd->add_option("--script-memory", c.script_memory,
                  "Lua heap in MB while a script runs (default " + std::to_string(script_memory_mb_default) +
                      ", or NEUSIGHT_SCRIPT_MEMORY)")
      ->type_name("MB")->check(CLI::NonNegativeNumber)->group(lim);
  cmd->add_option("--script-timeout", c.script_timeout,
                  "CPU seconds a script may run per call, also inside one library call (default " +
                      fmt::format("{:g}", script_timeout_default) + ", or NEUSIGHT_SCRIPT_TIMEOUT)")
      ->type_name("SECONDS")->check(CLI::NonNegativeNumber)->group(lim);
  if (with_format) {
    cmd->add_option("--format", c.format, "Output format")->check(CLI::IsMember(formats));
    cmd->add_option("-o,--output", c.output,
                    "Write the report to FILE instead of standard output (a .json or .csv FILE sets --format unless "
                    "it is given)")
        ->type_name("FILE");
  }
}

void add_report(CLI::App* cmd, common_flags& c) {
  cmd->add_option("--report", c.report_html,
                  "Also write a self-contained HTML page of the forecast to FILE (scripts/neusight/html.lua): time by "
                  "op kind and phase, memory, the pipeline stages (serve: latency percentiles, what bounds each phase, "
                  "the sweep's rows); nothing is written on error")
      ->type_name("FILE.html");
}

// --no-calibration on the commands that forecast (run, predict, serve, search; NEUSIGHT_NO_CALIBRATION=1 for all);
// --calibrate on those that forecast one workload (run, predict: `fit` = calibrate_fit::workload) or one static serving
// batch (serve: calibrate_fit::serve).
enum class calibrate_fit { none, workload, serve };
CLI::Option* add_calibration(CLI::App* cmd, common_flags& c, calibrate_fit fit) {
  cmd->add_flag("--no-calibration", c.no_calibration,
                "Ignore the GPU's calibration (<gpu file stem>.calibration.toml beside its file, written by --calibrate; "
                "also NEUSIGHT_NO_CALIBRATION=1)");
  if (fit == calibrate_fit::none) return nullptr;
  const std::string help =
      fit == calibrate_fit::workload
          ? "Fit per-kernel-family correction factors of the GPU from FILE: a TOML with latency_ms = the measured "
            "time of exactly this workload on that GPU (and optionally note = \"…\"), or a PyTorch-profiler "
            "Chrome trace (.json, recorded with shapes on that GPU: scripts/collect/hf_trace.py; predict --gpu G "
            "only, no workload); they are written beside the GPU's file as <stem>.calibration.toml and used by "
            "later forecasts on it (scripts/neusight/calibration.lua)"
          : "Fit per-kernel-family correction factors of the GPU from FILE, a TOML with the measured times of exactly "
            "this static batch (--batch; not --rate) on that GPU: ttft_ms = its prefill (time to first token) and/or "
            "tpot_ms = its mean decode step (time per output token), optionally note = \"…\"; one of them fits as "
            "predict --calibrate does, both pin the families the prefill and the decode step weigh differently. "
            "Written beside the GPU's file as <stem>.calibration.toml and used by later forecasts on it (predict, "
            "search, serve; scripts/neusight/calibration.lua fit_serve)";
  return cmd->add_option("--calibrate", c.calibrate, help)
      ->type_name("FILE")
      ->excludes(cmd->get_option("--no-calibration"))
      ->excludes(cmd->get_option("--report"));  // it writes the calibration and its summary, not a forecast
}

void add_forecast(CLI::App* cmd, forecast_flags& f, bool for_script) {
  const char* o = for_script ? " (overrides the script)" : "";
  const std::string l = " (a comma-separated list compares every combination)";
  cmd->add_option("--gpu", f.gpu, std::string("GPU: file path, file stem or alias, see `neusight gpus`") + o + l)
      ->check(nonempty_list());
  cmd->add_option("--batch", f.batch, std::string("Global batch size") + o + l)->check(positive_list())->type_name("N[,N…]");
  cmd->add_option("--seq", f.seq, std::string("Sequence length (prefill: the prompt length; not used in decode)") + o + l)
      ->check(positive_list())->type_name("N[,N…]");
  cmd->add_option("--mode", f.mode,
                  std::string("train, inference, or a serving phase: prefill (prompts of --seq tokens, writing the KV "
                              "cache) or decode (one token per sequence over a KV cache of --context tokens)") + o + l)
      ->check(member_list({"train", "inference", "prefill", "decode"}));
  cmd->add_option("--context", f.context,
                  std::string("Tokens already in each sequence's KV cache (required by, and only for, --mode decode)") + o + l)
      ->check(positive_list())->type_name("N[,N…]");
  cmd->add_option("--optimizer", f.optimizer, std::string("Optimizer step in training: none, sgd, adam, adamw") + o)
      ->check(CLI::IsMember({"none", "sgd", "adam", "adamw"}));
  cmd->add_option("--optimizer-impl", f.optimizer_impl,
                  std::string("How the step runs: fused (one kernel; default for adamw) or foreach (multi-tensor "
                              "passes; default for adam, sgd)") + o);
  cmd->add_option("--dtype", f.dtype,
                  std::string("Compute element type: fp32, tf32, fp16, bf16, fp8 (also as people write them: bfloat16, "
                              "BF16, torch.float16, fp8_e4m3, …)") + o + l)
      ->check(nonempty_list());
  cmd->add_option("--kv-dtype", f.kv_dtype,
                  std::string("KV-cache element type of the serving phases (prefill, decode): fp8, bf16, fp16 or fp32; "
                              "default the compute dtype. The cache bytes, the KV-cache writes and the decode "
                              "attention's cache reads shrink; FLOPs stay at --dtype") + o);
  cmd->add_option("--weight-dtype", f.weight_dtype,
                  std::string("Weight-only quantisation (inference, prefill, decode): int8, int4 or fp8 weights, "
                              "dequantised in the GEMM; compute stays at --dtype") + o);
  cmd->add_option("--precision", f.precision,
                  std::string("Precision recipe: pure (parameters, gradients, optimizer state in --dtype) or amp "
                              "(fp32 master weights and optimizer state, 16-bit compute); default amp when training "
                              "in fp16/bf16/fp8, else pure (scripts/neusight/precision.lua)") + o);
  cmd->add_option("--attention", f.attention,
                  std::string("Attention implementation: eager (matmul-softmax-matmul kernels) or sdpa (one fused "
                              "FlashAttention kernel each way); default sdpa for bf16/fp16/fp8 where the model has "
                              "it, else eager") + o)
      ->check(CLI::IsMember({"eager", "sdpa"}));
  cmd->add_option("--experts", f.experts,
                  std::string("How an MoE model's routed experts run: loop (HF eager's per-expert loop, default) or "
                              "grouped (permute, grouped GEMMs, unpermute: Megatron-Core GroupedMLP / vLLM fused_moe; "
                              "scripts/neusight/models/moe.lua)") + o)
      ->check(CLI::IsMember({"loop", "grouped"}));
  cmd->add_option("--predictor", f.predictor, predictor_help());
  cmd->add_option("--weights", f.weights,
                  "Weights root of the neusight predictor, laid out as weights/<vendor>/<family> (default: the "
                  "bundled weights/; e.g. the --out of weights/train.sh)")
      ->type_name("DIR")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--overhead", f.overhead,
                  "Host-side framework overhead per kernel launch (scripts/neusight/overhead.lua): on or off "
                  "(default: as the script says)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--launch", f.launch,
                  std::string("Kernel launches: eager (PyTorch, one host launch per op: the predictors' times, default) "
                              "or graph (CUDA-graph replay as serving engines run; scripts/neusight/launch.lua)") + o)
      ->check(CLI::IsMember({"eager", "graph"}));
  cmd->add_flag("--fusion", f.fusion,
                std::string("Inference with torch.compile-style kernel fusion (scripts/neusight/fusion.lua)") + o);
  cmd->add_flag("--flash-attention", f.flash_attention,
                std::string("Like --fusion, and each attention block becomes one FlashAttention kernel") + o);
  const char* g = "Parallelism (scripts/neusight/parallel.lua)";
  cmd->add_option("--dp", f.dp, std::string("Data-parallel degree: replicas; --batch stays the global batch") + o + l)
      ->check(positive_list())->type_name("N[,N…]")->group(g);
  cmd->add_option("--tp", f.tp, std::string("Tensor-parallel degree (Megatron-style sharding of each layer)") + o + l)
      ->check(positive_list())->type_name("N[,N…]")->group(g);
  cmd->add_option("--ep", f.ep,
                  std::string("Expert-parallel degree (MoE models): experts spread over ep of the dp ranks") + o + l)
      ->check(positive_list())->type_name("N[,N…]")->group(g);
  cmd->add_option("--pp", f.pp, std::string("Pipeline-parallel degree: stages") + o + l)->check(positive_list())->type_name("N[,N…]")->group(g);
  cmd->add_option("--microbatches", f.microbatches,
                  std::string("Microbatches per iteration and pipeline (batch / (dp * microbatches) each)") + o + l)
      ->check(positive_list())->type_name("N[,N…]")->group(g);
  cmd->add_option("--schedule", f.schedule, std::string("Pipeline schedule: gpipe, 1f1b or interleaved") + o)
      ->group(g);
  cmd->add_option("--virtual-stages", f.virtual_stages,
                  std::string("Model chunks per device of the interleaved schedule (default 2 with --schedule "
                              "interleaved)") + o)
      ->check(CLI::PositiveNumber)->type_name("N")->group(g);
  cmd->add_option("--bucket-mb", f.bucket_mb,
                  std::string("Data-parallel gradient bucket size in MB (default 25, PyTorch DDP's)") + o)
      ->check(CLI::PositiveNumber)->type_name("MB")->group(g);
  cmd->add_option("--overlap-grad-reduce", f.overlap_grad_reduce,
                  std::string("Overlap the data-parallel gradient reduction with backward: on (default) or off") + o)
      ->check(CLI::IsMember({"on", "off"}))->group(g);
  cmd->add_option("--kernels", f.kernels,
                  std::string("Kernels of a parallel run: megatron (Megatron-LM's fused ones; default with more than one GPU) or eager (the HF eager graph; default on one GPU)") + o)
      ->check(CLI::IsMember({"megatron", "eager"}))->group(g);
  cmd->add_option("--recompute", f.recompute,
                  std::string("Activation recomputation: none, selective (core attention re-runs in backward) or "
                              "full (every layer re-runs its forward)") + o + l)
      ->check(member_list({"none", "selective", "full"}))->group(g);
  cmd->add_flag("--sequence-parallel", f.sequence_parallel,
                std::string("Megatron sequence parallelism (needs --tp >= 2): norms/dropouts on s/tp tokens") + o)
      ->group(g);
  cmd->add_flag("--distributed-optimizer", f.distributed_optimizer,
                std::string("Shard the optimizer state and step over dp (Megatron's distributed optimizer, ZeRO-1)") + o)
      ->group(g);
  cmd->add_option("--cluster", f.cluster,
                  std::string("Cluster: a gpus/clusters/*.toml name (dgx_h100, dgx_a100, pcie_8gpu) or a .toml path; "
                              "default: one node of the GPU's own links") + o)
      ->group(g);
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
  // the integer flags hold one validated value here (a comparison calls this once per combination)
  auto integer = [](const std::string& v) { return workload_value(int64_t(std::stoll(v))); };
  if (!f.batch.empty()) o["batch"] = integer(f.batch);
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
  return o;
}

// One forecast, finished: the kernels' latencies and aggregation, the parallel timeline, the warnings and the figures.
// What the report shows of its workload stays in Lua (scripts/neusight/report.lua, session::forecast_render).
struct forecast_done {
  std::optional<forecast> fc;
  gpu_spec gpu;
  std::string source;                       // the workload script or "command line": its own figures go by it
  std::string launch = "eager";             // "eager" | "graph" (scripts/neusight/launch.lua)
  std::vector<std::string> warnings;        // the workload's, then the predictor's, memory's and figures'
  std::optional<parallel_report> parallel;  // parallel runs: the timeline's report
  std::optional<figures> figs;              // scripts/neusight/figures.lua of this forecast
  // A comparison's row (run_compare): its figures sit beside the row's inputs, latency_ms, warnings and error, so a
  // workload's own figure may not take those names; a single forecast's figures have an object of their own.
  bool comparison_row = false;
  // The run's latency: a parallel run's iteration on its slowest device, else the forecast's total.
  double latency_s() const { return parallel ? parallel->iteration_s : fc->total(); }
};

// The tail every forecast shares: library tiles, kernel latencies, aggregation, timeline, figures. With `say`,
// warnings go to stderr as they are found (a single forecast); a comparison row only keeps them in meta.warnings.
void forecast_finish(session& s, const predictor& pred, const std::string& overhead, const graph& g,
                     std::vector<kernel_instance> kernels, forecast_done& out, bool say) {
  if (say)
    for (const auto& w : out.warnings) std::fprintf(stderr, "neusight: warning: %s\n", w.c_str());
  out.fc.emplace(s.forecast_run(g, std::move(kernels), out.gpu, pred, overhead, out.launch));
  for (const auto& w : pred.warnings()) {
    if (say) std::fprintf(stderr, "neusight: warning: %s\n", w.c_str());
    out.warnings.push_back(w);
  }
  if (auto tl = s.timeline(*out.fc)) out.parallel = std::move(*tl);
  // after timeline(): a parallel run's memory comes from it (scripts/neusight/report.lua)
  session::forecast_facts facts = s.forecast_facts_of(*out.fc, out.gpu);
  for (const auto& w : facts.memory_warnings) {  // the table says so too; JSON and CSV readers need it
    if (say) std::fprintf(stderr, "neusight: warning: %s\n", w.c_str());
    out.warnings.push_back(w);
  }
  figure_inputs in = std::move(facts.inputs);
  kernel gemm;  // the dense peak a GEMM of the compute dtype (the figures' `dtype`) runs at (roofline.cpp)
  gemm.kind = kernel_kind::gemm, gemm.name = "peak";
  for (const auto& [key, v] : in)
    if (const auto* dtype = std::get_if<std::string>(&v); dtype && key == "dtype") gemm.dtype = *dtype;
  try {
    in.emplace_back("peak_tflops", roofline_peak_flops(out.gpu, gemm) / 1e12);
  } catch (const error&) {
    // no units of that dtype: no MFU
  }
  family_inputs_add(in, out.fc->seconds_by_family(), pred, out.gpu.vendor);
  // the names a comparison row holds besides the figures (a workload's own figures may not take them there)
  if (out.comparison_row) {
    std::string row_keys = "latency_ms,warnings,error";
    for (const auto& lf : list_flags()) row_keys += std::string(",") + lf.key;  // every row has every input
    in.emplace_back("row_keys", row_keys);
  }
  if (const calibration* c = s.calibration_of(out.gpu)) {  // the factors forecast_run applied
    in.emplace_back("calibration_source", c->source);
    for (const auto& [fam, x] : c->factors) in.emplace_back("calibration." + fam, x);
  }
  out.figs = s.figures_compute(in, out.gpu, pred.uncertainty_file(out.gpu.vendor), out.source);
  for (const auto& w : out.figs->warnings) {
    if (say) std::fprintf(stderr, "neusight: warning: %s\n", w.c_str());
    out.warnings.push_back(w);
  }
}

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
  const auto texts = s.forecast_render(*d.fc, d.gpu, predictor, d.warnings, *d.figs, formats);
  // --report: the page is rendered first (a script error writes nothing), written after the normal output.
  const std::string html = c.report_html.empty() ? "" : s.render("neusight.html", "render", texts.back());
  emit(texts.front(), c.output);
  if (!c.report_html.empty()) emit(html, c.report_html);
}

// A workload (a script, or the command line alone) forecast with `f`'s single values: what `predict` / `run` print and
// what each comparison row holds. `pred` is made on first use, after the workload has loaded.
void forecast_workload(session& s, std::unique_ptr<predictor>& pred, const forecast_flags& f, const std::string& script,
                       forecast_done& out, bool say) {
  const workload w = s.workload_load(script, overrides_make(f));
  out.gpu = w.gpu_resolved;
  expansion e = s.expand(w.g, out.gpu, w.training());
  out.source = w.source;
  out.launch = w.launch;
  out.warnings = w.warnings;
  if (!pred) pred = predictor_for(s, f);
  forecast_finish(s, *pred, f.overhead, w.g, std::move(e.kernels), out, say);
}

// --calibrate FILE: the workload forecast without any calibration, the measurement of FILE, and the factors
// scripts/neusight/calibration.lua fits, written beside the GPU's file for later forecasts.
int run_calibrate(session& s, const common_flags& c, const predictor& pred, const forecast_done& d) {
  const measurement m = measurement_load(c.calibrate);
  const fs::path path = calibration_path(d.gpu);
  if (path.empty()) throw error("--calibrate: " + d.gpu.name + " was not read from a file: nowhere to keep a calibration");
  const double latency_s = d.latency_s();
  figure_inputs in = {{"latency_s", latency_s}, {"measured_s", m.latency_ms / 1e3}, {"measurement", m.source}};
  family_inputs_add(in, d.fc->seconds_by_family(), pred, d.gpu.vendor);
  const figures fit = s.figures_call("neusight.calibration", "fit", in, d.gpu, pred.uncertainty_file(d.gpu.vendor));
  std::map<std::string, double> factors;
  std::optional<double> calibrated_ms;
  for (const auto& x : fit.fields) {
    const double* v = std::get_if<double>(&x.value);
    if (x.key.rfind("factor.", 0) == 0 && v) factors[x.key.substr(7)] = *v;
    if (x.key == "calibrated_ms" && v) calibrated_ms = *v;
  }
  if (factors.empty()) throw error("scripts/neusight/calibration.lua fit(): no factor.<family> fields");
  for (const auto& w : fit.warnings) std::fprintf(stderr, "neusight: warning: %s\n", w.c_str());
  const std::string config = s.forecast_summary();  // the workload in a line (scripts/neusight/report.lua)
  std::vector<std::pair<std::string, std::variant<std::string, double>>> facts = {
      {"measurement", m.source}, {"measured_ms", m.latency_ms}, {"forecast_ms", latency_s * 1e3},
      {"workload", config},      {"predictor", pred.name()}};
  if (!m.note.empty()) facts.emplace_back("note", m.note);
  const std::string where = calibration_write(d.gpu, path, factors, "`neusight predict … --calibrate " + m.source + "`", c.output, facts);
  if (c.format == "json") {
    nlohmann::ordered_json j;
    j["gpu"] = d.gpu.name;
    j["calibration_file"] = where;
    j["measurement"] = m.source;
    j["workload"] = config;
    j["measured_ms"] = m.latency_ms;
    j["forecast_ms"] = latency_s * 1e3;
    j["calibrated_ms"] = calibrated_ms ? nlohmann::ordered_json(*calibrated_ms) : nlohmann::ordered_json(nullptr);
    j["factors"] = factors;
    j["warnings"] = fit.warnings;
    emit(j.dump(2) + "\n", c.output);
  } else {
    std::string out = fmt::format("calibrated {} from {} ({})\n", d.gpu.name, m.source, config);
    for (const auto& line : fit.lines) out += line + "\n";
    out += "written to " + where + "\n";
    emit(out, c.output);
  }
  return 0;
}

// --calibrate TRACE.json: a PyTorch-profiler Chrome trace measured on the GPU. Its GEMM and attention ops (those
// scripts/neusight/scale.lua builds kernels for) give each kernel family's measured and predicted time on that GPU;
// scripts/neusight/calibration.lua fit_trace() turns them into factors, written beside the GPU's file.
bool calibrate_from_trace(const std::string& file) {
  return file.size() > 5 && text_lower(file.substr(file.size() - 5)) == ".json";
}

int run_calibrate_trace(session& s, const common_flags& c, const forecast_flags& f) {
  const gpu_spec gpu = s.gpu(f.gpu);
  const fs::path path = calibration_path(gpu);
  if (path.empty()) throw error("--calibrate: " + gpu.name + " was not read from a file: nowhere to keep a calibration");
  const trace tr = trace_load(c.calibrate);
  if (tr.format != trace_format::chrome_json)
    throw error(c.calibrate + ": --calibrate reads a PyTorch-profiler Chrome trace (.json) or a TOML measurement (" +
                std::string(trace_format_name(tr.format)) + " given)");
  std::vector<std::string> warnings;
  if (tr.origin_device.empty()) {
    warnings.push_back(c.calibrate + ": the trace does not name its GPU (deviceProperties): taken as " + gpu.name);
  } else {
    std::string origin;
    try {
      origin = s.gpu(tr.origin_device).name;
    } catch (const error&) {
      throw error(c.calibrate + ": the trace was recorded on '" + tr.origin_device +
                  "', which no GPU file names: add its torch.cuda.get_device_name() string to the aliases of " +
                  gpu.source + " if it is that GPU");
    }
    if (origin != gpu.name)
      throw error(c.calibrate + ": the trace was recorded on " + origin + " ('" + tr.origin_device + "'), not on " +
                  gpu.name + " (--gpu)");
  }
  std::map<std::string, size_t> not_built;
  std::vector<kernel_instance> ks = trace_kernels(s, tr, not_built);
  for (const auto& [kind, n] : not_built)
    warnings.push_back(fmt::format("{} '{}' ops had missing or unsupported input shapes: not used", n, kind));
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
  figure_inputs in = {{"measurement", c.calibrate}, {"ops", double(dominant.size())}};
  family_inputs_add(in, pf.seconds_by_family(), *pred, gpu.vendor);
  for (const auto& ft : mf.seconds_by_family()) in.emplace_back("measured_s." + ft.family, ft.seconds);
  const figures fit = s.figures_call("neusight.calibration", "fit_trace", in, gpu, pred->uncertainty_file(gpu.vendor));
  std::map<std::string, double> factors;
  for (const auto& x : fit.fields) {
    const double* v = std::get_if<double>(&x.value);
    if (x.key.rfind("factor.", 0) == 0 && v) factors[x.key.substr(7)] = *v;
  }
  if (factors.empty()) throw error("scripts/neusight/calibration.lua fit_trace(): no factor.<family> fields");
  warnings.insert(warnings.end(), fit.warnings.begin(), fit.warnings.end());
  for (const auto& w : warnings) std::fprintf(stderr, "neusight: warning: %s\n", w.c_str());
  double m_total = 0, p_total = 0;
  for (size_t i = 0; i < measured.size(); ++i) m_total += measured[i], p_total += predicted[i];
  std::vector<std::pair<std::string, std::variant<std::string, double>>> facts = {
      {"measurement", c.calibrate}, {"trace_device", tr.origin_device}, {"ops", double(dominant.size())},
      {"measured_ms", m_total * 1e3}, {"forecast_ms", p_total * 1e3}, {"predictor", pred->name()}};
  const std::string where =
      calibration_write(gpu, path, factors, "`neusight predict --gpu … --calibrate " + c.calibrate + "` (a profiler trace)", c.output, facts);
  if (c.format == "json") {
    nlohmann::ordered_json j;
    j["gpu"] = gpu.name;
    j["calibration_file"] = where;
    j["measurement"] = c.calibrate;
    j["trace_device"] = tr.origin_device;
    j["ops"] = dominant.size();
    j["measured_ms"] = m_total * 1e3;
    j["forecast_ms"] = p_total * 1e3;
    j["factors"] = factors;
    nlohmann::ordered_json fams = nlohmann::ordered_json::object();
    for (const auto& ft : pf.seconds_by_family()) fams[ft.family]["forecast_ms"] = ft.seconds * 1e3;
    for (const auto& ft : mf.seconds_by_family()) fams[ft.family]["measured_ms"] = ft.seconds * 1e3;
    j["families"] = fams;
    j["warnings"] = warnings;
    emit(j.dump(2) + "\n", c.output);
  } else {
    std::string out = fmt::format("calibrated {} from the trace {} ({} ops)\n", gpu.name, c.calibrate, dominant.size());
    for (const auto& line : fit.lines) out += line + "\n";
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
  forecast_workload(s, pred, f, script, d, c.calibrate.empty());
  if (!c.calibrate.empty()) return run_calibrate(s, c, *pred, d);
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
  session s(session_options_make(c));
  std::map<std::string, std::string> gpu_names;  // as given → the GPU's name (a typo throws here)
  for (const auto& g : list_split(f.gpu)) gpu_names.emplace(g, s.gpu(g).name);
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
  for (const auto& one : combos) s.workload_check(overrides_make(one));  // typos stop here, before any forecast
  std::vector<session::compare_input> inputs;
  for (const auto& lf : list_flags()) inputs.push_back({lf.key, lf.column, lf.integer});
  s.compare_begin(inputs, script.empty() ? "command line" : script);  // the rows: scripts/neusight/compare.lua
  std::unique_ptr<predictor> pred;
  for (const auto& one : combos) {
    try {
      forecast_done d;
      d.comparison_row = true;
      forecast_workload(s, pred, one, script, d, false);
      s.compare_add(d.gpu, d.latency_s() * 1e3, *d.figs, d.warnings);
    } catch (const std::exception& ex) {
      std::vector<std::string> given;  // the inputs as given (the GPU by its name)
      for (const auto& lf : list_flags()) {
        const std::string& v = one.*lf.flag;
        const auto gi = lf.flag == &forecast_flags::gpu ? gpu_names.find(v) : gpu_names.end();
        given.push_back(gi != gpu_names.end() ? gi->second : v);
      }
      std::string why = ex.what();
      if (const size_t nl = why.find('\n'); nl != std::string::npos) why.resize(nl);
      s.compare_add_error(given, why);
    }
  }
  const std::string html = c.report_html.empty() ? "" : s.compare_render("html");
  emit(s.compare_render(c.format == "json" ? "json" : c.format == "csv" ? "csv" : "table"), c.output);
  if (!c.report_html.empty()) emit(html, c.report_html);
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
  if (f.gpu.empty()) throw error("predict --graph needs --gpu (a file path, file stem or alias)");
  const gpu_spec gpu = gpu_catalog(data_root_find() / "gpus").resolve(f.gpu);
  const std::string mode = !f.mode.empty() ? f.mode : og.tag ? og.tag->mode : "";
  if (mode.empty())
    throw error(og.source + ": the file name carries no -inf-/-train- tag: pass --mode train or --mode inference");
  if (mode == "prefill" || mode == "decode")
    throw error("predict --graph: --mode " + mode + " needs a model built with a KV cache (--model), not a reference graph");
  forecast_done d;
  d.gpu = gpu;
  d.source = og.source;
  d.launch = f.launch.empty() ? "eager" : f.launch;
  d.warnings = og.warnings;
  const int64_t layers = opgraph_layers(og, gf.layers, d.warnings);
  opgraph_replicate(og, layers);
  // what the report shows of the graph (scripts/neusight/report.lua graph)
  s.report_graph({{"source", og.source}, {"model", og.g.model}, {"mode", mode},
                  {"batch", int64_t(og.tag ? og.tag->batch : 0)}, {"seq", int64_t(og.tag ? og.tag->seq : 0)},
                  {"layers", layers}, {"launch", d.launch}},
                 og.g.params_total(), gpu.mem_gb);
  const bool training = mode == "train";
  bool has_backward = false;
  for (const auto& ki : og.kernels) has_backward = has_backward || ki.ph != phase::forward;
  if (training && !has_backward)
    d.warnings.push_back(og.source + ": the graph holds no backward kernels (parsed for inference): the training "
                                     "forecast is the forward pass only");
  std::vector<kernel_instance> kernels = opgraph_kernels(og, training);
  if (const auto par = opgraph_parallel_of(og)) {
    if (!training) throw error(og.source + ": a distributed graph (" + og.tag->option + ") is a training graph: drop --mode inference");
    s.graph_parallel(og.g, kernels, gpu, *par, og.tag->batch, mode, d.warnings);
  }
  const auto pred = predictor_for(s, f);
  forecast_finish(s, *pred, f.overhead, og.g, std::move(kernels), d, true);
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
    throw error(script + ": no such file (nor " + bundled.string() + " among the bundled files)");
  }
  throw error(script + ": no such file");
}

int run_paths(const common_flags& c) {
  const fs::path root = data_root_find();
  session s(session_options_make(c));
  std::string out = fmt::format("{:<13} {}\n", "data", root.string());
  for (const char* d : {"gpus", "ops", "scripts", "weights", "examples"})
    out += fmt::format("{:<13} {}\n", d, (root / d).string());
  std::string ops_path;
  for (const auto& d : s.ops_search_path()) ops_path += (ops_path.empty() ? "" : ":") + d.string();
  out += fmt::format("{:<13} {}   (first hit wins: --ops, NEUSIGHT_OPS_PATH, the bundled ops/)\n", "op search", ops_path);
  std::string scripts_path;
  for (const auto& d : s.scripts_search_path()) scripts_path += (scripts_path.empty() ? "" : ":") + d.string();
  out += fmt::format("{:<13} {}   (first hit wins: --scripts, NEUSIGHT_SCRIPTS_PATH, the bundled scripts/)\n",
                     "script search", scripts_path);
  emit(out, "");
  return 0;
}

int run_gpus(const common_flags& c) {
  if (c.format == "csv") throw error("gpus: --format csv is not offered (table or json)");
  const auto gpus = gpu_catalog(data_root_find() / "gpus").load_all();
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
  session s(session_options_make(c));
  std::string out;
  for (const auto& e : s.ops_list()) {
    std::string doc;
    try {
      doc = s.op_load(e.name).doc;
    } catch (const std::exception& ex) {
      doc = std::string("ERROR: ") + ex.what();
    }
    out += fmt::format("{:<16} {:<28} {}\n", e.name, e.file, doc);
    if (c.verbose)
      for (const auto& sh : e.shadows) out += fmt::format("{:<16}   shadows {}\n", "", sh);
  }
  emit(out, "");
  return 0;
}

}  // namespace

// What a command's own flag struct takes from the common flags: the search paths and -v (paths_into), and for a
// command that writes a report, the format and -o too (report_into).
template <class F>
F& paths_into(F& f, const common_flags& c) {
  f.ops_dirs = c.ops_dirs;
  f.scripts_dirs = c.scripts_dirs;
  f.verbose = c.verbose;
  return f;
}
template <class F>
F& report_into(F& f, const common_flags& c) {
  f.format = c.format;
  f.output = c.output;
  return paths_into(f, c);
}

int app_main(int argc, char** argv) {
  CLI::App app{"neusight — forecast deep-learning training and inference latency on GPUs you do not have"};
  app.set_version_flag("--version", std::string("neusight ") + NEUSIGHT_VERSION + " (" + NEUSIGHT_GIT + ")");
  app.require_subcommand(1);

  common_flags common;
  forecast_flags fflags;
  std::string script;

  auto* run = app.add_subcommand("run", "Evaluate a workload script (examples/*.lua)");
  run->add_option("script", script,
                  "Workload script returning { model=…, gpu=…, mode=…, batch=…, seq=… }; a relative path that does "
                  "not exist here is looked up in the bundled files (examples/gpt3_train.lua works from any folder)")
      ->required();
  add_forecast(run, fflags, true);
  add_common(run, common, true);
  add_report(run, common);
  add_calibration(run, common, calibrate_fit::workload);

  graph_flags gflags;
  auto* predict = app.add_subcommand("predict", "Forecast a built-in model or a reference operator graph without writing a script");
  auto* model_opt = predict->add_option("--model", fflags.model, "Model preset (e.g. gpt3_175b, bert_large, llama3_8b, mixtral_8x7b, deepseek_v3; `neusight models` lists them) or a HuggingFace config.json (the model_types scripts/neusight/models/hf.lua maps: GPT-2, BERT, OPT, Switch, Llama, Mistral, Qwen2/3, Mixtral, Qwen MoE, DeepSeek-V2/V3); a comma-separated list compares every combination")
                        ->check(nonempty_list());
  add_forecast(predict, fflags, false);
  auto* graph_opt = predict->add_option("--graph", gflags.file,
                                        "Reference operator graph opgraph/<model>-<inf|train>-<seq>-<batch>.csv "
                                        "instead of --model (needs --gpu; mode from the file name)")
                        ->check(CLI::ExistingFile)
                        ->excludes(model_opt);
  for (const char* o : {"--batch", "--seq", "--context", "--optimizer", "--optimizer-impl", "--dtype", "--kv-dtype", "--weight-dtype", "--precision", "--attention", "--experts", "--fusion", "--flash-attention", "--dp", "--tp",
                        "--pp", "--ep", "--microbatches", "--schedule", "--virtual-stages", "--bucket-mb", "--overlap-grad-reduce", "--kernels", "--cluster", "--recompute", "--sequence-parallel", "--distributed-optimizer"})
    graph_opt->excludes(predict->get_option(o));
  predict->add_option("--layers", gflags.layers,
                      "Layer count of --graph (default: the model config in ../DLmodel_configs beside the file)")
      ->check(CLI::PositiveNumber)
      ->needs(graph_opt);
  add_common(predict, common, true);
  add_report(predict, common);
  // a reference graph is not fitted (run_graph has no --calibrate): refused, not ignored
  add_calibration(predict, common, calibrate_fit::workload)->excludes(graph_opt);

  auto* paths = app.add_subcommand("paths", "Print where the bundled GPUs, op rules, scripts, weights and examples are read from");
  add_common(paths, common, false);

  auto* gpus = app.add_subcommand("gpus", "List the known GPUs and their key specs");
  add_common(gpus, common, true, {"table", "json"});
  gpus->get_option("--ops")->group("");  // irrelevant here; hidden

  auto* models = app.add_subcommand("models", "List the model presets with their family, parameter count and source");
  add_common(models, common, true);

  auto* ops = app.add_subcommand("ops", "List operator rules: op name → resolved file (first hit wins)");
  std::string list_word;
  ops->add_option("list", list_word, "Optional word 'list'")->check(CLI::IsMember({"list"}));
  add_common(ops, common, false);

  train_flags tflags;
  std::string hidden = "64,64,64";
  auto* train = app.add_subcommand("train", "Train the tile predictor of one kernel family from micro-benchmark CSVs");
  train->add_option("--family", tflags.family, "Kernel family: bmm, linear (fp32 GEMMs), elementwise, softmax, layernorm, gemm_tc16 (bf16/fp16/tf32 tensor-core GEMMs), gemm_fp8")->required()
      ->check(CLI::IsMember(family_name_list()));
  train->add_option("--data", tflags.data, "CSV files or folders (searched recursively), e.g. dataset/train/collect/bmm")
      ->required();
  train->add_option("--out", tflags.out, "Output weight folder, e.g. weights/nvidia/bmm")->required();
  train->add_option("--exclude-gpu", tflags.exclude_gpus, "Leave this GPU's rows out (repeatable)");
  train->add_option("--vendor", tflags.vendor, "Expected vendor of the rows (nvidia or amd)");
  train->add_option("--tiles", tflags.tiles, "Tiles of training rows: measured (from kernel names) or rule")
      ->check(CLI::IsMember({"measured", "rule"}));
  train->add_option("--hidden", hidden, "Hidden layer sizes")->capture_default_str();
  train->add_option("--epochs", tflags.opts.max_epochs, "Maximum epochs")->capture_default_str()->check(CLI::PositiveNumber);
  train->add_option("--patience", tflags.opts.patience, "Stop after this many epochs without improvement")->capture_default_str();
  train->add_option("--batch", tflags.opts.batch, "Mini-batch size")->capture_default_str()->check(CLI::PositiveNumber);
  train->add_option("--lr", tflags.opts.lr, "Adam learning rate")->capture_default_str();
  train->add_option("--seed", tflags.opts.seed, "Random seed (split, init, batches)")->capture_default_str();
  train->add_option("--threads", tflags.opts.threads, "Threads per mini-batch")->capture_default_str()->check(CLI::PositiveNumber);
  train->add_flag("-q,--quiet", tflags.quiet, "No progress bar");
  train->add_flag("--force", tflags.force, "Replace a model already in --out");
  add_common(train, common, false);

  eval_kernels_flags eflags;
  auto* eval = app.add_subcommand("eval", "Compare forecasts with measurements");
  eval->require_subcommand(1);
  auto* eval_k = eval->add_subcommand("kernels", "MAPE per GPU x family on micro-benchmark CSV rows");
  eval_k->add_option("files", eflags.files, "Micro-benchmark CSV files or folders")->required();
  eval_k->add_option("--predictor", eflags.predictor, predictor_help());
  eval_k->add_option("--weights", eflags.weights, "Weights root (default: the bundled weights/)");
  eval_k->add_option("--tiles", eflags.tiles, "rule (what a forecast uses) or measured (oracle)")
      ->check(CLI::IsMember({"rule", "measured"}));
  eval_k->add_option("--exclude-gpu", eflags.exclude_gpus, "Leave this GPU's rows out (repeatable)");
  add_common(eval_k, common, true);

  eval_models_flags mflags;
  auto* eval_m = eval->add_subcommand("models", "End-to-end APE per GPU against measured labels (label/<GPU>/<tag>.json)");
  eval_m->add_option("labels", mflags.labels, "Label folders label/<GPU> (or label/ itself, or single label JSON files)")
      ->required();
  eval_m->add_option("--graphs", mflags.graphs, "Folder of opgraph/<tag>.csv (default: opgraph/ beside label/)")
      ->type_name("DIR");
  eval_m->add_option("--predictor", mflags.predictor, predictor_help());
  eval_m->add_option("--weights", mflags.weights, "Weights root (default: the bundled weights/)");
  eval_m->add_option("--overhead", mflags.overhead,
                     "Host-side framework overhead per kernel launch (scripts/neusight/overhead.lua): on or off")
      ->check(CLI::IsMember({"on", "off"}));
  eval_m->add_flag("--calibrate-each", mflags.calibrate_each,
                   "Also score calibration from one measurement: per GPU, each label in turn calibrates the forecast "
                   "(scripts/neusight/calibration.lua, as predict --calibrate) and the GPU's other labels are scored "
                   "before and after");
  add_common(eval_m, common, true, {"table", "json"});

  scale_flags sflags;
  auto* scale = app.add_subcommand("scale", "Scale a trace measured on one GPU to another GPU (hybrid with the tile predictor)");
  scale->add_option("--trace", sflags.trace, "Trace: per-op label CSV label/<GPU>/<tag>.csv, Chrome-trace JSON, or wavescale manifest")->required()->check(CLI::ExistingFile);
  scale->add_option("--from", sflags.from, "GPU the trace was measured on")->required();
  scale->add_option("--to", sflags.to, "GPU to forecast")->required();
  scale->add_option("--layers", sflags.layers, "Replicate the traced layer N times (default: the model config)")
      ->check(CLI::PositiveNumber);
  scale->add_option("--graph", sflags.graph, "Operator graph of the trace (default: opgraph/<tag>.csv beside label/)");
  scale->add_option("--weights", sflags.weights, "Weights root (default: the bundled weights/)");
  scale->add_option("--predictor", sflags.predictor, predictor_help() + " — whose forecasts on the two GPUs give the ratio");
  scale->add_option("--wave-variant", sflags.wave_variant,
                    "Wave scaling of Chrome/wavescale traces: code (the released code, default) or paper (wave counts)")
      ->check(CLI::IsMember({"code", "paper"}));
  add_common(scale, common, true);

  search_flags qflags;
  auto* search = app.add_subcommand("search", "Forecast every dp x tp x pp layout of N GPUs and rank those that fit in memory");
  search->add_option("--model", qflags.model, "Model preset or HuggingFace config.json")->required();
  search->add_option("--gpu", qflags.gpu, "GPU: file path, file stem or alias")->required();
  search->add_option("--gpus", qflags.gpus, "Number of GPUs")->required()->check(CLI::PositiveNumber);
  search->add_option("--batch", qflags.batch, "Global batch size")->required()->check(CLI::PositiveNumber);
  search->add_option("--seq", qflags.seq, "Sequence length")->required()->check(CLI::PositiveNumber);
  search->add_option("--mode", qflags.mode, "train or inference")->capture_default_str()
      ->check(CLI::IsMember({"train", "inference"}));
  search->add_option("--optimizer", qflags.optimizer, "Optimizer step in training: none, sgd, adam, adamw (default adam)")
      ->check(CLI::IsMember({"none", "sgd", "adam", "adamw"}));
  search->add_option("--optimizer-impl", qflags.optimizer_impl,
                     "How the step runs: fused (default for adamw) or foreach (default for adam, sgd)");
  search->add_option("--dtype", qflags.dtype, "Compute element type: fp32, tf32, fp16, bf16, fp8 (or bfloat16, torch.float16, …)");
  search->add_option("--precision", qflags.precision,
                     "Precision recipe: pure or amp (default amp when training in fp16/bf16/fp8, else pure)");
  search->add_option("--predictor", qflags.predictor, predictor_help());
  search->add_option("--schedule", qflags.schedule,
                     "Pipeline schedules to search, comma-separated: gpipe, 1f1b, interleaved (e.g. 1f1b,interleaved; "
                     "default 1f1b)")
      ->check(member_list({"gpipe", "1f1b", "interleaved"}));
  search->add_option("--virtual-stages", qflags.virtual_stages,
                     "Model chunks per device to search with the interleaved schedule, comma-separated (default 2)")
      ->check(positive_list());
  search->add_option("--ep", qflags.ep,
                     "Fix the expert-parallel degree (MoE); default: every ep dividing dp and the expert count")
      ->check(CLI::PositiveNumber);
  search->add_option("--cluster", qflags.cluster, "Cluster: a gpus/clusters/*.toml name or a .toml path");
  search->add_option("--max-tp", qflags.max_tp, "Largest tensor-parallel degree to try (keep tp inside a node)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  search->add_flag("--sequence-parallel", qflags.sequence_parallel, "Use sequence parallelism whenever tp > 1");
  search->add_flag("--distributed-optimizer", qflags.distributed_optimizer, "Shard the optimizer over dp (ZeRO-1)");
  search->add_option("--recompute", qflags.recompute,
                     "Activation recomputation: auto (the cheapest that fits), all (every mode), none, selective, full")
      ->capture_default_str()->check(CLI::IsMember({"auto", "all", "none", "selective", "full"}));
  search->add_option("--top", qflags.top, "Show this many layouts")->capture_default_str()->check(CLI::PositiveNumber);
  search->add_flag("--all", qflags.all, "Also list layouts that do not fit in memory");
  add_common(search, common, true);
  add_calibration(search, common, calibrate_fit::none);

  serve_flags vflags;
  std::string serve_gpu, serve_tp, serve_batch, serve_rate;  // lists with --sweep; split after parsing
  auto* serve = app.add_subcommand(
      "serve", "Serving latency and throughput of an LLM: a static batch (--batch) or continuous batching of Poisson "
               "arrivals (--rate, --requests), simulated in scripts/neusight/serve.lua from prefill/decode forecasts; "
               "--sweep runs every GPU x tp x batch|rate combination and picks the cheapest that meets --ttft-ms and "
               "--tpot-ms (scripts/neusight/sweep.lua)");
  serve->add_option("--model", vflags.model, "Model preset or HuggingFace config.json of a decoder-only model with a KV cache (gpt, llama, moe, deepseek builders; `neusight models` lists the presets)")
      ->required();
  serve->add_option("--gpu", serve_gpu, "GPU: file path, file stem or alias (--sweep: a list, e.g. h100,a100_sxm4_80gb,l4)")
      ->required()->check(nonempty_list())->type_name("GPU[,GPU…]");
  serve->add_option("--dtype", vflags.dtype, "Compute element type, and the KV cache's unless --kv-dtype (default bf16)");
  serve->add_option("--kv-dtype", vflags.kv_dtype,
                    "KV-cache element type: fp8, bf16, fp16 or fp32 (default --dtype); fp8 halves a bf16 cache: "
                    "more concurrent sequences, cheaper decode attention");
  serve->add_option("--weight-dtype", vflags.weight_dtype,
                    "Weight-only quantisation: int8, int4 or fp8 weights (dequantised in the GEMMs; default: --dtype)");
  serve->add_option("--tp", serve_tp, "Tensor-parallel degree (one replica over tp GPUs; --sweep: a list, e.g. 1,2,4)")
      ->check(positive_list())->type_name("INT[,INT…]");
  serve->add_option("--launch", vflags.launch,
                    "Kernel launches: graph (CUDA-graph replay, as serving engines run; default) or eager")
      ->check(CLI::IsMember({"eager", "graph"}));
  serve->add_option("--attention", vflags.attention, "Attention implementation: sdpa (default for 16-bit) or eager")
      ->check(CLI::IsMember({"eager", "sdpa"}));
  serve->add_option("--experts", vflags.experts,
                    "MoE models' routed experts: grouped (grouped GEMMs, as serving engines run them; default) or loop "
                    "(HF eager's per-expert loop)")
      ->check(CLI::IsMember({"loop", "grouped"}));
  serve->add_option("--predictor", vflags.predictor, predictor_help());
  serve->add_option("--input-len", vflags.input_len,
                    "Prompt tokens per request: N, or uniform:LO:HI (integers, inclusive; --rate only)")
      ->required();
  serve->add_option("--output-len", vflags.output_len,
                    "Generated tokens per request (the first comes from the prefill): N, or uniform:LO:HI")
      ->required();
  auto* batch_opt = serve->add_option("--batch", serve_batch,
                                      "Static batch: N requests prefilled together, then decoded to the end "
                                      "(--sweep: a list, e.g. 1,8,32)")
                        ->check(positive_list())->type_name("INT[,INT…]");
  auto* rate_opt = serve->add_option("--rate", serve_rate,
                                     "Continuous batching: Poisson arrivals, requests per second (--sweep: a list, "
                                     "e.g. 1,4,16)")
                       ->check(number_list())->type_name("FLOAT[,FLOAT…]");
  rate_opt->excludes(batch_opt);
  // 0 is "not given" in serve_flags (serve.lua fills the default): a 0 given is refused here, never taken as the default
  serve->add_option("--requests", vflags.requests, "Requests to simulate (with --rate; default 1000)")
      ->check(positive_integer())->needs(rate_opt);
  serve->add_option("--seed", vflags.seed, "Seed of the arrivals and lengths (with --rate; default 0)")->needs(rate_opt);
  serve->add_option("--chunked-prefill", vflags.chunked_prefill,
                    "Chunked prefill: at most TOKENS tokens per step, decodes first (with --rate)")
      ->check(positive_integer())->needs(rate_opt);
  serve->add_option("--max-batch", vflags.max_batch, "Most running requests (vLLM max_num_seqs; default 256)")
      ->check(positive_integer())->needs(rate_opt);
  serve->add_option("--max-batched-tokens", vflags.max_batched_tokens,
                    "Most prompt tokens in one prefill step without chunking (default 8192)")
      ->check(positive_integer())->needs(rate_opt);
  serve->add_option("--block-size", vflags.block_size, "KV-cache block size in tokens (default 16)")
      ->check(positive_integer());
  serve->add_option("--gpu-memory-utilization", vflags.gpu_memory_utilization,
                    "Fraction of GPU memory for weights + KV cache, in (0, 1] (default 0.9, vLLM's)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            char* end = nullptr;
            const double d = std::strtod(v.c_str(), &end);
            if (v.empty() || end != v.c_str() + v.size() || !(d > 0 && d <= 1))
              return "Value " + v + " is not a fraction in (0, 1]: the share of GPU memory for weights + KV cache "
                     "(e.g. 0.9)";
            return {};
          },
          "FRACTION"));
  auto* sweep_opt = serve->add_flag(
      "--sweep", vflags.sweep,
      "Run every combination of the lists --gpu x --tp x (--batch | --rate), one row each (the numbers of a single "
      "`serve` run of it), and choose the cheapest meeting the targets: lowest $ per million output tokens when every "
      "GPU file has price_per_hour_usd, else highest output tokens/s per GPU. A combination that cannot run (does not fit, tp not dividing the heads) is a "
      "row with its error; when none meets the targets the run says so and exits 0");
  serve->add_option("--ttft-ms", vflags.ttft_ms,
                    "--sweep target: time to first token at most this many ms (the p90 over the requests with --rate; "
                    "the batch's prefill with --batch)")
      ->check(CLI::PositiveNumber)->needs(sweep_opt);
  serve->add_option("--tpot-ms", vflags.tpot_ms,
                    "--sweep target: time per output token at most this many ms (the p90 over the requests with "
                    "--rate; the mean over the decode steps with --batch)")
      ->check(CLI::PositiveNumber)->needs(sweep_opt);
  add_common(serve, common, true);
  add_report(serve, common);
  add_calibration(serve, common, calibrate_fit::serve)->excludes(sweep_opt);

  try {
    app.parse(argc, argv);
    if (*serve && !*batch_opt && !*rate_opt) throw CLI::RequiredError("--batch (static batch) or --rate");
    if (*serve) {
      for (const auto& [name, text] : {std::pair{"--gpu", &serve_gpu}, {"--tp", &serve_tp}, {"--batch", &serve_batch},
                                       {"--rate", &serve_rate}})
        if (!vflags.sweep && list_split(*text).size() > 1)
          throw CLI::ValidationError(name, "'" + *text + "' is a list: pass --sweep to compare settings (without it "
                                     "serve forecasts one setting)");
      vflags.gpu = list_split(serve_gpu);
      for (const auto& v : list_split(serve_tp)) vflags.tp.push_back(std::stoll(v));
      for (const auto& v : list_split(serve_batch)) vflags.batch.push_back(std::stoll(v));
      for (const auto& v : list_split(serve_rate)) vflags.rate.push_back(std::stod(v));
    }
    if (*predict && fflags.model.empty() && gflags.file.empty() &&
        !(!common.calibrate.empty() && calibrate_from_trace(common.calibrate)))
      throw CLI::RequiredError("--model or --graph");
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help/version or the usage error
    return code == 0 ? 0 : 2;       // CLI11 uses 1xx codes per error kind; we promise 2 for every usage error
  }
  // -o out.json / out.csv: the format follows the extension unless --format was given.
  for (CLI::App* cmd : {run, predict, gpus, models, scale, search, serve, eval_k, eval_m}) {
    const CLI::Option* fo = *cmd ? cmd->get_option_no_throw("--format") : nullptr;
    if (!fo || fo->count() > 0 || common.output.empty()) continue;
    const std::string ext = text_lower(fs::path(common.output).extension().string());
    const std::string want = ext == ".json" ? "json" : ext == ".csv" ? "csv" : "";
    if (want.empty()) continue;
    if (want == "csv" && (cmd == eval_m || cmd == scale || cmd == gpus)) {
      std::fprintf(stderr, "neusight: -o %s: %s writes a table or JSON, not CSV (pass --format table to write a table)\n",
                   common.output.c_str(), cmd->get_name().c_str());
      return 2;
    }
    common.format = want;
  }

  script_limits_set(common.script_budget, common.script_memory, common.script_timeout);
  try {
    if (*run) {
      const std::string file = script_resolve(script);
      return is_comparison(fflags) ? run_compare(common, fflags, file) : run_forecast(common, fflags, file);
    }
    if (*paths) return run_paths(common);
    if (*predict) {
      if (!gflags.file.empty()) return run_graph(common, fflags, gflags);
      return is_comparison(fflags) ? run_compare(common, fflags, "") : run_forecast(common, fflags, "");
    }
    if (*gpus) return run_gpus(common);
    if (*models) return run_models(common);
    if (*scale) {
      report_into(sflags, common).format = common.format == "csv" ? "table" : common.format;
      return scale_main(sflags);
    }
    if (*ops) return run_ops(common);
    if (*serve) {
      vflags.report_html = common.report_html;
      vflags.no_calibration = common.no_calibration;
      vflags.calibrate = common.calibrate;
      return serve_main(report_into(vflags, common));
    }
    if (*search) {
      qflags.no_calibration = common.no_calibration;
      return search_main(report_into(qflags, common));
    }
    if (*train) {
      tflags.opts.hidden.clear();
      paths_into(tflags, common);
      for (const auto& part : CLI::detail::split(hidden, ',')) tflags.opts.hidden.push_back(std::stoi(part));
      for (int i = 0; i < argc; ++i) tflags.command += (i ? " " : "") + std::string(argv[i]);
      return train_main(tflags);
    }
    if (*eval_k) {
      return eval_kernels_main(report_into(eflags, common));
    }
    if (*eval_m) {
      return eval_models_main(report_into(mflags, common));
    }
  } catch (const script_error& e) {
    std::fprintf(stderr, "neusight: %s\n", text_cap(e.what(), 8192).c_str());
    if (common.traceback && !e.traceback.empty()) std::fprintf(stderr, "%s\n", text_cap(e.traceback, 16384).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "neusight: %s\n", text_cap(e.what(), 8192).c_str());
    return 1;
  }
  return 0;
}

}  // namespace ns
