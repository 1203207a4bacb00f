-- ops/weight.lua — a bare parameter read by elementwise ops (T5 RMSNorm scale): no kernels but the gradient accumulation VECadd(1, numel).
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "weight",
  doc = "parameter leaf: no forward/backward kernels; acc VECadd(1, numel(out))",
  forward = function() return {} end,
  backward = false, -- a leaf: its gradient is only accumulated
  accumulate = function(node)
    if node.attrs.frozen then return {} end -- LoRA's frozen base (attrs.frozen): no gradient
    return { rules.grad_accumulate(node, K.numel(node.output)) }
  end,
}
