-- scripts/neusight/predictors/neusight_vector_form.lua — `--predictor neusight_vector_form`: the neusight predictor,
-- but a family of scripts/neusight/vector_form.lua (softmax) on an NVIDIA GPU beyond its weights' per-SM bandwidth or
-- memory range (their manifests' training GPUs: ns.trained_gpus; the range warning's rule, neusight.uncertainty
-- per_sm_beyond) is priced by that file's physical form instead of the MLP, which extrapolates there
-- (weights/VECTOR_FORM_RULE.md, weights/ACCURACY.md). In range (every training GPU, L40S, RTX 4090, A10, …) and on
-- other vendors it is the neusight predictor bit for bit. Opt-in: one held-out GPU supports it.
local FORM = require "neusight.vector_form"

local KEYS = { softmax = true, elementwise = true, layernorm = true }
for key, v in pairs(FORM) do
  if key == "range" then  -- the range is the weights' manifests' now: a typed-in one would be stale under --weights DIR
    error("neusight.vector_form: field 'range' is no longer read: the training range is the weights' manifests' "
      .. "(ns.trained_gpus; scripts/neusight/uncertainty.lua per_sm_beyond): drop it")
  end
  if not KEYS[key] then error(("neusight.vector_form: unknown field '%s'"):format(tostring(key))) end
  if type(v) ~= "table" then error(("neusight.vector_form: field '%s' must be a table"):format(key)) end
end
for fam, p in pairs(FORM) do
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

-- The families of FORM ({ family = true }) for which the GPU `gpu` (NVIDIA only: the form was fitted there) is beyond
-- the per-SM bandwidth or memory of the GPUs their weights were trained on: the range warning's rule
-- (neusight.uncertainty per_sm_beyond) over the neusight predictor's manifests (ns.trained_gpus: --weights DIR's). A
-- family whose range is unknown (no manifest list, a training GPU without a GPU file: the range warning says so) keeps
-- the MLP.
local function families_beyond(gpu)
  local out = {}
  if gpu.vendor ~= "nvidia" then return out end
  local trained = require("neusight").trained_gpus("neusight", gpu.vendor)
  local per_sm_beyond = require("neusight.uncertainty").per_sm_beyond
  for fam in pairs(FORM) do
    local what = per_sm_beyond(gpu, trained, fam)
    if what and #what > 0 then out[fam] = true end
  end
  return out
end

return {
  description = "neusight, with softmax priced by a two-parameter roofline form on NVIDIA GPUs beyond the fp32 "
    .. "weights' per-SM bandwidth or memory range (scripts/neusight/vector_form.lua)",
  predict = function(kernels, gpu)
    local ns = require "neusight"
    local s = ns.predict(kernels, gpu, "neusight")
    local formed = families_beyond(gpu)
    if next(formed) == nil then return s end
    local roof
    local bw = gpu.mem_bw_gbps * 1e9
    for i, k in ipairs(kernels) do
      local p = formed[k.kind] and FORM[k.kind] or nil
      if p then
        roof = roof or ns.predict(kernels, gpu, "roofline")
        s[i] = math.max(p.floor_s, (roof[i] + p.s_half_bytes * gpu.num_sm / bw) / p.efficiency)
      end
    end
    return s
  end,
}
