// engine/lua/session.cpp — the Lua runtime of one neusight run: prelude, search paths, workloads, expansion.
#include "lua/session.h"

#include <cmath>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>
#include <string>
#include <type_traits>

#include "core/cluster_spec.h"
#include "core/forecast.h"
#include "core/roofline.h"
#include "core/tile_model.h"
#include "lua/lua_state.h"
#include "lua/session_impl.h"
#include "lua/workload_context.h"
#include "lua/wrap.h"
#include "prelude_lua.h"

#ifndef NEUSIGHT_VERSION
#define NEUSIGHT_VERSION "0.1.0"
#endif

namespace ns {

// The largest side of a GEMM thread-block tile a tiling rule may choose (cuBLAS/CUTLASS tiles are at most 256).
constexpr int64_t max_gemm_tile = 1024;

namespace {

bool name_ok(const std::string& s, bool dots) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || (dots && c == '.');
  });
}

// A module name for require: parts of letters, digits and '_' separated by single dots ("neusight.models.gpt"); no
// leading, trailing or doubled dot, so that the name maps to a path under a script root and nowhere else.
bool module_name_ok(const std::string& s) {
  if (s.empty() || s.size() > 200) return false;
  bool part_empty = true;
  for (char c : s) {
    if (c == '.') {
      if (part_empty) return false;
      part_empty = true;
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
      part_empty = false;
    } else {
      return false;
    }
  }
  return !part_empty;
}

session::impl* impl_of(lua_State* L) { return static_cast<session::impl*>(lua_touserdata(L, lua_upvalueindex(1))); }

// find_script(name) -> path, chunkname | nil, "\n\tno file ..." [-1, +2, -]
int l_find_script(lua_State* L) {
  const auto* p = impl_of(L);
  std::string tried;
  if (const auto f = script_find(*p, luaL_checkstring(L, 1), &tried)) {
    lua_pushstring(L, f->path.c_str());
    lua_pushstring(L, f->display.c_str());
    return 2;
  }
  lua_pushnil(L);
  lua_pushstring(L, tried.c_str());
  return 2;
}

// find_op(name) -> path, chunkname | nil [-1, +1|2, -]
int l_find_op(lua_State* L) {
  const auto* p = impl_of(L);
  const std::string name = luaL_checkstring(L, 1);
  if (name_ok(name, false)) {
    for (const auto& d : p->op_dirs) {
      const fs::path file = d.path / (name + ".lua");
      if (fs::is_regular_file(file)) {
        lua_pushstring(L, file.string().c_str());
        lua_pushstring(L, (d.display + "/" + name + ".lua").c_str());
        return 2;
      }
    }
  }
  lua_pushnil(L);
  return 1;
}

// op_names() -> { name, … }: every op file on the search path (for did-you-mean) [-0, +1, m]
int l_op_names(lua_State* L) {
  const auto* p = impl_of(L);
  std::set<std::string> names;
  for (const auto& d : p->op_dirs) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d.path, ec))
      if (e.is_regular_file(ec) && e.path().extension() == ".lua") names.insert(e.path().stem().string());
  }
  lua_createtable(L, int(names.size()), 0);
  lua_Integer i = 0;
  for (const auto& n : names) lua_pushstring(L, n.c_str()), lua_rawseti(L, -2, ++i);
  return 1;
}

// op_unsearched(name) -> chunkname | nil: the bundled rule of op `name` ("ops/adam.lua") when the search path leaves
// the bundled ops/ out (NEUSIGHT_OPS_PATH without ";;"), for the message of an op no rule on the path answers [-1, +1, -]
int l_op_unsearched(lua_State* L) {
  const auto* p = impl_of(L);
  const std::string name = luaL_checkstring(L, 1);
  const fs::path bundled = p->opts.data_root / "ops";
  std::error_code ec;
  if (!name_ok(name, false) || !fs::is_regular_file(bundled / (name + ".lua"), ec)) {
    lua_pushnil(L);
    return 1;
  }
  for (const auto& d : p->op_dirs)
    if (fs::equivalent(d.path, bundled, ec)) {
      lua_pushnil(L);
      return 1;
    }
  lua_pushstring(L, ("ops/" + name + ".lua").c_str());
  return 1;
}

// load(path, chunkname, env) -> function [-3, +1, e]
int l_load(lua_State* L) {
  return ns_catch(L, [&] {
    const std::string path = luaL_checkstring(L, 1);
    const std::string chunk = luaL_checkstring(L, 2);
    luaL_checktype(L, 3, LUA_TTABLE);
    ns_load_chunk(L, file_read(path, chunk), chunk, 3);
    return 1;
  });
}

// cluster_load(name_or_path) -> { name, source, description, gpu = { names }?, gpus_per_node, nodes?, intra = {…}, inter = {…} }
// from gpus/clusters/<name>.toml or a .toml path; { none = true } for "none" (the GPU's own links) [-1, +1, e]
int l_cluster_load(lua_State* L) {
  return ns_catch(L, [&] {
    const auto* p = impl_of(L);
    const cluster_spec c = cluster_resolve(p->opts.data_root / "gpus" / "clusters", luaL_checkstring(L, 1));
    lua_createtable(L, 0, 7);
    if (c.none) {  // "none": no cluster file, the GPU's own links
      lua_pushboolean(L, 1), lua_setfield(L, -2, "none");
      return 1;
    }
    for (const auto& [k, v] : {std::pair{"name", &c.name}, {"source", &c.source}, {"description", &c.description}})
      lua_pushstring(L, v->c_str()), lua_setfield(L, -2, k);
    if (!c.gpus.empty()) {  // the GPUs it was built for, an array
      lua_createtable(L, int(c.gpus.size()), 0);
      for (size_t i = 0; i < c.gpus.size(); ++i) lua_pushstring(L, c.gpus[i].c_str()), lua_rawseti(L, -2, lua_Integer(i + 1));
      lua_setfield(L, -2, "gpu");
    }
    lua_pushinteger(L, lua_Integer(c.gpus_per_node)), lua_setfield(L, -2, "gpus_per_node");
    if (c.nodes) lua_pushinteger(L, lua_Integer(*c.nodes)), lua_setfield(L, -2, "nodes");
    for (const auto& [level, l] : {std::pair{"intra", &c.intra}, {"inter", &c.inter}}) {
      lua_createtable(L, 0, 3);
      if (l->bw_gbps) lua_pushnumber(L, *l->bw_gbps), lua_setfield(L, -2, "bw_gbps");
      if (l->latency_us) lua_pushnumber(L, *l->latency_us), lua_setfield(L, -2, "latency_us");
      if (l->efficiency) lua_pushnumber(L, *l->efficiency), lua_setfield(L, -2, "efficiency");
      lua_setfield(L, -2, level);
    }
    return 1;
  });
}

std::string joined_args(lua_State* L) {
  std::string out;
  const int n = lua_gettop(L);
  for (int i = 1; i <= n; ++i) {
    size_t len = 0;
    const char* s = luaL_tolstring(L, i, &len);  // [-0, +1, e]
    if (i > 1) out += '\t';
    out.append(s, len);
    lua_pop(L, 1);
  }
  return out;
}

// eprint(...) — print() for scripts, to stderr [-n, +0, e]
int l_eprint(lua_State* L) {
  const std::string s = joined_args(L);
  std::fprintf(stderr, "%s\n", s.c_str());
  return 0;
}

// warn(...) [-n, +0, e]
int l_warn(lua_State* L) {
  const std::string s = joined_args(L);
  std::fprintf(stderr, "neusight: warning: %s\n", s.c_str());
  return 0;
}

// view(mt) -> a userdata with metatable mt: the handle of a read-only view (prelude E.strict) [-1, +1, m]
int l_view(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_newuserdatauv(L, 0, 0);
  lua_pushvalue(L, 1);
  lua_setmetatable(L, -2);
  return 1;
}

// limit_tripped() -> boolean: the current call ran over a script limit [-0, +1, -]
int l_limit_tripped(lua_State* L) {
  lua_pushboolean(L, ns_limit_tripped(L));
  return 1;
}

// infeasible(msg): raises `msg` (a string, as it is: no position) as the reason a setting cannot run, noted as such
// (ns_infeasible_note) [-1, +0, v]
int l_infeasible(lua_State* L) {
  size_t n = 0;
  const char* msg = luaL_checklstring(L, 1, &n);
  ns_infeasible_note(L, std::string(msg, n));
  lua_settop(L, 1);
  return lua_error(L);
}

// infeasible_take() -> the message the last infeasible() (or ns::infeasible raised into scripts) gave, or nil; it is
// then forgotten [-0, +1, m]
int l_infeasible_take(lua_State* L) {
  ns_infeasible_take(L);
  return 1;
}

