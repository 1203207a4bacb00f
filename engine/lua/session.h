// engine/lua/session.h — one Lua runtime with its search paths: loads workloads and expands graphs into kernels.
#pragma once
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/calibration.h"
#include "core/tile_model.h"
#include "core/figures.h"
#include "core/forecast.h"
#include "core/gpu_spec.h"
#include "core/graph.h"
#include "ingest/opgraph.h"
#include "core/roofline.h"
#include "lua/script_limits.h"

struct lua_State;

namespace ns {

// A Lua table the engine holds in its session's Lua state by one registry reference. A loaded workload's
// (session::workload_load) or reference graph's (session::report_graph): { workload (workload.lua normalize's table;
// workload::field reads it), fields (scripts/neusight/report.lua workload or graph), plan and nodes (a parallel one's:
// neusight.parallel.plan and its node tables; session::graph_parallel, session::timeline) }; a comparison's
// (session::compare_begin): { comparison }. What reports, times or re-plans that workload's forecast, or adds to that
// comparison, takes it: the session keeps no "last workload" or "comparison in progress".
// Copies share the table; its registry reference is released with the last copy (the registry does not grow with
// the workloads loaded). Must not outlive its session.
class run_state {
 public:
  run_state() = default;
  run_state(lua_State* L, int ref);  // takes over the registry reference `ref`
  explicit operator bool() const { return bool(h_); }
  int ref() const;         // the registry reference (LUA_NOREF when empty)
  lua_State* lua() const;  // the state it lives in (nullptr when empty)

 private:
  struct holder;
  std::shared_ptr<holder> h_;
};

struct session_options {
  std::filesystem::path data_root;                 // bundled gpus/ ops/ scripts/ weights/
  std::vector<std::filesystem::path> ops_dirs;     // --ops DIR (repeatable), searched first
  std::string ops_path_env;                        // NEUSIGHT_OPS_PATH: ';'-separated, ";;" splices the defaults
  std::vector<std::filesystem::path> script_dirs;  // --scripts DIR (repeatable): Lua module roots searched first
  std::string scripts_path_env;                    // NEUSIGHT_SCRIPTS_PATH: as ops_path_env, before data_root/scripts
  std::vector<std::filesystem::path> gpu_dirs;     // --gpus-dir DIR (repeatable): GPU files found before the bundled gpus/
  std::string gpus_path_env;                       // NEUSIGHT_GPUS_PATH: ';'-separated folders, after --gpus-dir's
  // Reuse a node's kernels and a kernel shape's tile across expand()/tiles_select() calls of this session (op and
  // tiling rules are functions of their arguments). Off: NEUSIGHT_NO_CACHE=1, to check that results are the same.
  bool memo = true;
  // -v: each user script or op file that shadows another (a bundled one) is named on stderr when the session starts,
  // and each op file of a workload's ops/ folder when the workload loads (session::ops_list, the table `ops -v` prints).
  bool verbose = false;
  // `ops -v` lists the op shadows in its own table: its session names only the script shadows on stderr.
  bool verbose_op_shadows = true;
  // Per call into a script: instructions, heap, wall clock (--script-budget, --script-memory, --script-timeout).
  script_limits limits = script_limits_default();
  // Apply a GPU's calibration (<gpu stem>.calibration.toml beside its file, engine/core/calibration.h) to its
  // forecasts. Off: --no-calibration or NEUSIGHT_NO_CALIBRATION=1.
  bool calibration = true;
};

// What the engine reads of a parallel run as scripts/neusight/parallel/report.lua reports it (session::timeline); the
// single forecast's report renders the rest from the Lua table (scripts/neusight/report.lua).
struct parallel_report {
  double iteration_s = 0;       // the slowest device's finish: the run's latency
  nlohmann::ordered_json json;  // the report's `parallel` object (dp, tp, pp, … iteration_ms, compute_ms): search ranks by it
  // what scripts/neusight/figures.lua gets of the layout (the report's `figures`: dp, tp, pp, microbatches,
  // distributed_optimizer, device_floor_s), as figure inputs
  figure_inputs figures;
  // why Megatron-LM would refuse the layout's layers over its model chunks (scripts/neusight/parallel/config.lua
  // layers_refusal, the rule search skips layouts by); "" when it runs them
  std::string layers_refusal;
  // where the distributed optimizer is off and could shard (training, dp > 1): whether the layout would fit with it on
  // (scripts/neusight/parallel/memory.lua report); false otherwise. search's no-fit help suggests the flag by it.
  bool distributed_optimizer_fits = false;
  // where the layout does not fit: the least higher ZeRO stage under which it would (scripts/neusight/parallel/memory.lua
  // report zero_fits), 0 when none would or it fits. search's no-fit help suggests --zero N by it.
  int64_t zero_fits = 0;
};

// A workload after validation and model construction (scripts/neusight/workload.lua).
// Its fields stay in Lua (the workload table, report fields and plan in `state`): field() reads one.
struct workload {
  std::string source;  // chunk name of the script, or "command line"
  std::string launch = "eager";           // "eager" | "graph": how kernels are launched (scripts/neusight/launch.lua)
  std::vector<std::string> warnings;      // what the forecast does not know (workload.lua warnings(), then build()'s)
  size_t build_warnings_at = 0;           // where build()'s start in `warnings` (a model function's checks, …)
  // build()'s warning_ids: each of build()'s warnings' stable id, by its place from build_warnings_at ("" when none)
  std::vector<std::string> build_warning_ids;
  graph g;  // the model built (g.model its name: the builder's, else "custom")
  // The workload's GPU, resolved (through the session's memo) before the model is built: builders and collectives
  // read it.
  gpu_spec gpu_resolved;
  bool parallel = false;
  // the workload table (scripts/neusight/workload.lua normalize's: "workload"), its report fields and parallel plan
  run_state state;
  // Field `key` of the workload table (mode, dtype, precision, batch, …) as T: std::string, int64_t, double or bool;
  // throws when it is absent or of another type.
  template <class T>
  T field(const std::string& key) const;
  bool training() const;  // field("mode") is "train"
};
// (instantiated in session.cpp for those four types)
extern template std::string workload::field<std::string>(const std::string&) const;
extern template int64_t workload::field<int64_t>(const std::string&) const;
extern template double workload::field<double>(const std::string&) const;
extern template bool workload::field<bool>(const std::string&) const;
inline bool workload::training() const { return field<std::string>("mode") == "train"; }

// CLI flags that override a workload's fields (or define it entirely, for `predict`).
using workload_value = std::variant<std::string, int64_t, bool, double>;
using workload_overrides = std::map<std::string, workload_value>;

struct op_entry {
  std::string name;
  std::string file;                  // as shown in messages, e.g. "ops/matmul.lua"
  std::vector<std::string> shadows;  // later files with the same name that this one hides
  std::string doc;                   // filled by op_load
  // filled by op_load: the node attrs the rule declares (its field `attrs`), name → "type: what it does", by name
  std::vector<std::pair<std::string, std::string>> attrs;
};

struct expansion {
  std::vector<kernel_instance> kernels;
};

class session {
 public:
  explicit session(session_options opts);
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  // Runs a workload script (script = "" builds one from the overrides alone) and builds its graph.
  workload workload_load(const std::string& script, const workload_overrides& overrides);
  // The text of the file `path`, used instead of reading it: a config.json (a --model override or a script's
  // `model`) or an error table (figures_call's `uncertainty`). The fuzz targets (tests/fuzz) feed these files from
  // memory through the loaders the CLI uses.
  void file_text_set(const std::string& path, std::string text);

