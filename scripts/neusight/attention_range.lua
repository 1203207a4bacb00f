-- scripts/neusight/attention_range.lua — the token counts the neusight predictor's fused-attention MLPs were trained
-- on, and the warning a forecast beyond them gets. The attention_prefill and attention_decode weights
-- (weights/nvidia/attention_*/model.toml, [training] data) learnt AIConfigurator's context_attention.csv and
-- generation_attention.csv of their training GPUs: prefills of 1 … 16384 prompt tokens (isl; batch ≤ 8 at 16384) and
-- decode steps over caches of 2 … 131072 tokens (isl 1 + step; batch ≤ 128 at 131072). Beyond that the MLP
-- extrapolates its utilisation: a 131072-token prefill (a 128k-context model's full prompt) is 8× the longest measured
-- one, and nothing said so (audit25). The roofline floor still holds the kernel; its time beyond it is not measured.
-- tests/scripts/test_attention_range.lua checks these numbers against the shared data when ../shared is present.
local fmt = string.format

local M = {}

M.prefill_tokens = 16384   -- the longest prompt of the attention_prefill training rows (keys of a causal prefill)
M.decode_tokens = 131072   -- the longest cache of the attention_decode training rows (context + the new token)

--- Whether forecasts of `predictor` on a GPU of `vendor` price fused attention with these MLPs: the built-in neusight
--- predictor on NVIDIA GPUs (AMD's fused attention is priced by the roofline fallback: no weights).
function M.applies(predictor, vendor)
  return (predictor == nil or predictor == "neusight") and vendor == "nvidia"
end

--- The warning of a forecast whose fused attention attends over `prefill` keys in a prefill (or training/inference
--- sdpa) kernel and over `decode` cached tokens in a decode kernel (either nil: none such), beyond what the MLPs were
--- trained on; nil when both are within it.
---@param prefill integer?
---@param decode integer?
---@return string?
function M.warning(prefill, decode)
  local parts = {}
  if prefill and prefill > M.prefill_tokens then
    parts[#parts + 1] = fmt("a prefill attention over %d tokens (attention_prefill was trained on prompts of up to %d: "
      .. "AIConfigurator's context_attention)", prefill, M.prefill_tokens)
  end
  if decode and decode > M.decode_tokens then
    parts[#parts + 1] = fmt("a decode attention over %d cached tokens (attention_decode was trained on caches of up to "
      .. "%d: AIConfigurator's generation_attention)", decode, M.decode_tokens)
  end
  if #parts == 0 then return nil end
  return fmt("%s: beyond the contexts the neusight predictor's attention MLPs were trained on, so their utilisation "
    .. "is extrapolated and these kernels' times are indicative only (held to their roofline floor, not measured)",
    table.concat(parts, " and "))
end

--- The longest prefill keys and decode cache among `kernels` (run.kernels()' fields: kind, op, m, k), as M.warning
--- takes them: a fused attention kernel of op "decode" attends over k cached tokens, any other (causal, full, their
--- backward) over k keys for m queries.
function M.of_kernels(kernels)
  local prefill, decode
  for _, k in ipairs(kernels) do
    if k.kind == "attention" then
      if k.op == "decode" then
        decode = math.max(decode or 0, k.k)
      else
        prefill = math.max(prefill or 0, k.k, k.m)
      end
    end
  end
  return prefill, decode
end

return M
