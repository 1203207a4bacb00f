-- scripts/neusight/predictors/roofline_derated.lua — an analytical Lua predictor: the roofline over an efficiency per family.
--
-- `--predictor roofline_derated`. Each kernel takes roofline / efficiency, where the roofline is the built-in's
-- max(flops / peak of its dtype, bytes / DRAM bandwidth) (ns.predict(…, "roofline"), one formula in the engine) and
-- the efficiency is the fraction of the roofline kernels of its family reach on real GPUs. It is an example of the
-- predictor contract (README "Writing a predictor in Lua") more than a model: one number per family, no shape, no
-- wave quantisation, no GPU dependence.
--
-- EFFICIENCY: scripts/neusight/efficiency.lua (how it was derived, and the table), shared with the neusight predictor's
-- fallback for families it has no weights for.
local EFFICIENCY = require "neusight.efficiency"

-- Checked once, as the predictor loads (not per kernel priced): the engine checks the table only for the neusight
-- predictor's fallback, and an efficiency of 0 would price a kernel of its family infinite. Keys in order, so a table
-- with two bad fields always names the same one.
do
  if type(EFFICIENCY) ~= "table" then error("neusight.efficiency: must return a table of family = efficiency") end
  local keys = {}
  for key in pairs(EFFICIENCY) do  -- but `errors`: the fallback's error quantiles, the band's (neusight.uncertainty)
    if key ~= "errors" then keys[#keys + 1] = key end
  end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, key in ipairs(keys) do
    local eff = EFFICIENCY[key]
    if math.type(eff) == nil or not (eff > 0 and eff <= 1) then
      error(("neusight.efficiency: field '%s' must be a number in (0, 1] (the fraction of the roofline the family "
        .. "reaches)"):format(tostring(key)))
    end
  end
end

-- The family a kernel's efficiency comes from (the tile predictor's families: engine/core/tile_model.h).
local function family(k)
  if k.kind == "gemm" or k.kind == "bmm" then
    if k.dtype == "fp8" then return "gemm_fp8" end
    if k.dtype ~= "fp32" then return "gemm_tc16" end
    return k.kind == "gemm" and "linear" or "bmm"
  end
  if k.kind == "attention" then return k.op == "decode" and "attention_decode" or "attention_prefill" end
  return k.kind
end

return {
  description = "roofline / median achieved efficiency per kernel family (an analytical example)",
  predict = function(kernels, gpu)
    local ns = require "neusight"
    local roofline = ns.predict(kernels, gpu, "roofline")
    local out = {}
    for i, k in ipairs(kernels) do
      local eff = EFFICIENCY[family(k)]
      if not eff then error("no efficiency for kernel kind '" .. tostring(k.kind) .. "' (" .. k.name .. ")") end
      out[i] = roofline[i] / eff
    end
    return out
  end,
}