  // The report fields of a graph without a workload (predict --graph): one call of scripts/neusight/report.lua
  // graph(fields, params, gpu_mem_gb, reported_gib), where `fields` holds source, model, mode, batch, seq, layers,
  // launch; the Lua side makes its model state (precision.lua, for `params` on a GPU of `gpu_mem_gb` that reports
  // `gpu_reported_gib` GiB, 0: its file gives none), checked here as workload_load's is. What forecast_render renders
  // of the graph's forecast, as it renders a workload's from its workload.state.
  run_state report_graph(const workload_overrides& fields, double params, double gpu_mem_gb, double gpu_reported_gib);

  // Every node's op rule hooks → kernels (forward; backward and accumulate when training). `st`: the run state of the
  // workload `g` was built from (workload_load's "node_located"), whose script's line of a node the refusal of a rule
  // without backward names; nullptr: none.
  expansion expand(const graph& g, const gpu_spec& gpu, bool training, const run_state* st = nullptr);
  // One node's training kernels by its op rule, for a reader of engine/ingest (opgraph_options::rule). The rule gets no
  // GPU (nil): the rows it prices are GPU-independent, like the reference graphs they come from.
  node_rule rule_kernels();

  // Fills each non-memory kernel's tile from scripts/tiling/{gemm,vec}.lua select(k, gpu), once per distinct shape.
  void tiles_select(std::vector<kernel_instance>& kernels, const gpu_spec& gpu);
  void tiles_select(std::vector<kernel*>& kernels, const gpu_spec& gpu);
  // The tile of a measured GEMM kernel name (tiling.gemm.parse); false when the name carries none.
  bool tile_parse(const std::string& kernel_name, int64_t& tile_m, int64_t& tile_k);
  // FLOPs, bytes and name of kernels built outside Lua (measurement rows, traces, reference graphs: kind, op, dims
  // and dtype set) from neusight.kernels — the one cost formula forecasts, training, evaluation and scaling share:
  // gemm → linear(m, n, k), bmm → bmm(b, m, n, k), elementwise → vec(op, rows, hidden), softmax, layernorm,
  // attention. Memory and collective kernels are left as they are. A kernel the formula refuses (its own message, as
  // "bad argument to 'linear' (operand W has more than 2^48 elements)") throws that message after `where(i)` and ": "
  // when `where` is given (the reader's file:line); any other error (a script's bug) as ns_call throws it.
  void kernel_costs(std::vector<kernel*>& kernels, const kernel_where& where = {});
  // The same as a callback for the readers of engine/ingest (bench_load, opgraph_load), which know no Lua.
  kernel_costing costing();
  // What the neusight predictor makes the pieces of its sub-additivity envelope with (predictor::gemm_pieces_set):
  // kernel_costs, then tiles_select on the GPU. Every neusight predictor that prices as forecasts do takes it: the
  // session's own (predictor_make) and `neusight train`'s validation rows "as forecast".
  std::function<void(std::vector<kernel*>&, const gpu_spec&)> gemm_pieces();
  // scripts/neusight/kernels.lua train_convention(), read once: the convention the vector families' MLPs were trained
  // in, which every tile model of the session shows vector kernels in (predictor_make hands it to the neusight
  // predictor; `neusight train` computes its features with it).
  const ns::train_convention& training_convention();
  // Measured elements per block of a vector kernel launch (tiling.vec.from_grid).
  int64_t tile_from_grid(int64_t rows, int64_t hidden, int64_t grid_x, int64_t grid_y, int64_t grid_z);

