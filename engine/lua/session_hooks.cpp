// engine/lua/session_hooks.cpp — Lua hooks that run after kernel prediction: host overhead, trace scaling, the parallel
// timeline and its report.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/text.h"
#include "core/weights.h"
#include "lua/session_impl.h"

namespace ns {

namespace {
// Trades a GEMM's tile fields for its alternative tile's (kernel::tile_alt_*), and back: the tile that priced the
// kernel shows in the tile fields, the other in tile_alt_* (kernel::tile_switched says which is the rule's).
void tile_switch(kernel& k) {
  std::swap(k.tile_m, k.tile_alt_m), std::swap(k.tile_k, k.tile_alt_k), std::swap(k.tile_split, k.tile_alt_split);
  std::swap(k.tile_kernel, k.tile_alt_kernel);
  k.tile_switched = !k.tile_switched;
}

// The roofline's compute term, 0 for a kernel whose dtype has no unit on this GPU (a fixed-latency kernel the
// predictors never priced: nothing to re-price).
double compute_seconds_or_zero(const kernel& k, const gpu_spec& gpu) {
  try {
    return roofline_compute_seconds(k, gpu);
  } catch (const error&) {
    return 0;
  }
}
}  // namespace

std::vector<double> session::kernel_seconds(std::vector<kernel_instance>& kernels, const gpu_spec& gpu,
                                            const predictor& pred, const std::string& overhead, const std::string& launch,
                                            bool decode, std::vector<std::string>* notes) {
  if (launch == "graph" && overhead == "on") {
    // the vendor's word for a graph replay, as the table's launch note says it (scripts/neusight/report.lua
    // graph_replay: launch.lua graph_name's, a HIP graph on AMD; vendor-neutral for an older --scripts launch.lua)
    const auto r = call("neusight.report", "graph_replay", {nlohmann::json(gpu.vendor)}, 1, "");
    if (r.empty() || !r[0].is_string())
      throw error(module_display("neusight.report") + ": graph_replay must return a string");
    const std::string replay = r[0].get<std::string>();
    throw error("--overhead on and --launch graph exclude each other: a " + replay + " runs its kernels without a "
                "per-launch host cost (scripts/neusight/overhead.lua models eager launches)");
  }
  // kernels priced before (a forecast's, priced again) show the tile that priced them: the rule's back in place first,
  // whatever tiles_select does with a kernel that has its tile
  for (auto& ki : kernels)
    if (ki.k.tile_switched) tile_switch(ki.k);
  tiles_select(kernels, gpu);
  std::vector<double> seconds = pred.predict(kernels, gpu);
  // a kernel its alternative tile priced shows that tile (its kernel name, blocks): the report's tile is the one whose
  // price it gives, the rule's own kept as the other (JSON tile.rule)
  if (const std::vector<bool> sw = pred.tiles_switched(); sw.size() == kernels.size())
    for (size_t i = 0; i < kernels.size(); ++i)
      if (sw[i]) tile_switch(kernels[i].k);
  launch_apply(kernels, seconds, gpu, launch);
  // after the launch re-pricing: a factor corrects the GPU time the forecast ends with, which is what a fit weighs
  // (a CUDA-graph replay of a small vector kernel is priced from its roofline, not the predictor: scaled before, the
  // factor would vanish in the min() of scripts/neusight/launch.lua); before the host overhead, which is not GPU time
  if (const calibration* c = calibration_of(gpu, pred.name())) calibration_apply(kernels, seconds, *c, decode);
  if (launch != "graph") overhead_apply(seconds, gpu, overhead, notes);
  return seconds;
}

forecast session::forecast_run(const graph& g, std::vector<kernel_instance> kernels, const gpu_spec& gpu,
                               const predictor& pred, const std::string& overhead, const std::string& launch,
                               bool decode) {
  std::vector<double> seconds = kernel_seconds(kernels, gpu, pred, overhead, launch, decode);
  return forecast_make(g, std::move(kernels), std::move(seconds));
}

const calibration* session::calibration_of(const gpu_spec& gpu, const std::string& predictor) {
  if (auto o = p_->calibration_overrides.find(gpu.name); o != p_->calibration_overrides.end())
    return o->second ? &*o->second : nullptr;
  if (!p_->opts.calibration || gpu.file.empty()) return nullptr;
  auto it = p_->calibrations.find(gpu.file);
  if (it == p_->calibrations.end()) it = p_->calibrations.emplace(gpu.file, calibration_load(gpu)).first;
  if (!it->second || !calibration_scope_warning(*it->second, predictor, gpu).empty()) return nullptr;
  return &*it->second;
}

std::string session::calibration_scope_warning(const calibration& c, const std::string& predictor,
                                               const gpu_spec& gpu) {
  if (auto w = calibration_predictor_warning(c, predictor); !w.empty()) return w;
  // the weights' identities, only when they can differ: a file that names none under the bundled root is theirs
  if (c.weights.empty() && !p_->weights_given) return "";
  const std::string bundled = weights_identity_memo(p_->opts.data_root / "weights", gpu.vendor);
  const std::string current = p_->weights_given ? weights_identity_memo(p_->weights_root, gpu.vendor) : bundled;
  return calibration_weights_warning(c, predictor, current, display_of(p_->weights_root), bundled);
}

const std::string& session::weights_identity_memo(const fs::path& root, const std::string& vendor) {
  const std::string key = root.lexically_normal().generic_string() + "\n" + vendor;
  auto it = p_->weights_identities.find(key);
  if (it == p_->weights_identities.end()) it = p_->weights_identities.emplace(key, weights_identity(root, vendor)).first;
  return it->second;
}

std::string session::weights_fitted(const gpu_spec& gpu) {
  return p_->weights_read ? weights_identity_memo(p_->weights_root, gpu.vendor) : "";
}

std::string session::calibration_skipped(const gpu_spec& gpu, const std::string& predictor) {
  if (p_->calibration_overrides.count(gpu.name)) return "";
  const calibration* c = calibration_of(gpu);
  if (!c) return "";
  if (auto w = calibration_scope_warning(*c, predictor, gpu); !w.empty()) return w;
  return calibration_unnamed_warning(*c, predictor);  // applied, as the default predictor's
}

void session::calibration_set(const std::string& gpu_name, std::optional<calibration> c) {
  p_->calibration_overrides[gpu_name] = std::move(c);
}

void session::graph_parallel(const run_state& st, const graph& g, std::vector<kernel_instance>& kernels, const gpu_spec& gpu,
                             const opgraph_parallel_option& layout, int64_t batch, const std::string& mode,
                             std::vector<std::string>& notes) {
  const workload_overrides parallel{{"dp", layout.dp},
                                    {"tp", layout.tp},
                                    {"pp", layout.pp},
                                    {"microbatches", layout.microbatches},
                                    {"kernels", std::string("eager")}};
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const bool training = mode == "train";
  require_push(*p_, "neusight.parallel");  // stack: P
  const int P = lua_gettop(L);
  const std::string& file = function_get(*p_, P, "neusight.parallel", "plan");
  function_get(*p_, P, "neusight.parallel", "normalize");
  lua_createtable(L, 0, int(parallel.size()));
  for (const auto& [k, v] : parallel) {
    if (const auto* i = std::get_if<int64_t>(&v)) lua_pushinteger(L, lua_Integer(*i));
    else if (const auto* d = std::get_if<double>(&v)) lua_pushnumber(L, *d);
    else if (const auto* s = std::get_if<std::string>(&v)) lua_pushstring(L, s->c_str());
    else lua_pushboolean(L, std::get<bool>(v));
    lua_setfield(L, -2, k.c_str());
  }
  ns_call(L, 1, 1, "in " + file + " normalize");  // stack: P plan_fn p
  p_->push_gpu(gpu);
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, lua_Integer(batch)), lua_setfield(L, -2, "batch");
  lua_pushstring(L, "fp32"), lua_setfield(L, -2, "dtype");  // the reference's graphs are fp32 throughout
  lua_pushstring(L, mode.c_str()), lua_setfield(L, -2, "mode");
  // its nodes (the reference's op names) do not say what autograd keeps for backward: no saved activations counted
  // (as the one-GPU report of a graph counts none); every node's output, what memory.lua charges a node no rule
  // describes, put a 4-GPU GPT-2 Large dp run measured on 40 GB A100s at 131 GB per GPU
  lua_pushboolean(L, false), lua_setfield(L, -2, "saves_known");
  ns_call(L, 3, 1, "in " + file + " plan");  // stack: P plan
  const int plan = lua_gettop(L);
  std::map<std::string, size_t> dropped;
  std::vector<kernel_instance> kept;
  kept.reserve(kernels.size());
  for (auto& ki : kernels) {
    if (ki.k.kind != kernel_kind::collective) {
      kept.push_back(std::move(ki));
      continue;
    }
    function_get(*p_, P, "neusight.parallel", "price_reference");
    lua_pushvalue(L, plan);
    lua_pushstring(L, ki.k.name.c_str());
    lua_pushnumber(L, ki.k.bytes);
    ns_call(L, 3, 1, "in " + file + " price_reference");
    if (lua_isnil(L, -1)) {
      ++dropped[ki.k.name];
    } else {
      ki.k.seconds = lua_tonumber(L, -1);
      kept.push_back(std::move(ki));
    }
    lua_pop(L, 1);
  }
  kernels = std::move(kept);
  for (const auto& [name, n] : dropped)
    notes.push_back(std::to_string(n) + " " + name + " kernel(s) of the reference graph replaced by neusight's own " +
                    (name == "SENDRECV" ? "stage-boundary send/recv" : "bucketed gradient all-reduce") +
                    " (" + file + ")");
  lua_createtable(L, int(g.nodes.size()), 0);  // stack: P plan nodes
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    node_push(L, g.nodes[i], training);
    lua_rawseti(L, -2, lua_Integer(i + 1));
  }
  if (!st) throw error("graph_parallel: no graph state (report_graph's) to keep the plan in");
  run_state_set(L, st, "nodes");  // pops nodes
  run_state_set(L, st, "plan");   // pops plan
}


