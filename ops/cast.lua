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
  attrs = rules.attrs { "no_grad", from = "string: the source dtype (default: node.dtype, a plain copy)",
    autocast_weight = "boolean: torch.autocast's cast of an fp32 GEMM weight (neusight.nodes): its input is the "
      .. "parameter (model state) and its output autocast's cached copy (memory workspace): no temporary",
    output_shared = "boolean: the output is the buffer the next node saves (Megatron's in-place vocab-parallel "
      .. "cross-entropy keeps the upcast logits as its softmax): counted there, the temporary is the input only" },
  saves = rules.saves_nothing, -- ToCopyBackward keeps no tensor (autocast's cached weight copies: neusight.memory)
  -- Input and output alive at once (neusight.memory's default, in their own element sizes); with attrs.output_shared
  -- the output is the next node's saved tensor, counted among the activations, and only the input is extra.
  temporary = function(node)
    if node.attrs.autocast_weight then return 0 end
    local input = K.numel(rules.input(node, 1)) * K.dtype_bytes(node.attrs.from or node.dtype)
    if node.attrs.output_shared then return input end
    return input + K.numel(node.output) * K.dtype_bytes(node.dtype)
  end,
  forward = function(node) return { kernel(node) } end,
  backward = function(node) return node.attrs.no_grad and {} or { kernel(node) } end,
}