  // Host-side framework overhead (scripts/neusight/overhead.lua) applied to predicted per-launch seconds after
  // prediction; mode is "on", "off" or "default" (the script decides). Returns true when the script applied it (an
  // array back). `notes` (when given) gets what the script says of a mode that changes nothing here (apply's second
  // result: --overhead on where this GPU's launch_s is 0).
  bool overhead_apply(std::vector<double>& seconds, const gpu_spec& gpu, const std::string& mode,
                      std::vector<std::string>* notes = nullptr);

  // Launch mode (scripts/neusight/launch.lua apply): "eager" leaves the predicted seconds alone, "graph" (CUDA-graph
  // replay) re-prices what the rule says, from each kernel's kind, bytes and roofline terms. True when it changed
  // anything.
  bool launch_apply(const std::vector<kernel_instance>& kernels, std::vector<double>& seconds, const gpu_spec& gpu,
                    const std::string& mode);

  // `neusight serve`: scripts/neusight/serve.lua run(options, phase, progress) drives the whole thing. `phase(fields)`
  // forecasts one serving phase — a workload made of the fields (model, gpu, mode, batch, seq, context, dtype,
  // launch, parallel.tp …), expanded and predicted by `pred` as `predict` does — and returns its latency, memory
  // and per-kernel roofline terms; `progress(text)` writes a throttled progress line on stderr. The report table
  // comes back as JSON text, plus serve.lua's own table rendering of it.
  struct serve_report {
    std::string json;   // the report, every number (objects' keys sorted)
    std::string table;  // serve.lua format_table(report)
    std::string csv;    // sweep.lua format_csv(report); empty for a single setting
  };
  serve_report serve(const workload_overrides& options, const predictor& pred);
  // `neusight serve --sweep`: scripts/neusight/sweep.lua run(options, phase, progress, gpu) — `options` as serve's,
  // the list-valued ones (gpu, tp, batch, rate) as arrays from `lists`; `gpu(query)` is the GPU a name resolves to
  // (its file's fields, price_per_hour_usd among them; an unknown name is an error). JSON, table and CSV come back.
  // Empty `lists` is serve(): one setting through scripts/neusight/serve.lua.
  using option_lists = std::map<std::string, std::vector<workload_value>>;
  serve_report serve_sweep(const workload_overrides& options, const option_lists& lists, const predictor& pred);
  // `neusight serve --batch … --calibrate FILE`: scripts/neusight/serve.lua calibration_inputs(options, phase) — the
  // static batch's forecast TTFT and TPOT (ttft_s, tpot_s), and each kernel family's seconds, effective kernel count
  // and roofline flag in its prefill (prefill_family_s.<family> …) and in its mean decode step (decode_family_s.<family>
  // …), the inputs of scripts/neusight/calibration.lua fit_serve(); sorted by key.
  figure_inputs serve_calibration_inputs(const workload_overrides& options, const predictor& pred);

  // What `neusight search` needs of the model a workload (the overrides, as for workload_load) names:
  // scripts/neusight/search.lua model_facts(w) of the normalized workload, its table as JSON (experts: routed experts
  // per MoE layer, 1 when dense; layers), read by the caller as it reads any Lua result (no C++ mirror of it).
  nlohmann::ordered_json model_facts_of(const workload_overrides& overrides);
  // scripts/neusight/search.lua pipeline_skip(layers, pp, schedule, virtual_stages): why search skips this pipeline
  // variant before forecasting it ("" when it does not).
  std::string search_pipeline_skip(int64_t layers, int64_t pp, const std::string& schedule, int64_t virtual_stages);

