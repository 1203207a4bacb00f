-- ops/div.lua — elementwise div (VECdiv, or VECdivu with a scalar operand); backward repeats the kernel per operand.
return require("neusight.rules").elementwise {
  name = "div",
  doc = "elementwise div: VECdiv(rows,H) (VECdivu with one tensor operand); bw the same kernel per tensor operand",
  grad = "same",
}
