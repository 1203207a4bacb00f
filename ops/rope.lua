-- ops/rope.lua — fused rotary position embedding (Transformer Engine / Megatron-Core fused apply_rotary_pos_emb, what
-- `kernels = "megatron"` runs on q and on k; HF's eager apply_rotary_pos_emb is five kernels, neusight.nodes rope):
-- one element-wise pass each way. Forward VECrope reads x and writes x·cos + rotate_half(x)·sin; backward the same pass
-- over dy. Nothing is saved: the backward needs only the cos/sin table, one for every layer (not counted).
return require("neusight.rules").activation {
  name = "rope",
  doc = "fused RoPE: VECrope(rows,H); bw VECrope(rows,H)",
  grad = "rope",
  saves = "nothing",
}
