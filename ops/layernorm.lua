-- ops/layernorm.lua — nn.LayerNorm over the last dim: VECln forward; backward one VECmul; γ and β grads accumulated.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "layernorm",
  doc = "LayerNorm: VECln(rows,H); bw VECmul(rows,H); acc VECadd(1,H) x2 (gamma, beta)",
  -- native_layer_norm keeps its input and the per-row mean and rstd (fp32); γ and β are model state
  saves = function(node)
    local rows = K.vec_shape(node.output)
    return rules.saved_inputs(node, { 1 }) + 2 * 4 * rows
  end,
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
