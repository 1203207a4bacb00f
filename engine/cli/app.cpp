// engine/cli/app.cpp — subcommands run, predict, gpus, ops, train, eval; every error ends as "neusight: <where>: <what>".
#include "cli/app.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "cli/kernels_cmd.h"
#include "cli/models_cmd.h"
#include "cli/paths.h"
#include "cli/scale_cmd.h"
#include "cli/search_cmd.h"
#include "cli/report.h"
#include "core/opgraph.h"
#include "core/roofline.h"
#include "core/text.h"
#include "core/tile_model.h"
#include "lua/script_limits.h"
#include "lua/session.h"

namespace ns {
namespace fs = std::filesystem;

namespace {

struct common_flags {
  std::vector<std::string> ops_dirs;
  bool traceback = false;
  bool verbose = false;
  std::string format = "table";
  std::string output;
  int64_t script_budget = -1, script_memory = -1;  // -1: NEUSIGHT_SCRIPT_* or the built-in limit
  double script_timeout = -1;
};

struct forecast_flags {
  std::string gpu, mode, optimizer, optimizer_impl, dtype, precision, attention, model;
  int64_t batch = 0, seq = 0, context = 0;
  std::string predictor = "neusight";
  std::string weights;                // --weights DIR: weights root instead of the bundled weights/
  std::string overhead = "default";  // --overhead on|off; "default": scripts/neusight/overhead.lua decides
  bool fusion = false;                // --fusion: workload field fusion = true (scripts/neusight/fusion.lua)
  bool flash_attention = false;       // --flash-attention: fusion = "flash_attention"
  // --dp/--tp/--pp/--microbatches/--schedule: fields of the workload's `parallel` table (scripts/neusight/parallel.lua)
  int64_t dp = 0, tp = 0, pp = 0, microbatches = 0, ep = 0;
  std::string schedule, kernels, cluster, recompute;
  bool sequence_parallel = false, distributed_optimizer = false;
};

struct graph_flags {
  std::string file;    // predict --graph: a reference operator graph (opgraph/<tag>.csv)
  int64_t layers = 0;  // --layers; 0 = from the model config
};

session_options session_options_make(const common_flags& c) {
  session_options o;
  o.data_root = data_root_find();
  for (const auto& d : c.ops_dirs) o.ops_dirs.emplace_back(d);
  if (const char* env = std::getenv("NEUSIGHT_OPS_PATH")) o.ops_path_env = env;
  o.memo = !memo_disabled();
  return o;
}

void add_common(CLI::App* cmd, common_flags& c, bool with_format) {
  cmd->add_option("--ops", c.ops_dirs, "Directory of op rules searched before the bundled ops/ (repeatable)")
      ->type_name("DIR");
  cmd->add_flag("--traceback", c.traceback, "Print the Lua traceback of script errors");
  cmd->add_flag("-v,--verbose", c.verbose, "Report op files that shadow others, and other details");
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
                  "Seconds a script may run per call, also inside one library call (default " +
                      fmt::format("{:g}", script_timeout_default) + ", or NEUSIGHT_SCRIPT_TIMEOUT)")
      ->type_name("SECONDS")->check(CLI::NonNegativeNumber)->group(lim);
  if (with_format) {
    cmd->add_option("--format", c.format, "Output format")->check(CLI::IsMember({"table", "json", "csv"}));
    cmd->add_option("-o,--output", c.output,
                    "Write the report to FILE instead of standard output (a .json or .csv FILE sets --format unless "
                    "it is given)")
        ->type_name("FILE");
  }
}

void add_forecast(CLI::App* cmd, forecast_flags& f, bool for_script) {
  const char* o = for_script ? " (overrides the script)" : "";
  cmd->add_option("--gpu", f.gpu, std::string("GPU: file path, file stem or alias, see `neusight gpus`") + o);
  cmd->add_option("--batch", f.batch, std::string("Global batch size") + o)->check(CLI::PositiveNumber);
  cmd->add_option("--seq", f.seq, std::string("Sequence length (prefill: the prompt length; not used in decode)") + o)
      ->check(CLI::PositiveNumber);
  cmd->add_option("--mode", f.mode,
                  std::string("train, inference, or a serving phase: prefill (prompts of --seq tokens, writing the KV "
                              "cache) or decode (one token per sequence over a KV cache of --context tokens)") + o)
      ->check(CLI::IsMember({"train", "inference", "prefill", "decode"}));
  cmd->add_option("--context", f.context,
                  std::string("Tokens already in each sequence's KV cache (required by, and only for, --mode decode)") + o)
      ->check(CLI::PositiveNumber);
  cmd->add_option("--optimizer", f.optimizer, std::string("Optimizer step in training: none, sgd, adam, adamw") + o)
      ->check(CLI::IsMember({"none", "sgd", "adam", "adamw"}));
  cmd->add_option("--optimizer-impl", f.optimizer_impl,
                  std::string("How the step runs: fused (one kernel; default for adamw) or foreach (multi-tensor "
                              "passes; default for adam, sgd)") + o);
  cmd->add_option("--dtype", f.dtype,
                  std::string("Compute element type: fp32, tf32, fp16, bf16, fp8 (also as people write them: bfloat16, "
                              "BF16, torch.float16, fp8_e4m3, …)") + o);
  cmd->add_option("--precision", f.precision,
                  std::string("Precision recipe: pure (parameters, gradients, optimizer state in --dtype) or amp "
                              "(fp32 master weights and optimizer state, 16-bit compute); default amp when training "
                              "in fp16/bf16/fp8, else pure (scripts/neusight/precision.lua)") + o);
  cmd->add_option("--attention", f.attention,
                  std::string("Attention implementation: eager (matmul-softmax-matmul kernels) or sdpa (one fused "
                              "FlashAttention kernel each way); default sdpa for bf16/fp16/fp8 where the model has "
                              "it, else eager") + o)
      ->check(CLI::IsMember({"eager", "sdpa"}));
  cmd->add_option("--predictor", f.predictor, "Kernel latency predictor")
      ->check(CLI::IsMember(predictor_names()));
  cmd->add_option("--weights", f.weights,
                  "Weights root of the neusight predictor, laid out as weights/<vendor>/<family> (default: the "
                  "bundled weights/; e.g. the --out of weights/train.sh)")
      ->type_name("DIR")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--overhead", f.overhead,
                  "Host-side framework overhead per kernel launch (scripts/neusight/overhead.lua): on or off "
                  "(default: as the script says)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_flag("--fusion", f.fusion,
                std::string("Inference with torch.compile-style kernel fusion (scripts/neusight/fusion.lua)") + o);
  cmd->add_flag("--flash-attention", f.flash_attention,
                std::string("Like --fusion, and each attention block becomes one FlashAttention kernel") + o);
  const char* g = "Parallelism (scripts/neusight/parallel.lua)";
  cmd->add_option("--dp", f.dp, std::string("Data-parallel degree: replicas; --batch stays the global batch") + o)
      ->check(CLI::PositiveNumber)->group(g);
  cmd->add_option("--tp", f.tp, std::string("Tensor-parallel degree (Megatron-style sharding of each layer)") + o)
      ->check(CLI::PositiveNumber)->group(g);
  cmd->add_option("--ep", f.ep,
                  std::string("Expert-parallel degree (MoE models): experts spread over ep of the dp ranks") + o)
      ->check(CLI::PositiveNumber)->group(g);
  cmd->add_option("--pp", f.pp, std::string("Pipeline-parallel degree: stages") + o)->check(CLI::PositiveNumber)->group(g);
  cmd->add_option("--microbatches", f.microbatches,
                  std::string("Microbatches per iteration and pipeline (batch / (dp * microbatches) each)") + o)
      ->check(CLI::PositiveNumber)->group(g);
  cmd->add_option("--schedule", f.schedule, std::string("Pipeline schedule: gpipe, 1f1b or interleaved") + o)
      ->group(g);
  cmd->add_option("--kernels", f.kernels,
                  std::string("Kernels of a parallel run: megatron (Megatron-LM's fused ones, default) or eager") + o)
      ->check(CLI::IsMember({"megatron", "eager"}))->group(g);
  cmd->add_option("--recompute", f.recompute,
                  std::string("Activation recomputation: none, selective (core attention re-runs in backward) or "
                              "full (every layer re-runs its forward)") + o)
      ->check(CLI::IsMember({"none", "selective", "full"}))->group(g);
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
  if (f.batch > 0) o["batch"] = f.batch;
  if (f.seq > 0) o["seq"] = f.seq;
  if (f.context > 0) o["context"] = f.context;
  if (f.flash_attention) o["fusion"] = std::string("flash_attention");
  else if (f.fusion) o["fusion"] = true;
  if (f.dp > 0) o["parallel.dp"] = f.dp;
  if (f.tp > 0) o["parallel.tp"] = f.tp;
  if (f.pp > 0) o["parallel.pp"] = f.pp;
  if (f.ep > 0) o["parallel.ep"] = f.ep;
  if (f.microbatches > 0) o["parallel.microbatches"] = f.microbatches;
  if (!f.schedule.empty()) o["parallel.schedule"] = f.schedule;
  if (!f.kernels.empty()) o["parallel.kernels"] = f.kernels;
  if (!f.cluster.empty()) o["parallel.cluster"] = f.cluster;
  if (!f.recompute.empty()) o["parallel.recompute"] = f.recompute;
  if (f.sequence_parallel) o["parallel.sequence_parallel"] = true;
  if (f.distributed_optimizer) o["parallel.distributed_optimizer"] = true;
  return o;
}