  // The predictor `name` names: a built-in (predictor_names(); "neusight" reads `weights_root`), else a Lua predictor
  // run in this session's state behind the same interface — the module neusight.predictors.<name> on the script
  // search path (scripts/neusight/predictors/<name>.lua, --scripts, NEUSIGHT_SCRIPTS_PATH), or a file when the name
  // ends in ".lua" or holds a '/'. The file returns { predict = function(kernels, gpu) → { seconds, … },
  // description = "…" }; predict gets the distinct kernels without fixed seconds (kernel_push tables) and the GPU
  // table. Throws for an unknown name (naming the built-ins and the Lua predictors found), a file that breaks the
  // schema, and later a predict() that errs or returns the wrong count, a non-number, NaN, inf or a negative time,
  // each with file:line. ns.predict(kernels, gpu, name) runs the same built-ins with the same weights. The predictor
  // must not outlive the session.
  // With a weights root other than the bundled one, the predictor's warnings() end with weights_unused_note's while it
  // holds.
  std::unique_ptr<predictor> predictor_make(const std::string& name, const std::filesystem::path& weights_root);
  // "--weights DIR has no effect: …" when the last predictor_make's weights root is not the bundled one and no
  // predictor has read it yet (only the neusight predictor reads weights: roofline never, a Lua predictor only
  // through ns.predict(…, "neusight")); empty otherwise. Ask after predicting.
  std::string weights_unused_note() const;

  // The GPU a name resolves to (gpu_catalog::resolve), parsed once per name for the session's lifetime; what
  // workload_load, serve's gpu() and comparisons use.
  const gpu_spec& gpu(const std::string& query);
  // The check every GPU file the session loads passes beyond its keys' own: its architecture as the tile rules know it
  // (scripts/tiling/gemm.lua architecture_problem). For the catalogues a command reads itself:
  // gpu_catalog(dir, s.gpu_checker()); the session must outlive it.
  gpu_check gpu_checker();
  // The GPU files the session reads: --gpus-dir's folders, NEUSIGHT_GPUS_PATH's, then the bundled gpus/ (a user file
  // hides a bundled one of its stem or GPU name; -v names each when the session starts), each file checked by
  // gpu_checker(). What every command that takes --gpu resolves names with; the session must outlive it.
  gpu_catalog gpus();
  // The note resolving `query` gave (gpu(query) first): a short name several GPUs answer to, taken as the one whose
  // file lists it (gpu_catalog::resolve); "" when the name was not ambiguous.
  std::string gpu_note(const std::string& query) const;