// gpu_named(gpu, name) -> boolean [-2, +1, e]: whether `name` names the GPU table `gpu` (its name, an alias or its
// file's stem, as people type them: engine/core/gpu_spec.h gpu_spec_named, the engine's one rule). Reads the fields
// through __index, so a read-only GPU view works.
int l_gpu_named(lua_State* L) {
  return ns_catch(L, [&] {
    luaL_checkany(L, 1);
    const std::string name = luaL_checkstring(L, 2);
    gpu_spec gpu;
    for (const auto& [key, member] : {std::pair{"name", &gpu.name}, {"source", &gpu.source}}) {
      if (lua_getfield(L, 1, key) == LUA_TSTRING) *member = lua_tostring(L, -1);  // stack: gpu name value
      lua_pop(L, 1);
    }
    if (lua_getfield(L, 1, "aliases") != LUA_TNIL) {  // stack: gpu name aliases
      for (lua_Integer i = 1;; ++i) {
        if (lua_geti(L, -1, i) != LUA_TSTRING) {
          lua_pop(L, 1);
          break;
        }
        gpu.aliases.emplace_back(lua_tostring(L, -1));
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
    lua_pushboolean(L, gpu_spec_named(gpu, name));
    return 1;
  });
}

// gpu_find(name) -> GPU view | nil [-1, +1, e]: the bundled GPU file a name answers (its name, an alias or its file's
// stem: the session's gpu_resolve, parsed once per session), as the read-only view rules receive; nil for a name no GPU
// file answers (or a file that does not load) and for a path (a name only: a table's GPU names are not files to open).
int l_gpu_find(lua_State* L) {
  return ns_catch(L, [&] {
    auto* p = impl_of(L);
    const std::string name = luaL_checkstring(L, 1);
    const gpu_spec* spec = nullptr;
    if (!gpu_query_is_path(name)) {
      try {
        spec = &p->gpu_resolve(name);
      } catch (const error&) {  // no such GPU: the caller says what it could not do without it
      }
    }
    if (spec) p->push_gpu(*spec);
    else lua_pushnil(L);
    return 1;
  });
}

// closest(word, candidates) -> string | nil [-2, +1, e]: the candidate closest to `word` by text_close_matches (the
// engine's one did-you-mean rule, engine/core/text.h), ties to the alphabetically first. `candidates`: an array of strings, or a table whose
// string keys are the candidates.
int l_closest(lua_State* L) {
  const std::string word = luaL_tolstring(L, 1, nullptr);
  lua_pop(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  std::vector<std::string> cands;
  lua_pushnil(L);
  while (lua_next(L, 2) != 0) {  // stack: … key value
    if (lua_type(L, -2) == LUA_TSTRING) cands.emplace_back(lua_tostring(L, -2));
    else if (lua_type(L, -2) == LUA_TNUMBER && lua_type(L, -1) == LUA_TSTRING) cands.emplace_back(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  std::sort(cands.begin(), cands.end());
  cands.erase(std::unique(cands.begin(), cands.end()), cands.end());
  const auto m = text_close_matches(word, cands, 1);
  if (m.empty()) lua_pushnil(L);
  else lua_pushstring(L, m.front().c_str());
  return 1;
}

// dtype_sizes() -> { fp32 = 4, … }: engine/core/graph.cpp's one table of the dtypes it knows, a fresh copy each call.
int l_dtype_sizes(lua_State* L) {
  lua_createtable(L, 0, int(dtype_sizes().size()));
  for (const auto& [name, bytes] : dtype_sizes()) {
    lua_pushinteger(L, bytes);
    lua_setfield(L, -2, name.c_str());
  }
  return 1;
}

// node_fields() -> { "op", "name", … }: wrap_graph.cpp's one list of the fields a node may have, a fresh copy each call.
int l_node_fields(lua_State* L) {
  const auto& keys = node_fields();
  lua_createtable(L, int(keys.size()), 0);
  for (size_t i = 0; i < keys.size(); ++i) lua_pushstring(L, keys[i].c_str()), lua_rawseti(L, -2, lua_Integer(i + 1));
  return 1;
}

// gpu_fields() -> { "name", "aliases", …, "source" }: the fields a GPU table may have (engine/core/gpu_spec.cpp
// gpu_fields, the one list, and the `source` gpu_push adds), a fresh copy each call.
int l_gpu_fields(lua_State* L) {
  const auto& fields = gpu_fields();
  lua_createtable(L, int(fields.size()) + 1, 0);
  for (size_t i = 0; i < fields.size(); ++i) lua_pushstring(L, fields[i].key), lua_rawseti(L, -2, lua_Integer(i + 1));
  lua_pushliteral(L, "source"), lua_rawseti(L, -2, lua_Integer(fields.size() + 1));
  return 1;
}

// families() -> { { name = "bmm", per_sm = true }, … }: the predictor's kernel families in the engine's order
// (engine/core/tile_model.h families), each with whether its MLP's features read the GPU's memory bandwidth and memory
// per SM (all but the tensor-core and fused-attention families: family_transfer_features), a fresh copy each call.
int l_families(lua_State* L) {
  lua_createtable(L, int(families.size()), 0);
  for (size_t i = 0; i < families.size(); ++i) {
    lua_createtable(L, 0, 2);
    const std::string_view name = family_name(families[i]);
    lua_pushlstring(L, name.data(), name.size()), lua_setfield(L, -2, "name");
    lua_pushboolean(L, !family_transfer_features(families[i])), lua_setfield(L, -2, "per_sm");
    lua_rawseti(L, -2, lua_Integer(i + 1));
  }
  return 1;
}

// cluster_limits() -> { bw_gbps = 1e6, latency_us = 1e6, count = 1048576 }: engine/core/cluster_spec.h's ranges of a
// cluster (the maxima of a link's bandwidth and latency, of gpus_per_node and nodes), a fresh copy each call.
int l_cluster_limits(lua_State* L) {
  lua_createtable(L, 0, 3);
  lua_pushnumber(L, cluster_max_bw_gbps), lua_setfield(L, -2, "bw_gbps");
  lua_pushnumber(L, cluster_max_latency_us), lua_setfield(L, -2, "latency_us");
  lua_pushinteger(L, lua_Integer(cluster_max_count)), lua_setfield(L, -2, "count");
  return 1;
}

// limit_text(x) -> "1e6": engine/core/text.h text_limit, the one form in which the messages print a limit.
int l_limit_text(lua_State* L) {
  const std::string s = text_limit(luaL_checknumber(L, 1));
  lua_pushlstring(L, s.data(), s.size());
  return 1;
}

// model_where(origin, model) -> "<origin>: model '<model>'": wrap_graph.cpp model_where, the one wording of a
// workload's model in messages.
int l_model_where(lua_State* L) {
  const std::string s = model_where(luaL_checkstring(L, 1), luaL_checkstring(L, 2));
  lua_pushlstring(L, s.data(), s.size());
  return 1;
}

// nodes_check(nodes, where): nothing when nodes_read (wrap_graph.cpp, the one reader of a model's nodes) takes `nodes`
// (the nodes read are dropped: prelude check_nodes' first step, before each rule's check reads the shapes); else what it
// refuses (a field of another type, a shape that is no array of integers: its message, starting with `where`) and the
// index of the node it names ("<where>: node #i …"), or nil where it names none (the array itself). [-2, +0|2, e]
int l_nodes_check(lua_State* L) {
  const std::string where = luaL_checkstring(L, 2);
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer node = 0;
  std::string msg;
  try {
    nodes_read(L, 1, where, &node);
    return 0;
  } catch (const std::exception& e) {
    msg = e.what();
  }
  lua_pushlstring(L, msg.data(), msg.size());
  if (node > 0 && msg.rfind(where + ": node #" + std::to_string(node), 0) == 0) lua_pushinteger(L, node);
  else lua_pushnil(L);
  return 2;
}

const luaL_Reg engine_functions[] = {
    {"find_script", l_find_script}, {"find_op", l_find_op}, {"load", l_load},
    {"eprint", l_eprint},           {"warn", l_warn},       {"closest", l_closest},
    {"cluster_load", l_cluster_load}, {"op_names", l_op_names}, {"op_unsearched", l_op_unsearched}, {"view", l_view},
    {"limit_tripped", l_limit_tripped}, {"predict", l_predict}, {"dtype_sizes", l_dtype_sizes},
    {"cluster_limits", l_cluster_limits}, {"limit_text", l_limit_text}, {"gpu_named", l_gpu_named},
    {"gpu_find", l_gpu_find},
    {"node_fields", l_node_fields}, {"gpu_fields", l_gpu_fields}, {"infeasible", l_infeasible},
    {"infeasible_take", l_infeasible_take}, {"families", l_families}, {"trained_gpus", l_trained_gpus},
    {"nodes_check", l_nodes_check}, {"model_where", l_model_where},
    {nullptr, nullptr},
};


// Checks the model-state report at `idx` (scripts/neusight/precision.lua state_report's result): the fields the engine
// and neusight.report read, where the message names the rule. [-0, +0, e]
void state_report_check(lua_State* L, int idx) {
  table_reader r(L, idx, "scripts/neusight/precision.lua state_report result");
  r.number("state_gb"), r.str("convention"), r.str("line");
  r.str_or("warning", "");  // the state alone does not fit: neusight.report's memory_warnings reads it
}

// Pushes scripts/neusight/precision.lua state_report(s, params, recipe, gpu_mem_gb, unreported, reported_gib) of the
// state table at `idx` (precision.lua state()), reported_gib not given (nil: it reads the capacity only when
// `unreported`, which the engine's callers pass false): the report neusight.report renders, checked
// (state_report_check). [-0, +1, e]
void state_report_push(session::impl& p, int idx, double params, const std::string& recipe, double gpu_mem_gb,
                       bool unreported) {
  lua_State* L = p.L();
  idx = lua_absindex(L, idx);
  const std::string& file = function_push(p, "neusight.precision", "state_report");  // stack: … state_report
  lua_pushvalue(L, idx);
  lua_pushnumber(L, params);
  lua_pushstring(L, recipe.c_str());
  lua_pushnumber(L, gpu_mem_gb);
  lua_pushboolean(L, unreported);
  ns_call(L, 5, 1, "in " + file + " state_report");  // stack: … report
  state_report_check(L, -1);
}

// Calls neusight.report.`fn` with the `nargs` values on top of the stack and keeps its result as the report fields of
// `st` (run_state's "fields"). [-nargs, +0, e]
void report_fields_keep(session::impl& p, const run_state& st, const char* fn, int nargs) {
  lua_State* L = p.L();
  const std::string& file = function_push(p, "neusight.report", fn);  // stack: … args fn
  lua_insert(L, -(nargs + 1));  // stack: … fn args
  ns_call(L, nargs, 1, "in " + file + " " + fn);  // stack: … fields
  if (!lua_istable(L, -1))
    throw error(file + ": " + fn + " returned " + luaL_typename(L, -1) + ", expected a table");
  run_state_set(L, st, "fields");  // pops fields
}

}  // namespace

std::optional<script_file> script_find(const session::impl& p, const std::string& name, std::string* tried) {
  std::string rel = name, looked;
  std::replace(rel.begin(), rel.end(), '.', '/');
  if (module_name_ok(name)) {
    for (const auto& d : p.script_dirs) {
      for (const std::string& cand : {rel + ".lua", rel + "/init.lua"}) {
        const fs::path file = d.path / cand;
        if (fs::is_regular_file(file)) {
          std::error_code ec;
          const bool bundled = fs::equivalent(file, p.opts.data_root / "scripts" / cand, ec);
          return script_file{file.string(), d.display + "/" + cand, bundled};
        }
        looked += "\n\tno file '" + d.display + "/" + cand + "'";
      }
    }
  } else {
    looked = " invalid module name (parts of letters, digits and '_' separated by single dots, e.g. "
             "\"neusight.kernels\")";
  }
  if (tried) *tried = std::move(looked);
  return std::nullopt;
}

const script_file& session::impl::module_file(const std::string& module) {
  auto it = module_files.find(module);
  if (it == module_files.end()) {
    auto found = script_find(*this, module);
    it = module_files.emplace(module, found ? std::move(*found) : script_file{"", "module " + module, false}).first;
  }
  return it->second;
}

namespace {
// The error of a module function that is not there (`type`: what module[fn] is; the module not a table: -1).
[[noreturn]] void function_missing(session::impl& p, int idx, const char* module, const char* fn, int type) {
  lua_State* L = p.L();
  const script_file& f = p.module_file(module);
  std::string msg = f.display;
  if (type < 0)
    msg += ": module " + std::string(module) + " returned " + luaL_typename(L, idx) + ", not a table of functions (" +
           fn + " expected)";
  else if (type == LUA_TNIL)
    msg += " has no function " + std::string(fn) + " (module " + module + ")";
  else
    msg += ": " + std::string(module) + "." + fn + " is a " + lua_typename(L, type) + ", not a function";
  if (!f.bundled && !f.path.empty()) {
    std::string rel = module;
    std::replace(rel.begin(), rel.end(), '.', '/');
    for (const std::string& cand : {rel + ".lua", rel + "/init.lua"}) {
      const fs::path bundled = p.opts.data_root / "scripts" / cand;
      if (!fs::is_regular_file(bundled)) continue;
      msg += std::string(": ") + older_scripts_words + " compare it with the bundled " + display_of(bundled);
      break;
    }
  }
  throw error(msg);
}
}  // namespace

const std::string& function_get(session::impl& p, int idx, const char* module, const char* fn) {
  lua_State* L = p.L();
  idx = lua_absindex(L, idx);
  if (!lua_istable(L, idx)) function_missing(p, idx, module, fn, -1);
  if (const int type = raw_getfield(L, idx, fn); type != LUA_TFUNCTION) function_missing(p, idx, module, fn, type);
  return p.module_file(module).display;
}

const std::string& function_push(session::impl& p, const char* module, const char* fn) {
  require_push(p, module);
  const std::string& file = function_get(p, -1, module, fn);
  lua_remove(p.L(), -2);
  return file;
}

void gpu_architecture_check(session::impl& p, const gpu_spec& gpu) {
  lua_State* L = p.L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string& file = function_push(p, "tiling.gemm", "architecture_problem");  // stack: fn
  lua_pushstring(L, gpu.architecture.c_str());
  lua_pushstring(L, gpu.vendor.c_str());
  if (gpu.vendor_line > 0) lua_pushinteger(L, lua_Integer(gpu.vendor_line));
  else lua_pushnil(L);
  ns_call(L, 3, 1, "in " + file + " architecture_problem");  // stack: problem
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TSTRING)
      throw error(file + ": architecture_problem returned " + luaL_typename(L, -1) + ", expected a message or nil");
    throw error(gpu_key_at(gpu, "architecture") + ": " + lua_tostring(L, -1));
  }
  lua_pop(L, 1);
  // the file's numbers against each other (a peak no chip of its SMs and clock reaches): scripts/neusight/gpu_check.lua
  const std::string& check = function_push(p, "neusight.gpu_check", "problem");  // stack: fn
  p.push_gpu(gpu);
  ns_call(L, 1, 2, "in " + check + " problem");  // stack: message key
  if (lua_isnil(L, -2)) return;
  if (lua_type(L, -2) != LUA_TSTRING || !(lua_isnil(L, -1) || lua_type(L, -1) == LUA_TSTRING))
    throw error(check + ": problem returned " + luaL_typename(L, -2) + ", " + luaL_typename(L, -1) +
                ", expected a message and a key, or nil");
  const char* key = lua_tostring(L, -1);
  throw error((key ? gpu_key_at(gpu, key) : gpu.source) + ": " + lua_tostring(L, -2));
}

gpu_check session::gpu_checker() {
  return [p = p_.get()](const gpu_spec& g) { gpu_architecture_check(*p, g); };
}

gpu_catalog session::gpus() { return p_->gpu_catalog_make(); }

std::string session::gpu_note(const std::string& query) const {
  const auto it = p_->gpu_notes.find(query);
  return it == p_->gpu_notes.end() ? std::string() : it->second;
}

bool function_find(session::impl& p, int idx, const char* module, const char* fn) {
  lua_State* L = p.L();
  idx = lua_absindex(L, idx);
  if (!lua_istable(L, idx)) function_missing(p, idx, module, fn, -1);
  const int type = raw_getfield(L, idx, fn);
  if (type == LUA_TFUNCTION) return true;
  lua_pop(L, 1);
  if (type != LUA_TNIL) function_missing(p, idx, module, fn, type);
  return false;
}

// [-0, +1, m] the overrides as a table { field = value } ("parallel.tp" keys stay flat)
void overrides_push_table(lua_State* L, const workload_overrides& o) {
  lua_createtable(L, 0, int(o.size()));
  for (const auto& [k, v] : o) {
    if (const auto* s = std::get_if<std::string>(&v)) lua_pushstring(L, s->c_str());
    else if (const auto* i = std::get_if<int64_t>(&v)) lua_pushinteger(L, lua_Integer(*i));
    else if (const auto* d = std::get_if<double>(&v)) lua_pushnumber(L, *d);
    else lua_pushboolean(L, std::get<bool>(v));
    lua_setfield(L, -2, k.c_str());
  }
}

session::session(session_options opts) : p_(std::make_unique<impl>()) {
  p_->opts = std::move(opts);
  p_->owner = this;
  p_->weights_root = p_->opts.data_root / "weights";
  p_->predict_memo = p_->opts.memo;
  p_->state.limits_set(p_->opts.limits);
  p_->script_dirs_rebuild();
  p_->op_dirs_rebuild();

  lua_State* L = p_->L();
  stack_guard guard(L);
  // prelude(C, version) -> E
  lua_newtable(L);  // stack: penv  (the prelude runs with the full standard library)
  lua_pushglobaltable(L);
  lua_setfield(L, -2, "_G");
  lua_createtable(L, 0, 1);
  lua_pushglobaltable(L);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  ns_load_chunk(L, prelude_lua, "engine/lua/prelude.lua", -1);  // stack: penv prelude
  lua_remove(L, -2);
  luaL_newlibtable(L, engine_functions);
  lua_pushlightuserdata(L, p_.get());
  luaL_setfuncs(L, engine_functions, 1);  // stack: prelude C
  lua_pushstring(L, older_scripts_words);
  lua_setfield(L, -2, "older_scripts");
  series_functions_add(L);  // pack_integers, walk, fold, queue (wrap_series.cpp)
  lua_pushstring(L, NEUSIGHT_VERSION);
  ns_call(L, 2, 1);  // stack: E
  p_->engine_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  if (p_->opts.verbose)
    for (const auto& e : scripts_shadowing())
      for (const auto& sh : e.shadows)
        std::fprintf(stderr, "neusight: %s shadows %s (module '%s')\n", e.file.c_str(), sh.c_str(), e.name.c_str());
  if (p_->opts.verbose && (!p_->opts.gpu_dirs.empty() || !p_->opts.gpus_path_env.empty()))
    for (const auto& line : gpus().shadows()) std::fprintf(stderr, "neusight: %s\n", line.c_str());
  op_shadows_report();
}

void session::op_shadows_report() {
  if (!p_->opts.verbose || !p_->opts.verbose_op_shadows) return;
  for (const auto& e : ops_list())
    for (const auto& sh : e.shadows)
      if (p_->op_shadows_reported.insert(e.file + '\n' + sh).second)
        std::fprintf(stderr, "neusight: %s shadows %s (op '%s')\n", e.file.c_str(), sh.c_str(), e.name.c_str());
}

struct run_state::holder {
  lua_State* L = nullptr;
  int ref = LUA_NOREF;
  holder(lua_State* l, int r) : L(l), ref(r) {}
  holder(const holder&) = delete;
  holder& operator=(const holder&) = delete;
  ~holder() { luaL_unref(L, LUA_REGISTRYINDEX, ref); }
};

run_state::run_state(lua_State* L, int ref) : h_(std::make_shared<holder>(L, ref)) {}

int run_state::ref() const { return h_ ? h_->ref : LUA_NOREF; }

lua_State* run_state::lua() const { return h_ ? h_->L : nullptr; }

namespace {
// Pushes field `key` of the workload table of `w` and returns the state, after checking its type is `type` (named
// `expected` in the error). [-0, +1, e]
lua_State* workload_field_push(const workload& w, const std::string& key, int type, const char* expected,
                               bool integer = false) {
  lua_State* L = w.state.lua();
  if (!L) throw error(w.source + ": workload field '" + key + "': the workload has no Lua state");
  run_state_push(L, w.state, "workload");
  const int got = lua_istable(L, -1) ? raw_getfield(L, -1, key.c_str()) : (lua_pushnil(L), LUA_TNIL);
  lua_remove(L, -2);
  if (got != type || (integer && !lua_isinteger(L, -1))) {
    const std::string got_name = lua_typename(L, got);
    lua_pop(L, 1);
    throw error(w.source + ": workload field '" + key + "' is " + got_name + ", expected " + expected);
  }
  return L;
}
}  // namespace

template <class T>
T workload::field(const std::string& key) const {
  T v{};
  if constexpr (std::is_same_v<T, std::string>) {
    lua_State* L = workload_field_push(*this, key, LUA_TSTRING, "a string");
    v = lua_tostring(L, -1), lua_pop(L, 1);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    lua_State* L = workload_field_push(*this, key, LUA_TNUMBER, "an integer", true);
    v = lua_tointeger(L, -1), lua_pop(L, 1);
  } else if constexpr (std::is_same_v<T, double>) {
    lua_State* L = workload_field_push(*this, key, LUA_TNUMBER, "a number");
    v = lua_tonumber(L, -1), lua_pop(L, 1);
  } else {
    static_assert(std::is_same_v<T, bool>, "workload::field: std::string, int64_t, double or bool");
    lua_State* L = workload_field_push(*this, key, LUA_TBOOLEAN, "a boolean");
    v = lua_toboolean(L, -1), lua_pop(L, 1);
  }
  return v;
}
template std::string workload::field<std::string>(const std::string&) const;
template int64_t workload::field<int64_t>(const std::string&) const;
template double workload::field<double>(const std::string&) const;
template bool workload::field<bool>(const std::string&) const;

void session::plan_set(const run_state& st, const std::string& key, const std::string& value) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  if (run_state_push(L, st, "plan") != LUA_TTABLE) {
    lua_pop(L, 1);
    throw error("plan_set: the last workload has no parallel plan");
  }
  lua_pushstring(L, key.c_str());
  lua_pushstring(L, value.c_str());
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

void session::file_text_set(const std::string& path, std::string text) {
  p_->file_texts[path] = std::move(text);
  if (const auto it = p_->data_refs.find(path); it != p_->data_refs.end()) {  // parsed from the old text
    luaL_unref(p_->L(), LUA_REGISTRYINDEX, it->second);
    p_->data_refs.erase(it);
  }
  p_->predict_band_warnings.clear();  // ns.predict's warnings of the old table (session_predict.cpp l_predict)
}

session::~session() {
  if (!p_) return;
  if (p_->engine_ref != LUA_NOREF) luaL_unref(p_->L(), LUA_REGISTRYINDEX, p_->engine_ref);
  for (int ref : p_->predictor_refs) luaL_unref(p_->L(), LUA_REGISTRYINDEX, ref);
}

run_state session::report_graph(const workload_overrides& fields, double params, double gpu_mem_gb,
                                double gpu_reported_gib) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  // a new graph's state: no parallel plan (graph_parallel, called after this, makes its plan there)
  run_state st = run_state_new(L);
  overrides_push_table(L, fields);  // stack: g
  lua_pushnumber(L, params);
  lua_pushnumber(L, gpu_mem_gb);
  if (gpu_reported_gib > 0) lua_pushnumber(L, gpu_reported_gib);
  else lua_pushnil(L);  // stack: g params gpu_mem_gb reported_gib (nil: the GPU file gives none)
  report_fields_keep(*p_, st, "graph", 4);
  run_state_push(L, st, "fields");
  if (raw_getfield(L, -1, "state") != LUA_TTABLE)  // stack: fields state
    throw error(std::string("scripts/neusight/report.lua: graph returned a state that is ") + luaL_typename(L, -1) +
                ", expected precision.lua state_report's table");
  state_report_check(L, -1);
  return st;
}

workload session::workload_load(const std::string& script, const workload_overrides& overrides) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  workload w;
  w.state = run_state_new(L);
  w.source = script.empty() ? workload_command_line : display_of(script);
  std::string origin = w.source;  // messages also name a config.json given on the command line
  if (const auto m = overrides.find("model"); m != overrides.end())
    if (const auto* name = std::get_if<std::string>(&m->second);
        name && (fs::path(*name).extension() == ".json" || fs::path(*name).extension() == ".lua" ||
                 (!p_->model_is_preset(*name) && fs::is_directory(*name))))  // a snapshot directory's config.json
      origin += " (--model " + *name + ")";
  if (!script.empty()) {
    p_->workload_ops = fs::path(script).parent_path() / "ops";
    if (p_->workload_ops == "ops") p_->workload_ops = "./ops";
    const std::vector<search_dir> before = p_->op_dirs;
    p_->op_dirs_rebuild();
    const auto same = [](const search_dir& a, const search_dir& b) { return a.path == b.path; };
    if (!std::equal(before.begin(), before.end(), p_->op_dirs.begin(), p_->op_dirs.end(), same)) {
      // another path: the rules loaded by name, and what nodes expanded into by them, may be another file's now
      p_->push_engine_field("ops_forget");
      ns_call(L, 0, 0);
      p_->expansions.clear();
    }
    op_shadows_report();  // the workload's ops/ folder joins the path now
  }
  p_->push_engine_field("require");
  lua_pushstring(L, "neusight.workload");
  ns_call(L, 1, 1, "while loading scripts/neusight/workload.lua");  // stack: W
  const int wl = lua_gettop(L);
  std::string text;  // the script's source: normalize names the line of a field it refuses
  if (script.empty()) {
    lua_newtable(L);
  } else {
    p_->push_engine_field("new_env");
    ns_call(L, 0, 1);  // stack: W env
    text = file_read(script, w.source);
    ns_load_chunk(L, text, w.source, -1);
    lua_remove(L, -2);
    ns_call(L, 0, 1);  // stack: W spec
    if (!lua_istable(L, -1))
      throw error(w.source + ": a workload script must return a table (got " + luaL_typename(L, -1) + ")");
  }
  const int spec = lua_gettop(L);
  function_get(*p_, wl, "neusight.workload", "normalize");
  lua_pushvalue(L, spec);
  overrides_push_table(L, overrides);  // stack: W spec norm ov
  p_->model_file_resolve(spec, lua_gettop(L), script);
  lua_pushstring(L, w.source.c_str());
  if (script.empty()) lua_pushnil(L);
  else lua_pushlstring(L, text.data(), text.size());
  ns_call(L, 4, 1);  // stack: W spec norm
  const int norm = lua_gettop(L);
  // the workload's own figures (field `figures`, a function): kept for figures_compute, by the workload's source
  if (auto old = p_->figures_hooks.find(w.source); old != p_->figures_hooks.end()) {
    luaL_unref(L, LUA_REGISTRYINDEX, old->second);
    p_->figures_hooks.erase(old);
  }
  if (raw_getfield(L, norm, "figures") == LUA_TFUNCTION) p_->figures_hooks[w.source] = luaL_ref(L, LUA_REGISTRYINDEX);
  else lua_pop(L, 1);
  lua_pushvalue(L, norm);
  run_state_set(L, w.state, "workload");  // what workload::field reads
  table_reader r(L, norm, w.source);
  const std::string gpu_given = r.str("gpu");
  r.str("mode");  // workload::field's
  r.str("optimizer"), r.str_or("optimizer_impl", "");  // the report's (scripts/neusight/report.lua workload)
  r.str("dtype");  // workload::field's
  const std::string precision = r.str("precision");
  r.integer("batch"), r.integer("seq"), r.integer_or("context", 0);  // the report's, as above
  w.launch = r.str_or("launch", "eager");
  for (const char* key : {"description", "kv_dtype", "weight_dtype"}) r.str_or(key, "");  // the report's, as above
  function_get(*p_, wl, "neusight.workload", "warnings");  // stack: W spec norm warnings()
  lua_pushvalue(L, norm);
  ns_call(L, 1, 1, "while listing the warnings of " + w.source);
  if (lua_istable(L, -1))
    for (lua_Integer i = 1, n = lua_Integer(lua_rawlen(L, -1)); i <= n; ++i) {
      lua_rawgeti(L, -1, i);
      if (lua_type(L, -1) == LUA_TSTRING) w.warnings.emplace_back(lua_tostring(L, -1));
      lua_pop(L, 1);
    }
  lua_pop(L, 1);  // stack: W spec norm
  function_get(*p_, wl, "neusight.workload", "build");
  lua_pushvalue(L, norm);
  // the GPU prices a parallel run's collectives and bounds every run's memory (fits, the largest batch)
  try {
    // a relative GPU file path in a script is the script's, as its `model = "x.json"` is; a path that is not there
    // beside the script is taken as before (from the current folder, or gpus/<file>.toml of the bundled GPUs)
    std::string query = gpu_given;
    if (!script.empty() && !overrides.count("gpu") && gpu_query_is_path(gpu_given) && fs::path(gpu_given).is_relative()) {
      const fs::path beside = fs::path(script).parent_path() / gpu_given;
      std::error_code ec;
      if (fs::is_regular_file(beside, ec)) query = display_of(beside);
    }
    w.gpu_resolved = p_->gpu_resolve(query);
    if (const std::string note = gpu_note(query); !note.empty()) w.warnings.push_back(note);  // a short name's pick
  } catch (const error& e) {  // an unknown name or a bad GPU file: say which workload script asked for it
    if (script.empty()) throw;  // --gpu on the command line: the message names the flag's value already
    std::string where = w.source;
    // the script's line that names it (workload.lua field_line), when one line does; a --scripts workload.lua without
    // field_line, or one that fails, leaves the file alone: the GPU's error is the one to report
    if (!overrides.count("gpu") && raw_getfield(L, wl, "field_line") == LUA_TFUNCTION) {
      lua_pushlstring(L, text.data(), text.size());
      lua_pushstring(L, "gpu");
      try {
        ns_call(L, 2, 1);
        if (lua_isinteger(L, -1)) where += ":" + std::to_string(lua_tointeger(L, -1));
      } catch (const error&) {
      }
    }
    throw error(std::string(e.what()) + "\n    while resolving the GPU of " + where);
  }
  p_->push_gpu(w.gpu_resolved);
  lua_pushstring(L, origin.c_str());  // build checks the nodes (check_nodes, as below) before its memory report
  ns_call(L, 3, 1, workload_building_context + origin);  // stack: W spec norm build
  if (!lua_istable(L, -1))
    throw error("scripts/neusight/workload.lua: build returned " + std::string(luaL_typename(L, -1)) + ", expected a table");
  const int build = lua_gettop(L);
  // what building the graph found (workload.lua build: a model function that ignores opts, …): after warnings()'
  w.build_warnings_at = w.warnings.size();
  if (raw_getfield(L, build, "warnings") == LUA_TTABLE)
    for (lua_Integer i = 1, n = lua_Integer(lua_rawlen(L, -1)); i <= n; ++i) {
      lua_rawgeti(L, -1, i);
      if (lua_type(L, -1) == LUA_TSTRING) w.warnings.emplace_back(lua_tostring(L, -1));
      lua_pop(L, 1);
    }
  lua_pop(L, 1);  // stack: W spec norm build
  w.build_warning_ids.assign(w.warnings.size() - w.build_warnings_at, std::string());
  if (raw_getfield(L, build, "warning_ids") == LUA_TTABLE)
    for (size_t i = 0; i < w.build_warning_ids.size(); ++i) {
      lua_rawgeti(L, -1, lua_Integer(i + 1));
      if (lua_type(L, -1) == LUA_TSTRING) w.build_warning_ids[i] = lua_tostring(L, -1);
      lua_pop(L, 1);
    }
  lua_pop(L, 1);  // stack: W spec norm build
  raw_getfield(L, build, "model");
  w.g.model = lua_isstring(L, -1) ? lua_tostring(L, -1) : "custom";
  lua_pop(L, 1);
  lua_pushstring(L, w.g.model.c_str()), lua_setfield(L, build, "model");  // the report's name of it
  w.g.origin = origin;
  raw_getfield(L, build, "nodes");  // stack: W spec norm build nodes
  const std::string where_model = model_where(w.g.origin, w.g.model);  // the words of its nodes' errors
  w.g.nodes = nodes_read(L, -1, where_model);
  const int nodes = lua_gettop(L);
  // every op has a rule, each rule's check() accepts its node: build checked them before its memory report called
  // the rules' hooks (nodes_checked); a --scripts workload.lua whose build does not is checked here
  const bool checked = raw_getfield(L, build, "nodes_checked") == LUA_TBOOLEAN && lua_toboolean(L, -1);
  lua_pop(L, 1);
  p_->push_engine_field("check_nodes");
  lua_pushvalue(L, nodes);
  lua_pushstring(L, where_model.c_str());  // origin: also the --model config.json
  // a node's error names the script's line that writes it (workload.lua node_located; a --scripts workload.lua
  // without it leaves the file alone)
  if (raw_getfield(L, wl, "node_located") == LUA_TFUNCTION) {  // stack: W spec norm build nodes check nodes where f
    lua_pushvalue(L, norm);
    lua_pushvalue(L, nodes);
    ns_call(L, 2, 1);  // stack: W spec norm build nodes check nodes where located
  }
  lua_pushvalue(L, -1);
  lua_rotate(L, nodes + 1, 1);  // stack: W spec norm build nodes located check nodes where located
  if (checked) lua_pop(L, 4);  // stack: W spec norm build nodes located
  else ns_call(L, 3, 0);       // stack: W spec norm build nodes located
  // the model-FLOPs attributes, by the rule the figures read them with (core/forecast.h node_model_flops_check): an
  // error names the node as check_nodes names it, the script's line where the script writes it
  for (size_t i = 0; i < w.g.nodes.size(); ++i) {
    const node& n = w.g.nodes[i];
    if (n.attrs.empty()) continue;
    std::string who = where_model + ", node " + std::to_string(i + 1) + " '" + n.name + "'";
    try {
      node_model_flops_check(n, who);
    } catch (const error&) {
      if (lua_isfunction(L, -1)) {  // the line only now: located() reads the script's text
        lua_pushvalue(L, -1);
        lua_pushinteger(L, lua_Integer(i + 1));
        lua_pushstring(L, who.c_str());
        ns_call(L, 2, 1);  // stack: W spec norm build nodes located who
        if (lua_isstring(L, -1)) who = lua_tostring(L, -1);
        lua_pop(L, 1);
      }
      node_model_flops_check(n, who);  // the same error, naming the line
      throw;
    }
  }
  // kept for expand's refusal of a rule without backward, which names the line too
  if (lua_isfunction(L, -1)) run_state_set(L, w.state, "node_located");  // pops located
  else lua_pop(L, 1);  // stack: W spec norm build nodes
  // the model state (a memory report covers every workload: neusight.memory's single, or the parallel timeline's):
  // the report shows its state report in the build's place of it
  raw_getfield(L, build, "state");
  state_report_push(*p_, -1, w.g.params_total(), precision, w.gpu_resolved.mem_gb, false);
  lua_setfield(L, build, "state");
  lua_pop(L, 1);  // stack: W spec norm build nodes
  // the report's fields (neusight.report.workload): what the workload says of itself and the build's facts
  lua_pushstring(L, w.source.c_str()), lua_setfield(L, build, "source");
  lua_pushvalue(L, norm);
  lua_pushvalue(L, build);
  report_fields_keep(*p_, w.state, "workload", 2);  // stack: W spec norm build nodes
  raw_getfield(L, build, "plan");  // stack: W spec norm build nodes plan
  w.parallel = lua_istable(L, -1);
  if (w.parallel) {
    run_state_set(L, w.state, "plan");   // pops plan
    run_state_set(L, w.state, "nodes");  // pops nodes
  }
  return w;
}