// The tail every forecast shares: library tiles, kernel latencies, aggregation, the report.
int forecast_report(session& s, const common_flags& c, const forecast_flags& f, const graph& g,
                    std::vector<kernel_instance> kernels, const gpu_spec& gpu, const report_meta& m) {
  const std::string& predictor_name = f.predictor;
  for (const auto& w : m.warnings) std::fprintf(stderr, "neusight: warning: %s\n", w.c_str());
  const auto pred = predictor_make(predictor_name, f.weights.empty() ? data_root_find() / "weights" : fs::path(f.weights));
  pred->memo_enable(!memo_disabled());
  const forecast fc = s.forecast_run(g, std::move(kernels), gpu, *pred, f.overhead);
  report_meta meta = m;
  for (const auto& w : pred->warnings()) {
    std::fprintf(stderr, "neusight: warning: %s\n", w.c_str());
    meta.warnings.push_back(w);
  }
  if (auto tl = s.timeline(fc)) meta.timeline = std::move(*tl);
  for (const auto& w : report_memory_warnings(fc, meta)) {  // the table says so too; JSON and CSV readers need it
    std::fprintf(stderr, "neusight: warning: %s\n", w.c_str());
    meta.warnings.push_back(w);
  }
  if (c.format == "json") emit(report_json(fc, meta), c.output);
  else if (c.format == "csv") emit(report_csv(fc, meta), c.output);
  else emit(report_table(fc, meta), c.output);
  return 0;
}

