-- scripts/neusight/calibration.lua — per-kernel-family correction factors of one GPU from one measured end-to-end time
-- (`neusight predict … --calibrate FILE`: fit), a profiler trace (fit_trace) or a measured static serving batch
-- (`neusight serve --batch … --calibrate FILE`: fit_serve, its TTFT and/or TPOT). The engine writes them beside the
-- GPU's file (<stem>.calibration.toml) and multiplies every later forecast's kernel times on that GPU by them, after
-- the launch re-pricing (engine/core/calibration.h).
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
local fmt, exp, abs, ipairs, pairs, sort, concat = string.format, math.exp, math.abs, ipairs, pairs, table.sort, table.concat

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


-- The families a fit weighs, sorted by name, with their priors ({ name, s, mu, sigma2, eps2 }), the time no factor
-- touches (`other`: copies, collectives, families without error data) and the forecast's kernel time (`total`).
local function parts_of(r)
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
  return parts, other, total
end

--- The warning for a forecast of `model` on a GPU whose calibration (`source`) was fitted to a measurement of another
--- model (`calibrated`), or nil: leave one GPU out, a calibration from another model helped less and could hurt
--- (weights/ACCURACY.md, "Calibration from one measurement"). figures.lua (predict, run), serve.lua and sweep.lua
--- say it. Models are told apart by name: a preset and its HF config.json (named after its folder) count as two.
function M.model_warning(source, gpu_name, calibrated, model)
  if not (source and calibrated and model) or calibrated == model then return nil end
  -- a model function's graph is "custom" whatever it holds: no telling whether it is the calibrated one
  if calibrated == "custom" or model == "custom" then return nil end
  return fmt("%s calibrates %s from a measurement of %s, not of %s: a calibration from another model helps less and can "
    .. "hurt (weights/ACCURACY.md, \"Calibration from one measurement\"); calibrate with %s to forecast it", source,
    gpu_name, calibrated, model, model)
end

--- The same as figures (no fields, no lines; `r`: calibration_source, calibration_model, model, gpu): what
--- `neusight search` (engine/cli/search_cmd.cpp) tells once of its layouts' forecasts.
---@param r table
function M.model_warnings(r)
  return { fields = {}, lines = {},
           warnings = { M.model_warning(r.calibration_source, r.gpu.name, r.calibration_model, r.model) } }
end

-- A factor, kept within the loader's range.
local function clamp(c) return math.min(M.max_factor, math.max(M.min_factor, c)) end

