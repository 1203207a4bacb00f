-- ops/softmax.lua — softmax over the last dim: VECsoftmax forward; backward a VECmul plus a softmax-like reduction.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "softmax",
  doc = "softmax: VECsoftmax(rows,H); bw VECmul(rows,H) + VECsoftmax(rows,H)",
  fusion = "anchor", -- absorbs the element-wise runs around it (scale, mask; dropout)
  saves = rules.saves_output, -- softmax_backward reads y
  forward = function(node)
    local rows, hidden = K.vec_shape(node.output)
    return { K.softmax(rows, hidden, node.dtype) }
  end,
  -- dx = y ∘ (dy − Σ y∘dy): the reference charges an elementwise multiply plus one more row-wise softmax pass.
  backward = function(node)
    local rows, hidden = K.vec_shape(node.output)
    return { K.vec("mul", rows, hidden, node.dtype), K.softmax(rows, hidden, node.dtype) }
  end,
}
