// engine/lua/wrap_gpu.cpp — the GPU spec as the plain table op rules receive.
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

}  // namespace ns
