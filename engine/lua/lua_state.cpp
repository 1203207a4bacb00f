// engine/lua/lua_state.cpp — state lifetime, panic backstop, traceback-carrying protected calls.
#include "lua/lua_state.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace ns {

namespace {

int l_panic(lua_State* L) {
  const char* msg = lua_tostring(L, -1);
  std::fprintf(stderr, "neusight: unprotected Lua error: %s\n", msg ? msg : "(not a string)");
  std::abort();
}

// Message handler: turns any error object into "message\nstack traceback:...". [-1, +1, m]
int l_traceback(lua_State* L) {
  const char* msg = lua_tostring(L, 1);
  if (msg == nullptr) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

}  // namespace

lua_state::lua_state() : L_(luaL_newstate()) {
  if (L_ == nullptr) throw error("cannot create Lua state (out of memory)");
  lua_atpanic(L_, l_panic);
  luaL_openlibs(L_);
}

lua_state::~lua_state() { lua_close(L_); }

int ns_pcall(lua_State* L, int nargs, int nres) {
  const int base = lua_gettop(L) - nargs;  // function index
  lua_pushcfunction(L, l_traceback);
  lua_insert(L, base);                     // stack: handler f args...
  const int status = lua_pcall(L, nargs, nres, base);
  lua_remove(L, base);                     // drop the handler
  return status;
}

void ns_call(lua_State* L, int nargs, int nres, const std::string& context) {
  if (ns_pcall(L, nargs, nres) == LUA_OK) return;
  std::string full = lua_tostring(L, -1) ? lua_tostring(L, -1) : "(error)";
  lua_pop(L, 1);
  std::string tb;
  const auto cut = full.find("\nstack traceback:");
  if (cut != std::string::npos) {
    tb = full.substr(cut + 1);
    full.erase(cut);
  }
  if (!context.empty()) full += "\n    " + context;
  throw script_error(full, tb);
}

void ns_load_chunk(lua_State* L, const std::string& source, const std::string& chunkname, int env_idx) {
  env_idx = lua_absindex(L, env_idx);
  const std::string name = "@" + chunkname;
  if (luaL_loadbufferx(L, source.data(), source.size(), name.c_str(), "t") != LUA_OK) {
    std::string msg = lua_tostring(L, -1);
    lua_pop(L, 1);
    throw script_error(msg, "");
  }
  lua_pushvalue(L, env_idx);
  if (lua_setupvalue(L, -2, 1) == nullptr) lua_pop(L, 1);  // a chunk's first upvalue is _ENV
}

std::string file_read(const std::string& path, const std::string& display) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(display + ": cannot read file");
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

}  // namespace ns