void session::workload_check(const workload_overrides& overrides) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  function_push(*p_, "neusight.workload", "check_fields");  // stack: check
  lua_newtable(L);                      // stack: check spec
  overrides_push_table(L, overrides);   // stack: check spec ov
  p_->model_file_resolve(lua_gettop(L) - 1, lua_gettop(L), "");
  lua_remove(L, -2);                    // stack: check ov
  lua_pushstring(L, "command line");
  ns_call(L, 2, 0);
}

nlohmann::ordered_json session::model_facts_of(const workload_overrides& overrides) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  require_push(*p_, "neusight.workload");
  const int wl = lua_gettop(L);
  lua_newtable(L);  // stack: W spec
  const int spec = lua_gettop(L);
  function_get(*p_, wl, "neusight.workload", "normalize");
  lua_pushvalue(L, spec);
  overrides_push_table(L, overrides);  // stack: W spec norm spec ov
  p_->model_file_resolve(spec, lua_gettop(L), "");
  lua_pushstring(L, "command line");
  ns_call(L, 3, 1);  // stack: W spec w
  const int norm = lua_gettop(L);
  const std::string& file = function_push(*p_, "neusight.search", "model_facts");
  lua_pushvalue(L, norm);
  ns_call(L, 1, 1, "in " + file + " model_facts");
  return json_from_lua(L, -1, file + " model_facts");
}

