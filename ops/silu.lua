-- ops/silu.lua — SiLU (swish) activation x·σ(x), nn.SiLU / F.silu (ACT2FN["silu"]): one element-wise kernel each way.
-- Forward VECsilu reads x and writes y; backward VECsilu_backward (PyTorch's silu_backward) reads dy and x and
-- writes dx. FLOPs per element are the real ones (neusight.kernels: 4 forward, 9 backward).
-- Prediction: the tile predictor shows every element-wise kernel to its MLP in the training convention (1 FLOP
-- per element, the kernel's bytes) and uses the real FLOPs only as a compute bound (engine/core/tile_model.h).
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "silu",
  doc = "SiLU x·σ(x): VECsilu(rows,H); bw VECsilu_backward(rows,H) (reads dy and x)",
  check = rules.check_broadcast,
  forward = function(node)
    local rows, hidden = rules.vec_dims(node)
    if not rows then return {} end
    return { K.vec("silu", rows, hidden, node.dtype, { bytes = rules.io_bytes(node) }) }
  end,
  backward = function(node)
    local rows, hidden = rules.vec_dims(node)
    if not rows then return {} end
    return { K.vec("silu_backward", rows, hidden, node.dtype) }
  end,
}
