// engine/lua/session_impl.h — private to engine/lua/session*.cpp: the state behind ns::session.
#pragma once
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lua/lua_state.h"
#include "lua/session.h"
#include "lua/wrap.h"

namespace ns {
namespace fs = std::filesystem;

struct search_dir {
  fs::path path;
  std::string display;  // prefix used in chunk names and messages
};

inline std::string display_of(const fs::path& p) { return p.lexically_normal().generic_string(); }

// "chunk:line: " of the Lua code that called the running C function ("" when there is none: luaL_where's text): a
// primitive's or a callback's misuse names its caller's place.
inline std::string caller_where(lua_State* L) {
  lua_Debug ar;
  if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "Sl", &ar) && ar.currentline > 0)
    return std::string(ar.short_src) + ":" + std::to_string(ar.currentline) + ": ";
  return {};
}

// A search path, first hit wins: the flag's directories (--ops, --scripts), then the environment variable's entries
// (NEUSIGHT_OPS_PATH, NEUSIGHT_SCRIPTS_PATH; LUA_PATH rules: ';'-separated, ";;" splices the defaults in at that
// place), else the defaults (the bundled folder) when the variable is unset or empty.
inline std::vector<search_dir> search_path_make(const std::vector<fs::path>& flag_dirs, const std::string& env_value,
                                                const std::vector<search_dir>& defaults) {
  std::vector<search_dir> out;
  for (const auto& d : flag_dirs) out.push_back({d, display_of(d)});
  if (env_value.empty()) {
    out.insert(out.end(), defaults.begin(), defaults.end());
    return out;
  }
  std::string env = env_value;
  for (size_t at; (at = env.find(";;")) != std::string::npos;) env.replace(at, 2, ";\x01;");
  size_t start = 0;
  while (start <= env.size()) {
    size_t end = std::min(env.find(';', start), env.size());
    const std::string entry = env.substr(start, end - start);
    if (entry == "\x01") out.insert(out.end(), defaults.begin(), defaults.end());
    else if (!entry.empty()) out.push_back({entry, display_of(entry)});
    start = end + 1;
  }
  return out;
}

// A module's file (script_find): its path, its chunk name ("scripts/neusight/pipeline.lua", "DIR/neusight/pipeline.lua")
// and whether it is the bundled one (under data_root/scripts, by whatever search path entry it was found).
struct script_file {
  std::string path, display;
  bool bundled = false;
};

// A GPU file's architecture as the tile rules know it (scripts/tiling/gemm.lua architecture_problem, of M.vendors: the
// one list of architectures and their vendors); its message, after the place of the file's architecture key, is the
// error. What every GPU file a session loads is checked by (session::gpu_checker). [-0, +0, e]
void gpu_architecture_check(session::impl& p, const gpu_spec& gpu);

struct session::impl {
  session_options opts;
  lua_state state;
  int engine_ref = LUA_NOREF;
  std::vector<search_dir> op_dirs;
  std::vector<search_dir> script_dirs;
  fs::path workload_ops;  // <dir of the run script>/ops
  // -v: the op shadow lines already printed (file + hidden file), so that a workload's ops/ folder, added to the
  // search path when the workload loads, reports only what it adds
  std::set<std::string> op_shadows_reported;

