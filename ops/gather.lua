-- ops/gather.lua — torch.gather(x, dim, idx) / x.gather(dim, idx) (DeepSeek-V3's router: scores.gather(1, topk_indices),
-- the k selected experts' scores of each token).
-- Inputs: x (…, E) and the int64 index (…, k); output (…, k) in node.dtype, the index's shape.
-- Forward: one kernel reading the index and the k gathered elements per row, writing the output. Backward
-- (GatherBackward: new_zeros + scatter_add_): a zero-filled gradient of x's shape, then the k gradients per row
-- scattered into it (reading them and the index, read-modify-write of k elements). Saves the int64 index.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

local function dims(node)
  local x, idx, out = rules.input(node, 1), rules.input(node, 2), node.output
  if #idx ~= #x or #out ~= #idx or K.numel(out) ~= K.numel(idx) then
    error(("gather node '%s': the index and the output must have x's rank and the index's shape"):format(node.name), 0)
  end
  return x, K.numel(idx)
end

---@type neusight.OpRule
return {
  name = "gather",
  doc = "gather along a dim: MEM(idx, gathered, out) with an int64 index; bw MEM(x) (zero-fill) + MEM(idx, grad, x rows ×2) (scatter_add)",
  check = function(node)
    local ok, err = pcall(dims, node)
    if not ok then return tostring(err) end
  end,
  saves = function(node) return K.index_bytes * K.numel(rules.input(node, 2)) end, -- the int64 index
  forward = function(node)
    local _, m = dims(node)
    local k = K.mem({ { m }, node.output, node.output }, node.dtype)
    k.bytes = K.index_bytes * m + 2 * m * K.dtype_bytes(node.dtype)
    return { k }
  end,
  backward = function(node)
    local x, m = dims(node)
    local scatter = K.mem({ { m }, node.output, node.output, node.output }, node.dtype)
    scatter.bytes = K.index_bytes * m + 3 * m * K.dtype_bytes(node.dtype)
    return { K.mem({ x }, node.dtype), scatter }
  end,
}
