-- ops/fused_elementwise.lua — a torch.compile-style fused kernel built by scripts/neusight/fusion.lua.
--
-- The node's inputs are the fused run's external inputs and its output the run's final output, so the
-- kernel reads each input once and writes the output once (rules.io_bytes); attrs.flops is the run's total
-- FLOPs. attrs.anchor = "softmax" | "layernorm" makes it that family's kernel; otherwise it is one VEC kernel
-- named after the last computing member (attrs.rep, the reference's representative primitive), or a MEM
-- kernel when no member computes (selects, slices). Inference only: there is no backward hook.
--
-- Prediction: the tile predictor's VEC/softmax/LN families were trained on single primitives (1, 5 or 6 FLOPs
-- per element) and extrapolate wildly beyond them (a 2-FLOP VECmul of (4096, 5120) on A100 comes out 20×
-- slower, 4 FLOPs 7000×). A fused chain stays memory-bound (≤ 1 FLOP/byte in fp32, far below any GPU's ridge
-- point), so the predictor sees its memory-bound representative: the fused bytes with the representative
-- primitive's FLOPs (predict_flops); the reported FLOPs are the chain's.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "fused_elementwise",
  doc = "fused run (scripts/neusight/fusion.lua): one VEC<rep>/VECsoftmax/VECln kernel, inputs read once + output written once",
  forward = function(node)
    local rows, hidden = rules.vec_dims(node)
    if not rows then return {} end
    local a = node.attrs
    local k
    if a.anchor == "softmax" then k = K.softmax(rows, hidden, node.dtype)
    elseif a.anchor == "layernorm" then k = K.layernorm(rows, hidden, node.dtype)
    elseif a.rep then k = K.vec(a.rep, rows, hidden, node.dtype)
    else return { K.mem(rules.shapes(node, true), node.dtype) } end
    k.bytes = rules.io_bytes(node)
    k.predict_flops = k.flops
    k.flops = a.flops or k.flops
    return { k }
  end,
}
