-- ops/one_hot.lua — F.one_hot(indices, num_classes) (MoE routing's expert mask): reads the int64 indices, writes the int64 mask; no gradient.
-- Input (…) of indices, output (…, num_classes); both int64 (neusight.kernels.index_bytes), whatever node.dtype says.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "one_hot",
  doc = "one-hot mask: MEM(indices, mask), int64 elements; no backward (integer tensors)",
  backward = false,
  forward = function(node)
    local k = K.mem(rules.shapes(node, true), node.dtype)
    k.bytes = K.index_bytes * (K.numel(rules.input(node, 1)) + K.numel(node.output))
    return { k }
  end,
}
