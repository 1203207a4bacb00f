-- ops/adam.lua — Adam optimizer step (PyTorch 2.x foreach) over the P parameters of input {P}: 7 elementwise passes.
--
-- torch.optim.Adam(foreach=True, default hyper-parameters, no weight decay) launches, per step, these
-- multi-tensor kernels over all parameters (bytes per parameter with element size e):
--   1 _foreach_lerp_(exp_avg, grad, 1−β1)              exp_avg += (1−β1)(grad − exp_avg)  reads 2, writes 1  3e
--   2 _foreach_mul_(exp_avg_sq, β2)                    in place                            reads 1, writes 1  2e
--   3 _foreach_addcmul_(exp_avg_sq, grad, grad, 1−β2)  grad is passed twice, read once     reads 2, writes 1  3e
--   4 denom = _foreach_sqrt(exp_avg_sq)                                                    reads 1, writes 1  2e
--   5 _foreach_div_(denom, √bias_correction2)          scalar per tensor                   reads 1, writes 1  2e
--   6 _foreach_add_(denom, eps)                                                            reads 1, writes 1  2e
--   7 _foreach_addcdiv_(param, exp_avg, denom, −step)  param += −step·exp_avg/denom        reads 3, writes 1  4e
-- = 18e bytes and 13 FLOPs per parameter. The step-counter increments (one scalar per tensor) are ignored.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "adam",
  doc = "Adam step over P params (foreach): VEClerp, VECmulu, VECaddcmul, VECsqrt, VECdivu, VECaddu, VECaddcdiv (18·e bytes per param)",
  forward = function(node)
    local rows, params = K.vec_shape(rules.input(node, 1))
    local dtype, e = node.dtype, K.dtype_bytes(node.dtype)
    return {
      K.vec("lerp", rows, params, dtype),
      K.vec("mulu", rows, params, dtype),
      K.vec("addcmul", rows, params, dtype, { bytes_per_elem = 3 * e }), -- grad read once, not twice
      K.vec("sqrt", rows, params, dtype),
      K.vec("divu", rows, params, dtype),
      K.vec("addu", rows, params, dtype),
      K.vec("addcdiv", rows, params, dtype),
    }
  end,
}
