// engine/lua/wrap_forecast.cpp — a forecast (engine/core/forecast.h) as the plain table neusight.report renders.
#include <string>
#include <variant>

#include "lua/wrap.h"

namespace ns {

void forecast_push(lua_State* L, const forecast& f, bool rows) {
  const auto str = [&](const char* key, const std::string& v) {
    lua_pushlstring(L, v.data(), v.size());
    lua_setfield(L, -2, key);
  };
  const auto num = [&](const char* key, double v) {
    lua_pushnumber(L, v);
    lua_setfield(L, -2, key);
  };
  const auto integer = [&](const char* key, int64_t v) {
    lua_pushinteger(L, lua_Integer(v));
    lua_setfield(L, -2, key);
  };
  lua_createtable(L, 0, 13);  // stack: fc
  num("total", f.total());
  num("forward", f.phase_total(phase::forward));
  num("backward", f.phase_total(phase::backward));
  num("accumulate", f.phase_total(phase::accumulate));
  num("optimizer", f.phase_total(phase::optimizer));
  num("flops", f.flops_total());
  num("flops_forward", f.phase_flops(phase::forward));
  num("flops_backward", f.phase_flops(phase::backward));
  num("flops_accumulate", f.phase_flops(phase::accumulate));
  num("flops_optimizer", f.phase_flops(phase::optimizer));
  num("params", f.params_total());
  if (!rows) return;
  lua_createtable(L, int(f.g.nodes.size()), 0);  // stack: fc nodes
  for (size_t i = 0; i < f.g.nodes.size(); ++i) {
    const node& n = f.g.nodes[i];
    lua_createtable(L, 0, 5);  // stack: fc nodes node
    str("name", n.name);
    str("op", n.op);
    str("layer", n.layer);
    integer("count", n.count);
    if (const auto it = n.attrs.find("fused"); it != n.attrs.end())  // members of a fused node (neusight.fusion)
      if (const auto* s = std::get_if<std::string>(&it->second)) str("fused", *s);
    lua_rawseti(L, -2, lua_Integer(i + 1));
  }
  lua_setfield(L, -2, "nodes");
  lua_createtable(L, int(f.kernels.size()), 0);  // stack: fc kernels
  for (size_t i = 0; i < f.kernels.size(); ++i) {
    const kernel_instance& ki = f.kernels[i];
    const kernel& k = ki.k;
    lua_createtable(L, 0, 24);  // stack: fc kernels kernel
    integer("node", int64_t(ki.node) + 1);
    str("phase", std::string(phase_name(ki.ph)));
    str("name", k.name);
    str("kind", std::string(kernel_kind_name(k.kind)));
    integer("b", k.b), integer("m", k.m), integer("n", k.n), integer("k", k.k);
    integer("rows", k.rows), integer("hidden", k.hidden);
    str("kv_dtype", k.kv_dtype);
    num("weight_bytes", k.weight_bytes);
    num("flops", k.flops), num("bytes", k.bytes);
    integer("tile_m", k.tile_m), integer("tile_k", k.tile_k), integer("tile_split", k.tile_split);
    integer("tile_elems", k.tile_elems);
    num("tile_blocks", k.tile_blocks), num("tile_flops", k.tile_flops), num("tile_bytes", k.tile_bytes);
    str("tile_kernel", k.tile_kernel);
    num("seconds_each", f.seconds_each[i]);
    num("seconds", f.seconds(i));
    lua_rawseti(L, -2, lua_Integer(i + 1));
  }
  lua_setfield(L, -2, "kernels");
}

}  // namespace ns
