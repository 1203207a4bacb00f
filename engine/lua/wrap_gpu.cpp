// engine/lua/wrap_gpu.cpp — the GPU spec as the plain table op rules receive.
#include <cmath>
#include <type_traits>

#include "lua/wrap.h"

namespace ns {

void gpu_push(lua_State* L, const gpu_spec& gpu) {
  lua_createtable(L, 0, int(gpu_fields().size()) + 1);  // stack: gpu
  for (const auto& f : gpu_fields()) {
    if (!gpu_field_present(gpu, f)) continue;  // an optional key the file leaves out is nil
    std::visit(
        [&](auto member) {
          using T = std::decay_t<decltype(gpu.*member)>;
          const T& v = gpu.*member;
          if constexpr (std::is_same_v<T, std::string>) {
            lua_pushlstring(L, v.data(), v.size());
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            lua_createtable(L, int(v.size()), 0);
            for (size_t i = 0; i < v.size(); ++i) {
              lua_pushlstring(L, v[i].data(), v[i].size());
              lua_rawseti(L, -2, lua_Integer(i + 1));
            }
          } else if constexpr (std::is_same_v<T, int64_t>) {
            lua_pushinteger(L, lua_Integer(v));
          } else {
            lua_pushnumber(L, v);
          }
        },
        f.member);
    lua_setfield(L, -2, f.key);  // gpu[key] = value
  }
  lua_pushlstring(L, gpu.source.data(), gpu.source.size());
  lua_setfield(L, -2, "source");
}

gpu_spec gpu_read(lua_State* L, int idx, const std::string& what) {
  idx = lua_absindex(L, idx);
  if (!lua_istable(L, idx)) throw error(what + ": expected a GPU table (got " + luaL_typename(L, idx) + ")");
  std::vector<std::string> keys = {"source"};  // a misspelt field would otherwise leave the GPU's number unchanged
  for (const auto& f : gpu_fields()) keys.emplace_back(f.key);
  table_reader(L, idx, what).check_keys(keys);
  gpu_spec gpu;
  for (const auto& f : gpu_fields()) {
    const int t = raw_getfield(L, idx, f.key);  // stack: value
    if (t == LUA_TNIL) {
      lua_pop(L, 1);
      if (f.optional) continue;
      throw error(what + ": missing GPU field '" + f.key + "'");
    }
    std::visit(
        [&](auto member) {
          using T = std::decay_t<decltype(gpu.*member)>;
          T& v = gpu.*member;
          auto bad = [&](const char* expected) {
            const std::string got = luaL_typename(L, -1);
            lua_pop(L, 1);
            throw error(what + ": GPU field '" + f.key + "' must be " + expected + " (got " + got + ")");
          };
          if constexpr (std::is_same_v<T, std::string>) {
            if (t != LUA_TSTRING) bad("a string");
            v = lua_tostring(L, -1);
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            if (t != LUA_TTABLE) bad("an array of strings");
            for (lua_Integer i = 1, n = lua_Integer(lua_rawlen(L, -1)); i <= n; ++i) {
              if (lua_rawgeti(L, -1, i) != LUA_TSTRING) {
                lua_pop(L, 1);
                bad("an array of strings");
              }
              v.emplace_back(lua_tostring(L, -1));
              lua_pop(L, 1);
            }
          } else {
            int ok = t == LUA_TNUMBER;
            if constexpr (std::is_same_v<T, int64_t>) v = int64_t(lua_tointegerx(L, -1, &ok));
            else v = lua_tonumber(L, -1);
            if (!ok) bad(std::is_same_v<T, int64_t> ? "an integer" : "a number");
            const double x = double(v);
            if (!std::isfinite(x) || (f.positive || f.optional ? !(x > 0) : !(x >= 0))) {
              lua_pop(L, 1);
              throw error(what + ": GPU field '" + f.key + "' must be a finite number " +
                          (f.positive || f.optional ? "> 0" : ">= 0") + " (got " + std::to_string(x) + ")");
            }
          }
        },
        f.member);
    lua_pop(L, 1);
  }
  if (raw_getfield(L, idx, "source") == LUA_TSTRING) gpu.source = lua_tostring(L, -1);
  lua_pop(L, 1);
  if (gpu.source.empty()) gpu.source = what;
  return gpu;
}

}  // namespace ns
