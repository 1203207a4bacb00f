-- ops/matmul.lua — torch.matmul of A[…,M,N] by B[…,N,K]: one BMM forward, two BMMs (dA, dB) backward.
-- Decomposition (neusight/rules.lua, rules.bmm), batch = numel(A)/(M·N):
--   forward BMM(batch, M, N, K); backward BMM(batch, M, K, N), BMM(batch, N, M, K).
return require("neusight.rules").bmm {
  name = "matmul",
  doc = "A[…,M,N]·B[…,N,K]: BMM(B,M,N,K); bw BMM(B,M,K,N)+BMM(B,N,M,K)",
}
