-- ops/sigmoid.lua — torch.sigmoid / F.sigmoid (Qwen2-MoE's shared-expert gate): one element-wise kernel each way.
-- Forward VECsigmoid reads x and writes y; backward VECsigmoid_backward (PyTorch's sigmoid_backward, dy·y·(1 − y))
-- reads dy and y and writes dx.
return require("neusight.rules").activation {
  name = "sigmoid",
  doc = "sigmoid 1/(1+exp(−x)): VECsigmoid(rows,H); bw VECsigmoid_backward(rows,H) (reads dy and y)",
  grad = "sigmoid_backward",
  saves = "output", -- sigmoid_backward reads y
}
