-- ops/index_add.lua — out.index_add_(0, idx, src) (MoE: each expert's weighted output added into the block's output rows).
-- Inputs: src (m, …), the int64 index (m), out (n, …) updated in place; the node's output is the m rows written (the
-- tensor itself is out's storage: no new activation).
-- Forward: read src and the index, read-modify-write m rows of out. Backward: the gradient of src is
-- grad.index_select(0, idx) (read the index and m rows, write m rows); out's gradient passes through (no kernel).
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "index_add",
  doc = "scatter-add out[idx] += src: MEM(src, idx, out rows ×2); bw MEM(idx, src, src) (index_select of the gradient)",
  saves = function(node) return K.index_bytes * K.numel(rules.input(node, 2)) end, -- the int64 index
  forward = function(node)
    local src, m = rules.input(node, 1), K.numel(rules.input(node, 2))
    local k = K.mem({ src, { m }, src, src }, node.dtype)
    k.bytes = K.index_bytes * m + 3 * K.numel(src) * K.dtype_bytes(node.dtype)
    return { k }
  end,
  backward = function(node)
    local src, m = rules.input(node, 1), K.numel(rules.input(node, 2))
    local k = K.mem({ { m }, src, src }, node.dtype)
    k.bytes = K.index_bytes * m + 2 * K.numel(src) * K.dtype_bytes(node.dtype)
    return { k }
  end,
}
