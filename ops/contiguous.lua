-- ops/contiguous.lua — Tensor.contiguous() on a permuted tensor: a full copy, MEM(in, out); backward MEM(in) ×2.
return require("neusight.rules").memory {
  name = "contiguous",
  doc = "copy to contiguous layout: MEM(inputs…, out); bw MEM(inputs…) x2",
}
