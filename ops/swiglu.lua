-- ops/swiglu.lua — fused SwiGLU silu(gate) · up (Megatron-LM bias_swiglu_impl / Transformer Engine swiglu, what
-- `kernels = "megatron"` runs in the Llama-family MLPs; HF runs act_fn and mul, two kernels each way): the node's
-- inputs are gate and up, its output their product. Forward VECswiglu reads both and writes the product; backward
-- VECswiglu_backward reads dy, gate and up and writes the gradients of both (neusight.kernels). Saved: gate and up.
return require("neusight.rules").activation {
  name = "swiglu",
  doc = "fused SwiGLU: VECswiglu(rows,H); bw VECswiglu_backward(rows,H) (reads dy, gate, up; writes both grads)",
  grad = "swiglu_backward",
  saves = "inputs",
}
