-- ops/topk.lua — torch.topk(x, k, dim=-1) (MoE routing: the k experts of each token).
-- Input (…, E); output (…, k) values in node.dtype, plus the int64 indices (neusight.kernels.index_bytes).
-- Forward: one kernel reading x and writing values and indices. Backward (values only: indices have no gradient):
-- a zero-filled (…, E) gradient, then the k gradients per row scattered into it (reading them and the indices).
-- attrs.no_grad = true (under torch.no_grad(), or only the indices are used): no backward, nothing saved.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "topk",
  doc = "top-k along the last dim: MEM(x, values) + int64 indices; bw MEM(x) (zero-fill) + MEM(values, values) (scatter)",
  attrs = rules.attrs { "no_grad" },
  saves = function(node) -- the int64 indices
    return node.attrs.no_grad and 0 or K.index_bytes * K.numel(node.output)
  end,
  forward = function(node)
    local x, out = rules.input(node, 1), node.output
    local k = K.mem({ x, out }, node.dtype)
    k.bytes = k.bytes + K.index_bytes * K.numel(out)
    return { k }
  end,
  backward = function(node)
    if node.attrs.no_grad then return {} end
    local x, out = rules.input(node, 1), node.output
    local scatter = K.mem({ out, out }, node.dtype)
    scatter.bytes = scatter.bytes + K.index_bytes * K.numel(out)
    return { K.mem({ x }, node.dtype), scatter }
  end,
}