  // A report computed entirely in Lua: `module`.`fn`() returns a table, rendered as JSON (keys sorted) and by the
  // module's format_table(report) and format_csv(report).
  struct lua_report {
    std::string json, table, csv;
  };
  lua_report report(const std::string& module, const std::string& fn);
  // What `neusight search` reads of the forecast `f` of the workload (or graph) whose state is `st`, after its timeline(),
  // from scripts/neusight/report.lua: figure_inputs (what neusight.figures compute() gets besides the kernel families'
  // times, the dtype's peak and the calibration) and memory_warnings (the run does not fit), for a layout without a
  // parallel plan (whose lean pipeline run makes neither). A forecast of predict and run gets both in
  // scripts/neusight/pipeline.lua finish(run) instead.
  struct forecast_facts {
    figure_inputs inputs;
    std::vector<std::string> memory_warnings;
  };
  forecast_facts forecast_facts_of(const run_state& st, const forecast& f, const gpu_spec& gpu);
  // A comparison (predict with list-valued flags) as scripts/neusight/compare.lua builds and renders it: a Lua table of
  // rows (its "comparison", in the run_state compare_begin returns, which the other compare_ calls take). compare_begin
  // starts one: `inputs` are the list-valued flags (a row's first cells, in order: key, table column, whether its
  // values are integers), `source` what the table says the rows come from.
  struct compare_input {
    std::string key, column;
    bool integer = false;
  };
  run_state compare_begin(const std::vector<compare_input>& inputs, const std::string& source);
  // compare.lua add(): the row of the forecast of the workload whose state is `st` — its inputs as run
  // (scripts/neusight/report.lua row), latency_ms, the figures, the warnings. Throws when the row cannot be made (a
  // figure named like a column).
  void compare_add(const run_state& cmp, const run_state& st, const gpu_spec& gpu, double latency_ms,
                   const figures& figs, const std::vector<std::string>& warnings);
  // compare.lua add_error(): a combination that could not be forecast: its inputs as given (one text per input, ""
  // for none), the error and the file of the GPU --gpu gave ("" when none did).
  void compare_add_error(const run_state& cmp, const std::vector<std::string>& given, const std::string& message,
                         const std::string& gpu_file);
  // The comparison as compare.lua renders it: "json" (JSON text), "csv", "table" or "html" (neusight.html's page).
  std::string compare_render(const run_state& cmp, const std::string& format);
  // scripts/neusight/compare.lua gpu_labels(given, names): the rows' label of each GPU of a --gpu list (`given`, as
  // given; `names`, each one's GPU name): its name, or "NAME (as given)" for files that share a name. One per item.
  std::vector<std::string> gpu_labels(const std::vector<std::string>& given, const std::vector<std::string>& names);
  // scripts/neusight/compare.lua repeated(key, given): why the items of the list-valued input `key` (as given) name one
  // thing twice once each is resolved to its one name (--dtype bf16,BF16), "" when they do not.
  std::string compare_repeated(const std::string& key, const std::vector<std::string>& given);
  // scripts/neusight/report.lua summary(fields) of `st`'s fields: the workload in one line (a calibration file's note).
  std::string forecast_summary(const run_state& st);
  // scripts/neusight/report.lua model_params of the same fields and `params` (the forecast's count): the whole
  // model's parameters a calibration records, nullopt when not known (a reference graph, a tp/ep layout, an older
  // --scripts report.lua without the function).
  std::optional<double> forecast_model_params(const run_state& st, double params);
  // The single forecast `f` of the workload (or graph) whose state is `st` as scripts/neusight/report.lua renders it:
  // result(fields, forecast, extras) with extras the GPU, the predictor's name, the warnings and the figures, then
  // its format_json (as JSON text), format_table or format_csv for each of `formats` ("json", "table", "csv"), all
  // from that one result.
  std::vector<std::string> forecast_render(const run_state& st, const forecast& f, const gpu_spec& gpu, const std::string& predictor,
                                           const std::vector<std::string>& warnings, const figures& figs,
                                           const std::vector<std::string>& formats);
  // `module`.`fn`(report, fields): `report` the JSON text `json` as a table, `fields` the report fields of `st` (a
  // workload's or graph's state: neusight.report workload's table; nil when `st` is null or empty). A string result as
  // it is (an HTML page: neusight.html; search's table and CSV), a table as its JSON text (search's JSON: search.lua
  // format_json).
  std::string render(const std::string& module, const std::string& fn, const std::string& json,
                     const run_state* st = nullptr);
  // The same with the document `doc` itself as the table (json_push_ordered: its objects keep their key order, a null
  // is a JSON-null table): what a command hands its formatter once (search: search.lua format_table/json/csv).
  std::string render(const std::string& module, const std::string& fn, const nlohmann::ordered_json& doc,
                     const run_state* st = nullptr);
  // What `module`.`fn` makes of the report fields of `st` (neusight.report workload's
  // table), as JSON: a command's document says a workload's fields from their Lua table (search's optimizer:
  // scripts/neusight/search.lua json_fields), never from a C++ copy of them.
  nlohmann::ordered_json report_fields_json(const run_state& st, const std::string& module, const std::string& fn);

  // One generic call into a script module: require(module)[fn](args…), each argument a JSON value pushed as a plain
  // value (json_value_push: objects → tables, arrays → sequences, integers stay integers) or a GPU (the read-only view
  // rules get); its first `nres` results come back as JSON (json_from_lua: nil → null, NaN and inf → null). A module
  // without `fn` is function_get's error (an older --scripts copy); an error the call raises goes on with `context`.
  // What a command that drives a Lua rule item by item calls (scale_cmd.cpp: scripts/neusight/scale.lua's scale,
  // route_of, kernels, destination, sub_wave_streams), instead of a C++ struct per Lua function's arguments, and the
  // one accessor of a Lua table a command reads (search's choices: scripts/neusight/search.lua), never a C++ struct
  // mirroring it.
  using lua_arg = std::variant<nlohmann::json, const gpu_spec*>;
  std::vector<nlohmann::ordered_json> call(const std::string& module, const std::string& fn,
                                           const std::vector<lua_arg>& args, int nres, const std::string& context);
  // The chunk name of the file require(module) loads ("scripts/neusight/scale.lua", or a --scripts DIR's), for the
  // messages about what a call returned.
  const std::string& module_display(const std::string& module);
  // A script's list of kernels (a call's result) read as an op rule's are (kernels_read): FLOPs and bytes filled;
  // `where` names the rule in errors.
  std::vector<kernel> kernels_of(const nlohmann::ordered_json& list, const std::string& where);
  // kernel_share_min of scripts/neusight/scale.lua: under this share of the measured step its kernels ran, the step is
  // launch- or host-bound and `neusight scale` warns (a number in [0, 1]).
  double scale_kernel_share_min();

