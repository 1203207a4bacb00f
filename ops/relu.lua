-- ops/relu.lua — ReLU activation (VECrelu); backward is modelled as one more VECrelu (reference).
return require("neusight.rules").elementwise {
  name = "relu",
  doc = "ReLU: VECrelu(rows,H); bw VECrelu(rows,H)",
  unary = true,
  grad = "same",
}
