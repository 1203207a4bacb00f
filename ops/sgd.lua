-- ops/sgd.lua — optimizer step of plain SGD (no momentum, no weight decay) over the P parameters of input {P}.
-- torch.optim.SGD(foreach=True) launches _foreach_add_(params, grads, alpha=-lr): one binary elementwise
-- pass that reads param and grad and writes param (3 element accesses per parameter).
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "sgd",
  doc = "SGD step over P params: VECadd(1,P) (param += -lr·grad)",
  forward = function(node)
    local rows, params = K.vec_shape(rules.input(node, 1))
    return { K.vec("add", rows, params, node.dtype) }
  end,
}
