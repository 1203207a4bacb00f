-- scripts/neusight/predictors/neusight_vector_form.lua — `--predictor neusight_vector_form`: the neusight predictor,
-- but a family of scripts/neusight/vector_form.lua (softmax) on an NVIDIA GPU beyond the fp32 weights' per-SM
-- bandwidth or memory range is priced by that file's physical form instead of the MLP, which extrapolates there
-- (weights/VECTOR_FORM_RULE.md, weights/ACCURACY.md). In range (every training GPU, L40S, RTX 4090, A10, …) and on
-- other vendors it is the neusight predictor bit for bit. Opt-in: one held-out GPU supports it.
local FORM = require "neusight.vector_form"

local KEYS = { range = true, softmax = true, elementwise = true, layernorm = true }
for key, v in pairs(FORM) do
  if not KEYS[key] then error(("neusight.vector_form: unknown field '%s'"):format(tostring(key))) end
  if type(v) ~= "table" then error(("neusight.vector_form: field '%s' must be a table"):format(key)) end
end
local range = FORM.range
if type(range) ~= "table" or not (type(range.bw_per_sm_gbps) == "number" and range.bw_per_sm_gbps > 0)
    or not (type(range.mem_per_sm_gb) == "number" and range.mem_per_sm_gb > 0) then
  error("neusight.vector_form: range must be { bw_per_sm_gbps = <GB/s>, mem_per_sm_gb = <GB> }, both > 0")
end
for fam, p in pairs(FORM) do
  if fam ~= "range" then
    for key in pairs(p) do
      if key ~= "efficiency" and key ~= "s_half_bytes" and key ~= "floor_s" then
        error(("neusight.vector_form: %s: unknown field '%s'"):format(fam, tostring(key)))
      end
    end
    if not (type(p.efficiency) == "number" and p.efficiency > 0 and p.efficiency <= 1)
        or not (type(p.s_half_bytes) == "number" and p.s_half_bytes >= 0)
        or not (type(p.floor_s) == "number" and p.floor_s >= 0) then
      error(("neusight.vector_form: %s must be { efficiency in (0, 1], s_half_bytes >= 0, floor_s >= 0 }"):format(fam))
    end
  end
end

local function beyond(gpu)
  return gpu.vendor == "nvidia" and (gpu.mem_bw_gbps / gpu.num_sm > range.bw_per_sm_gbps
    or gpu.mem_gb / gpu.num_sm > range.mem_per_sm_gb)
end

return {
  description = "neusight, with softmax priced by a two-parameter roofline form on NVIDIA GPUs beyond the fp32 "
    .. "weights' per-SM bandwidth or memory range (scripts/neusight/vector_form.lua)",
  predict = function(kernels, gpu)
    local ns = require "neusight"
    local s = ns.predict(kernels, gpu, "neusight")
    if not beyond(gpu) then return s end
    local roof
    local bw = gpu.mem_bw_gbps * 1e9
    for i, k in ipairs(kernels) do
      local p = k.kind ~= "range" and FORM[k.kind] or nil
      if p then
        roof = roof or ns.predict(kernels, gpu, "roofline")
        s[i] = math.max(p.floor_s, (roof[i] + p.s_half_bytes * gpu.num_sm / bw) / p.efficiency)
      end
    end
    return s
  end,
}
