-- ops/addmm.lua — torch.addmm(b, x, W), the traced form of nn.Linear: the same kernels as ops/linear.lua, x = inputs[2].
return require("neusight.rules").linear {
  name = "addmm",
  doc = "traced nn.Linear addmm(bias, x, W): Linear(T,I,O); bw Linear(T,O,I)+Linear(O,T,I); acc VECadd(1,O·I)+VECadd(1,O)",
  x_input = 2,
}
