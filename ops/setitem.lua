-- ops/setitem.lua — indexed assignment x[idx] = y (MoE token dispatch/combine): MEM(inputs…, out); backward MEM(inputs…) ×2.
return require("neusight.rules").memory {
  name = "setitem",
  doc = "indexed assignment: MEM(inputs…, out); bw MEM(inputs…) x2",
}
