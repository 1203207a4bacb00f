-- ops/mean.lua — torch.mean over some dims (T5 RMSNorm variance, router losses): a memory-bound reduction, MEM(in, out); backward MEM(in) ×2.
return require("neusight.rules").memory {
  name = "mean",
  doc = "mean reduction: MEM(inputs…, out); bw MEM(inputs…) x2",
}
