-- ops/silu.lua — SiLU (swish) activation x·σ(x), nn.SiLU / F.silu (ACT2FN["silu"]): one element-wise kernel each way.
-- Forward VECsilu reads x and writes y; backward VECsilu_backward (PyTorch's silu_backward) reads dy and x and
-- writes dx. FLOPs per element are the real ones (neusight.kernels: 4 forward, 9 backward).
-- Prediction: the element-wise tile predictor was trained on 1-FLOP-per-element kernels only and extrapolates
-- wildly beyond them (VECsilu_backward of 4096 × 14336 on an H100 came out at 200 ms, roofline 0.1 ms). Both kernels
-- are memory-bound on every GPU (≤ 1.5 FLOP/byte in fp32), so, as ops/fused_elementwise.lua does, the predictor
-- sees the 1-FLOP representative with the same bytes (predict_flops); the reported FLOPs stay the real ones.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "silu",
  doc = "SiLU x·σ(x): VECsilu(rows,H); bw VECsilu_backward(rows,H) (reads dy and x)",
  forward = function(node)
    local rows, hidden = rules.vec_dims(node)
    if not rows then return {} end
    local k = K.vec("silu", rows, hidden, node.dtype, { bytes = rules.io_bytes(node) })
    k.predict_flops = rows * hidden
    return { k }
  end,
  backward = function(node)
    local rows, hidden = rules.vec_dims(node)
    if not rows then return {} end
    local k = K.vec("silu_backward", rows, hidden, node.dtype)
    k.predict_flops = rows * hidden
    return { k }
  end,
}