  std::map<std::string, gpu_spec> gpus_resolved;  // --gpu query → spec: a search resolves the same name per layout
  // opts.memo: what a node expanded into (key: GPU, training, every field of the node; rules are cached by op name
  // for the session, so the name picks the rule) and the tile of a kernel shape (key: GPU, shape).
  struct expanded {
    std::vector<std::pair<phase, kernel>> kernels;
  };
  std::map<std::string, expanded> expansions;
  std::map<std::string, kernel> tiles;
  std::map<std::string, std::optional<calibration>> calibrations;  // by GPU file (calibration_of)
  std::map<std::string, std::optional<calibration>> calibration_overrides;  // by GPU name (calibration_set)
  std::map<std::string, std::string> file_texts;  // file_text_set: path → the text read instead of the file
  std::map<std::string, int> figures_hooks;  // workload source → its `figures` function (workload.lua), registry refs
  std::map<std::string, int> data_refs;  // figures_call: parsed data files (uncertainty tables) by path, registry refs
  std::map<std::string, int> trained_refs;  // figures_call: r.trained_gpus tables by their lists, registry refs
  // Predictors (session_predict.cpp): the built-ins ns.predict runs, made on first use with `weights_root` (the last
  // predictor_make's, else data_root/weights) and memoised unless `predict_memo` is off; the checked tables of the
  // Lua predictors made (registry refs, released with the session); what the built-ins warned of during the current
  // Lua predictor call.
  session* owner = nullptr;  // the session this state belongs to (ns.predict selects tiles through it)
  fs::path weights_root;
  // Whether a neusight predictor was made over `weights_root` (predictor_make's, or one a Lua predictor's
  // ns.predict(…, "neusight") made): the only reader of weights. False with a --weights root: that flag had no effect.
  bool weights_read = false;
  bool weights_given = false;  // weights_root is not the bundled data_root/weights
  std::map<std::string, std::string> weights_identities;  // weights_identity_memo: by root and vendor
  bool predict_memo = true;
  std::map<std::string, std::unique_ptr<predictor>> builtin_predictors;
  std::vector<int> predictor_refs;
  std::vector<std::string> predict_warnings;
  // ns.predict's out-of-distribution warnings (neusight.uncertainty warnings) during the current Lua predictor call,
  // by predictor, GPU and the families priced (and which of them by the roofline): what the rule reads, so it runs
  // once per forecast and such set, not once per ns.predict call
  std::map<std::string, std::vector<std::string>> predict_band_warnings;
  predictor& builtin_predictor(const std::string& name);
  // [-0, +1, e] pushes a new table { family = { each training GPU's view (push_gpu), or the name no GPU file answers
  // as the string, … } } of `trained` (uncertainty_source::trained_gpus): r.trained_gpus (figures_call, made once per
  // session and list) and ns.trained_gpus (l_trained_gpus, a fresh one each call).
  void trained_gpus_push(const std::map<std::string, std::vector<std::string>>& trained);
  // ns::predictor_make(name, root) with the session's efficiency table (scripts/neusight/efficiency.lua: what a
  // built-in predictor divides the roofline by for a family it has no model of).
  std::unique_ptr<predictor> builtin_make(const std::string& name, const std::filesystem::path& root);
  // The session's script set is fixed (script_dirs, from the options) and a module loads once (prelude.lua's
  // `loaded`), so what is read of a module is read once: the efficiency table (builtin_make; nullopt until then, and
  // after a read that failed, which the next read repeats) and the files of the modules the engine calls
  // (module_file).
  std::optional<std::map<std::string, double>> efficiency;
  std::optional<train_convention> convention;  // neusight.kernels train_convention() (session::training_convention)
  // scripts/neusight/launch.lua params(gpu).floor_s by gpu_spec_key: the neusight predictor's floor for the kernels it
  // prices by the roofline (builtin_make), read once per GPU
  std::map<std::string, double> launch_floor;
  std::map<std::string, script_file> module_files;
  // The file require(module) loads, for the messages of calls into it: its chunk name ("scripts/neusight/compare.lua",
  // or a --scripts DIR's "DIR/neusight/compare.lua"), looked up on the script search path on first use ("module
  // NAME", not bundled, when no file answers: a module the engine itself provides).
  const script_file& module_file(const std::string& module);

  lua_State* L() const { return state.get(); }

  // The GPU a workload names (gpu_catalog::resolve, its files checked by gpu_architecture_check), parsed once per
  // query for the session's lifetime.
  const gpu_spec& gpu_resolve(const std::string& query) {
    if (auto it = gpus_resolved.find(query); it != gpus_resolved.end()) return it->second;
    std::string note;
    gpu_spec spec = gpu_catalog_make().resolve(query, note);
    // what the file is of where its name misleads (its `note`: one GCD of the MI250 package), said with the pick
    if (!spec.note.empty())
      note += (note.empty() ? "GPU '" + query + "' is " + spec.name + " (" + spec.source + "): " : "; it is ") + spec.note;
    if (!note.empty()) gpu_notes[query] = note;
    return gpus_resolved.emplace(query, std::move(spec)).first->second;
  }
  std::map<std::string, std::string> gpu_notes;  // --gpu query → the note its resolution gave (gpu_catalog::resolve)
  // --gpus-dir's folders, then NEUSIGHT_GPUS_PATH's (';'-separated; an entry that is not a folder is an error), then
  // the bundled gpus/; every file checked by gpu_architecture_check. One catalogue per session, handed out as copies
  // that share what it has read (gpu_catalog::visible: every name the session resolves reads the files once).
  std::optional<gpu_catalog> catalog;
  gpu_catalog gpu_catalog_make() {
    if (!catalog) catalog.emplace(gpu_catalog_build());
    return *catalog;
  }
  gpu_catalog gpu_catalog_build() {
    std::vector<gpu_dir> dirs;
    for (const auto& d : opts.gpu_dirs) dirs.push_back({d, display_of(d)});
    for (size_t start = 0; start <= opts.gpus_path_env.size();) {
      const size_t end = std::min(opts.gpus_path_env.find(';', start), opts.gpus_path_env.size());
      const std::string entry = opts.gpus_path_env.substr(start, end - start);
      start = end + 1;
      if (entry.empty()) continue;
      std::error_code ec;
      if (!fs::is_directory(entry, ec))
        throw error("NEUSIGHT_GPUS_PATH: '" + entry + "' is not a folder (';'-separated folders of GPU files)");
      dirs.push_back({entry, display_of(entry)});
    }
    return gpu_catalog(opts.data_root / "gpus", [this](const gpu_spec& g) { gpu_architecture_check(*this, g); },
                       std::move(dirs));
  }