  // The forecast every command shares: library tiles, kernel latencies from `pred`, the launch mode
  // (scripts/neusight/launch.lua, "eager" | "graph"), host overhead (scripts/neusight/overhead.lua, mode
  // "on" | "off" | "default"; never with CUDA graphs, which have no per-launch host cost), aggregation
  // (forecast_make of kernel_seconds). `decode`: the kernels are a decode step's (the GPU's calibration applies its
  // decode factors, core/calibration.h). `notes` (when given): the host overhead's (overhead_apply).
  std::vector<double> kernel_seconds(std::vector<kernel_instance>& kernels, const gpu_spec& gpu, const predictor& pred,
                                     const std::string& overhead, const std::string& launch = "eager",
                                     bool decode = false, std::vector<std::string>* notes = nullptr);
  forecast forecast_run(const graph& g, std::vector<kernel_instance> kernels, const gpu_spec& gpu, const predictor& pred,
                        const std::string& overhead, const std::string& launch = "eager", bool decode = false);

  // A forecast driven by scripts/neusight/pipeline.lua (a --scripts DIR may hold another): forecast_workload runs its
  // forecast(run) — the workload loaded (workload_load), expanded into kernels (expand), the predictor made — and then
  // its finish(run); forecast_finish runs finish(run) alone on kernels made elsewhere (a reference graph: predict
  // --graph, eval models; a layout search built, lean). finish(run)
  // takes the steps once the kernels are known: forecast_run, the parallel timeline, the memory warnings, the figure
  // inputs (scripts/neusight/report.lua's, the dtype's dense peak, the kernel families' times, a comparison row's
  // names, the calibration) and the figures, collecting the warnings found on the way. The engine gives the script
  // its primitives (run.workload, run.expand, run.predictor, run.forecast — or its halves run.predict and
  // run.aggregate, with run.kernels, run.latencies and run.set_latencies between them —, run.timeline,
  // run.peak_tflops, run.family_inputs, run.calibration_inputs, run.figures) and reads back { figures, warnings }; an
  // error a primitive raises comes out as it was thrown.
  // What a run's report says it ran as, besides its GPU: a pipeline_graph has them and its finished the same (the GPU
  // is not among them: a pipeline_graph points at its caller's, a finished keeps a copy that outlives the workload).
  struct run_facts {
    std::string source;            // the workload's (figures_compute's `workload`) or the graph file's
    std::string launch = "eager";  // "eager" | "graph" (scripts/neusight/launch.lua)
    bool decode = false;           // a decode step (--mode decode): the calibration's decode factors apply
    // the workload's (run.workload(): workload_load's) or the graph's (report_graph's): what the report renders and
    // the timeline times (empty: a run of no workload, whose report has no fields and no timeline)
    run_state state;
  };
  // What a pipeline run works on: the graph and its kernels, the GPU, the predictor, and what the report says of
  // them. forecast_finish is given it whole; forecast_workload's steps fill it (run.workload(), run.expand(),
  // run.predictor()).
  struct pipeline_graph : run_facts {
    const graph* g = nullptr;
    std::vector<kernel_instance> kernels;
    const gpu_spec* gpu = nullptr;
    const predictor* pred = nullptr;
    std::vector<std::string> warnings;  // found before: the graph's
  };
  // How either run prices and reports.
  struct pipeline_options {
    std::string overhead = "default";  // scripts/neusight/overhead.lua's mode
    std::string row_keys;              // a comparison row: the names it holds besides its figures; "" otherwise
    bool say = false;                  // each warning goes to stderr as it is found
    bool lean = false;  // the caller reads the forecast and its timeline only: figures may be skipped, the timeline lean
  };
  // forecast_workload's workload: the script ("" builds one from the overrides alone), as workload_load takes it, and
  // the predictor, made on first use (after the workload has loaded and expanded)
  struct workload_request {
    std::string script;
    workload_overrides overrides;
    std::function<const predictor&()> predictor_make;
  };
  // A pipeline run's result, with the facts of the pipeline_graph it ran on.
  struct finished : run_facts {
    std::optional<forecast> fc;
    std::optional<parallel_report> parallel;  // timeline()'s, when the pipeline ran it on a parallel workload
    figures figs;
    std::vector<std::string> warnings;
    // scripts/neusight/overhead.lua's: why the --overhead asked for changed nothing (run.forecast() hands them to the
    // pipeline among its warnings; eval models, which shows none of those, says these)
    std::vector<std::string> overhead_notes;
    gpu_spec gpu;  // the workload's, resolved (forecast_finish: the graph's)
    // The run's latency: a parallel run's iteration on its slowest device, else the forecast's total.
    double latency_s() const { return parallel ? parallel->iteration_s : fc->total(); }
  };
  finished forecast_workload(workload_request req, pipeline_options opt);
  finished forecast_finish(pipeline_graph graph, pipeline_options opt);

