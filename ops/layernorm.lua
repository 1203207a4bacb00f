-- ops/layernorm.lua — nn.LayerNorm over the last dim: VECln forward; backward one VECmul; γ and β grads accumulated.
local K = require "neusight.kernels"

---@type neusight.OpRule
return {
  name = "layernorm",
  doc = "LayerNorm: VECln(rows,H); bw VECmul(rows,H); acc VECadd(1,H) x2 (gamma, beta)",
  forward = function(node)
    local rows, hidden = K.vec_shape(node.output)
    return { K.layernorm(rows, hidden, node.dtype) }
  end,
  -- The reference models the whole input-gradient computation as a single elementwise multiply.
  backward = function(node)
    local rows, hidden = K.vec_shape(node.output)
    return { K.vec("mul", rows, hidden, node.dtype) }
  end,
  accumulate = function(node)
    local hidden = node.output[#node.output]
    return { K.vec("add", 1, hidden, node.dtype), K.vec("add", 1, hidden, node.dtype) }
  end,
}
