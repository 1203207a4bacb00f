-- ops/gelu.lua — fused GELU activation (VECgelu); backward is modelled as one more VECgelu (reference).
-- HF's gelu_new is not this op: the traced graph expands it into 8 elementwise nodes (models/gpt.lua).
return require("neusight.rules").elementwise {
  name = "gelu",
  doc = "GELU: VECgelu(rows,H); bw VECgelu(rows,H)",
  unary = true,
  grad = "same",
}