namespace {
// The prologue of a call into scripts/neusight/search.lua: pushes its function `name` (stack: f) and keeps the
// chunk name of the module's file (`file`); the stack goes back to its height before when this object goes, also on
// error. [-0, +1, e]
struct search_call {
  stack_guard guard;
  stack_restore restore;
  std::string file;
  search_call(session::impl& p, const char* name)
      : guard(p.L()), restore(p.L()), file(function_push(p, "neusight.search", name)) {}
};
}  // namespace

std::string session::search_pipeline_skip(int64_t layers, int64_t pp, const std::string& schedule,
                                          int64_t virtual_stages) {
  lua_State* L = p_->L();
  const search_call call(*p_, "pipeline_skip");
  lua_pushinteger(L, lua_Integer(layers));
  lua_pushinteger(L, lua_Integer(pp));
  lua_pushstring(L, schedule.c_str());
  lua_pushinteger(L, lua_Integer(virtual_stages));
  ns_call(L, 4, 1, "in " + call.file + " pipeline_skip");
  if (lua_isnil(L, -1)) return {};
  if (lua_type(L, -1) != LUA_TSTRING)
    throw error(call.file + " pipeline_skip returned " + luaL_typename(L, -1) +
                ", expected a reason (string) or nil");
  return lua_tostring(L, -1);
}