std::optional<parallel_report> session::timeline(const run_state& st, const forecast& fc, const gpu_spec& gpu,
                                                 bool lean) {
  lua_State* L = p_->L();
  if (!run_state_has(L, st, "plan")) return std::nullopt;
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  // Per node, one instance: forward, backward (+ accumulate), optimizer; the collective part of each pass; and the
  // roofline floor of each pass's kernels (roofline_floor_seconds: a collective's, a fixed latency, is 0), which the
  // timeline sums per device as it sums their times; and the part of the backward in weight-gradient GEMMs (kernels with
  // wgrad set: what the timeline hides a column-parallel linear's input-gradient collective under).
  struct node_times {
    double fw = 0, fw_comm = 0, bw = 0, bw_comm = 0, bw_wgrad = 0, opt = 0, fw_floor = 0, bw_floor = 0, opt_floor = 0;
  };
  std::vector<node_times> t(fc.g.nodes.size());
  for (size_t i = 0; i < fc.kernels.size(); ++i) {
    const auto& ki = fc.kernels[i];
    node_times& n = t[ki.node];
    const double s = fc.seconds_each[i];
    const double floor = roofline_floor_seconds(ki.k, gpu);
    const bool comm = ki.k.kind == kernel_kind::collective;
    if (ki.ph == phase::forward) n.fw += s, n.fw_comm += comm ? s : 0, n.fw_floor += floor;
    else if (ki.ph == phase::optimizer) n.opt += s, n.opt_floor += floor;
    else n.bw += s, n.bw_comm += comm ? s : 0, n.bw_wgrad += ki.k.wgrad ? s : 0, n.bw_floor += floor;
  }
  p_->push_engine_field("require");
  lua_pushstring(L, "neusight.parallel");
  ns_call(L, 1, 1, "while loading scripts/neusight/parallel.lua");  // stack: P
  const int P = lua_gettop(L);
  run_state_push(L, st, "plan");
  const int plan = lua_gettop(L);  // stack: P plan
  const std::string& file = function_get(*p_, P, "neusight.parallel", "timeline");
  lua_pushvalue(L, plan);
  run_state_push(L, st, "nodes");
  if (lua_rawlen(L, -1) != t.size())
    throw error("parallel timeline: the graph has " + std::to_string(t.size()) + " nodes, the plan's model " +
                std::to_string(lua_rawlen(L, -1)));
  lua_createtable(L, int(t.size()), 0);
  for (size_t i = 0; i < t.size(); ++i) {
    lua_createtable(L, 0, 9);
    const std::pair<const char*, double> fields[] = {
        {"fw", t[i].fw},           {"fw_comm", t[i].fw_comm},   {"bw", t[i].bw},
        {"bw_comm", t[i].bw_comm}, {"bw_wgrad", t[i].bw_wgrad}, {"opt", t[i].opt},
        {"fw_floor", t[i].fw_floor}, {"bw_floor", t[i].bw_floor}, {"opt_floor", t[i].opt_floor}};
    for (const auto& [k, v] : fields) lua_pushnumber(L, v), lua_setfield(L, -2, k);
    lua_rawseti(L, -2, lua_Integer(i + 1));
  }
  lua_pushboolean(L, lean);  // a search's ranking: the memory report without its per-stage lines
  // the plan and nodes are this session's, changed between calls only in the plan's schedule and recompute (search
  // re-times a build: plan_set): the timeline may keep what neither changes (NEUSIGHT_NO_CACHE=1: it keeps nothing)
  lua_pushboolean(L, p_->opts.memo);
  // the workload too: "parallel: 7 pipeline stage(s) … but the model has only 2 layer(s)" named no file
  ns_call(L, 5, 1, "in " + file + " timeline" +
                       (fc.g.origin.empty() ? std::string() : " of " + fc.g.origin));  // stack: P plan result
  std::string where = file + " timeline";
  if (!lua_istable(L, -1)) throw error(where + " returned " + luaL_typename(L, -1) + ", expected a table");
  if (!lean && run_state_has(L, st, "fields")) {  // the forecast's report shows this memory report (neusight.memory.parallel)
    run_state_push(L, st, "fields");  // stack: P plan result fields
    raw_getfield(L, -2, "memory");
    lua_setfield(L, -2, "memory");
    lua_pop(L, 1);
  }
  // the report of it (scripts/neusight/parallel/report.lua): the timeline itself stays a Lua table
  function_get(*p_, P, "neusight.parallel", "report");
  lua_pushvalue(L, plan);
  lua_pushvalue(L, -3);
  lua_pushboolean(L, lean);
  ns_call(L, 3, 1, "in " + file + " report");  // stack: P plan result report
  where = file + " report";
  table_reader r(L, -1, where + " result");
  // the forecast's report renders this one (scripts/neusight/report.lua), and its layout's warnings are read from it
  // (report.lua layout_warnings: scripts/neusight/pipeline.lua finish, a lean one too: search says them)
  if (run_state_has(L, st, "fields")) {
    run_state_push(L, st, "fields");  // stack: P plan result report fields
    lua_pushvalue(L, -2);
    lua_setfield(L, -2, "parallel");
    lua_pop(L, 1);
  }
  parallel_report out;
  out.iteration_s = r.number("iteration");
  out.layers_refusal = r.str_or("layers_refusal", "");
  raw_getfield(L, -1, "distributed_optimizer_fits");
  if (!lua_isnil(L, -1) && !lua_isboolean(L, -1))
    throw error(where + " result: field 'distributed_optimizer_fits' must be a boolean or nil");
  out.distributed_optimizer_fits = lua_toboolean(L, -1);
  lua_pop(L, 1);
  raw_getfield(L, -1, "zero_fits");
  if (!lua_isnil(L, -1) && !lua_isinteger(L, -1))
    throw error(where + " result: field 'zero_fits' must be an integer or nil");
  out.zero_fits = lua_isnil(L, -1) ? 0 : int64_t(lua_tointeger(L, -1));
  lua_pop(L, 1);
  r.number("state_gb"), r.str("table");  // scripts/neusight/report.lua renders them: checked here, naming the rule
  raw_getfield(L, -1, "json");
  if (!lua_istable(L, -1)) throw error(where + " result: field 'json' must be a table");
  out.json = json_from_lua(L, -1, where + " result.json");
  lua_pop(L, 1);
  // what figures.lua gets of the layout, by name (scripts/neusight/report.lua figure_inputs): checked here
  raw_getfield(L, -1, "figures");
  if (!lua_istable(L, -1)) throw error(where + " result: field 'figures' must be a table");
  const nlohmann::ordered_json figs = json_from_lua(L, -1, where + " result.figures");
  for (const auto& [k, v] : figs.items()) {
    if (v.is_boolean()) out.figures.emplace_back(k, v.get<bool>());
    else if (v.is_number_integer()) out.figures.emplace_back(k, v.get<int64_t>());
    else if (v.is_number()) out.figures.emplace_back(k, v.get<double>());
    else if (v.is_string()) out.figures.emplace_back(k, v.get<std::string>());
    else throw error(where + " result.figures." + k + " must be a number, boolean or string");
  }
  return out;
}

