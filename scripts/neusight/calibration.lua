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
M.trace_min_launches = 20  -- fit_trace: a family's least measured time per step, in kernel launch overheads

-- A family's prior from the leave-one-GPU-out table (a part of neusight.uncertainty's parts()): the mean μ (the folds'
-- mean log bias, part.bias; 0 on a GPU the family's weights were trained on, part.trained: see uncertainty.lua
-- trained_on) and variance σ² of its folds' log bias, and ε² = the folds' mean kernel variance / n (the scatter of n
-- kernels' mean).
local function prior_of(part)
  local var, within = 0, 0
  for _, st in ipairs(part.stats) do within = within + st.var end
  within = within / #part.stats
  for _, st in ipairs(part.stats) do var = var + (st.mean - part.bias) ^ 2 end
  var = #part.stats > 1 and var / (#part.stats - 1) or within
  return { mu = part.trained and 0 or part.bias, sigma2 = math.max(var, 1e-6), eps2 = within / math.max(1, part.n) }
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
      local pr = prior_of(part)  -- in distribution (part.trained): no fold bias
      parts[#parts + 1] = { name = part.name, s = part.s, mu = pr.mu, sigma2 = pr.sigma2, eps2 = pr.eps2 }
    end
    -- families the roofline priced (no weights for them): no error data; a wide prior, so they take the most
    local family_s = r.family_s or {}
    for name in pairs(r.roofline or {}) do
      local s = family_s[name]
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
--- say it. Models are told apart by their whole-model parameter counts when both runs know one (`calibrated_params`,
--- `params`: neusight.report model_params; a preset and its HF config.json in a folder of another name are then one
--- model, and two model functions, "custom" whatever their graphs hold, are two when their counts differ), else by
--- name. One name is one model within M.same_name_params of each other (BERT counts its MLM head's parameters in
--- training only: 0.6 % more), so that two HF configs named alike by their folders ("config", "7b") still differ.
M.same_name_params = 0.05
function M.model_warning(source, gpu_name, calibrated, model, calibrated_params, params)
  if not (source and calibrated and model) then return nil end
  local by_size = type(calibrated_params) == "number" and type(params) == "number"
  if calibrated == model and model ~= "custom" and (not by_size or
      abs(calibrated_params - params) <= M.same_name_params * math.max(abs(calibrated_params), abs(params))) then
    return nil
  end
  if by_size then  -- counts are written whole: half a parameter apart is one count
    if abs(calibrated_params - params) <= math.max(0.5, 1e-9 * math.max(abs(calibrated_params), abs(params))) then
      return nil
    end
  elseif calibrated == "custom" or model == "custom" then
    return nil
  end
  local a, b = calibrated, model
  if by_size and a == b then  -- one name, two sizes: say the sizes
    a, b = fmt("%s (%.0f parameters)", a, calibrated_params), fmt("%s (%.0f parameters)", b, params)
  end
  return fmt("%s calibrates %s from a measurement of %s, not of %s: a calibration from another model helps less and can "
    .. "hurt (weights/ACCURACY.md, \"Calibration from one measurement\"); calibrate with %s to forecast it", source,
    gpu_name, a, b, model)
end

--- The same as figures (no fields, no lines; `r`: calibration_source, calibration_model, model, gpu, and the sizes
--- calibration_model_params and model_params when known): what
--- `neusight search` (engine/cli/search_cmd.cpp) tells once of its layouts' forecasts.
---@param r table
function M.model_warnings(r)
  return { fields = {}, lines = {},
           warnings = { M.model_warning(r.calibration_source, r.gpu.name, r.calibration_model, r.model,
                                        r.calibration_model_params, r.model_params) } }
end

-- The warning of a measurement below its workload's roofline floor (neusight.figures floor_warning: the one rule for
-- a time faster than physics allows), or nil: a calibration fitted to it would make later forecasts faster than the
-- GPU can be. `floors`: floor_s.<family> of the forecast (its kernels' roofline floors); `what`: the measurement named;
-- `r` the fit's inputs (a parallel run is held to its busiest device's kernels: neusight.figures kernel_floor, as its
-- forecast is).
local function floor_warning(what, measured_s, floors, gpu, r)
  local F = require("neusight.figures")
  local floor, floor_of = F.kernel_floor(r or {}, floors)
  return F.floor_warning { subject = what .. ": the measured", seconds = measured_s, floor_s = floor,
                           floor_of = floor_of, gpu = gpu, measured = true }
end

--- A measurement below its roofline floor by more than the forecast's uncertainty band allows is refused (an error:
--- nothing is written), not fitted: its factors would put every later forecast on the GPU under what the GPU's peaks
--- allow. The floor (neusight.figures kernel_floor) counts every FLOP and byte once at the peaks; what it can overcount
--- (bytes an L2 serves, work a fused kernel skips) is the forecast's error too, so the floor is lowered by the band's
--- low side: allowed = floor × p10 / forecast (neusight.uncertainty band of `r`, at most 1). Without a band (the
--- roofline predictor) the floor itself, to M.below_floor's rounding. Returns the message or nil. `what`, `measured_s`,
--- `floors`, `gpu`, `r` as floor_warning's; `band` the band of `r` (nil: none).
--- The p10 is the band as drawn (its p10_drawn: an error without one), not the band predict shows, whose quantiles are held
--- to the same floor (neusight.uncertainty floor_of): that one's p10 is never below the floor, so its low side would
--- shrink the slack to nothing exactly where the forecast sits at its floor (a long-context decode: 1 % of it instead
--- of 21 %), the floor bounding its own error. What the slack is for, the floor's overcount, is the forecast's error
--- as the folds measured it, before any floor.
function M.floor_refusal(what, measured_s, floors, gpu, r, band)
  local F = require("neusight.figures")
  local floor = F.kernel_floor(r or {}, floors)
  if not F.below_floor(measured_s, floor) then return nil end
  local low, why = 1, "no uncertainty band to allow for"
  if band and type(band.p10_drawn) ~= "number" then
    error("calibration floor_refusal: the band has no p10_drawn (neusight.uncertainty band's p10 as drawn, before the "
      .. "floor); its p10 is held to the floor and would leave no slack", 0)
  end
  local p10 = band and band.p10_drawn
  if p10 and type(r.latency_s) == "number" and r.latency_s > 0 then
    low = math.min(1, p10 / r.latency_s)
    why = fmt("the forecast's p10 as drawn, before the floor, is %.1f %% below it", 100 * (1 - low))
  end
  if measured_s >= floor * low then return nil end
  return fmt("%s; below the floor by more than the band allows (%s: at least %.4g ms): not calibrated, nothing written",
    floor_warning(what, measured_s, floors, gpu, r), why, floor * low * 1e3)
