-- ops/flash_attention.lua — FlashAttention: softmax(Q·Kᵀ)·V in one kernel (scripts/neusight/fusion.lua).
--
-- inputs = { Q[…,S,D], Kᵀ[…,D,Sk], V[…,Sk,Dv] }, output O[…,S,Dv] (Dv = D but for DeepSeek's latent attention);
-- BH = numel(Q)/(S·D). FLOPs: 2·BH·S·Sk·D (Q·Kᵀ) + 2·BH·S·Sk·Dv (P·V) + 5·BH·S·Sk (softmax, kernels.lua's count); the causal
-- half is not skipped (FlashAttention-2 does skip it: an upper bound). Bytes: Q, K, V read once, O written
-- once (the S×Sk scores never reach DRAM; the mask is computed from indices). The kernel is predicted as
-- BMM(2·BH, S, D, Sk) — the two products — with these FLOPs and bytes. Inference only: no backward hook.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "flash_attention",
  doc = "FlashAttention: BMM(2BH,S,D,Sk) kernel, flops 4·BH·S·Sk·D + 5·BH·S·Sk, bytes Q+K+V+O",
  attrs = rules.attrs { "fused" },
  forward = function(node)
    local q, kt, v = rules.input(node, 1), rules.input(node, 2), rules.input(node, 3)
    local s, d, sk, dv = q[#q - 1], q[#q], kt[#kt], v[#v] -- dv < d: DeepSeek's latent attention (values of 128, Q/K of 192)
    local bh = K.numel(q) // (s * d)
    local k = K.bmm(2 * bh, s, d, sk, node.dtype)
    k.flops = 2 * bh * s * sk * (d + dv) + 5 * bh * s * sk
    k.bytes = rules.io_bytes(node)
    return { k }
  end,
}
