-- ops/fused_elementwise.lua — a torch.compile-style fused kernel built by scripts/neusight/fusion.lua.
--
-- The node's inputs are the fused run's external inputs and its output the run's final output, so the
-- kernel reads each input once and writes the output once (rules.io_bytes); attrs.flops is the run's total
-- FLOPs. attrs.anchor = "softmax" | "layernorm" makes it that family's kernel; otherwise it is one VEC kernel
-- named after the last computing member (attrs.rep, the reference's representative primitive), or a MEM
-- kernel when no member computes (selects, slices). Inference only: there is no backward hook.
--
-- Prediction: the kernel carries the fused bytes and the chain's total FLOPs. The tile predictor sees every
-- vector kernel in its family's training convention (1, 5 or 6 FLOPs per element for element-wise, softmax,
-- layer norm) and takes the real FLOPs only as a compute bound (engine/core/tile_model.h,
-- tile_features_compute): a fused chain stays memory-bound (≤ 1 FLOP/byte in fp32, far below any GPU's ridge
-- point), so it is forecast as its memory-bound representative, never faster than FLOPs / fp32 peak.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "fused_elementwise",
  doc = "fused run (scripts/neusight/fusion.lua): one VEC<rep>/VECsoftmax/VECln kernel, inputs read once + output written once",
  attrs = rules.attrs { "fused", anchor = "string: \"softmax\" or \"layernorm\", the row-wise kernel of the run", flops = "number: the run's FLOPs", rep = "string: the element-wise kernel of the last computing member" },
  forward = function(node)
    local rows, hidden = rules.vec_dims(node)
    if not rows then return {} end
    local a = node.attrs
    local k
    if a.anchor == "softmax" then k = K.softmax(rows, hidden, node.dtype)
    elseif a.anchor == "layernorm" then k = K.layernorm(rows, hidden, node.dtype)
    elseif a.rep then
      -- a member's own kernel kind (rules.elementwise flops_per_elem): the run's FLOPs below are its count
      k = K.vec(a.rep, rows, hidden, node.dtype, not K.vec_ops[a.rep] and { flops_per_elem = 0 } or nil)
    else return { K.mem(rules.shapes(node, true), node.dtype) } end
    k.bytes = rules.io_bytes(node)
    k.flops = a.flops or k.flops
    return { k }
  end,
}