figures session::figures_compute(const figure_inputs& inputs, const gpu_spec& gpu,
                                 const uncertainty_source& uncertainty, const std::string& workload) {
  return figures_call("neusight.figures", "compute", inputs, gpu, uncertainty, workload);
}

bool session::has_function(const char* module, const char* fn) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  require_push(*p_, module);       // stack: M
  return function_find(*p_, -1, module, fn);
}

bool session::infeasible_is(const std::exception& e) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  require_push(*p_, "neusight");   // stack: ns
  lua_getfield(L, -1, "is_infeasible");  // stack: ns is_infeasible (the prelude's: takes the note ns_infeasible_note kept)
  lua_pushstring(L, e.what());
  ns_call(L, 1, 1, "in neusight.is_infeasible");  // stack: ns result
  // an ns::infeasible thrown by the engine itself, never through a script, left no note: its type says it
  return lua_toboolean(L, -1) != 0 || dynamic_cast<const infeasible*>(&e) != nullptr;
}

std::vector<std::string> session::strings_call(const char* module, const char* fn,
                                               const std::vector<std::string>& list) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string& file = function_push(*p_, module, fn);  // stack: fn
  lua_createtable(L, int(list.size()), 0);                    // stack: fn list
  for (size_t i = 0; i < list.size(); ++i)
    lua_pushlstring(L, list[i].data(), list[i].size()), lua_rawseti(L, -2, lua_Integer(i + 1));
  ns_call(L, 1, 1, "in " + file + " " + fn);  // stack: result
  return strings_read(L, -1, file + ": " + fn + " must return an array of strings");
}

std::vector<std::string> strings_read(lua_State* L, int idx, const std::string& bad) {
  idx = lua_absindex(L, idx);
  if (!lua_istable(L, idx)) throw error(bad);
  std::vector<std::string> out;
  for (lua_Integer i = 1, n = lua_Integer(lua_rawlen(L, idx)); i <= n; ++i) {
    if (lua_rawgeti(L, idx, i) != LUA_TSTRING) {  // stack: item
      lua_pop(L, 1);
      throw error(bad);
    }
    size_t len = 0;
    const char* s = lua_tolstring(L, -1, &len);
    out.emplace_back(s, len);
    lua_pop(L, 1);
  }
  return out;
}

std::optional<double> dense_peak_read(session::impl& p, const gpu_spec& gpu, const std::string& dtype,
                                      const std::string& at) {
  lua_State* L = p.L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string* file = nullptr;
  try {
    file = &function_push(p, "neusight.kernels", "dtype_name");  // stack: dtype_name
  } catch (const error& e) {  // a kernels.lua without it: said where it was asked for
    throw error(at + e.what());
  }
  lua_pushlstring(L, dtype.data(), dtype.size());
  ns_call(L, 1, 1, "in " + *file + " dtype_name");  // stack: name
  if (lua_type(L, -1) != LUA_TSTRING) {
    std::string names;
    for (const std::string& d : dtype_names()) names += d + ", ";
    throw error(at + "unknown dtype '" + dtype + "' (" + names + "or a name such as bfloat16)");
  }
  return dense_peak_tflops(gpu, lua_tostring(L, -1));
}

std::optional<double> session::dense_peak_tflops(const gpu_spec& gpu, const std::string& dtype) {
  return dense_peak_read(*p_, gpu, dtype, "");
}

namespace {
// r.<name>(t) of figures_call's callback: its upvalue a userdata holding the callback, emptied when the rule returns
// (a rule that kept the function cannot call it later). t's entries are read as numbers by name; the callback's
// scripts run as one call to the limits (ns_limits_enter, as a pipeline primitive's). [-1, +1, e]
int l_figures_callback(lua_State* L) {
  const limits_mark mark = ns_limits_enter(L);
  if (mark.over) return lua_error(L);  // the rule ran over a limit: it stops there
  return ns_catch(L, [&] {
    const limits_scope limits{L, mark};
    const auto* cb = *static_cast<const session::figures_callback**>(lua_touserdata(L, lua_upvalueindex(1)));
    if (!cb) throw error(caller_where(L) + "a figures rule's callback called after the rule returned");
    const std::string what = caller_where(L) + "r." + cb->name + "(t)";
    if (!lua_istable(L, 1))
      throw error(what + ": t must be a table of numbers by name (got " + luaL_typename(L, 1) + ")");
    std::map<std::string, double> args;
    lua_pushnil(L);
    while (lua_next(L, 1)) {  // stack: … key value
      if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TNUMBER)
        throw error(what + ": t must be a table of numbers by name (got a " + luaL_typename(L, -1) + " at a " +
                    luaL_typename(L, -2) + " key)");
      args.emplace(lua_tostring(L, -2), lua_tonumber(L, -1));
      lua_pop(L, 1);
    }
    lua_pushnumber(L, cb->fn(args));
    return 1;
  });
}
}  // namespace

void session::impl::trained_gpus_push(const std::map<std::string, std::vector<std::string>>& trained) {
  lua_State* L = this->L();
  lua_createtable(L, 0, int(trained.size()));  // stack: trained
  for (const auto& [family, names] : trained) {
    lua_createtable(L, int(names.size()), 0);  // stack: trained list
    for (size_t i = 0; i < names.size(); ++i) {
      const gpu_spec* spec = nullptr;
      try {
        spec = &gpu_resolve(names[i]);
      } catch (const error&) {  // a training GPU without a GPU file: uncertainty.lua names it
      }
      if (spec) push_gpu(*spec);
      else lua_pushstring(L, names[i].c_str());
      lua_rawseti(L, -2, lua_Integer(i + 1));
    }
    lua_setfield(L, -2, family.c_str());  // stack: trained
  }
}

void trained_range_push(lua_State* L, const std::map<std::string, std::map<std::string, double>>& range) {
  lua_createtable(L, 0, int(range.size()));  // stack: range
  for (const auto& [family, inputs] : range) {
    lua_createtable(L, 0, int(inputs.size()));  // stack: range family
    for (const auto& [name, v] : inputs) {
      lua_pushnumber(L, v);
      lua_setfield(L, -2, name.c_str());
    }
    lua_setfield(L, -2, family.c_str());  // stack: range
  }
}