  void op_dirs_rebuild() {
    std::vector<search_dir> defaults;
    if (!workload_ops.empty() && fs::is_directory(workload_ops)) defaults.push_back({workload_ops, display_of(workload_ops)});
    defaults.push_back({opts.data_root / "ops", "ops"});
    op_dirs = search_path_make(opts.ops_dirs, opts.ops_path_env, defaults);
  }

  void script_dirs_rebuild() {
    script_dirs = search_path_make(opts.script_dirs, opts.scripts_path_env, {{opts.data_root / "scripts", "scripts"}});
  }

  // [-0, +1, e] pushes the GPU as the read-only view rules receive (prelude E.gpu_view: ns.gpu_optional reads it)
  void push_gpu(const gpu_spec& gpu) const {
    push_engine_field("gpu_view");
    gpu_push(L(), gpu);
    ns_call(L(), 1, 1);
  }

  // [-0, +0, e] A model named by a path ending in ".json" (the --model override, else the script's field) is read
  // as a HuggingFace config.json and replaced, in the overrides table at `ov`, by the config table that
  // scripts/neusight/models/hf.lua makes of it. Paths from a script are relative to the script's folder. A --model
  // override ending in ".lua" is a model function's file: run as a workload script is (its own environment), it
  // returns the model function, or a workload table whose `model` is one (examples/custom_model.lua), and the function
  // replaces the override; workload.lua then checks it as it checks a script's (its opts, its graph).
  void model_file_resolve(int spec, int ov, const std::string& script) const {
    lua_State* L = this->L();
    stack_guard guard(L);
    auto has_ext = [](const char* s, const std::string& want) {
      const std::string v = s ? s : "";
      if (v.size() < want.size()) return false;
      std::string ext = v.substr(v.size() - want.size());
      std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
      return ext == want;
    };
    auto is_json = [&](const char* s) { return has_ext(s, ".json"); };
    const int top = lua_gettop(L);
    std::string path, display;
    const int ov_type = raw_getfield(L, ov, "model");
    if (ov_type == LUA_TSTRING && has_ext(lua_tostring(L, -1), ".lua")) {
      const std::string file = lua_tostring(L, -1), shown = display_of(file);
      lua_settop(L, top);
      push_engine_field("new_env");
      ns_call(L, 0, 1);  // stack: env
      ns_load_chunk(L, file_read(file, "--model " + shown), shown, -1);
      lua_remove(L, -2);
      ns_call(L, 0, 1);  // stack: result
      if (lua_istable(L, -1)) {
        raw_getfield(L, -1, "model");  // stack: result model
        lua_remove(L, -2);
      }
      if (!lua_isfunction(L, -1))
        throw error(shown + ": --model FILE.lua must return a model function (function(opts) returning nodes, as "
                    "examples/custom_model.lua's `model`) or a workload table with one as its field 'model' (got " +
                    luaL_typename(L, -1) + ")");
      lua_setfield(L, ov, "model");
      lua_settop(L, top);
      return;
    }
    if (ov_type == LUA_TSTRING && is_json(lua_tostring(L, -1))) {
      path = display = lua_tostring(L, -1);
    } else if (ov_type == LUA_TSTRING && !model_is_preset(lua_tostring(L, -1)) && fs::is_directory(lua_tostring(L, -1))) {
      // a HuggingFace snapshot directory (what transformers and vLLM take): its config.json
      const std::string dir = lua_tostring(L, -1);
      const fs::path file = fs::path(dir) / "config.json";
      std::error_code ec;
      if (!fs::is_regular_file(file, ec))
        throw error("--model " + display_of(dir) + ": a directory without config.json; --model takes a preset name, a "
                    "HuggingFace config.json, or a snapshot directory holding one (DIR/config.json)");
      path = file.string();
      display = display_of(path);
    } else if (ov_type == LUA_TNIL && !script.empty() && raw_getfield(L, spec, "model") == LUA_TSTRING &&
               is_json(lua_tostring(L, -1))) {
      const fs::path p(lua_tostring(L, -1));
      path = (p.is_absolute() ? p : fs::path(script).parent_path() / p).string();
      display = display_of(path);
    }
    lua_settop(L, top);
    if (path.empty()) return;
    push_engine_field("require");
    lua_pushstring(L, "neusight.models.hf");
    ns_call(L, 1, 1, "while loading scripts/neusight/models/hf.lua");  // stack: hf
    raw_getfield(L, -1, "from_config");
    lua_remove(L, -2);
    if (const auto text = file_texts.find(path); text != file_texts.end())
      json_config_push(L, text->second, display);  // stack: from_config t nulls lines
    else
      json_file_push(L, path, display);
    lua_pushstring(L, display.c_str());
    lua_insert(L, -3);                 // stack: from_config t display nulls lines
    ns_call(L, 4, 1);                  // stack: cfg
    lua_setfield(L, ov, "model");
  }

