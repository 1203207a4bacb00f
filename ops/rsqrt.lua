-- ops/rsqrt.lua — elementwise 1/sqrt(x) (T5 RMSNorm): the reference charges it as memory traffic, MEM(in, out) forward and backward.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "rsqrt",
  doc = "reciprocal square root: MEM(inputs…, out); bw MEM(inputs…, out)",
  fusion = "elementwise", -- RMSNorm's eps add → rsqrt → normalise multiply is one pass under torch.compile
  saves = rules.saves_output, -- rsqrt's backward reads y
  forward = function(node) return { K.mem(rules.shapes(node, true), node.dtype) } end,
  backward = function(node) return { K.mem(rules.shapes(node, true), node.dtype) } end,
}