figures session::figures_call(const char* module, const char* fn, const figure_inputs& inputs, const gpu_spec& gpu,
                              const uncertainty_source& band, const std::string& workload,
                              const figures_callback* callback) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string& file = function_push(*p_, module, fn);  // stack: fn
  figure_table_push(L, inputs);                               // stack: fn r
  const int r = lua_gettop(L);
  p_->push_gpu(gpu);
  lua_setfield(L, r, "gpu");
  if (auto h = p_->figures_hooks.find(workload); h != p_->figures_hooks.end()) {  // r.workload_figures(view)
    lua_rawgeti(L, LUA_REGISTRYINDEX, h->second);
    lua_setfield(L, r, "workload_figures");
    lua_pushstring(L, workload.c_str());
    lua_setfield(L, r, "workload_source");
  }
  if (const fs::path& uncertainty = band.table; !uncertainty.empty()) {  // parsed once per session
    const std::string key = uncertainty.string();
    auto it = p_->data_refs.find(key);
    if (it == p_->data_refs.end()) {
      if (const auto text = p_->file_texts.find(key); text != p_->file_texts.end())
        toml_text_push(L, text->second, display_of(uncertainty));
      else
        toml_file_push(L, key, display_of(uncertainty));
      it = p_->data_refs.emplace(key, luaL_ref(L, LUA_REGISTRYINDEX)).first;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, it->second);
    lua_setfield(L, r, "uncertainty");
    // bundled tables by their place in the tree ("weights/nvidia/uncertainty.toml"), others as given
    const fs::path rel = uncertainty.lexically_normal().lexically_relative(p_->opts.data_root.lexically_normal());
    const bool bundled = !rel.empty() && *rel.begin() != "..";
    lua_pushstring(L, (bundled ? rel.generic_string() : display_of(uncertainty)).c_str());
    lua_setfield(L, r, "uncertainty_source");
  }  // stack: fn r
  if (!band.trained_gpus.empty()) {  // r.trained_gpus: { family = { GPU view, or the name no GPU file answers, … } }
    std::string key;
    for (const auto& [family, names] : band.trained_gpus) {
      key += family + ":";
      for (const auto& n : names) key += n + "\n";
    }
    auto it = p_->trained_refs.find(key);
    if (it == p_->trained_refs.end()) {  // made once per session and list
      p_->trained_gpus_push(band.trained_gpus);  // stack: fn r trained
      it = p_->trained_refs.emplace(key, luaL_ref(L, LUA_REGISTRYINDEX)).first;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, it->second);
    lua_setfield(L, r, "trained_gpus");
  }  // stack: fn r
  if (!band.trained_range.empty()) {  // r.trained_range: { family = { input = the largest trained on } }
    trained_range_push(L, band.trained_range);
    lua_setfield(L, r, "trained_range");
  }  // stack: fn r
  // r.<name>: a closure over a slot emptied when the call ends, normally or not
  const figures_callback** slot = nullptr;
  struct slot_clear {
    const figures_callback**& slot;
    ~slot_clear() {
      if (slot) *slot = nullptr;
    }
  } const clear{slot};
  if (callback) {
    slot = static_cast<const figures_callback**>(lua_newuserdatauv(L, sizeof(figures_callback*), 0));
    *slot = callback;  // stack: fn r ud
    lua_pushvalue(L, -1);
    lua_pushcclosure(L, l_figures_callback, 1);
    lua_setfield(L, r, callback->name);
    lua_rotate(L, r - 1, 1);  // stack: ud fn r — the userdata stays on the stack, alive, until `clear` has emptied it
  }
  const std::string what = file + " " + fn + "()";
  ns_call_said(L, 1, 1, "in " + what);  // calibration.lua's "m.toml: needs ttft_ms or tpot_ms" is whole as it is
  return figures_read(L, -1, what);
}

figures session::figures_call_batch(const char* module, const char* fn, const std::vector<figure_inputs>& items,
                                    const figure_inputs& shared, const gpu_spec& gpu,
                                    std::vector<std::vector<figure>>* each) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string& file = function_push(*p_, module, fn);  // stack: fn
  lua_createtable(L, int(items.size()), 0);
  for (size_t i = 0; i < items.size(); ++i) {
    figure_table_push(L, items[i]);
    lua_rawseti(L, -2, lua_Integer(i + 1));
  }  // stack: fn items
  figure_table_push(L, shared);
  p_->push_gpu(gpu);
  lua_setfield(L, -2, "gpu");  // stack: fn items shared
  const std::string what = file + " " + fn + "()";
  ns_call(L, 2, 1, "in " + what);  // stack: result
  if (each && lua_istable(L, -1)) {
    raw_getfield(L, -1, "items");  // stack: result items
    if (!lua_isnil(L, -1)) {
      if (!lua_istable(L, -1)) throw error(what + ": 'items' must be a list");
      const lua_Integer n = lua_Integer(lua_rawlen(L, -1));
      for (lua_Integer i = 1; i <= n; ++i) {
        lua_rawgeti(L, -1, i);  // stack: result items item
        each->push_back(figures_read(L, -1, what + " items[" + std::to_string(i) + "]").fields);
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
  }
  return figures_read(L, -1, what);
}

figures figures_read(lua_State* L, int res, const std::string& what) {
  stack_guard guard(L);
  res = lua_absindex(L, res);
  figures out;
  if (!lua_istable(L, res)) throw error(what + ": must return a table { fields = …, lines = … }");
  raw_getfield(L, res, "fields");
  if (!lua_istable(L, -1)) throw error(what + ": 'fields' must be a list");
  const lua_Integer n = lua_Integer(lua_rawlen(L, -1));
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_rawgeti(L, -1, i);  // stack: … fields f
    const int f = lua_gettop(L);
    if (!lua_istable(L, f)) throw error(what + ": fields[" + std::to_string(i) + "] must be a table");
    figure fig;
    auto str = [&](const char* name, bool required) {
      raw_getfield(L, f, name);
      std::string v;
      if (lua_type(L, -1) == LUA_TSTRING) v = lua_tostring(L, -1);
      else if (required || !lua_isnil(L, -1))
        throw error(what + ": fields[" + std::to_string(i) + "]." + name + " must be a string");
      lua_pop(L, 1);
      return v;
    };
    fig.key = str("key", true);
    fig.column = str("column", false);
    fig.cell = str("cell", false);
    switch (raw_getfield(L, f, "top")) {
      case LUA_TNIL: break;
      case LUA_TBOOLEAN: fig.top = lua_toboolean(L, -1); break;
      default: throw error(what + ": fields[" + std::to_string(i) + "].top must be a boolean");
    }
    lua_pop(L, 1);
    switch (raw_getfield(L, f, "value")) {
      case LUA_TNIL: break;
      case LUA_TBOOLEAN: fig.value = bool(lua_toboolean(L, -1)); break;
      case LUA_TNUMBER:
        if (lua_isinteger(L, -1)) fig.value = int64_t(lua_tointeger(L, -1));
        else fig.value = double(lua_tonumber(L, -1));
        break;
      case LUA_TSTRING: fig.value = std::string(lua_tostring(L, -1)); break;
      default: throw error(what + ": fields[" + std::to_string(i) + "].value must be a number, boolean, string or nil");
    }
    lua_pop(L, 2);  // value, f
    out.fields.push_back(std::move(fig));
  }
  lua_pop(L, 1);
  for (auto [name, list] : {std::pair{"lines", &out.lines}, {"warnings", &out.warnings}}) {
    raw_getfield(L, res, name);
    if (!lua_isnil(L, -1)) {
      const std::string bad = what + ": '" + name + "' must be a list of strings";
      if (!lua_istable(L, -1)) throw error(bad);
      const lua_Integer m = lua_Integer(lua_rawlen(L, -1));
      for (lua_Integer i = 1; i <= m; ++i) {
        lua_rawgeti(L, -1, i);
        if (lua_type(L, -1) != LUA_TSTRING) throw error(bad);
        list->emplace_back(lua_tostring(L, -1));
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
  }
  return out;
}

namespace {
void key_add(std::string& out, const std::string& v) {
  out += std::to_string(v.size());
  out += ':';
  out += v;
}
void key_add(std::string& out, double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%a;", v);  // exact
  out += buf;
}
void key_add(std::string& out, const shape& s) {
  out += '[';
  for (int64_t d : s) out += std::to_string(d) + ',';
  out += ']';
}

// Everything node_push shows a rule, unambiguously.
std::string node_key(const node& n) {
  std::string k;
  for (const std::string* s : {&n.op, &n.name, &n.layer, &n.dtype}) key_add(k, *s);
  k += std::to_string(n.inputs.size()) + '{';
  for (const auto& in : n.inputs) key_add(k, in);
  key_add(k, n.output);
  k += std::to_string(n.count) + ';';
  key_add(k, n.params);
  k += n.optimizer ? 'o' : 'f';
  for (const auto& [name, v] : n.attrs) {
    key_add(k, name);
    if (const auto* d = std::get_if<double>(&v)) k += 'd', key_add(k, *d);
    else if (const auto* b = std::get_if<bool>(&v)) k += *b ? "bt" : "bf";
    else k += 's', key_add(k, std::get<std::string>(v));
  }
  return k;
}
}  // namespace

expansion session::expand(const graph& g, const gpu_spec& gpu, bool training, const run_state* st) {
  expansion e = expand_on(g, &gpu, training, st);
  // a graph whose every rule returned {} (views only, or a rule that forgot its kernels), or only kernels of 0 FLOPs and
  // 0 bytes, forecast 0 ms, exit 0 (found by tests/fuzz/mutate.py)
  const bool work = std::any_of(e.kernels.begin(), e.kernels.end(), [](const auto& x) {
    return x.k.flops > 0 || x.k.bytes > 0 || (x.k.seconds && *x.k.seconds > 0);
  });
  if (!work && !g.nodes.empty()) {
    // the rules that returned nothing name their files (a rule that forgot its kernels is the usual cause)
    std::vector<std::string> rules;
    for (const auto& n : g.nodes) {
      if (rules.size() == 4) break;
      if (!name_ok(n.op, false)) continue;
      for (const auto& d : p_->op_dirs) {
        std::error_code ec;
        if (!fs::is_regular_file(d.path / (n.op + ".lua"), ec)) continue;
        const std::string file = d.display + "/" + n.op + ".lua";
        if (std::find(rules.begin(), rules.end(), file) == rules.end()) rules.push_back(file);
        break;
      }
    }
    std::string listed;
    for (const auto& r : rules) listed += (listed.empty() ? "" : ", ") + r;
    throw error((g.origin.empty() ? std::string() : g.origin + ": ") + "model '" + g.model + "': none of its " +
                std::to_string(g.nodes.size()) + " nodes has a kernel that does work (every op rule returned {} or "
                "kernels of 0 flops and 0 bytes): the forecast would be 0 ms" +
                (listed.empty() ? std::string() : " (op rules: " + listed + ")"));
  }
  return e;
}

node_rule session::rule_kernels() {
  return [this](const node& n) {
    graph g;
    g.nodes.push_back(n);
    return expand_on(g, nullptr, true).kernels;
  };
}

expansion session::expand_on(const graph& g, const gpu_spec* gpu, bool training, const run_state* st) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  expansion out;
  if (gpu) p_->push_gpu(*gpu);  // stack: gpu
  else lua_pushnil(L);
  const int gpu_idx = lua_gettop(L);
  const std::string memo_prefix =
      p_->opts.memo ? (gpu ? gpu_spec_key(*gpu) : std::string("no gpu")) + (training ? "|T|" : "|I|") : std::string();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const node& n = g.nodes[i];
    std::string memo_key;
    if (p_->opts.memo) {
      memo_key = memo_prefix + node_key(n);
      if (auto it = p_->expansions.find(memo_key); it != p_->expansions.end()) {
        for (const auto& [ph, k] : it->second.kernels) out.kernels.push_back({i, ph, k});
        continue;
      }
    }
    session::impl::expanded memo;
    // the workload too: a built-in rule's error ("ops/layernorm.lua:16: bad argument …" for a 0 dimension) named
    // neither the file nor the model it came from (found by tests/fuzz/mutate.py)
    const std::string node_who = "for node " + std::to_string(i + 1) + " '" + n.name + "'";
    const std::string model_where = g.origin.empty() ? std::string() : ns::model_where(g.origin, g.model);
    const std::string who = model_where.empty() ? node_who : node_who + " of " + model_where;
    p_->push_engine_field("need_op");
    lua_pushstring(L, n.op.c_str());
    ns_call(L, 1, 2, "while loading op '" + n.op + "' " + who);  // stack: gpu rule chunk
    const std::string chunk = lua_tostring(L, -1);
    const int rule = lua_gettop(L) - 1;
    p_->push_engine_field("strict");
    node_push(L, n, training);
    lua_pushstring(L, ("node '" + n.name + "'").c_str());
    ns_call(L, 2, 1);  // stack: gpu rule chunk node
    const int node_idx = lua_gettop(L);
    std::vector<std::pair<const char*, phase>> hooks;
    if (n.optimizer) hooks = {{"forward", phase::optimizer}};
    else if (training) hooks = {{"forward", phase::forward}, {"backward", phase::backward}, {"accumulate", phase::accumulate}};
    else hooks = {{"forward", phase::forward}};
    for (const auto& [hook, ph] : hooks) {
      const int t = raw_getfield(L, rule, hook);  // stack: ... hook
      if (t == LUA_TNIL && ph == phase::backward) {  // a silent 0 ms backward is refused: the rule must say so
        // naming the workload script's line of the node, as check_nodes does (workload.lua node_located)
        std::string at = who;
        if (st && !g.origin.empty() && run_state_push(L, *st, "node_located") == LUA_TFUNCTION) {
          lua_pushinteger(L, lua_Integer(i + 1));
          lua_pushstring(L, model_where.c_str());
          ns_call(L, 2, 1);  // stack: ... hook located
          if (lua_isstring(L, -1)) at = node_who + " of " + lua_tostring(L, -1);
        }
        throw error(chunk + ": op '" + n.op + "' has no 'backward' and this is a training run; write backward = false "
                            "if the op has no backward work\n    " + at);
      }
      if (t == LUA_TNIL || t == LUA_TBOOLEAN) {  // optional hook absent, or backward = false: no kernels
        lua_pop(L, 1);
        continue;
      }
      // names the rule file too: an error without a position (error(), error({})) still says where it came from
      const std::string ctx = "while evaluating op '" + n.op + "' " + hook + "() (" + chunk + ") " + who;
      // what the hook returns is checked after it returned: its errors name the line of the rule file that defines
      // it (the file alone for a hook a library made, neusight.rules' constructors)
      std::string at = chunk;
      lua_Debug ar;
      lua_pushvalue(L, -1);
      if (lua_getinfo(L, ">S", &ar) && ar.linedefined > 0 && ar.source == "@" + chunk)  // pops the copy
        at += ":" + std::to_string(ar.linedefined);
      lua_pushvalue(L, node_idx);
      lua_pushvalue(L, gpu_idx);
      ns_call(L, 2, 1, ctx);  // stack: ... kernels
      try {
        auto ks = kernels_read(L, -1, at + ": " + hook + "()");
        // an optimizer step always updates its parameters: no kernels would be a silent 0 ms step (tester10)
        if (ph == phase::optimizer && ks.empty())
          throw error(at + ": " + hook + "() of optimizer '" + n.op + "' returned no kernels: an optimizer step reads "
                      "and writes every parameter; return its kernels");
        for (auto& k : ks) {
          if (p_->opts.memo) memo.kernels.emplace_back(ph, k);
          out.kernels.push_back({i, ph, std::move(k)});
        }
      } catch (const script_error&) {
        throw;
      } catch (const error& e) {
        throw error(std::string(e.what()) + "\n    " + ctx);
      }
      lua_pop(L, 1);
    }
    lua_settop(L, gpu_idx);
    if (p_->opts.memo) p_->expansions.emplace(std::move(memo_key), std::move(memo));
  }
  return out;
}

