-- ops/grouped_linear.lua — the grouped GEMM of a mixture of experts' MLP: the R routed rows x (R, I), sorted by
-- expert, times each expert's own weight (E experts of I × O, one (E, I, O) parameter) → y (R, O). Megatron-Core's
-- GroupedMLP (grouped_gemm.ops.gmm / TE GroupedLinear), vLLM's fused_moe_kernel and transformers' aten::_grouped_mm
-- run it as one kernel over the experts that receive rows (scripts/neusight/models/moe.lua, experts = "grouped").
-- attrs.experts = E (this rank's experts: the parameter is E · I · O); attrs.expert = true (routed-expert weights:
-- active_params, expert-parallel gradients, weight-only quantisation).
-- Experts that receive rows: b. With the routing statistics in attrs (top_k = k experts per token out of experts_total
-- = E_all, routed_tokens = N tokens whose routing reaches these E experts), b is the expected number of distinct
-- experts a uniform router reaches, E · (1 − (1 − k/E_all)^N) (each token picks k distinct experts; exact for one
-- token: k of them), rounded and at most R — at decode, 8 tokens of DeepSeek-V2-Lite (top 6 of 64) reach about 35
-- experts, not 48. A trained router's skew reaches fewer still; load imbalance is not modelled. Without those attrs,
-- every routed row goes to another expert: b = min(E, R). Each active expert gets ⌈R / b⌉ rows. The kernel is priced as a batched GEMM BMM(b, ⌈R/b⌉, I, O) (the bmm predictors, scripts/tiling/gemm.lua's bmm tile rule)
-- whose FLOPs are the R rows' 2·R·I·O and whose bytes are the R rows in and out once and the b active experts' whole
-- weight matrices (at attrs.weight_bytes per weight under weight-only quantisation); experts without rows are not read.
--   forward    BMM(b, m, I, O)                                   y = x · W[e]
--   backward   BMM(b, m, O, I) (dX = dY · W[e]ᵀ) and BMM(b, I, m, O) (dW[e] = x_eᵀ · dY_e, per active expert)
--   accumulate VECadd(1, E · I · O) into the (E, I, O) gradient.
local K = require "neusight.kernels"
local rules = require "neusight.rules"
local ceil, min, max, floor = math.ceil, math.min, math.max, math.floor

--- Expected distinct experts among E that N tokens reach, each picking k distinct experts of E_all uniformly.
local function experts_reached(E, k, E_all, N)
  return E * (1 - (1 - k / E_all) ^ N)
end

-- R rows, I in-features, O out-features, E experts, b active experts, m rows each
local function dims(node)
  local x = rules.input(node, 1)
  local I = x[#x]
  local a = node.attrs
  local R, O, E = K.numel(x) // I, node.output[#node.output], a.experts
  local b = min(E, R)
  if a.top_k and a.experts_total and a.routed_tokens then
    b = min(b, max(1, floor(experts_reached(E, a.top_k, a.experts_total, a.routed_tokens) + 0.5)))
  end
  return R, I, O, E, b, ceil(R / b)
end

-- BMM(b, m, n, k) with the FLOPs of the R real rows (`flops`: the padding of ⌈R/b⌉ does no work) and their bytes:
-- `acts` elements of activations and `weights` elements of the expert matrices (at `wb` bytes each when quantised).
local function grouped(b, m, n, k, dtype, flops, acts, weights, wb)
  local kern = K.bmm(b, m, n, k, dtype)
  local e = K.dtype_bytes(dtype)
  kern.flops = flops
  kern.bytes = e * acts + (wb or e) * weights
  kern.weight_bytes = wb
  return kern
end

---@type neusight.OpRule
return {
  name = "grouped_linear",
  doc = "MoE grouped GEMM x(R,I)·W[e](I,O), E experts, b = min(E,R) active, m = ceil(R/b) rows each: BMM(b,m,I,O); "
    .. "bw BMM(b,m,O,I)+BMM(b,I,m,O); acc VECadd(1,E·I·O)",
  saves = function(node) return rules.saved_inputs(node, { 1 }) end, -- dW needs x (and the group sizes: tiny)
  check = function(node)
    local x, out, E = node.inputs[1], node.output, node.attrs.experts
    if not x then return "needs input #1 (the routed rows x)" end
    if math.type(E) ~= "integer" or E < 1 then
      return ("needs attrs.experts, the experts of the (E, I, O) weight (got %s)"):format(tostring(E))
    end
    local a = node.attrs
    if (a.top_k ~= nil or a.experts_total ~= nil or a.routed_tokens ~= nil) and not (
        math.type(a.top_k) == "integer" and math.type(a.experts_total) == "integer"
        and math.type(a.routed_tokens) == "integer" and a.top_k >= 1 and a.experts_total >= a.top_k
        and a.experts_total >= E and a.routed_tokens >= 1) then
      return ("attrs.top_k, experts_total and routed_tokens go together: integers with 1 <= top_k <= experts_total, "
        .. "experts <= experts_total, routed_tokens >= 1 (got %s, %s, %s)"):format(tostring(a.top_k),
          tostring(a.experts_total), tostring(a.routed_tokens))
    end
    local I, O = x[#x], out[#out]
    if K.numel(x) // I ~= K.numel(out) // O then
      return ("x has %d rows but the output has %d"):format(K.numel(x) // I, K.numel(out) // O)
    end
    if node.params and node.params > 0 and node.params ~= E * I * O then
      return ("params %d is not experts · in · out = %d · %d · %d"):format(node.params, E, I, O)
    end
  end,
  forward = function(node)
    local R, I, O, _, b, m = dims(node)
    return { grouped(b, m, I, O, node.dtype, 2 * R * I * O, R * (I + O), b * I * O, node.attrs.weight_bytes) }
  end,
  backward = function(node)
    local R, I, O, _, b, m = dims(node)
    return {
      grouped(b, m, O, I, node.dtype, 2 * R * I * O, R * (I + O), b * I * O), -- dX = dY · W[e]ᵀ
      grouped(b, I, m, O, node.dtype, 2 * R * I * O, R * (I + O), b * I * O), -- dW[e] = x_eᵀ · dY_e, once per expert
    }
  end,
  accumulate = function(node)
    local _, I, O, E = dims(node)
    return { K.vec("add", 1, E * I * O, node.dtype) }
  end,
}
