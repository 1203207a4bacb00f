-- ops/sgd.lua — optimizer step of plain SGD (no momentum, no weight decay) over the P parameters of input {P}.
-- torch.optim.SGD(foreach=True) launches _foreach_add_(params, grads, alpha=-lr): one binary elementwise
-- pass that reads param and grad and writes param: 2w + g bytes per parameter (w, g: the recipe's element
-- sizes of the updated parameters and the gradients, rules.optimizer_roles; 3e in a pure recipe). With a
-- master copy (Megatron amp) "foreach" (default) adds the copy pass MEM [w + copy], "fused" writes the 16-bit
-- copy in the same kernel [+ copy]; a recipe's fp16 passes come first (rules.optimizer_prologue).
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "sgd",
  doc = "SGD step over P params: VECadd(1,P) (param += -lr·grad), 2w+g bytes per param",
  attrs = rules.optimizer_attrs,
  optimizer = { moments = 0 }, -- --optimizer sgd: no momentum buffer
  forward = function(node)
    local r = rules.optimizer_roles(node)
    local impl = rules.optimizer_impl(node, "foreach")
    local out = rules.optimizer_prologue(r, node.dtype)
    local fused = impl == "fused"
    out[#out + 1] = K.vec("add", r.rows, r.P, node.dtype, { bytes_per_elem = 2 * r.w + r.g + (fused and r.copy or 0) })
    if not fused then out[#out + 1] = rules.optimizer_copy(r, node.dtype) end
    return out
  end,
}
