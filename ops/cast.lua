-- ops/cast.lua — Tensor.to(dtype) / .float(): a dtype conversion copy (aten::_to_copy), memory-bound.
-- node.dtype is the target type, attrs.from the source type (default: node.dtype, a plain copy); the kernel
-- reads numel(in) elements of `from` and writes numel(out) of the target: MEM(in, out) with those element sizes.
-- Backward (ToCopyBackward) casts the gradient back: the same bytes the other way; none with attrs.no_grad (a cast
-- under torch.no_grad(), or of a tensor without gradient: a mask's .bool()).
local K = require "neusight.kernels"
local rules = require "neusight.rules"

local function kernel(node)
  local from = node.attrs.from or node.dtype
  local k = K.mem(rules.shapes(node, true), node.dtype)
  k.bytes = K.numel(rules.input(node, 1)) * K.dtype_bytes(from) + K.numel(node.output) * K.dtype_bytes(node.dtype)
  return k
end

---@type neusight.OpRule
return {
  name = "cast",
  doc = "dtype conversion x.to(dtype): MEM(in, out), in read as attrs.from, out written as node.dtype; bw the same bytes",
  attrs = rules.attrs { "no_grad", from = "string: the source dtype (default: node.dtype, a plain copy)" },
  saves = rules.saves_nothing, -- ToCopyBackward keeps no tensor (autocast's cached weight copies: neusight.memory)
  forward = function(node) return { kernel(node) } end,
  backward = function(node) return node.attrs.no_grad and {} or { kernel(node) } end,
}