std::vector<fs::path> session::ops_search_path() const {
  std::vector<fs::path> out;
  for (const auto& d : p_->op_dirs) out.push_back(d.path);
  return out;
}

std::vector<fs::path> session::scripts_search_path() const {
  std::vector<fs::path> out;
  for (const auto& d : p_->script_dirs) out.push_back(d.path);
  return out;
}

std::vector<op_entry> session::scripts_shadowing() const {
  std::vector<op_entry> out;
  const auto& dirs = p_->script_dirs;
  const fs::path bundled = p_->opts.data_root / "scripts";
  for (size_t i = 0; i < dirs.size(); ++i) {
    std::error_code ec;
    if (fs::equivalent(dirs[i].path, bundled, ec)) continue;  // the bundled files shadow nothing of their own
    std::vector<std::string> rels;  // module files under this root, relative ("neusight/launch.lua")
    for (auto it = fs::recursive_directory_iterator(dirs[i].path, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      std::error_code e1;
      if (it->is_regular_file(e1) && it->path().extension() == ".lua")
        rels.push_back(it->path().lexically_relative(dirs[i].path).generic_string());
    }
    std::sort(rels.begin(), rels.end());
    for (const auto& rel : rels) {
      std::string mod = rel.substr(0, rel.size() - 4);  // the module the file answers (a/b.lua, a/b/init.lua → a.b)
      if (mod.size() > 5 && mod.compare(mod.size() - 5, 5, "/init") == 0) mod.resize(mod.size() - 5);
      std::replace(mod.begin(), mod.end(), '/', '.');
      if (!module_name_ok(mod)) continue;
      // only the file require finds first: no earlier root has the module, and here a/b.lua beats a/b/init.lua
      std::string base = mod;
      std::replace(base.begin(), base.end(), '.', '/');
      auto found_in = [&](size_t j) -> std::string {
        std::error_code e2;
        for (const std::string& cand : {base + ".lua", base + "/init.lua"})
          if (fs::is_regular_file(dirs[j].path / cand, e2)) return cand;
        return {};
      };
      bool first = found_in(i) == rel;
      for (size_t j = 0; j < i && first; ++j) first = found_in(j).empty();
      if (!first) continue;
      op_entry e{mod, dirs[i].display + "/" + rel, {}, {}, {}};
      for (size_t j = i + 1; j < dirs.size(); ++j)
        if (const std::string cand = found_in(j); !cand.empty()) e.shadows.push_back(dirs[j].display + "/" + cand);
      if (!e.shadows.empty()) out.push_back(std::move(e));
    }
  }
  return out;
}

std::vector<op_entry> session::ops_list() const {
  std::vector<op_entry> out;
  std::map<std::string, size_t> index;
  for (const auto& d : p_->op_dirs) {
    std::error_code ec;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(d.path, ec))
      if (e.is_regular_file() && e.path().extension() == ".lua") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      const std::string name = f.stem().string();
      const std::string shown = d.display + "/" + f.filename().string();
      auto it = index.find(name);
      if (it == index.end()) {
        index[name] = out.size();
        out.push_back({name, shown, {}, {}, {}});
      } else {
        out[it->second].shadows.push_back(shown);
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const op_entry& a, const op_entry& b) { return a.name < b.name; });
  return out;
}


void session::tiles_select(std::vector<kernel_instance>& kernels, const gpu_spec& gpu) {
  std::vector<kernel*> ks;
  ks.reserve(kernels.size());
  for (auto& ki : kernels) ks.push_back(&ki.k);
  tiles_select(ks, gpu);
}

