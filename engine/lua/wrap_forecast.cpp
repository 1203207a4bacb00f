// engine/lua/wrap_forecast.cpp — a forecast (engine/core/forecast.h) as the plain table neusight.report renders.
#include <string>
#include <variant>

#include "lua/wrap.h"

namespace ns {

void forecast_push(lua_State* L, const forecast& f, bool rows) {
  lua_createtable(L, 0, 15);  // stack: fc
  set_number(L, "total", f.total());
  set_number(L, "forward", f.phase_total(phase::forward));
  set_number(L, "backward", f.phase_total(phase::backward));
  set_number(L, "accumulate", f.phase_total(phase::accumulate));
  set_number(L, "optimizer", f.phase_total(phase::optimizer));
  set_number(L, "flops", f.flops_total());
  set_number(L, "flops_forward", f.phase_flops(phase::forward));
  set_number(L, "flops_backward", f.phase_flops(phase::backward));
  set_number(L, "flops_accumulate", f.phase_flops(phase::accumulate));
  set_number(L, "flops_optimizer", f.phase_flops(phase::optimizer));
  // the model's work of the forward, backward and gradient accumulation (forecast::phase_model_flops: each node's
  // model_flops_share and model_flops_copies): what neusight.report figure_inputs hands the figures as model FLOPs
  set_number(L, "model_flops_forward", f.phase_model_flops(phase::forward));
  set_number(L, "model_flops_backward", f.phase_model_flops(phase::backward));
  set_number(L, "model_flops_accumulate", f.phase_model_flops(phase::accumulate));
  set_number(L, "params", f.params_total());
  if (!rows) return;
  lua_createtable(L, int(f.g.nodes.size()), 0);  // stack: fc nodes
  for (size_t i = 0; i < f.g.nodes.size(); ++i) {
    const node& n = f.g.nodes[i];
    lua_createtable(L, 0, 5);  // stack: fc nodes node
    set_string(L, "name", n.name);
    set_string(L, "op", n.op);
    set_string(L, "layer", n.layer);
    set_integer(L, "count", n.count);
    if (const auto it = n.attrs.find("fused"); it != n.attrs.end())  // members of a fused node (neusight.fusion)
      if (const auto* s = std::get_if<std::string>(&it->second)) set_string(L, "fused", *s);
    lua_rawseti(L, -2, lua_Integer(i + 1));
  }
  lua_setfield(L, -2, "nodes");
  lua_createtable(L, int(f.kernels.size()), 0);  // stack: fc kernels
  for (size_t i = 0; i < f.kernels.size(); ++i) {
    const kernel_instance& ki = f.kernels[i];
    const kernel& k = ki.k;
    lua_createtable(L, 0, 24);  // stack: fc kernels kernel
    set_integer(L, "node", int64_t(ki.node) + 1);
    set_string(L, "phase", std::string(phase_name(ki.ph)));
    set_string(L, "name", k.name);
    set_string(L, "kind", std::string(kernel_kind_name(k.kind)));
    set_integer(L, "b", k.b), set_integer(L, "m", k.m), set_integer(L, "n", k.n), set_integer(L, "k", k.k);
    set_integer(L, "rows", k.rows), set_integer(L, "hidden", k.hidden);
    set_string(L, "kv_dtype", k.kv_dtype);
    set_number(L, "weight_bytes", k.weight_bytes);
    set_string(L, "act_quant", k.act_quant);
    set_number(L, "flops", k.flops), set_number(L, "bytes", k.bytes);
    set_integer(L, "tile_m", k.tile_m), set_integer(L, "tile_k", k.tile_k), set_integer(L, "tile_split", k.tile_split);
    set_integer(L, "tile_elems", k.tile_elems);
    set_number(L, "tile_blocks", k.tile_blocks), set_number(L, "tile_flops", k.tile_flops), set_number(L, "tile_bytes", k.tile_bytes);
    set_string(L, "tile_kernel", k.tile_kernel);
    if (k.tile_switched) {  // the alternative tile priced it: the rule's own, for tile.rule (scripts/neusight/report.lua)
      set_integer(L, "rule_tile_m", k.tile_alt_m), set_integer(L, "rule_tile_k", k.tile_alt_k);
      set_integer(L, "rule_tile_split", k.tile_alt_split), set_string(L, "rule_tile_kernel", k.tile_alt_kernel);
    }
    set_number(L, "seconds_each", f.seconds_each[i]);
    set_number(L, "seconds", f.seconds(i));
    lua_rawseti(L, -2, lua_Integer(i + 1));
  }
  lua_setfield(L, -2, "kernels");
}

}  // namespace ns