  // A distributed reference graph (predict --graph, eval models): makes the plan timeline() uses, in `st` (the graph's
  // report_graph state), from the file's
  // layout (HF eager kernels), prices the graph's ALLREDUCE kernels with it and drops the ones the timeline models
  // itself (ALLREDUCE_ASYNC gradient rows, SENDRECV); a note on what was dropped goes to `notes`.
  void graph_parallel(const run_state& st, const graph& g, std::vector<kernel_instance>& kernels, const gpu_spec& gpu,
                      const opgraph_parallel_option& layout, int64_t batch, const std::string& mode,
                      std::vector<std::string>& notes);

  // The per-device timeline of the parallel plan in `st` (a workload's, or graph_parallel's) from a forecast of its graph
  // (scripts/neusight/parallel.lua timeline), as its report (scripts/neusight/parallel/report.lua) gives it; nullopt
  // when that workload was not parallel. The timeline itself stays a Lua table; the report and the timeline's memory
  // report join the report fields forecast_render renders. `lean` (search: a ranking of many layouts): the report's
  // JSON without its per-device list, no table text, and the report fields without the memory report (their
  // `parallel` is this report: its layout's warnings, report.lua layout_warnings, are said). `gpu`: the GPU the forecast
  // priced, whose roofline floors of each node's kernels (roofline_floor_seconds) the timeline sums per device.
  std::optional<parallel_report> timeline(const run_state& st, const forecast& fc, const gpu_spec& gpu, bool lean = false);

  // The calibration forecast_run applies on `gpu`: the one set by calibration_set for its name, else the file beside
  // the GPU's (read once per session); nullopt when there is none or calibration is off. `predictor` (a forecast's
  // predictor name; "" = any): nullptr too when the file was fitted to another predictor's forecasts
  // (calibration_predictor_warning) or to other weights than the session's root (calibration_weights_warning),
  // which calibration_skipped says.
  const calibration* calibration_of(const gpu_spec& gpu, const std::string& predictor = "");
  // The warning of a forecast with `predictor` on `gpu` whose calibration file calibration_of skips because it was
  // fitted to another predictor or other weights; for a file it applies that names no predictor (read as the default
  // one's), calibration_unnamed_warning; "" otherwise.
  std::string calibration_skipped(const gpu_spec& gpu, const std::string& predictor);
  // The weights identity a calibration of `gpu` fitted now records (key `weights`): weights_identity of the session's
  // weights root for the GPU's vendor when a predictor of this session read it (the neusight one, or a Lua predictor
  // through it), else "".
  std::string weights_fitted(const gpu_spec& gpu);
  // Forecasts on GPUs named `gpu_name` use `c` instead of any file (app.cpp run_calibrate's re-forecasts); nullopt: none.
  void calibration_set(const std::string& gpu_name, std::optional<calibration> c);

