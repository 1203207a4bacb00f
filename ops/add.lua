-- ops/add.lua — elementwise add (VECadd, or VECaddu with a scalar operand); backward passes the gradient through (MEM).
return require("neusight.rules").elementwise {
  name = "add",
  doc = "elementwise add: VECadd(rows,H) (VECaddu with one tensor operand); bw MEM(rows,H) per tensor operand",
  grad = "mem",
}
