-- ops/silu.lua — SiLU (swish) activation x·σ(x), nn.SiLU / F.silu (ACT2FN["silu"]): one element-wise kernel each way.
-- Forward VECsilu reads x and writes y; backward VECsilu_backward (PyTorch's silu_backward) reads dy and x and
-- writes dx. FLOPs per element are the real ones (neusight.kernels: 4 forward, 9 backward).
-- Prediction: the tile predictor shows every element-wise kernel to its MLP in the training convention (1 FLOP
-- per element, the kernel's bytes) and uses the real FLOPs only as a compute bound (engine/core/tile_model.h).
return require("neusight.rules").activation {
  name = "silu",
  doc = "SiLU x·σ(x): VECsilu(rows,H); bw VECsilu_backward(rows,H) (reads dy and x)",
  grad = "silu_backward",
}