  // scripts/neusight/figures.lua compute(r): `inputs` become the table r (a dotted key "a.b" the field b of the table
  // r.a, "a.b.c" of r.a.b), with r.gpu the GPU's table and, from `uncertainty` (predictor::uncertainty): when it
  // names the predictor's error table, r.uncertainty that TOML file as a plain table and r.uncertainty_source its
  // name; when it lists the weights' training GPUs, r.trained_gpus = { family = { each GPU's table (a name no GPU file
  // answers as the string) } }.
  // Returns its fields, table lines and warnings.
  // `workload` (a workload's source, as workload_load named it): its own `figures` function, when the script has one,
  // goes along as r.workload_figures (r.workload_source its name).
  figures figures_compute(const figure_inputs& inputs, const gpu_spec& gpu, const uncertainty_source& uncertainty = {},
                          const std::string& workload = {});
  // A C++ function a rule may call back (figures_call's `callback`): r.<name>(t) with a table t of numbers by name
  // ({ gemm_tc16 = 0.36, … }) returns fn(t), a number; fn's scripts are held to the limits as one call of their own
  // (as a pipeline primitive's). Callable only while the rule runs.
  struct figures_callback {
    const char* name = nullptr;
    std::function<double(const std::map<std::string, double>&)> fn;
  };
  // The same with another rule: module.fn(r) returning { fields, lines, warnings } (eval models: neusight.uncertainty),
  // r.<callback.name> the callback when one is given (predict --calibrate of a parallel run: r.forecast_with).
  figures figures_call(const char* module, const char* fn, const figure_inputs& inputs, const gpu_spec& gpu,
                       const uncertainty_source& uncertainty = {}, const std::string& workload = {},
                       const figures_callback* callback = nullptr);
  // A batch in one call: module.fn(items, shared), `items` an array of tables made as figures_call makes its r (a
  // dotted key "a.b.c" the field c of the table a.b), `shared` one more with shared.gpu the GPU's table (search's
  // floor warning over its whole ranking: neusight.figures search_floor). `each` (optional): the result's `items`, a
  // list of { fields = … } read as figures' fields are, one per item it gives figures of (search's layouts shown).
  figures figures_call_batch(const char* module, const char* fn, const std::vector<figure_inputs>& items,
                             const figure_inputs& shared, const gpu_spec& gpu,
                             std::vector<std::vector<figure>>* each = nullptr);
  // The dense peak of a GEMM of `dtype` as people write it ("bf16", "BF16", "bfloat16", "torch.bfloat16": the engine's
  // name neusight.kernels dtype_name reads) on the GPU in TFLOP/s, as run.peak_tflops gives it to the figures
  // (engine/core/roofline.h dense_peak_tflops); nullopt when the GPU has no unit for it. An unknown name throws.
  std::optional<double> dense_peak_tflops(const gpu_spec& gpu, const std::string& dtype);
  // Whether module `module` (require'd) has function `fn`: for a function an older --scripts copy may leave out, so
  // that a command skips what it gives (search's floor warning) instead of failing; another value there throws.
  bool has_function(const char* module, const char* fn);
  // Whether `e`, an error one of this session's calls threw, is a setting's reason that it cannot run (an
  // ns::infeasible, or a script's require("neusight").infeasible(msg): the prelude's neusight.is_infeasible, the one
  // test `serve --sweep` makes in Lua) rather than the input's bug. The note it reads is forgotten either way. A
  // caller that tries several settings (search's layouts) makes a skip reason of the first kind only.
  bool infeasible_is(const std::exception& e);
  // module.fn(list) for a rule that maps strings to strings (scripts/neusight/parallel/layout.lua
  // bridge_warnings_merge: search's warnings with its layouts' bridge warnings said as one); throws when it returns
  // anything but an array of strings.
  std::vector<std::string> strings_call(const char* module, const char* fn, const std::vector<std::string>& list);

  // Checks the command line's workload fields one by one (scripts/neusight/workload.lua check_fields), reading a
  // model given as a config.json: an unknown preset, a misspelled dtype or a broken config file throws as
  // workload_load would. A comparison runs it for every combination before forecasting any, so that a typo stops
  // the run while a combination a builder refuses becomes an error row.
  void workload_check(const workload_overrides& overrides);

  // Sets string field `key` of the parallel plan in `st`, the one timeline(st, …) reads (a search re-times one
  // built layout under another parallel.recompute: the graph, its kernels and their forecast do not depend on it).
  // Throws when that workload is not parallel.
  void plan_set(const run_state& st, const std::string& key, const std::string& value);

  // The resolved op → file table over the whole search path.
  std::vector<op_entry> ops_list() const;
  // The op search path in order (first hit wins): --ops, NEUSIGHT_OPS_PATH (";;" splices the defaults), the bundled ops/.
  std::vector<std::filesystem::path> ops_search_path() const;
  // The script module search path in order (first hit wins): --scripts, NEUSIGHT_SCRIPTS_PATH (";;" splices the
  // defaults), the bundled scripts/.
  std::vector<std::filesystem::path> scripts_search_path() const;
  // Every module file of a user script directory that hides a file of the same module later on the path (the bundled
  // scripts/ among them): name = module, file = the user file as shown, shadows = the hidden files.
  std::vector<op_entry> scripts_shadowing() const;

  // Loads and validates one op rule (cached); throws with file:line on any error or if no file defines it.
  op_entry op_load(const std::string& name);

  // Lua-side unit tests (tests/scripts/test_*.lua): a chunk returning a table of test_* functions, run in
  // the sandbox with two extra globals: load_op(name) (the resolved op rule) and make_node(t) (defaults filled).
  std::vector<std::string> lua_test_names(const std::filesystem::path& file);
  void lua_test_run(const std::filesystem::path& file, const std::string& test);

  struct impl;

 private:
  // gpu nullptr: rules see nil; st as expand's
  expansion expand_on(const graph& g, const gpu_spec* gpu, bool training, const run_state* st = nullptr);
  // -v: names on stderr each op file that shadows another (ops_list) this session has not named yet.
  void op_shadows_report();
  std::unique_ptr<predictor> predictor_make_inner(const std::string& name, const std::filesystem::path& weights_root);
  // Why a forecast with `predictor` does not apply `c` (calibration_predictor_warning, calibration_weights_warning
  // against the session's weights root, for `gpu`'s vendor), "" when it does.
  std::string calibration_scope_warning(const calibration& c, const std::string& predictor, const gpu_spec& gpu);
  // weights_identity(root, vendor), read once per session, root and vendor.
  const std::string& weights_identity_memo(const std::filesystem::path& root, const std::string& vendor);
  std::unique_ptr<impl> p_;
};

}  // namespace ns
