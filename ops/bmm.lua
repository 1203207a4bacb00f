-- ops/bmm.lua — torch.bmm(A[b,M,N], B[b,N,K]): the same kernels as ops/matmul.lua.
return require("neusight.rules").bmm {
  name = "bmm",
  doc = "A[b,M,N]·B[b,N,K]: BMM(b,M,N,K); bw BMM(b,M,K,N)+BMM(b,N,M,K)",
}
