-- ops/baddbmm.lua — torch.baddbmm(C, A, B) = C + A·B: ops/matmul.lua's kernels plus the VECadd of C forward.
return require("neusight.rules").bmm {
  name = "baddbmm",
  doc = "C + A·B (inputs C, A, B): BMM(B,M,N,K)+VECadd(B,M·K); bw BMM(B,M,K,N)+BMM(B,N,M,K)",
  a_input = 2,
  add_input = true,
}