  // Whether `name` is a model preset (scripts/neusight/models/presets.lua): a preset wins over a folder of that name.
  bool model_is_preset(const std::string& name) const {
    lua_State* L = this->L();
    stack_guard guard(L);
    const int top = lua_gettop(L);
    push_engine_field("require");
    lua_pushstring(L, "neusight.models.presets");
    ns_call(L, 1, 1, "while loading scripts/neusight/models/presets.lua");
    const bool found = lua_istable(L, -1) && raw_getfield(L, -1, name.c_str()) != LUA_TNIL;
    lua_settop(L, top);
    return found;
  }

  // [-0, +1, -] pushes the engine table E
  void push_engine() const { lua_rawgeti(L(), LUA_REGISTRYINDEX, engine_ref); }

  // [-0, +1, e] pushes E[field]
  void push_engine_field(const char* field) const {
    push_engine();
    raw_getfield(L(), -1, field);
    lua_remove(L(), -2);
  }
};

// A new, empty run_state: a table { } in the registry. [-0, +0, m]
inline run_state run_state_new(lua_State* L) {
  lua_newtable(L);
  return run_state(L, luaL_ref(L, LUA_REGISTRYINDEX));
}
// Pushes field `key` of the state's table (fields, plan, nodes); nil when the state is empty or has none. [-0, +1, -]
inline int run_state_push(lua_State* L, const run_state& st, const char* key) {
  if (!st) {
    lua_pushnil(L);
    return LUA_TNIL;
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, st.ref());
  const int type = raw_getfield(L, -1, key);
  lua_remove(L, -2);
  return type;
}
// Pops the value on top into field `key` of the state's table (which must not be empty). [-1, +0, -]
inline void run_state_set(lua_State* L, const run_state& st, const char* key) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, st.ref());
  lua_insert(L, -2);
  lua_setfield(L, -2, key);
  lua_pop(L, 1);
}
// Whether the state has a table as field `key` (a parallel one has its "plan"). [-0, +0, -]
inline bool run_state_has(lua_State* L, const run_state& st, const char* key) {
  const bool has = run_state_push(L, st, key) == LUA_TTABLE;
  lua_pop(L, 1);
  return has;
}

// predict(kernels, gpu, name) -> { seconds, … }: the engine half of ns.predict (session_predict.cpp). [-3, +1, e]
int l_predict(lua_State* L);
// trained_gpus(name, vendor) -> { family = { GPU view or name, … } }: the engine half of ns.trained_gpus
// (session_predict.cpp). [-2, +1, e]
int l_trained_gpus(lua_State* L);
// Pushes { family = { input = value } } (uncertainty_source::trained_range): a forecast's r.trained_range, a serve
// phase's trained_range.
void trained_range_push(lua_State* L, const std::map<std::string, std::map<std::string, double>>& range);