int run_forecast(const common_flags& c, const forecast_flags& f, const std::string& script) {
  session s(session_options_make(c));
  const workload w = s.workload_load(script, overrides_make(f));
  const gpu_spec gpu = w.gpu_resolved ? *w.gpu_resolved : gpu_catalog(data_root_find() / "gpus").resolve(w.gpu);
  expansion e = s.expand(w.g, gpu, w.training());
  report_meta m{w.source, w.model, f.predictor, w.mode, w.optimizer, w.dtype, w.batch, w.seq, &gpu,
                {}, {}, {}, w.precision, w.optimizer_impl, w.state, w.context, w.kv_cache_bytes};
  return forecast_report(s, c, f, w.g, std::move(e.kernels), gpu, m);
}

// predict --graph: the reference's own decomposition, replicated over the layers, no Lua rules involved.
int run_graph(const common_flags& c, const forecast_flags& f, const graph_flags& gf) {
  opgraph og = opgraph_load(gf.file);
  opgraph_check_supported(og);
  if (f.gpu.empty()) throw error("predict --graph needs --gpu (a file path, file stem or alias)");
  const gpu_spec gpu = gpu_catalog(data_root_find() / "gpus").resolve(f.gpu);
  const std::string mode = !f.mode.empty() ? f.mode : og.tag ? og.tag->mode : "";
  if (mode.empty())
    throw error(og.source + ": the file name carries no -inf-/-train- tag: pass --mode train or --mode inference");
  if (mode == "prefill" || mode == "decode")
    throw error("predict --graph: --mode " + mode + " needs a model built with a KV cache (--model), not a reference graph");
  session s(session_options_make(c));
  report_meta m{og.source, og.g.model, f.predictor, mode, "none", "fp32", og.tag ? og.tag->batch : 0,
                og.tag ? og.tag->seq : 0, &gpu, og.warnings, {}, {}, "pure", "", s.state_of("fp32", mode, "none"), 0, std::nullopt};
  const int64_t layers = opgraph_layers(og, gf.layers, m.warnings);
  opgraph_replicate(og, layers);
  m.layers = layers;
  const bool training = mode == "train";
  bool has_backward = false;
  for (const auto& ki : og.kernels) has_backward = has_backward || ki.ph != phase::forward;
  if (training && !has_backward)
    m.warnings.push_back(og.source + ": the graph holds no backward kernels (parsed for inference): the training "
                                     "forecast is the forward pass only");
  std::vector<kernel_instance> kernels = opgraph_kernels(og, training);
  if (const auto par = opgraph_parallel_of(og)) {
    if (!training) throw error(og.source + ": a distributed graph (" + og.tag->option + ") is a training graph: drop --mode inference");
    s.graph_parallel(og.g, kernels, gpu, *par, og.tag->batch, mode, m.warnings);
  }
  return forecast_report(s, c, f, og.g, std::move(kernels), gpu, m);
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
  std::string out = fmt::format("{:<10} {}\n", "data", root.string());
  for (const char* d : {"gpus", "ops", "scripts", "weights", "examples"})
    out += fmt::format("{:<10} {}\n", d, (root / d).string());
  std::string ops_path;
  for (const auto& d : s.ops_search_path()) ops_path += (ops_path.empty() ? "" : ":") + d.string();
  out += fmt::format("{:<10} {}   (first hit wins: --ops, NEUSIGHT_OPS_PATH, the bundled ops/)\n", "op search", ops_path);
  emit(out, "");
  return 0;
}

