-- ops/pow.lua — elementwise power (VECpowu for x ** scalar): backward is the power again plus two multiplies.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "pow",
  doc = "power: VECpow(u)(rows,H); bw VECpow(u) + VECmul + VECmulu (n · x^(n-1) · dy)",
  attrs = rules.attrs { "saved_inputs", "tensor_inputs" },
  fusion = "elementwise",
  check = rules.check_broadcast,
  saves = rules.saves_input, -- n · x^(n−1) needs x (a Python-scalar exponent)
  forward = function(node)
    local rows, hidden = rules.vec_dims(node)
    if not rows then return {} end
    return { K.vec(rules.vec_op(node, "pow"), rows, hidden, node.dtype, { bytes = rules.io_bytes(node) }) }
  end,
  -- d(x^n) = n · x^(n−1) · dy: x^(n−1), times dy, times the scalar n.
  backward = function(node)
    local rows, hidden = rules.vec_dims(node)
    if not rows then return {} end
    return {
      K.vec(rules.vec_op(node, "pow"), rows, hidden, node.dtype),
      K.vec("mul", rows, hidden, node.dtype),
      K.vec("mulu", rows, hidden, node.dtype),
    }
  end,
}
