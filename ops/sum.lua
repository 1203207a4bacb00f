-- ops/sum.lua — torch.sum over some dims (MoE routing: the top-k weights' normaliser, experts hit): a memory-bound reduction, MEM(in, out); backward MEM(in) ×2.
return require("neusight.rules").memory {
  name = "sum",
  doc = "sum reduction: MEM(inputs…, out); bw MEM(inputs…) x2 (attrs.elem_bytes for integer inputs)",
}