bool session::launch_apply(const std::vector<kernel_instance>& kernels, std::vector<double>& seconds,
                           const gpu_spec& gpu, const std::string& mode) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string& file = function_push(*p_, "neusight.launch", "apply");  // stack: apply
  lua_createtable(L, int(kernels.size()), 0);  // stack: apply views
  for (size_t i = 0; i < kernels.size(); ++i) {
    const kernel& k = kernels[i].k;
    lua_createtable(L, 0, 5);
    lua_pushstring(L, std::string(kernel_kind_name(k.kind)).c_str()), lua_setfield(L, -2, "kind");
    lua_pushnumber(L, k.bytes), lua_setfield(L, -2, "bytes");
    lua_pushnumber(L, k.flops), lua_setfield(L, -2, "flops");
    lua_pushnumber(L, compute_seconds_or_zero(k, gpu)), lua_setfield(L, -2, "compute_s");
    lua_pushnumber(L, roofline_memory_seconds(k, gpu)), lua_setfield(L, -2, "memory_s");
    lua_rawseti(L, -2, lua_Integer(i + 1));
  }
  lua_createtable(L, int(seconds.size()), 0);
  for (size_t i = 0; i < seconds.size(); ++i) lua_pushnumber(L, seconds[i]), lua_rawseti(L, -2, lua_Integer(i + 1));
  p_->push_gpu(gpu);
  lua_pushstring(L, mode.c_str());
  ns_call(L, 4, 1, "in " + file);  // stack: out|nil
  if (lua_isnil(L, -1)) return false;
  if (!lua_istable(L, -1) || lua_rawlen(L, -1) != seconds.size())
    throw error(file + ": apply must return nil or an array of " + std::to_string(seconds.size()) +
                " numbers");
  for (size_t i = 0; i < seconds.size(); ++i) {
    lua_rawgeti(L, -1, lua_Integer(i + 1));
    if (!lua_isnumber(L, -1) || !(lua_tonumber(L, -1) >= 0))
      throw error(file + ": apply returned a value that is not a number >= 0");
    seconds[i] = lua_tonumber(L, -1);
    lua_pop(L, 1);
  }
  return true;
}

