// engine/lua/session_report.cpp — reports computed entirely in Lua (`neusight models`, the HTML page) and the
// session's GPU lookup: a module's function returns a table; the engine renders it as JSON and asks the module for
// its table and CSV text.
#include <string>
#include <type_traits>
#include <variant>

#include "lua/session_impl.h"

namespace ns {

const gpu_spec& session::gpu(const std::string& query) { return p_->gpu_resolve(query); }

session::lua_report session::report(const std::string& module, const std::string& fn) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string where = "scripts/" + std::string(module.rfind("neusight.", 0) == 0 ? "neusight/" : "") +
                            module.substr(module.rfind("neusight.", 0) == 0 ? 9 : 0) + ".lua";
  require_push(*p_, module.c_str());  // stack: M
  const int M = lua_gettop(L);
  raw_getfield(L, M, fn.c_str());
  ns_call(L, 0, 1, "in " + where + " " + fn);  // stack: M report
  if (!lua_istable(L, -1)) throw error(where + ": " + fn + " returned " + luaL_typename(L, -1) + ", expected a table");
  lua_report out;
  out.json = json_text_of(L, -1);
  for (auto [name, text] : {std::pair<const char*, std::string*>{"format_table", &out.table}, {"format_csv", &out.csv}}) {
    raw_getfield(L, M, name);
    lua_pushvalue(L, -2);
    ns_call(L, 1, 1, "in " + where + " " + name);  // stack: M report text
    if (!lua_isstring(L, -1)) throw error(where + ": " + name + " must return a string");
    *text = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  return out;
}

namespace {

// [-0, +1, m] what neusight.report reads of a GPU: name, file, mem_gb, price_per_hour_usd
void report_gpu_push(lua_State* L, const gpu_spec& gpu) {
  lua_createtable(L, 0, 4);
  lua_pushstring(L, gpu.name.c_str()), lua_setfield(L, -2, "name");
  lua_pushstring(L, gpu.source.c_str()), lua_setfield(L, -2, "file");
  lua_pushnumber(L, gpu.mem_gb), lua_setfield(L, -2, "mem_gb");
  lua_pushnumber(L, gpu.price_per_hour_usd), lua_setfield(L, -2, "price_per_hour_usd");
}

}  // namespace

session::forecast_facts session::forecast_facts_of(const forecast& f, const gpu_spec& gpu) {
  if (p_->fields_ref == LUA_NOREF) throw error("forecast_facts_of: no workload or graph to report");
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string where = "scripts/neusight/report.lua";
  require_push(*p_, "neusight.report");  // stack: R
  const int R = lua_gettop(L);
  forecast_facts out;
  raw_getfield(L, R, "memory_warnings");
  lua_rawgeti(L, LUA_REGISTRYINDEX, p_->fields_ref);
  ns_call(L, 1, 1, "in " + where + " memory_warnings");  // stack: R warnings
  if (!lua_istable(L, -1)) throw error(where + ": memory_warnings must return an array of strings");
  for (lua_Integer i = 1, n = lua_Integer(lua_rawlen(L, -1)); i <= n; ++i) {
    lua_rawgeti(L, -1, i);
    if (lua_type(L, -1) != LUA_TSTRING) throw error(where + ": memory_warnings must return an array of strings");
    out.memory_warnings.emplace_back(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);  // stack: R
  raw_getfield(L, R, "figure_inputs");
  lua_rawgeti(L, LUA_REGISTRYINDEX, p_->fields_ref);
  forecast_push(L, f, false);
  report_gpu_push(L, gpu);
  ns_call(L, 3, 1, "in " + where + " figure_inputs");  // stack: R inputs
  const std::string bad = where + ": figure_inputs must return an array of { key, value } (a number, boolean or string)";
  if (!lua_istable(L, -1)) throw error(bad);
  for (lua_Integer i = 1, n = lua_Integer(lua_rawlen(L, -1)); i <= n; ++i) {
    lua_rawgeti(L, -1, i);  // stack: R inputs pair
    if (!lua_istable(L, -1)) throw error(bad);
    lua_rawgeti(L, -1, 1);
    lua_rawgeti(L, -2, 2);  // stack: R inputs pair key value
    if (lua_type(L, -2) != LUA_TSTRING) throw error(bad);
    const std::string key = lua_tostring(L, -2);
    if (lua_isinteger(L, -1)) out.inputs.emplace_back(key, int64_t(lua_tointeger(L, -1)));
    else if (lua_type(L, -1) == LUA_TNUMBER) out.inputs.emplace_back(key, double(lua_tonumber(L, -1)));
    else if (lua_type(L, -1) == LUA_TBOOLEAN) out.inputs.emplace_back(key, bool(lua_toboolean(L, -1)));
    else if (lua_type(L, -1) == LUA_TSTRING) out.inputs.emplace_back(key, std::string(lua_tostring(L, -1)));
    else throw error(bad + " (" + key + " is a " + luaL_typename(L, -1) + ")");
    lua_pop(L, 3);
  }
  return out;
}

std::map<std::string, figure_value> session::forecast_row(const gpu_spec& gpu) {
  if (p_->fields_ref == LUA_NOREF) throw error("forecast_row: no workload or graph to report");
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string where = "scripts/neusight/report.lua row";
  require_push(*p_, "neusight.report");  // stack: R
  raw_getfield(L, -1, "row");
  lua_rawgeti(L, LUA_REGISTRYINDEX, p_->fields_ref);
  report_gpu_push(L, gpu);
  ns_call(L, 2, 1, "in " + where);  // stack: R row
  if (!lua_istable(L, -1)) throw error(where + " must return a table");
  std::map<std::string, figure_value> out;
  lua_pushnil(L);
  while (lua_next(L, -2) != 0) {  // stack: R row key value
    if (lua_type(L, -2) != LUA_TSTRING) throw error(where + " must return a table of named values");
    const std::string key = lua_tostring(L, -2);
    if (lua_isinteger(L, -1)) out[key] = int64_t(lua_tointeger(L, -1));
    else if (lua_type(L, -1) == LUA_TNUMBER) out[key] = double(lua_tonumber(L, -1));
    else if (lua_type(L, -1) == LUA_TBOOLEAN) out[key] = bool(lua_toboolean(L, -1));
    else if (lua_type(L, -1) == LUA_TSTRING) out[key] = std::string(lua_tostring(L, -1));
    else throw error(where + ": " + key + " must be a number, boolean or string");
    lua_pop(L, 1);
  }
  return out;
}

std::string session::forecast_summary() {
  if (p_->fields_ref == LUA_NOREF) throw error("forecast_summary: no workload or graph to report");
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  require_push(*p_, "neusight.report");  // stack: R
  raw_getfield(L, -1, "summary");
  lua_rawgeti(L, LUA_REGISTRYINDEX, p_->fields_ref);
  ns_call(L, 1, 1, "in scripts/neusight/report.lua summary");  // stack: R line
  if (lua_type(L, -1) != LUA_TSTRING) throw error("scripts/neusight/report.lua summary must return a string");
  return lua_tostring(L, -1);
}

std::string session::forecast_render(const forecast& f, const gpu_spec& gpu, const std::string& predictor,
                                     const std::vector<std::string>& warnings, const figures& figs,
                                     const std::string& format) {
  if (p_->fields_ref == LUA_NOREF) throw error("forecast_render: no workload or graph to report");
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string where = "scripts/neusight/report.lua";
  require_push(*p_, "neusight.report");  // stack: R
  const int R = lua_gettop(L);
  raw_getfield(L, R, "result");
  lua_rawgeti(L, LUA_REGISTRYINDEX, p_->fields_ref);
  forecast_push(L, f);
  lua_createtable(L, 0, 6);  // stack: R result fields fc extras
  report_gpu_push(L, gpu);
  lua_setfield(L, -2, "gpu");
  lua_pushstring(L, predictor.c_str()), lua_setfield(L, -2, "predictor");
  const auto strings = [&](const std::vector<std::string>& v, const char* key) {
    lua_createtable(L, int(v.size()), 0);
    for (size_t i = 0; i < v.size(); ++i) lua_pushstring(L, v[i].c_str()), lua_rawseti(L, -2, lua_Integer(i + 1));
    lua_setfield(L, -2, key);
  };
  strings(warnings, "warnings");
  strings(figs.lines, "figure_lines");
  lua_createtable(L, int(figs.fields.size()), 0);  // stack: … extras figures
  for (size_t i = 0; i < figs.fields.size(); ++i) {
    const figure& x = figs.fields[i];
    lua_createtable(L, 0, 3);
    lua_pushstring(L, x.key.c_str()), lua_setfield(L, -2, "key");
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::monostate>) lua_pushnil(L);  // not available: JSON null
          else if constexpr (std::is_same_v<T, int64_t>) lua_pushinteger(L, lua_Integer(v));
          else if constexpr (std::is_same_v<T, double>) lua_pushnumber(L, v);
          else if constexpr (std::is_same_v<T, bool>) lua_pushboolean(L, v);
          else lua_pushlstring(L, v.data(), v.size());
        },
        x.value);
    lua_setfield(L, -2, "value");
    lua_pushboolean(L, x.top), lua_setfield(L, -2, "top");
    lua_rawseti(L, -2, lua_Integer(i + 1));
  }
  lua_setfield(L, -2, "figures");
  ns_call(L, 3, 1, "in " + where + " result");  // stack: R r
  if (!lua_istable(L, -1)) throw error(where + ": result returned " + luaL_typename(L, -1) + ", expected a table");
  const std::string fn = format == "json" ? "format_json" : format == "csv" ? "format_csv" : "format_table";
  raw_getfield(L, R, fn.c_str());
  lua_insert(L, -2);
  ns_call(L, 1, 1, "in " + where + " " + fn);  // stack: R out
  if (format == "json") {
    if (!lua_istable(L, -1)) throw error(where + ": format_json must return a table");
    return json_text_of(L, -1);
  }
  if (!lua_isstring(L, -1)) throw error(where + ": " + fn + " must return a string");
  size_t n = 0;
  const char* s = lua_tolstring(L, -1, &n);
  return std::string(s, n);
}

std::string session::render(const std::string& module, const std::string& fn, const std::string& json) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string where = "module " + module + " " + fn;
  require_push(*p_, module.c_str());  // stack: M
  raw_getfield(L, -1, fn.c_str());
  json_text_push(L, json, where);  // stack: M fn report
  ns_call(L, 1, 1, "in " + where);  // stack: M text
  if (!lua_isstring(L, -1)) throw error(where + " must return a string");
  size_t n = 0;
  const char* s = lua_tolstring(L, -1, &n);
  return std::string(s, n);
}

}  // namespace ns
