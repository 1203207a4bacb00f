-- ops/tanh.lua — elementwise tanh (VECtanh); backward dy·(1 − y²) as a VECmulu and a VECaddu (reference).
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "tanh",
  doc = "tanh: VECtanh(rows,H); bw VECmulu(rows,H) + VECaddu(rows,H)",
  fusion = "elementwise",
  check = rules.check_broadcast,
  saves = rules.saves_output, -- tanh_backward reads y
  forward = function(node)
    local rows, hidden = K.vec_shape(node.output)
    return { K.vec("tanh", rows, hidden, node.dtype) }
  end,
  backward = function(node)
    local rows, hidden = K.vec_shape(node.output)
    return { K.vec("mulu", rows, hidden, node.dtype), K.vec("addu", rows, hidden, node.dtype) }
  end,
}