bool session::overhead_apply(std::vector<double>& seconds, const gpu_spec& gpu, const std::string& mode,
                             std::vector<std::string>* notes) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  bool applied = false;
  const std::string& file = function_push(*p_, "neusight.overhead", "apply");  // stack: apply
  lua_createtable(L, int(seconds.size()), 0);
  for (size_t i = 0; i < seconds.size(); ++i) {
    lua_pushnumber(L, seconds[i]);
    lua_rawseti(L, -2, lua_Integer(i + 1));
  }
  p_->push_gpu(gpu);
  lua_pushstring(L, mode.c_str());
  ns_call(L, 3, 2, "in " + file);  // stack: out|nil note|nil
  if (!lua_isnil(L, -1)) {  // why the mode changes nothing on this GPU (an older script returns no second result)
    if (lua_type(L, -1) != LUA_TSTRING)
      throw error(file + ": apply's second result must be a string or nil (got " +
                  std::string(luaL_typename(L, -1)) + ")");
    if (notes) notes->emplace_back(lua_tostring(L, -1));
  }
  lua_pop(L, 1);  // stack: out|nil
  if (lua_istable(L, -1)) {
    if (lua_rawlen(L, -1) != seconds.size())
      throw error(file + ": apply returned " + std::to_string(lua_rawlen(L, -1)) +
                  " values for " + std::to_string(seconds.size()) + " kernels");
    for (size_t i = 0; i < seconds.size(); ++i) {
      lua_rawgeti(L, -1, lua_Integer(i + 1));
      if (!lua_isnumber(L, -1)) throw error(file + ": apply returned a non-number");
      seconds[i] = lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
    applied = true;
  } else if (!lua_isnil(L, -1)) {
    throw error(file + ": apply must return an array or nil");
  }
  return applied;
}

