-- ops/layernorm.lua — nn.LayerNorm over the last dim: VECln forward; backward one VECmul; γ and β grads accumulated.
-- native_layer_norm keeps its input and the per-row mean and rstd (fp32); γ and β are model state (rules.norm).
return require("neusight.rules").norm {
  name = "layernorm",
  doc = "LayerNorm: VECln(rows,H); bw VECmul(rows,H); acc VECadd(1,H) x2 (gamma, beta)",
  kernel = "layernorm",
  stats = 2, -- mean and rstd
  affine = 2, -- γ and β
  fusion = "anchor", -- absorbs the element-wise runs around it (residual add; dropout)
}
