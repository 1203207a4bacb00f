-- scripts/neusight/calibration.lua — per-kernel-family correction factors of one GPU from one measured end-to-end time
-- (`neusight predict … --calibrate FILE`). The engine writes them beside the GPU's file (<stem>.calibration.toml) and
-- multiplies every later forecast's kernel times on that GPU by them (engine/core/calibration.h).
--
-- One measurement M of a workload is its kernels' error: the GPU's bias per kernel family (shared with every other
-- workload on that GPU: what a calibration should carry over) plus the scatter of this workload's own kernels (not
-- shared). From the predictor's leave-one-GPU-out table (neusight.uncertainty: per family the folds' bias m_g = mean r
-- of a held-out GPU, and its kernels' variance v_g):
--   prior of family f's log bias b_f: mean μ_f and variance σ_f² of m_g over the folds the band uses;
--   scatter of the workload's family time: ε_f² = mean v_g / n_f (n_f the forecast's effective kernel count).
-- The measured log ratio ln(M / L) (L the forecast latency) is shrunk towards the prior's ln Σ_f w_f e^{μ_f}
-- (w_f = T_f / T) by k = Σ w_f² σ_f² / Σ w_f² (σ_f² + ε_f²), the share of its variance that is bias; then, of all
-- factors c_f reproducing that target kernel time, we take the ones closest to the prior on the bias scale:
--     minimise Σ_f (ln c_f − μ_f)² / σ_f²   subject to   Σ_f T_f c_f + T_other = T · target ratio
-- whose first-order solution is ln c_f = μ_f + λ σ_f² w_f, λ by bisection (the left side grows with λ). A family with
-- a wide bias spread and a large share of the time absorbs most of the correction; a sliver of the time barely moves.
-- T_other (copies, collectives) is kept as forecast. Without a table (roofline) every family gets μ = 0, σ = 1 and
-- k = 1 (the factors reproduce the measurement). Factors are kept within [0.05, 20] (the loader's range).
local fmt, exp, abs, ipairs, pairs, sort = string.format, math.exp, math.abs, ipairs, pairs, table.sort

local M = {}

M.min_factor, M.max_factor = 0.05, 20

-- A family's prior from the leave-one-GPU-out table (a part of neusight.uncertainty's parts()): the mean μ and
-- variance σ² of its folds' log bias, and ε² = the folds' mean kernel variance / n (the scatter of n kernels' mean).
local function prior_of(part)
  local mean, var, within = 0, 0, 0
  for _, st in ipairs(part.stats) do mean, within = mean + st.mean, within + st.var end
  mean, within = mean / #part.stats, within / #part.stats
  for _, st in ipairs(part.stats) do var = var + (st.mean - mean) ^ 2 end
  var = #part.stats > 1 and var / (#part.stats - 1) or within
  return { mu = mean, sigma2 = math.max(var, 1e-6), eps2 = within / math.max(1, part.n) }
end


--- Fits the factors.
--- `r`: latency_s (the forecast), measured_s, measurement (the file's name), family_s (seconds by family, "other" for
--- kernels no family prices), gpu, uncertainty / uncertainty_source (the predictor's error table, may be nil).
--- Returns { fields = { { key = "factor.<family>", value }, …, { key = "calibrated_ms" } }, lines, warnings }.
---@param r table
function M.fit(r)
  local U = require("neusight.uncertainty")
  local parts, other, total = {}, 0, 0
  local p = U.parts(r)
  if p then
    other, total = p.other, p.total
    for _, part in ipairs(p.parts) do
      local pr = prior_of(part)
      parts[#parts + 1] = { name = part.name, s = part.s, mu = pr.mu, sigma2 = pr.sigma2, eps2 = pr.eps2 }
    end
    -- families the roofline priced (no weights for them): no error data; a wide prior, so they take the most
    for name in pairs(r.roofline or {}) do
      local s = (r.family_s or {})[name]
      if s and s > 0 then
        other = other - s
        parts[#parts + 1] = { name = name, s = s, mu = 0, sigma2 = 1, eps2 = 0 }
      end
    end
    sort(parts, function(a, b) return a.name < b.name end)
  else
    local names = {}
    for name in pairs(r.family_s or {}) do names[#names + 1] = name end
    sort(names)
    for _, name in ipairs(names) do
      local s = r.family_s[name]
      total = total + s
      if name == "other" then other = other + s else parts[#parts + 1] = { name = name, s = s, mu = 0, sigma2 = 1, eps2 = 0 } end
    end
  end
  if not (total > 0) or #parts == 0 then
    error(fmt("%s: the forecast has no kernel time a family's predictor priced: nothing to calibrate", r.measurement), 0)
  end
  local ratio = r.measured_s / r.latency_s
  -- the prior's ratio and the shrinkage of the measured one towards it
  local prior, num, den = other / total, 0, 0
  for _, part in ipairs(parts) do
    local w = part.s / total
    prior = prior + w * exp(part.mu)
    num, den = num + w * w * part.sigma2, den + w * w * (part.sigma2 + part.eps2)
  end
  local k = den > 0 and num / den or 1
  local shrunk = exp(math.log(prior) + k * (math.log(ratio) - math.log(prior)))
  local target = total * shrunk
  if target <= other then
    error(fmt("%s: the measured %.4g ms is at most the forecast's time outside the predictor's families (%.4g ms of "
      .. "copies and collectives, scaled): no factor can explain it; check the workload matches the measurement",
      r.measurement, r.measured_s * 1e3, other * 1e3 * r.latency_s / total), 0)
  end
  local function factor(part, lambda)
    local c = exp(part.mu + lambda * part.sigma2 * part.s / total)
    return math.min(M.max_factor, math.max(M.min_factor, c))
  end
  local function sum(lambda)
    local t = other
    for _, part in ipairs(parts) do t = t + part.s * factor(part, lambda) end
    return t
  end
  local lo, hi = -1, 1
  while sum(lo) > target and lo > -1e9 do lo = lo * 2 end
  while sum(hi) < target and hi < 1e9 do hi = hi * 2 end
  for _ = 1, 200 do
    local mid = (lo + hi) / 2
    if sum(mid) < target then lo = mid else hi = mid end
  end
  local lambda = (lo + hi) / 2
  local fields, shown, warnings, clamped = {}, {}, {}, {}
  for _, part in ipairs(parts) do
    local c = factor(part, lambda)
    fields[#fields + 1] = { key = "factor." .. part.name, value = c }
    shown[#shown + 1] = fmt("%s x%.3f (%.0f %% of the kernel time)", part.name, c, 100 * part.s / total)
    if c <= M.min_factor or c >= M.max_factor then clamped[#clamped + 1] = part.name end
  end
  local calibrated = sum(lambda) / total * r.latency_s
  fields[#fields + 1] = { key = "calibrated_ms", value = calibrated * 1e3 }
  if #clamped > 0 then
    warnings[#warnings + 1] = fmt("%s: the factors of %s reached the limit [%g, %g]: is the measurement of this "
      .. "workload on this GPU?", r.measurement, table.concat(clamped, ", "), M.min_factor, M.max_factor)
  end
  if abs(ratio - 1) > 1 then
    warnings[#warnings + 1] = fmt("%s: measured %.4g ms is %.1fx the forecast %.4g ms; a calibration this large usually "
      .. "means the measurement and the workload differ (batch, sequence, dtype, layout, warm-up)", r.measurement,
      r.measured_s * 1e3, ratio, r.latency_s * 1e3)
  end
  local band = U.band(r)
  local lines = {
    fmt("forecast %.4g ms, measured %.4g ms (%+.1f %%)%s", r.latency_s * 1e3, r.measured_s * 1e3, 100 * (ratio - 1),
      band and fmt("; the forecast's p10-p90 band was %.4g - %.4g ms", band.p10 * 1e3, band.p90 * 1e3) or ""),
    "factors: " .. table.concat(shown, ", "),
    fmt("calibrated forecast of this workload: %.4g ms: %.0f %% of the measured deviation is taken as %s's bias "
      .. "(the rest is this workload's own kernel scatter, leave-one-GPU-out says)%s", calibrated * 1e3, 100 * k,
      r.gpu.name, other > 0 and fmt("; %.0f %% of the kernel time, copies and collectives, kept as forecast",
      100 * other / total) or ""),
  }
  return { fields = fields, lines = lines, warnings = warnings }
end

--- Fits the factors from a profiler trace measured on the GPU (`neusight predict --gpu G --calibrate TRACE.json`):
--- per family f, the measured time M_f of the trace's GEMM and attention ops and our forecast T_f of the same
--- kernels. Unlike one end-to-end time, a trace measures each family on its own, so each factor is that family's
--- own ratio, shrunk towards the leave-one-GPU-out prior of its bias like fit(): ln c_f = μ_f + k_f (ln(M_f / T_f) −
--- μ_f) with k_f = σ_f² / (σ_f² + ε_f²) (ε_f² = the folds' kernel variance / n_f, the trace's effective kernel
--- count of the family). Without an error table (roofline) c_f = M_f / T_f. Families the trace does not exercise
--- (element-wise, norms: their ops are not built from shapes) get no factor.
--- `r`: measurement, ops, family_s / family_n (forecast seconds and kernel counts by family), measured_s (by
--- family), roofline, gpu, uncertainty / uncertainty_source.
---@param r table
function M.fit_trace(r)
  local U = require("neusight.uncertainty")
  local measured, predicted = r.measured_s or {}, r.family_s or {}
  local prior = {}
  local p = U.parts(r)
  if p then
    for _, part in ipairs(p.parts) do prior[part.name] = prior_of(part) end
  end
  local names = {}
  for name, t in pairs(predicted) do
    if name ~= "other" and t > 0 and (measured[name] or 0) > 0 then names[#names + 1] = name end
  end
  sort(names)
  if #names == 0 then error(fmt("%s: no kernel family with a measured and a forecast time: nothing to calibrate",
    r.measurement), 0) end
  local fields, shown, warnings, clamped = {}, {}, {}, {}
  local m_all, t_all = 0, 0
  for _, name in ipairs(names) do m_all, t_all = m_all + measured[name], t_all + predicted[name] end
  for _, name in ipairs(names) do
    local ratio = measured[name] / predicted[name]
    local pr, c, k = prior[name], ratio, 1
    if pr then
      k = pr.sigma2 / (pr.sigma2 + pr.eps2)
      c = exp(pr.mu + k * (math.log(ratio) - pr.mu))
    end
    c = math.min(M.max_factor, math.max(M.min_factor, c))
    if c <= M.min_factor or c >= M.max_factor then clamped[#clamped + 1] = name end
    fields[#fields + 1] = { key = "factor." .. name, value = c }
    shown[#shown + 1] = fmt("%s x%.3f (measured %.4g ms vs forecast %.4g ms, %.0f %% taken as bias)", name, c,
      measured[name] * 1e3, predicted[name] * 1e3, 100 * k)
  end
  if #clamped > 0 then
    warnings[#warnings + 1] = fmt("%s: the factors of %s reached the limit [%g, %g]: was the trace recorded on this "
      .. "GPU?", r.measurement, table.concat(clamped, ", "), M.min_factor, M.max_factor)
  end
  local lines = {
    fmt("%d GEMM and attention ops: measured %.4g ms of kernel time, forecast %.4g ms (%+.1f %%)", r.ops or 0,
      m_all * 1e3, t_all * 1e3, 100 * (m_all / t_all - 1)),
    "factors: " .. table.concat(shown, "; "),
  }
  return { fields = fields, lines = lines, warnings = warnings }
end

return M
