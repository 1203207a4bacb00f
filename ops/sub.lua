-- ops/sub.lua — elementwise sub (VECsub, or VECsubu with a scalar operand); backward passes the gradient through (MEM).
return require("neusight.rules").elementwise {
  name = "sub",
  doc = "elementwise sub: VECsub(rows,H) (VECsubu with one tensor operand); bw MEM(rows,H) per tensor operand",
  grad = "mem",
}
