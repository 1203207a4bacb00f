-- ops/grouped_linear.lua — the grouped GEMM of a mixture of experts' MLP: the R routed rows x (R, I), sorted by
-- expert, times each expert's own weight (E experts of I × O, one (E, I, O) parameter) → y (R, O). Megatron-Core's
-- GroupedMLP (grouped_gemm.ops.gmm / TE GroupedLinear), vLLM's fused_moe_kernel and transformers' aten::_grouped_mm
-- run it as one kernel over the experts that receive rows (scripts/neusight/models/moe.lua, experts = "grouped").
-- attrs.experts = E (this rank's experts: the parameter is E · I · O); attrs.expert = true (routed-expert weights:
-- active_params, expert-parallel gradients, weight-only quantisation); attrs.act_quant (fp8 inference,
-- neusight.workload.quantise_activations) on the forward kernel: the routed rows' dynamic fp8 quantisation.
-- Experts that receive rows: b = min(E, R, attrs.experts_reached) — the builder's routing statistics
-- (neusight.models.moe experts_reached: the expected distinct experts a uniform router reaches); without it every
-- routed row goes to another expert, b = min(E, R). Each active expert gets ⌈R / b⌉ rows. The kernel is priced as a batched GEMM BMM(b, ⌈R/b⌉, I, O) (the bmm predictors, scripts/tiling/gemm.lua's bmm tile rule)
-- whose FLOPs are the R rows' 2·R·I·O and whose bytes are the R rows in and out once and the b active experts' whole
-- weight matrices (at attrs.weight_bytes per weight under weight-only quantisation); experts without rows are not read.
--   forward    BMM(b, m, I, O)                                   y = x · W[e]
--   backward   BMM(b, m, O, I) (dX = dY · W[e]ᵀ) and BMM(b, I, m, O) (dW[e] = x_eᵀ · dY_e, per active expert)
--   accumulate VECadd(1, E · I · O) into the (E, I, O) gradient.
local K = require "neusight.kernels"
local rules = require "neusight.rules"
local ceil, min = math.ceil, math.min

-- R rows, I in-features, O out-features, E experts, b active experts, m rows each
local function dims(node)
  local x = rules.input(node, 1)
  local I = x[#x]
  local R, O, E = K.numel(x) // I, node.output[#node.output], node.attrs.experts
  local b = min(E, R, node.attrs.experts_reached or R)
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
  attrs = rules.attrs { "act_quant", "saved_inputs",
    experts = "integer: E, this rank's experts (required)",
    experts_reached = "integer: the experts that receive rows (default: all)" },
  saves = function(node) return rules.saved_inputs(node, { 1 }) end, -- dW needs x (and the group sizes: tiny)
  check = function(node)
    local x, out, E = node.inputs[1], node.output, node.attrs.experts
    if not x then return "needs input #1 (the routed rows x)" end
    if math.type(E) ~= "integer" or E < 1 then
      return ("needs attrs.experts, the experts of the (E, I, O) weight (got %s)"):format(tostring(E))
    end
    local reached = node.attrs.experts_reached
    if reached ~= nil and (math.type(reached) ~= "integer" or reached < 1 or reached > E) then
      return ("attrs.experts_reached must be an integer in 1..experts (%d) (got %s)"):format(E, tostring(reached))
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
    local k = grouped(b, m, I, O, node.dtype, 2 * R * I * O, R * (I + O), b * I * O, node.attrs.weight_bytes)
    k.act_quant = node.attrs.act_quant -- vLLM's fused_moe fp8 quantises its routed rows as the Linear does (forward only)
    return { k }
  end,
  backward = function(node)
    local R, I, O, _, b, m = dims(node)
    return {
      grouped(b, m, O, I, node.dtype, 2 * R * I * O, R * (I + O), b * I * O), -- dX = dY · W[e]ᵀ
      grouped(b, I, m, O, node.dtype, 2 * R * I * O, R * (I + O), b * I * O), -- dW[e] = x_eᵀ · dY_e, once per expert
    }
  end,
  accumulate = function(node)
    -- attrs.wgrad_fused (Megatron kernels): the grouped dW GEMMs accumulated into main_grad themselves
    if node.attrs.wgrad_fused then return {} end
    local _, I, O, E = dims(node)
    return { rules.grad_accumulate(node, E * I * O) }
  end,
}
