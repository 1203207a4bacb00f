-- ops/rms_norm.lua — fused RMSNorm over the last dim (Megatron-Core / Transformer Engine / apex FusedRMSNorm, what
-- `kernels = "megatron"` runs for the Llama-family norms; HF's eager LlamaRMSNorm is a chain of kernels instead,
-- neusight.nodes rms_norm): one kernel each way, LayerNorm's (rules.norm) without the mean and β. Forward reads x and
-- writes y (VECrmsnorm: the layer-norm family, 4 FLOPs per element); backward reads dy and x and writes dx (VECmul's
-- bytes, as LayerNorm's); γ's gradient accumulated. Saved: the input and the per-row rstd (fp32).
return require("neusight.rules").norm {
  name = "rms_norm",
  doc = "fused RMSNorm: VECrmsnorm(rows,H); bw VECmul(rows,H); acc VECadd(1,H) (gamma)",
  kernel = "rms_norm",
  stats = 1, -- rstd
  affine = 1, -- γ
}
