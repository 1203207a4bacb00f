-- ops/rms_norm.lua — fused RMSNorm over the last dim (Megatron-Core / Transformer Engine / apex FusedRMSNorm, what
-- `kernels = "megatron"` runs for the Llama-family norms; HF's eager LlamaRMSNorm is a chain of kernels instead,
-- neusight.nodes rms_norm): one kernel each way, LayerNorm's (rules.norm) without the mean and β. Forward reads x and
-- writes y (VECrmsnorm: the layer-norm family, 4 FLOPs per element); backward reads dy and x and writes dx (VECmul's
-- bytes, as LayerNorm's). Saved: the input and the per-row rstd (fp32). γ is a `weight` node beside it (its gradient's
-- accumulation, as in HF's graph): a parameter every tensor-parallel rank holds whole is then counted once in the
-- model FLOPs whether or not sequence parallelism or split heads (Qwen3's q/k norms) split the norm's rows
-- (neusight.parallel.shard mark_replicated).
return require("neusight.rules").norm {
  name = "rms_norm",
  doc = "fused RMSNorm: VECrmsnorm(rows,H); bw VECmul(rows,H) (gamma: a weight node)",
  kernel = "rms_norm",
  stats = 1, -- rstd
  affine = 0, -- γ: the builder's weight node
}