// Reads the table at `res` that a figures rule returned ({ fields = { { key, value, column, cell, top }, … }, lines,
// warnings }: scripts/neusight/figures.lua compute's shape); `what` names the rule in errors. [-0, +0, -]
figures figures_read(lua_State* L, int res, const std::string& what);

// [-0, +1, m] what neusight.report reads of a GPU: name, vendor, file, mem_gb, price_per_hour_usd
void report_gpu_push(lua_State* L, const gpu_spec& gpu);
// [-0, +1, m] the figures' fields as neusight.report and neusight.compare read them: an array of { key, value (nil
// when not available), column, cell, top }
void figures_push(lua_State* L, const figures& figs);
// [-0, +1, m] an array of strings
void strings_push(lua_State* L, const std::vector<std::string>& v);
// The array of strings at `idx`, else throws `bad`. [-0, +0, e]
std::vector<std::string> strings_read(lua_State* L, int idx, const std::string& bad);
// [-0, +1, m] figure inputs as an array of { key, value } pairs, in order (a value not available: nil)
void figure_inputs_push(lua_State* L, const figure_inputs& in);
// [-0, +1, m] figure inputs as the table a figures rule gets them in (its `r`): each key a field, a dotted key "a.b.c"
// the field c of the table r.a.b (each made on first use), a value not available left out
void figure_table_push(lua_State* L, const figure_inputs& in);
// [-0, +0, -] the array of { key, value } pairs at `idx` (a number, boolean or string each; an integer stays one);
// `bad` is the message when it is not one.
figure_inputs figure_inputs_read(lua_State* L, int idx, const std::string& bad);

// The dense peak of a GEMM of `dtype` as people write it ("bf16", "BF16", "bfloat16", "torch.bfloat16": the engine's name
// neusight.kernels dtype_name, the one normaliser, reads) on the GPU, in TFLOP/s (engine/core/roofline.h
// dense_peak_tflops); nullopt when the GPU has no unit for it. A name dtype_name does not read, or a kernels.lua
// without it, throws, `at` before the message (run.peak_tflops, session::dense_peak_tflops). [-0, +0, e]
std::optional<double> dense_peak_read(session::impl& p, const gpu_spec& gpu, const std::string& dtype,
                                      const std::string& at);

// Pushes the overrides as a table { field = value } ("parallel.tp" keys stay flat). [-0, +1, m]
void overrides_push_table(lua_State* L, const workload_overrides& o);

// The file require(name) loads, the first hit on the script search path: its path and chunk name
// ("scripts/neusight/pipeline.lua", "DIR/neusight/pipeline.lua"); nullopt when there is none (`tried`: the files
// looked for, or why the name is not a module name).
std::optional<script_file> script_find(const session::impl& p, const std::string& name, std::string* tried = nullptr);

// Pushes require(module). [-0, +1, e]
inline void require_push(session::impl& p, const char* module) {
  p.push_engine_field("require");
  lua_pushstring(p.L(), module);
  ns_call(p.L(), 1, 1, std::string("while loading ") + module);
}

// The functions of a module the engine calls (neusight.compare's gpu_labels, …). A module from a --scripts DIR that
// lacks one (a copy from an older neusight) is an error that names that file, the function and the bundled file to
// compare it with, not Lua's "attempt to call a nil value". Each returns the chunk name of the module's file
// (module_file), for the context of the call and the messages about what it returns.
//
// The words by which these errors say so: the prelude's ns.older_scripts (C.older_scripts), for neusight.needs' message
// and for neusight.serve, which tells such an error from a model's by them.
inline constexpr const char* older_scripts_words = "a --scripts copy from an older neusight?";
//
// function_get: pushes module[fn] of `module`'s table, require(module), at `idx`; throws when it is not a function.
// [-0, +1, e]
const std::string& function_get(session::impl& p, int idx, const char* module, const char* fn);
// function_push: pushes require(module)[fn], the module itself not left on the stack. [-0, +1, e]
const std::string& function_push(session::impl& p, const char* module, const char* fn);
// function_find: for a function a module may leave out (older scripts): pushes module[fn] and returns true when it is
// a function, pushes nothing and returns false when it is nil; throws when it is something else. [-0, +0|1, e]
bool function_find(session::impl& p, int idx, const char* module, const char* fn);

}  // namespace ns
