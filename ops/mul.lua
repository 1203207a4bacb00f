-- ops/mul.lua — elementwise mul (VECmul, or VECmulu with a scalar operand); backward repeats the kernel per operand.
return require("neusight.rules").elementwise {
  name = "mul",
  doc = "elementwise mul: VECmul(rows,H) (VECmulu with one tensor operand); bw the same kernel per tensor operand",
  grad = "same",
}
