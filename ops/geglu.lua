-- ops/geglu.lua — fused GeGLU gelu(gate) · up (Megatron-LM bias_geglu_impl, megatron/core/fusions/fused_bias_geglu.py,
-- what `kernels = "megatron"` runs in Gemma's MLP; HF runs act_fn and mul, two kernels each way): ops/swiglu.lua's rule
-- (neusight.rules activation over gate and up) with the tanh-approximated GELU. Forward VECgeglu reads gate and up and
-- writes the product; backward VECgeglu_backward reads dy, gate and up and writes the gradients of both
-- (neusight.kernels). Saved: gate and up.
return require("neusight.rules").activation {
  name = "geglu",
  doc = "fused GeGLU: VECgeglu(rows,H); bw VECgeglu_backward(rows,H) (reads dy, gate, up; writes both grads)",
  grad = "geglu_backward",
  saves = "inputs",
}
