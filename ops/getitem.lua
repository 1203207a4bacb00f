-- ops/getitem.lua — indexing/slicing x[...]: charged as a copy like the reference, MEM(inputs…, out); backward MEM(inputs…) ×2.
return require("neusight.rules").memory {
  name = "getitem",
  doc = "indexing/slicing: MEM(inputs…, out); bw MEM(inputs…) x2",
  fusion = "elementwise", -- a slice joins a fused run (0 FLOPs: a MEM kernel)
}
