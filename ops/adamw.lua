-- ops/adamw.lua — AdamW optimizer step (decoupled weight decay) over the P parameters of input {P}.
--
-- Element sizes come from the node's precision recipe (see ops/adam.lua and rules.optimizer_roles): w = the
-- parameters the step updates (fp32 master in Megatron amp), g = the gradients it reads, m = one moment element,
-- copy = the 16-bit model parameters written back from a master (0 without one).
--
-- attrs.impl = "fused" (default): torch.optim.AdamW(fused=True) (PyTorch ≥ 2.0), apex/Transformer Engine
-- FusedAdam (Megatron-LM's Adam is AdamW: decoupled weight decay): one memory-bound kernel over all parameters
-- that reads param, grad, exp_avg, exp_avg_sq and writes param, exp_avg, exp_avg_sq and, with a master, the
-- 16-bit model copy:
--   VECadamw   2w + g + 4m + copy bytes, 14 FLOPs per parameter (the 13 of Adam + the decay multiply)
--     pure fp32 28, pure bf16 14, amp autocast 28 (everything fp32), amp megatron bf16 2·4 + 4 + 4·4 + 2 = 30
-- attrs.impl = "foreach": torch.optim.AdamW(foreach=True) (_multi_tensor_adamw): the decay pass
--   0 _foreach_mul_(param, 1 − lr·weight_decay)        2w
-- then Adam's seven passes (ops/adam.lua): 4w + 2g + 14m bytes (20e when every role has e bytes), 14 FLOPs per
-- parameter, plus, with a master, the copy pass MEM [w + copy].
-- Either way a recipe's fp16 passes come first (rules.optimizer_prologue): fp16 → fp32 main gradients
-- [grad16 + g] (Megatron), unscale + inf check [2g] (loss scaling).
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "adamw",
  doc = "AdamW step over P params: fused (default) one VECadamw, 2w+g+4m+copy bytes per param; foreach 8 passes, 4w+2g+14m",
  attrs = rules.optimizer_attrs,
  -- --optimizer adamw: exp_avg and exp_avg_sq per parameter; fused by default (torch.optim.AdamW(fused=True))
  optimizer = { moments = 2, impl = "fused" },
  forward = function(node) return rules.adam_step(node, "adamw", "fused", true) end,
}