void session::tiles_select(std::vector<kernel*>& kernels, const gpu_spec& gpu) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  p_->push_gpu(gpu);  // stack: gpu
  const int gpu_idx = lua_gettop(L);
  require_push(*p_, "tiling.gemm");
  require_push(*p_, "tiling.vec");
  require_push(*p_, "tiling.attention");  // stack: gpu gemm vec attention
  const int gemm_idx = gpu_idx + 1, vec_idx = gpu_idx + 2, attn_idx = gpu_idx + 3;
  // shape key → kernel holding the tile: this call's, or (opts.memo) the session's, keyed by the GPU too
  std::map<std::string, kernel> local;
  std::map<std::string, kernel>& done = p_->opts.memo ? p_->tiles : local;
  const std::string prefix = p_->opts.memo ? gpu_spec_key(gpu) + "|" : std::string();
  for (kernel* k : kernels) {
    if (k->kind == kernel_kind::memory || k->kind == kernel_kind::collective) continue;
    const bool is_gemm = k->kind == kernel_kind::gemm || k->kind == kernel_kind::bmm;
    const std::string key = prefix + std::string(kernel_kind_name(k->kind)) + "|" + k->op + "|" + k->dtype + "|" +
                            std::to_string(k->b) + "," + std::to_string(k->m) + "," + std::to_string(k->n) + "," +
                            std::to_string(k->k) + "," + std::to_string(k->rows) + "," + std::to_string(k->hidden) +
                            "|" + k->kv_dtype;
    if (auto it = done.find(key); it != done.end()) {
      k->tile_m = it->second.tile_m, k->tile_k = it->second.tile_k, k->tile_elems = it->second.tile_elems;
      k->tile_split = it->second.tile_split;
      k->tile_alt_m = it->second.tile_alt_m, k->tile_alt_k = it->second.tile_alt_k;
      k->tile_alt_split = it->second.tile_alt_split, k->tile_alt_kernel = it->second.tile_alt_kernel;
      k->tile_switched = false;
      k->tile_piece = it->second.tile_piece, k->tile_piece_elems = it->second.tile_piece_elems;
      k->tile_blocks = it->second.tile_blocks, k->tile_flops = it->second.tile_flops, k->tile_bytes = it->second.tile_bytes;
      k->tile_kernel = it->second.tile_kernel;
      continue;
    }
    const bool is_attn = k->kind == kernel_kind::attention;
    const char* tiling = is_gemm ? "tiling.gemm" : is_attn ? "tiling.attention" : "tiling.vec";
    const std::string& module = function_get(*p_, is_gemm ? gemm_idx : is_attn ? attn_idx : vec_idx, tiling, "select");
    lua_createtable(L, 0, 7);  // stack: ... select k
    const std::string fam = k->kind == kernel_kind::gemm ? "linear" : std::string(kernel_kind_name(k->kind));
    lua_pushstring(L, fam.c_str());
    lua_setfield(L, -2, "family");
    lua_pushstring(L, k->op.c_str());
    lua_setfield(L, -2, "op");
    lua_pushstring(L, k->dtype.c_str());
    lua_setfield(L, -2, "dtype");
    if (!k->kv_dtype.empty()) {
      lua_pushstring(L, k->kv_dtype.c_str());
      lua_setfield(L, -2, "kv_dtype");
    }
    const std::pair<const char*, int64_t> dims[] = {{"b", k->b}, {"m", k->m}, {"n", k->n}, {"k", k->k},
                                                     {"rows", k->rows}, {"hidden", k->hidden}};
    for (const auto& [name, v] : dims) {
      lua_pushinteger(L, lua_Integer(v));
      lua_setfield(L, -2, name);
    }
    lua_pushvalue(L, gpu_idx);
    ns_call(L, 2, 1, "while selecting the tile of kernel " + k->name + " in " + module);
    table_reader r(L, -1, module + ": select()");
    if (is_gemm) {
      k->tile_m = r.integer("tile_m"), k->tile_k = r.integer("tile_k");
      k->tile_kernel = r.str_or("kernel", "");
      if (k->tile_m < 1 || k->tile_k < 1) throw error(r.what() + ": tile_m and tile_k must be >= 1");
      // a thread block's output tile: real GEMM libraries stop at 256 a side (shared memory); 100000 x 100000 was
      // accepted and forecast gpt2_large at 11 years (found by a user test)
      if (k->tile_m > max_gemm_tile || k->tile_k > max_gemm_tile)
        throw error(r.what() + ": tile_m and tile_k must be at most " + std::to_string(max_gemm_tile) + " (got " +
                    std::to_string(k->tile_m) + " x " + std::to_string(k->tile_k) + ")");
      if (r.has("split")) {
        k->tile_split = r.integer("split");
        if (k->tile_split < 1 || k->tile_split > k->n)
          throw error(r.what() + ": split must be between 1 and the reduction length n = " + std::to_string(k->n));
      }
      k->tile_alt_m = 0, k->tile_alt_k = 0, k->tile_alt_split = 1, k->tile_alt_kernel.clear(), k->tile_switched = false;
      if (r.has("alt_tile_m") || r.has("alt_tile_k")) {  // the tile a row doubling above, by whole row bands (weights/TILE_SWITCH_RULE.md)
        k->tile_alt_m = r.integer("alt_tile_m"), k->tile_alt_k = r.integer("alt_tile_k");
        k->tile_alt_split = r.integer_or("alt_split", 1);
        k->tile_alt_kernel = r.str_or("alt_kernel", "");
        if (k->tile_alt_m < 1 || k->tile_alt_k < 1 || k->tile_alt_m > max_gemm_tile || k->tile_alt_k > max_gemm_tile)
          throw error(r.what() + ": alt_tile_m and alt_tile_k must be between 1 and " + std::to_string(max_gemm_tile));
        if (k->tile_alt_split < 1 || k->tile_alt_split > k->n)
          throw error(r.what() + ": alt_split must be between 1 and the reduction length n = " + std::to_string(k->n));
      }
    } else if (is_attn) {
      k->tile_blocks = r.number("blocks"), k->tile_flops = r.number("flops"), k->tile_bytes = r.number("bytes");
      k->tile_kernel = r.str_or("kernel", "");
      if (!(k->tile_blocks >= 1) || !(k->tile_flops > 0) || !(k->tile_bytes > 0) || !std::isfinite(k->tile_blocks) ||
          !std::isfinite(k->tile_flops) || !std::isfinite(k->tile_bytes))
        throw error(r.what() + ": blocks must be >= 1, flops and bytes > 0 and finite");
    } else {
      k->tile_elems = r.integer("elems");
      if (k->tile_elems < 1) throw error(r.what() + ": elems must be >= 1");
      if (r.has("piece") || r.has("piece_elems")) {  // a tensor split into 32-bit-indexable launches
        k->tile_piece = r.integer("piece"), k->tile_piece_elems = r.integer("piece_elems");
        if (k->tile_piece < 1 || k->tile_piece_elems < 1 || k->tile_piece >= k->rows * k->hidden)
          throw error(r.what() + ": piece must be >= 1 and below the kernel's elements, piece_elems >= 1");
      }
    }
    lua_pop(L, 1);
    done[key] = *k;
  }
}

void session::kernel_costs(std::vector<kernel*>& kernels, const kernel_where& where) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);
  require_push(*p_, "neusight.kernels");  // stack: K
  const int k_idx = lua_gettop(L);
  for (size_t i = 0; i < kernels.size(); ++i) {
    kernel* k = kernels[i];
    int args = 0;
    switch (k->kind) {
      case kernel_kind::gemm:
        if (k->b != 1) throw error("kernel " + k->name + ": a gemm kernel has b = 1 (got " + std::to_string(k->b) + ")");
        function_get(*p_, k_idx, "neusight.kernels", "linear");
        for (int64_t v : {k->m, k->n, k->k}) lua_pushinteger(L, lua_Integer(v));
        args = 4;
        break;
      case kernel_kind::bmm:
        function_get(*p_, k_idx, "neusight.kernels", "bmm");
        for (int64_t v : {k->b, k->m, k->n, k->k}) lua_pushinteger(L, lua_Integer(v));
        args = 5;
        break;
      case kernel_kind::elementwise:
        function_get(*p_, k_idx, "neusight.kernels", "vec");
        lua_pushstring(L, k->op.c_str());
        for (int64_t v : {k->rows, k->hidden}) lua_pushinteger(L, lua_Integer(v));
        args = 4;
        break;
      case kernel_kind::softmax:
      case kernel_kind::layernorm:
        function_get(*p_, k_idx, "neusight.kernels", k->kind == kernel_kind::softmax ? "softmax" : "layernorm");
        for (int64_t v : {k->rows, k->hidden}) lua_pushinteger(L, lua_Integer(v));
        args = 3;
        break;
      case kernel_kind::attention:
        function_get(*p_, k_idx, "neusight.kernels", "attention");
        lua_pushstring(L, k->op.c_str());
        for (int64_t v : {k->b, k->m, k->k, k->n, k->rows, k->hidden}) lua_pushinteger(L, lua_Integer(v));
        args = 8;
        break;
      default:
        continue;
    }
    lua_pushstring(L, k->dtype.c_str());
    if (k->kind == kernel_kind::gemm && k->weight_bytes > 0) {  // linear(…, dtype, weight_bytes)
      lua_pushnumber(L, k->weight_bytes);
      args += 1;
    }
    if (k->kind == kernel_kind::attention && !k->kv_dtype.empty()) {  // attention(…, dtype, dv = nil, kv_dtype)
      lua_pushnil(L);
      lua_pushstring(L, k->kv_dtype.c_str());
      args += 2;
    }
    if (!where) {
      ns_call(L, args, 1, "while costing kernel " + k->name);
    } else if (const int status = ns_pcall(L, args, 1); status != LUA_OK) {
      // neusight.kernels' own message about this kernel (not positioned: raised at its C caller) at the reader's row
      const char* msg = lua_tostring(L, -1);
      const bool said = status == LUA_ERRRUN && msg && !ns_limit_tripped(L) && !ns_message_positioned(msg);
      try {
        ns_error_throw(L, status, said ? std::string() : "while costing kernel " + k->name + " of " + where(i));
      } catch (const script_error& e) {
        if (!said) throw;
        throw script_error(where(i) + ": " + e.what(), e.traceback);
      }
    }
    table_reader r(L, -1, "neusight.kernels");
    k->flops = r.number("flops"), k->bytes = r.number("bytes"), k->name = r.str("name");
    if (k->kind == kernel_kind::attention) kv_costs_read(r, *k);
    lua_pop(L, 1);
  }
}

kernel_costing session::costing() {
  return [this](std::vector<kernel*>& ks, const kernel_where& where) { kernel_costs(ks, where); };
}

bool session::tile_parse(const std::string& kernel_name, int64_t& tile_m, int64_t& tile_k) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  function_push(*p_, "tiling.gemm", "parse");
  lua_pushstring(L, kernel_name.c_str());
  ns_call(L, 1, 2, "while parsing kernel name '" + kernel_name + "'");
  const bool ok = lua_isinteger(L, -2) && lua_isinteger(L, -1);
  if (ok) tile_m = lua_tointeger(L, -2), tile_k = lua_tointeger(L, -1);
  lua_pop(L, 2);
  return ok;
}

int64_t session::tile_from_grid(int64_t rows, int64_t hidden, int64_t grid_x, int64_t grid_y, int64_t grid_z) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const std::string& file = function_push(*p_, "tiling.vec", "from_grid");
  for (int64_t v : {rows, hidden, grid_x, grid_y, grid_z}) lua_pushinteger(L, lua_Integer(v));
  ns_call(L, 5, 1, "while computing elements per block");
  int ok = 0;
  const int64_t e = lua_tointegerx(L, -1, &ok);
  lua_pop(L, 1);
  if (!ok || e < 1) throw error(file + ": from_grid() must return a positive integer");
  return e;
}

op_entry session::op_load(const std::string& name) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  p_->push_engine_field("get_op");
  lua_pushstring(L, name.c_str());
  ns_call(L, 1, 2);  // stack: rule chunk
  if (lua_isnil(L, -2)) {
    lua_pop(L, 2);
    throw error("no rule for op '" + name + "' on the op search path");
  }
  op_entry e{name, lua_tostring(L, -1), {}, {}, {}};
  raw_getfield(L, -2, "doc");
  e.doc = lua_tostring(L, -1);
  lua_pop(L, 1);
  if (raw_getfield(L, -2, "attrs") == LUA_TTABLE) {  // stack: rule chunk attrs (checked by prelude.lua: name = string)
    lua_pushnil(L);
    while (lua_next(L, -2) != 0) {  // stack: rule chunk attrs key value
      if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TSTRING)
        e.attrs.emplace_back(lua_tostring(L, -2), lua_tostring(L, -1));
      lua_pop(L, 1);
    }
    std::sort(e.attrs.begin(), e.attrs.end());
  }
  lua_pop(L, 3);
  return e;
}

namespace {
// Loads a test file in a test env and leaves its returned table on the stack. [-0, +1, e]
void lua_test_push(session::impl& p, const fs::path& file) {
  lua_State* L = p.L();
  p.push_engine_field("new_env");
  p.push_engine_field("test_globals");
  ns_call(L, 0, 1);
  ns_call(L, 1, 1);  // stack: env
  const std::string chunk = "tests/scripts/" + file.filename().string();
  ns_load_chunk(L, file_read(file.string(), chunk), chunk, -1);
  lua_remove(L, -2);
  ns_call(L, 0, 1);
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    throw error(chunk + ": a test file must return a table of test_* functions");
  }
}
}  // namespace

std::vector<std::string> session::lua_test_names(const fs::path& file) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  lua_test_push(*p_, file);
  std::vector<std::string> names;
  lua_pushnil(L);
  while (lua_next(L, -2) != 0) {  // stack: tests key value
    if (lua_type(L, -2) == LUA_TSTRING && lua_isfunction(L, -1)) {
      const std::string k = lua_tostring(L, -2);
      if (k.rfind("test_", 0) == 0) names.push_back(k);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  std::sort(names.begin(), names.end());
  return names;
}

void session::lua_test_run(const fs::path& file, const std::string& test) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  lua_test_push(*p_, file);
  raw_getfield(L, -1, test.c_str());
  lua_remove(L, -2);
  ns_call(L, 0, 0);
}

}  // namespace ns