end

-- A factor, kept within the loader's range.
local function clamp(c) return math.min(M.max_factor, math.max(M.min_factor, c)) end

local fit_of -- M.fit's work, below

-- A parallel run's latency is its timeline's: the pipeline's bubbles and the overlaps of its transfers do not scale
-- with the kernel times the factors correct (llama3_8b pp 2, 8 microbatches: scaled, 2029 ms; forecast again with the
-- factors, 1867 ms). So the fit forecasts the run again with the factors it tries (r.forecast_with(factors) -> seconds,
-- the engine's: what the next forecast with the written calibration gives) and moves the ratio of kernel time it asks
-- of them (a secant on the logs, starting as if the latency were proportional) until that forecast lands on the
-- latency the fit intends, `shrunk` x the forecast, within M.reforecast_tolerance (relative) or M.reforecast_tries
-- forecasts. `solve(ratio)` is λ for that kernel-time ratio, `factors_at(λ)` its factors by family.
-- Returns λ, the forecast with its factors (seconds) and its log distance from the target: the closest tried.
M.reforecast_tries, M.reforecast_tolerance = 8, 1e-6
local function reforecast(r, shrunk, solve, factors_at)
  if type(r.forecast_with) ~= "function" then
    error(fmt("%s: a parallel run's calibration forecasts the run again with its factors: the engine gave no "
      .. "r.forecast_with", r.measurement), 0)
  end
  local goal = shrunk * r.latency_s
  local best, x0, y0
  local x = math.log(shrunk)
  for _ = 1, M.reforecast_tries do
    local lambda = solve(exp(x))
    local latency = r.forecast_with(factors_at(lambda))
    if not (type(latency) == "number" and latency > 0 and latency < math.huge) then
      error(fmt("%s: the run forecast again with the factors took %s s", r.measurement, tostring(latency)), 0)
    end
    local y = math.log(latency / goal)
    if not best or abs(y) < abs(best.y) then best = { lambda = lambda, latency = latency, y = y } end
    if abs(y) <= M.reforecast_tolerance or (x0 and y == y0) then break end  -- there, or the factors no longer move it
    local slope = x0 and (y - y0) / (x - x0) or 1
    if not (slope > 0) then slope = 1 end  -- the latency grows with the kernel time; a flat or odd step: proportional
    x0, y0, x = x, y, x - y / slope
  end
  return best.lambda, best.latency, best.y
end

--- Fits the factors.
--- `r`: latency_s (the forecast), measured_s, measurement (the file's name), family_s (seconds by family, "other" for
--- kernels no family prices), gpu, uncertainty / uncertainty_source (the predictor's error table, may be nil); for a
--- parallel run, parallel = true and forecast_with(factors) -> seconds (the run forecast again with them: reforecast).
--- Returns { fields = { { key = "factor.<family>", value }, …, { key = "calibrated_ms" } }, lines, warnings }.
---@param r table
function M.fit(r) return (fit_of(r, "this workload")) end

-- M.fit of `r`, the forecast it calibrates named `what` in its third line ("this workload"; fit_serve's phases name
-- theirs), and the factors as its second line lists them.
function fit_of(r, what)
  local U = require("neusight.uncertainty")
  -- physics first: a measurement the GPU cannot reach is refused before any fit
  local band = U.band(r)  -- its p10_drawn, the low side as drawn: the slack of M.floor_refusal
  local refused = M.floor_refusal(r.what or r.measurement, r.measured_s, r.floor_s, r.gpu, r, band)
  if refused then error(refused, 0) end
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
  -- λ whose factors make the kernel time `target` (bisection: the sum grows with λ)
  local function solve(target)
    local lo, hi = -1, 1
    while sum(lo) > target and lo > -1e9 do lo = lo * 2 end
    while sum(hi) < target and hi < 1e9 do hi = hi * 2 end
    for _ = 1, 200 do
      local mid = (lo + hi) / 2
      if sum(mid) < target then lo = mid else hi = mid end
    end
    return (lo + hi) / 2
  end
  local lambda = solve(target)
  -- one GPU: the latency scales with the kernel time the factors correct
  local calibrated, missed = sum(lambda) / total * r.latency_s, 0
  if r.parallel then
    lambda, calibrated, missed = reforecast(r, shrunk, function(ratio) return solve(total * ratio) end,
      function(l)
        local t = {}
        for _, part in ipairs(parts) do t[part.name] = factor(part, l) end
        return t
      end)
  end
  local fields, shown, warnings, clamped = {}, {}, {}, {}
  for _, part in ipairs(parts) do
    local c = factor(part, lambda)
    fields[#fields + 1] = { key = "factor." .. part.name, value = c }
    shown[#shown + 1] = fmt("%s x%.3f (%.0f %% of the kernel time)", part.name, c, 100 * part.s / total)
    if c <= M.min_factor or c >= M.max_factor then clamped[#clamped + 1] = part.name end
  end
  fields[#fields + 1] = { key = "calibrated_ms", value = calibrated * 1e3 }
  if #clamped > 0 then
    warnings[#warnings + 1] = fmt("%s: the factors of %s reached the limit [%g, %g]: is the measurement of this "
      .. "workload on this GPU?", r.measurement, table.concat(clamped, ", "), M.min_factor, M.max_factor)
  end
  warnings[#warnings + 1] = floor_warning(r.what or r.measurement, r.measured_s, r.floor_s, r.gpu, r)
  if abs(ratio - 1) > 1 then
    warnings[#warnings + 1] = fmt("%s: measured %.4g ms is %.1fx the forecast %.4g ms; a calibration this large usually "
      .. "means the measurement and the workload differ (batch, sequence, dtype, layout, warm-up)", r.measurement,
      r.measured_s * 1e3, ratio, r.latency_s * 1e3)
  end
  local listed = table.concat(shown, ", ")
  local lines = {
    fmt("forecast %.4g ms, measured %.4g ms (%+.1f %%)%s", r.latency_s * 1e3, r.measured_s * 1e3, 100 * (ratio - 1),
      band and fmt("; the forecast's p10-p90 band was %.4g - %.4g ms", band.p10 * 1e3, band.p90 * 1e3) or ""),
    "factors: " .. listed,
    fmt("calibrated forecast of %s: %.4g ms: %.0f %% of the measured deviation is taken as %s's bias "
      .. "(the rest is %s's own kernel scatter, leave-one-GPU-out says)%s%s", what, calibrated * 1e3, 100 * k,
      r.gpu.name, what, other > 0 and fmt("; %.0f %% of the kernel time, copies and collectives, kept as forecast",
      100 * other / total) or "",
      abs(missed) > M.reforecast_tolerance and fmt("; the factors%s leave it %+.1f %% from the %.4g ms intended",
        #clamped > 0 and ", at their limits," or " its forecasts reached", 100 * (exp(missed) - 1),
        shrunk * r.latency_s * 1e3) or ""),
  }
  return { fields = fields, lines = lines, warnings = warnings }, listed
end

--- Fits the factors from a profiler trace measured on the GPU (`neusight predict --gpu G --calibrate TRACE.json`):
--- per family f, the measured time M_f of the trace's GEMM and attention ops and our forecast T_f of the same
--- kernels. Unlike one end-to-end time, a trace measures each family on its own, so each factor is that family's
--- own ratio, shrunk towards the leave-one-GPU-out prior of its bias like fit(): ln c_f = μ_f + k_f (ln(M_f / T_f) −
--- μ_f) with k_f = σ_f² / (σ_f² + ε_f²) (ε_f² = the folds' kernel variance / n_f, the trace's effective kernel
--- count of the family). Without an error table (roofline) c_f = M_f / T_f. Families the trace does not exercise
--- (element-wise, norms: their ops are not built from shapes) get no factor.
--- `r`: measurement, ops, steps (the profiled steps the trace holds, each op once per step; default 1: the times
--- shown are per step), family_s / family_n (forecast seconds and kernel counts by family, over the whole trace),
--- measured_s (by family), roofline, gpu, uncertainty / uncertainty_source.
--- A family needs evidence: its measured kernel time per profiled step at least M.trace_min_launches launch overheads
--- (neusight.fallback launch_overhead_s, 5 µs: 100 µs). A kernel's fixed cost (launch, ramp, tail: microseconds) is no
--- part of the throughput bias a factor carries to other workloads; at 20 launches' worth one such cost moves the
--- family's ratio by 5 % at most, under the predictor's own scatter. A family below it (one 2.8 µs fp32 matmul of a
--- bf16 decode step) gets no factor: its forecasts stay as they were, and the output and the file's `skipped` say so.
---@param r table
function M.fit_trace(r)
  local U = require("neusight.uncertainty")
  local measured, predicted = r.measured_s or {}, r.family_s or {}
  local steps = math.tointeger(r.steps) or 1
  local per_step = 1e3 / steps  -- seconds over the trace → ms per profiled step
  local prior = {}
  local p = U.parts(r)
  if p then
    for _, part in ipairs(p.parts) do prior[part.name] = prior_of(part) end
  end
  local names, skipped, short = {}, {}, {}
  local min_s = M.trace_min_launches * require("neusight.fallback").launch_overhead_s  -- per profiled step
  for name, t in pairs(predicted) do
    if name ~= "other" and t > 0 and (measured[name] or 0) > 0 then
      if measured[name] / steps >= min_s then names[#names + 1] = name else short[#short + 1] = name end
    end
  end
  sort(names)
  sort(short)
  for _, name in ipairs(short) do
    skipped[#skipped + 1] = fmt("%s (%.4g ms measured per step)", name, measured[name] * per_step)
  end
  local skip_note = #skipped > 0 and fmt("not calibrated, too little measured time (under %.4g ms per step, %d kernel "
    .. "launches' overhead, for a factor to describe): %s", min_s * 1e3, M.trace_min_launches, concat(skipped, ", "))
  if #names == 0 then error(fmt("%s: no kernel family with enough measured time to calibrate%s", r.measurement,
    skip_note and ": " .. skip_note or " (none has a measured and a forecast time)"), 0) end
  local fields, shown, warnings, clamped = {}, {}, {}, {}
  local m_all, t_all = 0, 0
  -- the roofline floors of the families measured: what their measured time is held to
  local floors, floor_s, family_s = {}, r.floor_s or {}, {}
  for _, name in ipairs(names) do
    m_all, t_all = m_all + measured[name], t_all + predicted[name]
    floors[name], family_s[name] = floor_s[name], predicted[name]
  end
  -- physics first: kernels measured faster than the GPU can run them are refused (M.floor_refusal), against the band
  -- of their own forecast
  local what = fmt("%s (%d GEMM and attention ops)", r.measurement, r.ops or 0)
  local kept = setmetatable({ latency_s = t_all, family_s = family_s }, { __index = r })
  local refused = M.floor_refusal(what, m_all, floors, r.gpu, kept, (U.band(kept)))
  if refused then error(refused, 0) end
  warnings[#warnings + 1] = floor_warning(what, m_all, floors, r.gpu)
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
      measured[name] * per_step, predicted[name] * per_step, 100 * k)
  end
  if #clamped > 0 then
    warnings[#warnings + 1] = fmt("%s: the factors of %s reached the limit [%g, %g]: was the trace recorded on this "
      .. "GPU?", r.measurement, table.concat(clamped, ", "), M.min_factor, M.max_factor)
  end
  local lines = {
    fmt("%d GEMM and attention ops: measured %.4g ms of kernel time per step, forecast %.4g ms (%+.1f %%)%s", r.ops or 0,
      m_all * per_step, t_all * per_step, 100 * (m_all / t_all - 1),
      steps > 1 and fmt(" (the trace's %d steps: %.4g ms measured in all)", steps, m_all * 1e3) or ""),
    "factors: " .. table.concat(shown, "; "),
  }
  if skip_note then
    lines[#lines + 1] = skip_note
    fields[#fields + 1] = { key = "skipped", value = concat(skipped, ", ") }
  end
  return { fields = fields, lines = lines, warnings = warnings }
end

-- The phases of a serve run a measurement can name: the prefill (TTFT) and the mean decode step (TPOT).
local SERVE_PHASES = {
  { key = "ttft", label = "TTFT", prefix = "prefill_", what = "the prefill", section = "[factors]" },
  { key = "tpot", label = "TPOT", prefix = "decode_", what = "a decode step", section = "[decode_factors]" },
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

--- Fits the factors from a measurement of a static-batch serve run (`neusight serve --batch … --calibrate FILE`):
--- measured_ttft_s and/or measured_tpot_s, against the forecast's ttft_s / tpot_s and their families
--- (prefill_family_s.<f>, prefill_family_n.<f>, prefill_roofline.<f>; decode_… of the mean decode step, both from
--- scripts/neusight/serve.lua calibration_inputs). Each phase is calibrated from its own measurement only, by fit():
--- factor.<f> (the file's [factors]: the prefill and every forecast but a decode step) from the TTFT, or from the
--- TPOT when only that was measured (weights/PHASE_CALIBRATION_RULE.md, 2026-11-28: on GPUs held out of the predictor
--- a decode step's factors lowered the prefill's error, 11.5 → 10.6 %); decode_factor.<f> (the file's [decode_factors]: decode steps) from the TPOT,
--- none when only the TTFT was measured (decode steps stay uncalibrated). Why: one factor per family covers the
--- prefill's compute-bound GEMMs and a decode step's weight-streaming ones alike, and a GPU's bias differs between
--- the two; leave one GPU out, a TTFT calibration applied to decode steps made TPOT worse (5.6 → 10.7 % MAPE) and a
--- joint fit of both measurements too (→ 7.8 %), where each phase from its own gives TTFT 5.7 %, TPOT 5.7 %
--- (weights/ACCURACY.md, weights/PHASE_CALIBRATION_RULE.md).
--- Returns { fields = { factor.<family> …, decode_factor.<family> …, decode_fitted, calibrated_ttft_ms,
--- calibrated_tpot_ms }, lines, warnings }. decode_fitted (a boolean) says which: true, the decode_factor.<family> fields
--- are the TPOT's fit; false, none were fitted and decode steps keep their forecast (the file's [decode_factors] is
--- empty). The engine reads it (engine/cli/serve_cmd.cpp), never the fields' count.
---@param r table
function M.fit_serve(r)
  local fits, phs, listed = {}, {}, {}  -- by phase key: fit() of its measurement, its forecast, its factors' list
  for _, p in ipairs(SERVE_PHASES) do
    local ph = { latency_s = r[p.key .. "_s"], measured_s = r["measured_" .. p.key .. "_s"],
                 family_s = r[p.prefix .. "family_s"], family_n = r[p.prefix .. "family_n"],
                 floor_s = r[p.prefix .. "floor_s"], what = fmt("%s (%s)", r.measurement, p.label),
                 roofline = r[p.prefix .. "roofline"], measurement = r.measurement, gpu = r.gpu,
                 uncertainty = r.uncertainty, uncertainty_source = r.uncertainty_source,
                 trained_gpus = r.trained_gpus }
    if ph.measured_s and not ph.latency_s then
      error(fmt("%s: %s_ms given, but the run has no decode step (--output-len 1: its one token comes from the "
        .. "prefill)", r.measurement, p.key), 0)
    end
    phs[p.key] = ph
    if ph.measured_s then fits[p.key], listed[p.key] = fit_of(ph, p.what) end
  end
  if not (fits.ttft or fits.tpot) then error(fmt("%s: needs ttft_ms or tpot_ms", r.measurement), 0) end
  local fields, lines, warnings = {}, {}, {}
  -- the file's two sets, by the phase whose forecast they correct
  -- [factors] from the TTFT, else from the TPOT (a decode step's factors correct the prefill better than none:
  -- weights/PHASE_CALIBRATION_RULE.md, 2026-11-28)
  local sets = { { phase = "ttft", prefix = "factor.", fit = fits.ttft or fits.tpot },
                 { phase = "tpot", prefix = "decode_factor.", fit = fits.tpot } }
  local factors = { ttft = {}, tpot = {} }
  for _, set in ipairs(sets) do
    for _, x in ipairs(set.fit and set.fit.fields or {}) do
      if x.key ~= "calibrated_ms" then
        local family = x.key:sub(#"factor." + 1)
        fields[#fields + 1] = { key = set.prefix .. family, value = x.value }
        factors[set.phase][family] = x.value
      end
    end
  end
  for _, p in ipairs(SERVE_PHASES) do
    local f = fits[p.key]
    if f then
      lines[#lines + 1] = p.label .. ": " .. f.lines[1]
      lines[#lines + 1] = p.section .. ": " .. listed[p.key]
      lines[#lines + 1] = f.lines[3]
      for _, w in ipairs(f.warnings) do warnings[#warnings + 1] = w end
    end
  end
  if not fits.tpot and phs.tpot.latency_s then
    lines[#lines + 1] = "decode steps: not calibrated (no tpot_ms): a prefill's bias is its compute-bound GEMMs', not a "
      .. "decode step's, whose weight and KV-cache streaming the forecast meets as well on the GPUs measured"
  elseif not fits.ttft then
    lines[#lines + 1] = "the prefill and other forecasts: [factors] are the TPOT's (no ttft_ms; a measured TTFT "
      .. "calibrates them by their own)"
  end
  fields[#fields + 1] = { key = "decode_fitted", value = fits.tpot ~= nil }
  local shown = {}
  for _, p in ipairs(SERVE_PHASES) do
    local ph = phs[p.key]
    if ph.latency_s then
      local c = calibrated_s(ph, factors[p.key])
      fields[#fields + 1] = { key = "calibrated_" .. p.key .. "_ms", value = c * 1e3 }
      shown[#shown + 1] = fmt("%s %.4g ms (forecast %.4g ms%s)", p.label, c * 1e3, ph.latency_s * 1e3,
        ph.measured_s and fmt(", measured %.4g ms", ph.measured_s * 1e3) or ", not measured")
    end
  end
  lines[#lines + 1] = "calibrated forecast of this run: " .. concat(shown, "; ")
  return { fields = fields, lines = lines, warnings = warnings }
end

return M
