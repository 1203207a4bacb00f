-- ops/index.lua — advanced indexing x[idx] along dim 0 (aten::index; MoE: hidden_states[None, top_x], a gather of the
-- rows routed to one expert, and routing_weights[top_x, idx, None]).
-- Inputs: x (n, …) and the int64 index (m); output (m, …), the gathered rows.
-- Forward: read m rows and the index, write m rows. Backward (IndexBackward): a zero-filled gradient of x's full
-- shape (new_zeros), index_put_(accumulate = True) of the m gradient rows into it (read the rows and the index,
-- read-modify-write m rows), and autograd's accumulation of that full-size gradient into x's other gradients
-- (VECadd over x: the tensor feeds every expert's gather, so each one adds a full (n, …) gradient).
local K = require "neusight.kernels"
local rules = require "neusight.rules"

local function dims(node)
  local x, idx = rules.input(node, 1), rules.input(node, 2)
  local out = node.output
  return x, K.numel(idx), out
end

---@type neusight.OpRule
return {
  name = "index",
  doc = "gather x[idx]: MEM(idx, out, out); bw MEM(x) (zero-fill) + MEM(idx, out ×3) (index_put accumulate) + VECadd over x",
  saves = function(node) return K.index_bytes * K.numel(rules.input(node, 2)) end, -- the int64 index
  forward = function(node)
    local x, m, out = dims(node)
    local k = K.mem({ { m }, out, out }, node.dtype)
    k.bytes = K.index_bytes * m + 2 * K.numel(out) * K.dtype_bytes(node.dtype)
    return { k }
  end,
  backward = function(node)
    local x, m, out = dims(node)
    local put = K.mem({ { m }, out, out, out }, node.dtype)
    put.bytes = K.index_bytes * m + 3 * K.numel(out) * K.dtype_bytes(node.dtype)
    local rows, hidden = K.vec_shape(x)
    return { K.mem({ x }, node.dtype), put, K.vec("add", rows, hidden, node.dtype) }
  end,
}
