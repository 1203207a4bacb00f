// engine/lua/session_report.cpp — reports computed entirely in Lua (`neusight models`, the HTML page) and the
// session's GPU lookup: a module's function returns a table; the engine renders it as JSON and asks the module for
// its table and CSV text.
#include <string>

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