namespace {
// [-0, +1 or +3, e] pushes scripts/neusight/scale.lua's module, then `from` and `to` when given (read-only GPU
// tables); returns the module's stack index.
int scale_module_push(session::impl& p, const gpu_spec* from, const gpu_spec* to) {
  lua_State* L = p.L();
  p.push_engine_field("require");
  lua_pushstring(L, "neusight.scale");
  ns_call(L, 1, 1, "while loading scripts/neusight/scale.lua");
  const int mod = lua_gettop(L);
  if (from) p.push_gpu(*from);
  if (to) p.push_gpu(*to);
  return mod;
}
}  // namespace

std::vector<nlohmann::ordered_json> session::call(const std::string& module, const std::string& fn,
                                                  const std::vector<lua_arg>& args, int nres,
                                                  const std::string& context) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string& file = p_->module_file(module).display;
  p_->push_engine_field("require");
  lua_pushstring(L, module.c_str());
  ns_call(L, 1, 1, "while loading " + file);  // stack: M
  function_get(*p_, -1, module.c_str(), fn.c_str());  // stack: M fn
  for (const auto& a : args) {
    if (const auto* gpu = std::get_if<const gpu_spec*>(&a)) p_->push_gpu(**gpu);
    else json_value_push(L, std::get<nlohmann::json>(a));
  }
  ns_call(L, int(args.size()), nres, context);  // stack: M results…
  std::vector<nlohmann::ordered_json> out;
  out.reserve(size_t(nres));
  const std::string what = file + " " + fn + "()";
  for (int i = nres; i >= 1; --i) out.push_back(json_from_lua(L, -i, what));
  return out;
}

const std::string& session::module_display(const std::string& module) { return p_->module_file(module).display; }

std::vector<kernel> session::kernels_of(const nlohmann::ordered_json& list, const std::string& where) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  json_value_push(L, nlohmann::json(list));
  return kernels_read(L, -1, where);
}

double session::scale_kernel_share_min() {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const int mod = scale_module_push(*p_, nullptr, nullptr);  // stack: S
  lua_getfield(L, mod, "kernel_share_min");  // stack: S share
  const double v = lua_tonumber(L, -1);
  if (lua_type(L, -1) != LUA_TNUMBER || !(v >= 0 && v <= 1))
    throw error(p_->module_file("neusight.scale").display +
                ": kernel_share_min must be a number in [0, 1] (the least share of the measured step its kernels run "
                "before scale warns that the step is launch- or host-bound; got " +
                (lua_type(L, -1) == LUA_TNUMBER ? text_limit(v) : std::string(luaL_typename(L, -1))) + ")");
  return v;
}

}  // namespace ns