--- Fits the factors.
--- `r`: latency_s (the forecast), measured_s, measurement (the file's name), family_s (seconds by family, "other" for
--- kernels no family prices), gpu, uncertainty / uncertainty_source (the predictor's error table, may be nil).
--- Returns { fields = { { key = "factor.<family>", value }, …, { key = "calibrated_ms" } }, lines, warnings }.
---@param r table
function M.fit(r)
  local U = require("neusight.uncertainty")
  local parts, other, total = parts_of(r)
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
    return clamp(exp(part.mu + lambda * part.sigma2 * part.s / total))
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

-- The phases of a serve run a measurement can name: the prefill (TTFT) and the mean decode step (TPOT).
local SERVE_PHASES = {
  { key = "ttft", label = "TTFT", prefix = "prefill_", what = "the prefill" },
  { key = "tpot", label = "TPOT", prefix = "decode_", what = "a decode step" },
}

-- A phase's forecast with the factors applied: its families' seconds times their factors (1 without one).
local function calibrated_s(ph, factors)
  local names, total, sum = {}, 0, 0
  for name in pairs(ph.family_s or {}) do names[#names + 1] = name end
  sort(names)  -- a fixed order: the same sum, to the last bit, every run
  for _, name in ipairs(names) do
    local s = ph.family_s[name]
    total, sum = total + s, sum + s * (factors[name] or 1)
  end
  return total > 0 and ph.latency_s * sum / total or ph.latency_s
end

-- Solves the 2 x 2 system a x = b (nil when singular).
local function solve2(a, b)
  local det = a[1][1] * a[2][2] - a[1][2] * a[2][1]
  local scale = abs(a[1][1] * a[2][2]) + abs(a[1][2] * a[2][1])
  if not (abs(det) > 1e-12 * scale) then return nil end
  return { (b[1] * a[2][2] - a[1][2] * b[2]) / det, (a[1][1] * b[2] - b[1] * a[2][1]) / det }
end

-- Both phases measured: fit()'s model with two constraints. Each measurement k is a phase's log ratio y_k = ln(M_k /
-- L_k) whose kernel-time shares w_kf weigh the families differently (the prefill is mostly compute-bound GEMMs, a decode
-- step weight-streaming GEMMs and KV-cache attention). In fit()'s linear-Gaussian terms (bias b_f ~ N(μ_f, σ_f²),
-- scatter ε_kf² per phase, independent between the phases: their kernels have different shapes) the two deviations
-- from the prior's ln P_k are shrunk jointly, z = S (S + R)⁻¹ (y − ln P) with S_kl = Σ_f w_kf w_lf σ_f² (shared bias)
-- and R = diag Σ_f w_kf² ε_kf² (own scatter) — for one measurement this is fit()'s k — and the factors closest to the
-- prior reproducing both targets are ln c_f = μ_f + σ_f² Σ_k λ_k w_kf (fit()'s form with a multiplier per
-- constraint), λ by damped Newton. Two measurements pin two directions of the bias vector, not every family: the
-- rest stays with the prior.
local function fit_joint(r, phs)
  local fams, order = {}, {}
  for k, ph in ipairs(phs) do
    local parts, other, total = parts_of(ph)
    ph.other, ph.total = other, total
    for _, part in ipairs(parts) do
      local f = fams[part.name]
      if not f then
        f = { name = part.name, mu = part.mu, sigma2 = part.sigma2, s = {}, w = {}, eps2 = {} }
        fams[part.name] = f
        order[#order + 1] = part.name
      end
      f.s[k], f.w[k], f.eps2[k] = part.s, part.s / total, part.eps2
    end
  end
  sort(order)
  local list = {}
  for _, name in ipairs(order) do
    local f = fams[name]
    for k = 1, 2 do f.s[k], f.w[k], f.eps2[k] = f.s[k] or 0, f.w[k] or 0, f.eps2[k] or 0 end
    list[#list + 1] = f
  end
  local S, R, y, lnprior = { { 0, 0 }, { 0, 0 } }, { 0, 0 }, {}, {}
  for k, ph in ipairs(phs) do
    local prior = ph.other / ph.total
    for _, f in ipairs(list) do prior = prior + f.w[k] * exp(f.mu) end
    lnprior[k] = math.log(prior)
    y[k] = math.log(ph.measured_s / ph.latency_s) - lnprior[k]
    for _, f in ipairs(list) do
      R[k] = R[k] + f.w[k] ^ 2 * f.eps2[k]
      for l = 1, 2 do S[k][l] = S[k][l] + f.w[k] * f.w[l] * f.sigma2 end
    end
  end
  local u = solve2({ { S[1][1] + R[1], S[1][2] }, { S[2][1], S[2][2] + R[2] } }, y)
  if not u then
    error(fmt("%s: the prefill and a decode step weigh the kernel families alike here, so ttft_ms and tpot_ms cannot "
      .. "pin two directions of the bias: give one of them", r.measurement), 0)
  end
  local target = {}
  for k, ph in ipairs(phs) do
    local z = S[k][1] * u[1] + S[k][2] * u[2]
    target[k] = ph.total * exp(lnprior[k] + z)
    if target[k] <= ph.other then
      error(fmt("%s: the measured %s %.4g ms is at most the forecast's time outside the predictor's families (%.4g ms, "
        .. "scaled): no factor can explain it; check the run matches the measurement", r.measurement, ph.label,
        ph.measured_s * 1e3, ph.other * 1e3 * ph.latency_s / ph.total), 0)
    end
  end
  local function factors_at(lambda)
    local c = {}
    for _, f in ipairs(list) do c[f.name] = clamp(exp(f.mu + f.sigma2 * (lambda[1] * f.w[1] + lambda[2] * f.w[2]))) end
    return c
  end
  local function residual(lambda)
    local c, g = factors_at(lambda), {}
    for k, ph in ipairs(phs) do
      local sum = ph.other
      for _, f in ipairs(list) do sum = sum + f.s[k] * c[f.name] end
      g[k] = math.log(sum / target[k])
    end
    return g, c
  end
  local lambda = { 0, 0 }
  local g, c = residual(lambda)
  for _ = 1, 200 do
    if math.max(abs(g[1]), abs(g[2])) < 1e-13 then break end
    local J = { { 0, 0 }, { 0, 0 } }
    for k, ph in ipairs(phs) do
      local sum = ph.other
      for _, f in ipairs(list) do sum = sum + f.s[k] * c[f.name] end
      for _, f in ipairs(list) do
        local x = c[f.name]
        if x > M.min_factor and x < M.max_factor then  -- a clamped factor no longer moves
          for l = 1, 2 do J[k][l] = J[k][l] + f.s[k] * x * f.sigma2 * f.w[l] / sum end
        end
      end
    end
    local step = solve2(J, { -g[1], -g[2] })
    if not step then break end
    local norm, t = math.max(abs(g[1]), abs(g[2])), 1
    for _ = 1, 60 do  -- backtracking: the first step length that reduces the residual
      local trial = { lambda[1] + t * step[1], lambda[2] + t * step[2] }
      local g2, c2 = residual(trial)
      if math.max(abs(g2[1]), abs(g2[2])) < norm then lambda, g, c = trial, g2, c2; break end
      t = t / 2
    end
    if t < 2 ^ -59 then break end
  end
  if math.max(abs(g[1]), abs(g[2])) > 1e-9 then
    error(fmt("%s: no per-family factors within [%g, %g] reproduce both the measured TTFT and TPOT (they pull the "
      .. "shared kernel families apart: is the measurement of this run, batch and lengths?); give one of them",
      r.measurement, M.min_factor, M.max_factor), 0)
  end
  local fields, shown, clamped = {}, {}, {}
  for _, f in ipairs(list) do
    local x = c[f.name]
    fields[#fields + 1] = { key = "factor." .. f.name, value = x }
    shown[#shown + 1] = fmt("%s x%.3f (%.0f %% of the prefill's kernel time, %.0f %% of a decode step's)", f.name, x,
      100 * f.w[1], 100 * f.w[2])
    if x <= M.min_factor or x >= M.max_factor then clamped[#clamped + 1] = f.name end
  end
  local warnings = {}
  if #clamped > 0 then
    warnings[#warnings + 1] = fmt("%s: the factors of %s reached the limit [%g, %g]: is the measurement of this run "
      .. "on this GPU?", r.measurement, concat(clamped, ", "), M.min_factor, M.max_factor)
  end
  local lines = { "factors: " .. concat(shown, ", ") }
  return fields, lines, warnings
end

--- Fits the factors from a measurement of a static-batch serve run (`neusight serve --batch … --calibrate FILE`):
--- measured_ttft_s and/or measured_tpot_s, against the forecast's ttft_s / tpot_s and their families
--- (prefill_family_s.<f>, prefill_family_n.<f>, prefill_roofline.<f>; decode_… of the mean decode step, both from
--- scripts/neusight/serve.lua calibration_inputs). One of them: fit() on that phase, unchanged. Both: fit_joint().
--- Returns { fields = { factor.<family> …, calibrated_ttft_ms, calibrated_tpot_ms }, lines, warnings }.
---@param r table
function M.fit_serve(r)
  local phs = {}
  for _, p in ipairs(SERVE_PHASES) do
    local ph = { label = p.label, what = p.what, latency_s = r[p.key .. "_s"], measured_s = r["measured_" .. p.key .. "_s"],
                 family_s = r[p.prefix .. "family_s"], family_n = r[p.prefix .. "family_n"],
                 roofline = r[p.prefix .. "roofline"], measurement = r.measurement, gpu = r.gpu,
                 uncertainty = r.uncertainty, uncertainty_source = r.uncertainty_source }
    if ph.measured_s and not ph.latency_s then
      error(fmt("%s: %s_ms given, but the run has no decode step (--output-len 1: its one token comes from the "
        .. "prefill)", r.measurement, p.key), 0)
    end
    p.ph = ph
    if ph.measured_s then phs[#phs + 1] = ph end
  end
  if #phs == 0 then error(fmt("%s: needs ttft_ms or tpot_ms", r.measurement), 0) end
  local fields, lines, warnings
  if #phs == 1 then  -- one measurement: predict's fit on its phase
    local f = M.fit(phs[1])
    fields, warnings = {}, f.warnings
    for _, x in ipairs(f.fields) do
      if x.key ~= "calibrated_ms" then fields[#fields + 1] = x end
    end
    lines = { phs[1].label .. ": " .. f.lines[1], f.lines[2], f.lines[3] }
  else
    fields, lines, warnings = fit_joint(r, phs)
    for _, ph in ipairs(phs) do
      local ratio = ph.measured_s / ph.latency_s
      if abs(ratio - 1) > 1 then
        warnings[#warnings + 1] = fmt("%s: measured %s %.4g ms is %.1fx the forecast %.4g ms; a calibration this large "
          .. "usually means the measurement and the run differ (batch, lengths, dtype, tp, warm-up)", r.measurement,
          ph.label, ph.measured_s * 1e3, ratio, ph.latency_s * 1e3)
      end
    end
    table.insert(lines, 1, fmt("TTFT: forecast %.4g ms, measured %.4g ms (%+.1f %%); TPOT: forecast %.4g ms, measured "
      .. "%.4g ms (%+.1f %%)", phs[1].latency_s * 1e3, phs[1].measured_s * 1e3, 100 * (phs[1].measured_s /
      phs[1].latency_s - 1), phs[2].latency_s * 1e3, phs[2].measured_s * 1e3, 100 * (phs[2].measured_s /
      phs[2].latency_s - 1)))
  end
  local factors = {}
  for _, x in ipairs(fields) do factors[x.key:sub(8)] = x.value end
  local shown = {}
  for _, p in ipairs(SERVE_PHASES) do
    if p.ph.latency_s then
      local c = calibrated_s(p.ph, factors)
      fields[#fields + 1] = { key = "calibrated_" .. p.key .. "_ms", value = c * 1e3 }
      shown[#shown + 1] = fmt("%s %.4g ms (forecast %.4g ms%s)", p.label, c * 1e3, p.ph.latency_s * 1e3,
        p.ph.measured_s and fmt(", measured %.4g ms", p.ph.measured_s * 1e3) or ", not measured")
    end
  end
  lines[#lines + 1] = "calibrated forecast of this run: " .. concat(shown, "; ")
  if #phs == 2 then
    local share = {}  -- of the log distance from the forecast to the measurement
    for k, ph in ipairs(phs) do
      local y = math.log(ph.measured_s / ph.latency_s)
      share[k] = abs(y) > 1e-12 and math.log(calibrated_s(ph, factors) / ph.latency_s) / y or 1
    end
    lines[#lines + 1] = fmt("the calibrated TTFT goes %.0f %% of the way from the forecast to the measurement (log "
      .. "scale), the TPOT %.0f %%: %s's bias is shared by both phases' kernel families, each phase's own kernel "
      .. "scatter is not (leave-one-GPU-out says how much of each); the two measurements pin two directions of the "
      .. "per-family bias, the others stay with the prior", 100 * share[1], 100 * share[2], r.gpu.name)
  end
  for _, p in ipairs(SERVE_PHASES) do  -- both measured and pulling the shared families apart
    local ph = p.ph
    if #phs == 2 and (calibrated_s(ph, factors) - ph.latency_s) * (ph.measured_s - ph.latency_s) < 0 then
      warnings[#warnings + 1] = fmt("%s: the measured TTFT and TPOT pull the kernel families they share in opposite "
        .. "directions, so the calibrated %s moves away from its measurement (one factor per family covers both the "
        .. "prefill's compute-bound GEMMs and a decode step's weight-streaming ones): calibrate from the phase you "
        .. "forecast (ttft_ms or tpot_ms alone), or check both are of this run", r.measurement, ph.label)
    end
  end
  return { fields = fields, lines = lines, warnings = warnings }
end

return M