int run_gpus(const common_flags& c) {
  const auto gpus = gpu_catalog(data_root_find() / "gpus").load_all();
  emit(c.format == "json" ? gpus_json(gpus) : gpus_table(gpus), c.output);
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

  graph_flags gflags;
  auto* predict = app.add_subcommand("predict", "Forecast a built-in model or a reference operator graph without writing a script");
  auto* model_opt = predict->add_option("--model", fflags.model, "Model preset (e.g. gpt3_175b, gpt2_large, bert_large, opt_13) or a HuggingFace config.json (model_type gpt2, bert, opt, switch_transformers; mapping in scripts/neusight/models/hf.lua)");
  add_forecast(predict, fflags, false);
  auto* graph_opt = predict->add_option("--graph", gflags.file,
                                        "Reference operator graph opgraph/<model>-<inf|train>-<seq>-<batch>.csv "
                                        "instead of --model (needs --gpu; mode from the file name)")
                        ->check(CLI::ExistingFile)
                        ->excludes(model_opt);
  for (const char* o : {"--batch", "--seq", "--context", "--optimizer", "--optimizer-impl", "--dtype", "--precision", "--attention", "--fusion", "--flash-attention", "--dp", "--tp",
                        "--pp", "--ep", "--microbatches", "--schedule", "--kernels", "--cluster", "--recompute", "--sequence-parallel", "--distributed-optimizer"})
    graph_opt->excludes(predict->get_option(o));
  predict->add_option("--layers", gflags.layers,
                      "Layer count of --graph (default: the model config in ../DLmodel_configs beside the file)")
      ->check(CLI::PositiveNumber)
      ->needs(graph_opt);
  add_common(predict, common, true);

  auto* paths = app.add_subcommand("paths", "Print where the bundled GPUs, op rules, scripts, weights and examples are read from");
  add_common(paths, common, false);

  auto* gpus = app.add_subcommand("gpus", "List the known GPUs and their key specs");
  add_common(gpus, common, true);
  gpus->get_option("--ops")->group("");  // irrelevant here; hidden

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
  eval_k->add_option("--predictor", eflags.predictor, "Kernel latency predictor")->check(CLI::IsMember(predictor_names()));
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
  eval_m->add_option("--predictor", mflags.predictor, "Kernel latency predictor")->check(CLI::IsMember(predictor_names()));
  eval_m->add_option("--weights", mflags.weights, "Weights root (default: the bundled weights/)");
  eval_m->add_option("--overhead", mflags.overhead,
                     "Host-side framework overhead per kernel launch (scripts/neusight/overhead.lua): on or off")
      ->check(CLI::IsMember({"on", "off"}));
  add_common(eval_m, common, true);
  eval_m->get_option("--format")->check(CLI::IsMember({"table", "json"}));

  scale_flags sflags;
  auto* scale = app.add_subcommand("scale", "Scale a trace measured on one GPU to another GPU (hybrid with the tile predictor)");
  scale->add_option("--trace", sflags.trace, "Trace: per-op label CSV label/<GPU>/<tag>.csv, Chrome-trace JSON, or wavescale manifest")->required()->check(CLI::ExistingFile);
  scale->add_option("--from", sflags.from, "GPU the trace was measured on")->required();
  scale->add_option("--to", sflags.to, "GPU to forecast")->required();
  scale->add_option("--layers", sflags.layers, "Replicate the traced layer N times (default: the model config)")
      ->check(CLI::PositiveNumber);
  scale->add_option("--graph", sflags.graph, "Operator graph of the trace (default: opgraph/<tag>.csv beside label/)");
  scale->add_option("--weights", sflags.weights, "Weights root (default: the bundled weights/)");
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
  search->add_option("--predictor", qflags.predictor, "Kernel latency predictor")->check(CLI::IsMember(predictor_names()));
  search->add_option("--schedule", qflags.schedule, "Pipeline schedule: gpipe or 1f1b")->capture_default_str()
      ->check(CLI::IsMember({"gpipe", "1f1b"}));
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

  try {
    app.parse(argc, argv);
    if (*predict && fflags.model.empty() && gflags.file.empty()) throw CLI::RequiredError("--model or --graph");
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help/version or the usage error
    return code == 0 ? 0 : 2;       // CLI11 uses 1xx codes per error kind; we promise 2 for every usage error
  }
  // -o out.json / out.csv: the format follows the extension unless --format was given.
  for (CLI::App* cmd : {run, predict, gpus, scale, search, eval_k, eval_m}) {
    const CLI::Option* fo = *cmd ? cmd->get_option_no_throw("--format") : nullptr;
    if (!fo || fo->count() > 0 || common.output.empty()) continue;
    const std::string ext = text_lower(fs::path(common.output).extension().string());
    const std::string want = ext == ".json" ? "json" : ext == ".csv" ? "csv" : "";
    if (want.empty()) continue;
    if (want == "csv" && (cmd == eval_m || cmd == scale)) {
      std::fprintf(stderr, "neusight: -o %s: %s writes a table or JSON, not CSV (pass --format table to write a table)\n",
                   common.output.c_str(), cmd->get_name().c_str());
      return 2;
    }
    common.format = want;
  }

  script_limits_set(common.script_budget, common.script_memory, common.script_timeout);
  try {
    if (*run) return run_forecast(common, fflags, script_resolve(script));
    if (*paths) return run_paths(common);
    if (*predict) return gflags.file.empty() ? run_forecast(common, fflags, "") : run_graph(common, fflags, gflags);
    if (*gpus) return run_gpus(common);
    if (*scale) {
      sflags.format = common.format == "csv" ? "table" : common.format;
      sflags.output = common.output;
      return scale_main(sflags);
    }
    if (*ops) return run_ops(common);
    if (*search) {
      qflags.ops_dirs = common.ops_dirs;
      qflags.format = common.format;
      qflags.output = common.output;
      return search_main(qflags);
    }
    if (*train) {
      tflags.opts.hidden.clear();
      for (const auto& part : CLI::detail::split(hidden, ',')) tflags.opts.hidden.push_back(std::stoi(part));
      for (int i = 0; i < argc; ++i) tflags.command += (i ? " " : "") + std::string(argv[i]);
      return train_main(tflags);
    }
    if (*eval_k) {
      eflags.format = common.format;
      eflags.output = common.output;
      return eval_kernels_main(eflags);
    }
    if (*eval_m) {
      mflags.format = common.format;
      mflags.output = common.output;
      return eval_models_main(mflags);
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
