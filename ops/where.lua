-- ops/where.lua — torch.where(cond, x, y): a memory-bound select, MEM(inputs…, out); backward MEM(inputs…) ×2.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "where",
  doc = "select: MEM(cond, x, y, out); bw MEM(cond, x, y) x2 (one masked copy per branch gradient)",
  saves = function(node) return K.numel(rules.input(node, 1)) end, -- the bool condition, 1 B per element
  forward = function(node)
    return { K.mem(rules.shapes(node, true), node.dtype) }
  end,
  backward = function(node)
    local inputs = rules.shapes(node, false)
    return { K.mem(inputs, node.dtype), K.mem(inputs, node.dtype) }
  end,
}
