-- ops/nonzero.lua — torch.where(mask) / torch.nonzero (MoE routing: the tokens of one expert): reads the mask, writes the
-- int64 index tensors; no gradient. PyTorch also synchronises with the host to size the result (not modelled: the
-- engine has no host time).
-- Input: the mask (int64 elements, or attrs.elem_bytes); output: the indices, e.g. (2, m) for torch.where on a 2-D mask.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "nonzero",
  doc = "indices of non-zero elements: MEM(mask, indices), int64 elements; no backward (integer tensors)",
  attrs = rules.attrs { "elem_bytes" },
  backward = false,
  forward = function(node)
    local k = K.mem(rules.shapes(node, true), node.dtype)
    k.bytes = (node.attrs.elem_bytes or K.index_bytes) * K.numel(rules.input(node, 1)) + K.index_bytes * K.numel(node.output)
    return { k }
  end,
}
