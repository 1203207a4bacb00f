-- ops/cumsum.lua — torch.cumsum along one dim (OPT's position ids): a memory-bound scan, MEM(in, out); backward MEM(in) ×2.
return require("neusight.rules").memory {
  name = "cumsum",
  doc = "cumulative sum: MEM(inputs…, out); bw MEM(inputs…) x2",
}
