-- ops/adam.lua — Adam optimizer step (PyTorch 2.x torch.optim.Adam) over the P parameters of input {P}.
--
-- Element sizes come from the node's precision recipe (neusight.precision via workload.lua; rules.optimizer_roles):
-- w = the parameters the step updates (fp32 master in Megatron amp), g = the gradients it reads, m = one moment
-- element, copy = the 16-bit model parameters written back from a master (0 without one).
--
-- attrs.impl = "foreach" (default: torch.optim.Adam(foreach=True), default hyper-parameters, no weight decay)
-- launches these multi-tensor passes over all parameters (bytes per parameter):
--   1 _foreach_lerp_(exp_avg, grad, 1−β1)              exp_avg += (1−β1)(grad − exp_avg)  2m + g
--   2 _foreach_mul_(exp_avg_sq, β2)                    in place                            2m
--   3 _foreach_addcmul_(exp_avg_sq, grad, grad, 1−β2)  grad is passed twice, read once     2m + g
--   4 denom = _foreach_sqrt(exp_avg_sq)                                                    2m
--   5 _foreach_div_(denom, √bias_correction2)          scalar per tensor                   2m
--   6 _foreach_add_(denom, eps)                                                            2m
--   7 _foreach_addcdiv_(param, exp_avg, denom, −step)  param += −step·exp_avg/denom        2w + 2m
-- = 2w + 2g + 14m bytes (18e when every role has e bytes) and 13 FLOPs per parameter, plus, with a master,
-- the copy pass MEM [w + copy]. attrs.impl = "fused" (torch.optim.Adam(fused=True), apex/TE FusedAdam) is one
-- VECadam kernel reading w, g, exp_avg, exp_avg_sq and writing w, exp_avg, exp_avg_sq and the 16-bit copy:
-- 2w + g + 4m + copy bytes, 13 FLOPs per parameter. Either way a recipe's fp16 passes come first
-- (rules.optimizer_prologue). The step-counter increments (one scalar per tensor) are ignored.
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "adam",
  doc = "Adam step over P params: foreach (default) 7 passes, 2w+2g+14m bytes per param; fused one VECadam, 2w+g+4m+copy",
  attrs = rules.optimizer_attrs,
  optimizer = { moments = 2 }, -- --optimizer adam: exp_avg and exp_avg_sq per parameter; PyTorch's foreach default
  forward = function(node) return rules.adam_step(node, "adam", "foreach", false) end,
}
