-- ops/where.lua — torch.where(cond, x, y): a memory-bound select, MEM(inputs…, out); backward MEM(inputs…) ×2.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "where",
  doc = "select: MEM(cond, x, y, out); bw MEM(cond, x, y) x2 (one masked copy per branch gradient)",
  attrs = rules.attrs { "no_grad" },
  fusion = "elementwise", -- a select joins a fused run (0 FLOPs: a MEM kernel)
  -- the bool condition, 1 B per element; attrs.no_grad (under torch.no_grad()): nothing saved, no backward
  saves = function(node) return node.attrs.no_grad and 0 or K.numel(rules.input(node, 1)) end,
  forward = function(node)
    return { K.mem(rules.shapes(node, true), node.dtype) }
  end,
  backward = function(node)
    if node.attrs.no_grad then return {} end
    local inputs = rules.shapes(node, false)
    return { K.mem(inputs, node.dtype), K.mem(inputs, node.dtype) }
  end,
}
