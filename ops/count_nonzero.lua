-- ops/count_nonzero.lua — torch.count_nonzero (tokens routed to an expert): a memory-bound reduction, MEM(in, out); backward MEM(in) ×2.
return require("neusight.rules").memory {
  name = "count_nonzero",
  doc = "count of non-zero elements: MEM(inputs…, out); bw MEM(inputs…) x2",
}
