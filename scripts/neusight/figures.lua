-- scripts/neusight/figures.lua — the headline figures of a forecast: throughput, achieved FLOP/s, MFU, memory and
-- whether it fits, and cost. The engine hands over what it forecast (latency, the graph's FLOPs by phase, memory, the
-- parallel layout, the GPU) and renders what comes back as is: `fields` become the JSON object `figures` of a
-- report and the columns of a comparison (`predict --gpu a,b --batch 1,8`), `lines` the table's summary lines. A
-- field added here shows up everywhere without a C++ change.
--
-- Definitions (per iteration: a training step, an inference / prefill forward pass over the batch, one decode step):
--   tokens            train, inference, prefill: batch × seq (the global batch); decode: batch (one new token each)
--   tokens_per_s      tokens / latency (tokens_per_s_per_gpu: / gpus)
--   model FLOPs       the graph's forward + backward kernel FLOPs, times dp × tp × microbatches in a parallel run
--                     (the graph is one tp rank's microbatch), plus the gradient accumulation of the model's parameters
--                     once (not per dp replica and microbatch: that is the layout's work; × tp over the tp ranks'
--                     shards, a local expert's × ep; the optimizer step and activation recomputation excluded): FLOPs
--                     the model needs, the same whatever the layout, counted kernel by kernel from
--                     the same formulas that price the kernels — not the 6·N·tokens + attention approximation of the
--                     PaLM / Megatron papers (which it matches for dense transformers within the attention
--                     convention; it also covers MoE routing, encoders, imported graphs). Under expert parallelism
--                     the mean rank's expert rows, not the busiest rank's the latency prices; under tensor
--                     parallelism a node every tp rank runs whole (norms, residual adds, routers, MLA's down
--                     projections) once, not tp times (neusight.parallel.shard mark_replicated): the same FLOPs
--                     whatever the tp (flops_forward, flops_backward and flops_accumulate are the engine's model
--                     FLOPs: neusight.report figure_inputs)
--   flops_per_token   model FLOPs / tokens
--   achieved_tflops   per GPU: the model FLOPs and the optimizer step of every copy of the parameters it updates
--                     (recomputation not) / gpus / latency
--   mfu               model FLOPs / gpus / latency / the dtype's dense peak (peak_tflops: the GPU file's tensor
--                     peak for fp16/bf16/fp8/tf32, its fp32 matrix peak for fp32; no sparsity)
--   memory_gb, fits   per GPU, the fullest GPU: the memory model's (scripts/neusight/memory.lua: state + saved
--                     activations + temporary + workspace + KV cache) when the engine gives it; else (an imported graph)
--                     model state + the KV cache, activations not counted, fits = memory_gb <= the GPU's capacity
--                     (scripts/neusight/memory.lua capacity: mem_gb, at most 95 % of the total the device reports)
--   cost_per_iteration_usd       price_per_hour_usd × gpus × latency in hours (absent without a price in the GPU file)
--   cost_per_million_tokens_usd  cost_per_iteration_usd / tokens × 1e6
local type, ipairs, fmt, huge = type, ipairs, string.format, math.huge

local M = {}

local function positive(x) return type(x) == "number" and x > 0 and x < huge end
M.positive = positive

--- neusight.calibration's model_warning (a forecast of `model` on GPU `gpu_name`, whose calibration `source` was fitted
--- to `calibrated`; the two runs' whole-model parameter counts when known), or nil; asked only when the calibration names a model, so that an older --scripts calibration.lua
--- without model_warning breaks no forecast (it says nothing). Predict and run (M.compute), serve and its sweep say it.
function M.calibration_warning(source, gpu_name, calibrated, model, calibrated_params, params)
  local model_warning = calibrated and require("neusight.calibration").model_warning
  return model_warning and model_warning(source, gpu_name, calibrated, model, calibrated_params, params) or nil
end

-- 4 significant digits without exponent below 1e6 ("12345", "0.01234"), else "1.235e+07".
local function sig(x)
  if x == nil then return "-" end
  local a = math.abs(x)
  if a == 0 then return "0" end
  if a >= 1e6 or a < 1e-3 then return fmt("%.3e", x) end
  local digits = math.max(0, 3 - math.floor(math.log(a, 10)))
  return fmt("%." .. digits .. "f", x)
end
M.sig = sig

-- Whole dollars from 100, cents from 1 (62.40 next to 62.38: %.4g dropped the zero), three significant digits below
-- (0.0123, trailing zeros kept), then exponent notation.
local function money(x)
  if x == nil then return "-" end
  if x >= 99.995 then return fmt("%.0f", x) end -- (what "%.2f" would round to 100.00)
  if x >= 1 then return fmt("%.2f", x) end
  if x >= 0.01 then return fmt("%#.3g", x) end
  return fmt("%.3e", x)
end
M.money = money -- USD as the tables print it (also neusight.sweep's)

--- The roofline floor of a forecast or a measurement: Σ over its kernel families of floor_s.<family> (the engine's
--- family inputs: each family's Σ max(FLOPs / peak, bytes / bandwidth) over its kernels, fixed-latency kernels 0;
--- engine/core/roofline.h roofline_floor_seconds), in a fixed order; nil without one.
function M.roofline_floor(floors)
  if type(floors) ~= "table" then return nil end
  local names, sum = {}, 0
  for name in pairs(floors) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    if positive(floors[name]) then sum = sum + floors[name] end
  end
  return sum > 0 and sum or nil
end

--- Whether `seconds` is below roofline floor `floor_s` (a positive number; nil: none): the one tolerance (1e-6, the
--- rounding of a forecast priced at its roofline) of M.floor_warning and serve's furthest-below phase.
function M.below_floor(seconds, floor_s)
  return positive(floor_s) and type(seconds) == "number" and seconds < floor_s * (1 - 1e-6) or false
end

--- The one rule for a time faster than physics allows: the warning when `t.seconds` is below `t.floor_s` (its roofline
--- floor; M.roofline_floor), else nil. The predictors never price a kernel below its floor, so only a calibration fitted
--- to a measurement faster than the GPU can be, or the GPU file's peaks, bring a forecast there; a measurement below
--- it is of another workload or GPU, or the GPU file's peaks are too low. `t`: subject (what was timed: "the forecast",
--- "TPOT …", "FILE: the measurement"), seconds, floor_s, gpu (its table: name, source), measured (a measurement: the
--- advice is to check it or the GPU file), calibration (the calibration file a forecast applied; nil: none), mfu (the
--- forecast's, said when over 1), floor_of (what the floor sums; default "the sum over its kernels of max(FLOPs / peak,
--- bytes / bandwidth)"). Said by figures (predict, run), serve, its sweep, search and calibration.lua's fits.
function M.floor_warning(t)
  if not M.below_floor(t.seconds, t.floor_s) then return nil end
  local gpu = t.gpu or {}
  local advice
  if t.measured then
    advice = fmt("check the measurement or the GPU file (%s)", tostring(gpu.source))
  elseif t.calibration then
    advice = fmt("calibrated by %s: was its measurement of this workload on this GPU? --no-calibration ignores it",
      t.calibration)
  else
    advice = fmt("check the peaks and mem_bw_gbps of %s", tostring(gpu.source))
  end
  return fmt("%s %s ms is %.1f %% below what %s's peak FLOP/s and bandwidth allow (%s ms: %s%s); %s", t.subject,
    sig(t.seconds * 1e3), 100 * (1 - t.seconds / t.floor_s), tostring(gpu.name), sig(t.floor_s * 1e3),
    t.floor_of or "the sum over its kernels of max(FLOPs / peak, bytes / bandwidth)",
    (t.mfu and t.mfu > 1) and fmt("; MFU %.1f %%", 100 * t.mfu) or "", advice)
end

-- A Lua predictor's answer is warned of above M.predictor_above_roofline times max(the kernel's roofline floor,
-- M.predictor_floor_min_s): 100 times, as a predictor's roofline in milliseconds (k.bytes / (bw * 1e6)) is exactly
-- 1000 times a memory-bound kernel's floor and under it on a compute-bound one, so a bound of 1000 would miss the bug it
-- is for; and over 1 ms at least, as a kernel whose floor is a few ns (one row of an element-wise op) takes a
-- launch's microseconds, thousands of times its floor, on every GPU.
M.predictor_above_roofline = 100
M.predictor_floor_min_s = 1e-5

--- What a Lua predictor's answers say against each kernel's roofline floor (engine/core/roofline.h
--- roofline_floor_seconds), as warnings: one line for the kernels priced far above it (over
--- M.predictor_above_roofline times max(floor, M.predictor_floor_min_s): the usual bug is milliseconds where predict()
--- returns seconds), one for those below it (M.below_floor: faster than the GPU's peaks allow), each naming the
--- predictor, how many kernels and the furthest one; none when all are in range. Told once per predict() call, i.e.
--- once per forecast, not per kernel (engine/lua/session_predict.cpp lua_predictor). `t`: where (the predictor's
--- "file:line"), gpu (name, source), kernels = { { label, seconds, floor_s (0: no floor, e.g. a copy of 0 bytes) }, … }.
function M.predictor_warnings(t)
  local above, below, n = { count = 0, ratio = 0 }, { count = 0, ratio = huge }, #t.kernels
  for _, k in ipairs(t.kernels) do
    if positive(k.floor_s) then
      local ratio = k.seconds / k.floor_s
      if k.seconds > M.predictor_above_roofline * math.max(k.floor_s, M.predictor_floor_min_s) then
        above.count = above.count + 1
        if ratio > above.ratio then above.ratio, above.k = ratio, k end
      elseif M.below_floor(k.seconds, k.floor_s) then
        below.count = below.count + 1
        if ratio < below.ratio then below.ratio, below.k = ratio, k end
      end
    end
  end
  local gpu, out = t.gpu or {}, {}
  if above.k then
    out[#out + 1] = fmt("predictor %s priced %d of %d kernels on %s over %d times their roofline time (max(FLOPs / "
      .. "peak, bytes / bandwidth)), the furthest %s at %s ms against %s ms (x%.0f): predict() returns seconds per "
      .. "kernel, not milliseconds", tostring(t.where), above.count, n, tostring(gpu.name), M.predictor_above_roofline,
      above.k.label, sig(above.k.seconds * 1e3), sig(above.k.floor_s * 1e3), above.ratio)
  end
  if below.k then
    out[#out + 1] = fmt("predictor %s priced %d of %d kernels on %s below their roofline time (max(FLOPs / peak, "
      .. "bytes / bandwidth)), faster than the GPU's peaks allow, the furthest %s at %s ms against %s ms (%.1f %% "
      .. "below); check predict() (seconds per kernel) or the peaks and mem_bw_gbps of %s", tostring(t.where),
      below.count, n, tostring(gpu.name), below.k.label, sig(below.k.seconds * 1e3), sig(below.k.floor_s * 1e3),
      100 * (1 - below.ratio), tostring(gpu.source))
  end
  return out
end

-- The GPUs of `r` (M.compute's fields), the model FLOPs of its iteration (the graph's forward and backward, over the
-- copies of the graph it runs: one tp rank's microbatch in a parallel run; its gradient accumulation once over the
-- tp ranks, the model's parameters' once), the dtype's dense peak (nil: none) and the MFU of its latency_s (nil
-- without a peak or a latency).
local function layout_of(r)
  local gpus = r.parallel and r.dp * r.tp * r.pp or 1
  local replicas = r.parallel and r.dp * r.tp * r.microbatches or 1
  local model_flops = replicas * (r.flops_forward + r.flops_backward)
    + (r.parallel and r.tp or 1) * (r.flops_accumulate or 0)
  local peak = positive(r.peak_tflops) and r.peak_tflops or nil
  local latency = r.latency_s
  local mfu = (type(latency) == "number" and latency > 0 and peak) and model_flops / gpus / latency / (peak * 1e12)
    or nil
  return gpus, model_flops, peak, mfu
end

--- The kernels' roofline floor of a run and what it sums (M.floor_warning's floor_s and floor_of): a parallel run's
--- (r.parallel) its busiest device's kernels over its microbatches (r.device_floor_s, neusight.parallel.timeline's
--- `floor`; nil without it: an older --scripts parallel report), not the graph's one microbatch through every stage
--- with the whole optimizer step; else the sum of `floors` (floor_s.<family>, M.roofline_floor), floor_of nil (the
--- default words). Forecasts (M.forecast_floor) and calibration.lua's measurements are held to it.
function M.kernel_floor(r, floors)
  if r.parallel then
    return positive(r.device_floor_s) and r.device_floor_s or nil,
      "the sum over its busiest GPU's kernels, each microbatch's, of max(FLOPs / peak, bytes / bandwidth)"
  end
  return M.roofline_floor(floors), nil
end

-- M.forecast_floor of `r` whose layout_of is `gpus`, `model_flops`, `peak`.
local function forecast_floor_of(r, gpus, model_flops, peak)
  local kernels, what
  -- uncalibrated, the kernels' floor holds the predictor, not the GPU: the bundled neusight, roofline and
  -- roofline_derated price each kernel at or above it, while the published baseline roofline-reference (GiB against
  -- GB/s, its own bytes) and a Lua predictor may price under it by their own rules (a Lua predictor's kernels under
  -- their floors are warned of by M.predictor_warnings); the model FLOPs floor holds all
  if r.calibration_source then kernels, what = M.kernel_floor(r, r.floor_s) end
  local flops = peak and model_flops / gpus / (peak * 1e12)
  if flops and not (kernels and kernels >= flops) then
    return flops, fmt("the model FLOPs at the %s dense peak, MFU 100 %%", tostring(r.dtype))
  end
  return kernels, what
end

-- M.forecast_floor_warning of `r` whose layout_of is `gpus`, `model_flops`, `peak`, `mfu` (M.compute has it already).
local function forecast_floor_warning_of(r, subject, gpus, model_flops, peak, mfu)
  local floor, what = forecast_floor_of(r, gpus, model_flops, peak)
  return M.floor_warning { subject = subject, seconds = r.latency_s, floor_s = floor, floor_of = what, gpu = r.gpu,
                           calibration = r.calibration_source, mfu = mfu }
end

--- The roofline floor a forecast is held to (M.floor_warning's floor_s) and what it sums (its floor_of): with a
--- calibration applied, its kernels' floors, on one GPU all of the graph's (M.roofline_floor of floor_s), in a parallel run the busiest device's own
--- kernels over its microbatches as the timeline runs them, recomputed forwards and its share of the optimizer step
--- included (device_floor_s: neusight.parallel.timeline's `floor`; pipeline bubbles and communication are the
--- forecast's, not the floor's; an older --scripts parallel report without it: none); or, where that is more, the model
--- FLOPs at the dtype's dense peak (MFU 100 %). nil, nil without either. `r`: M.compute's fields (parallel, dp, tp, pp,
--- microbatches, flops_forward, flops_backward, flops_accumulate, peak_tflops, floor_s, device_floor_s).
function M.forecast_floor(r)
  return forecast_floor_of(r, layout_of(r))
end

--- A forecast below its floor (M.forecast_floor) told by M.floor_warning, or nil. `r`: M.compute's fields and
--- latency_s; `subject` what was timed ("the forecast").
function M.forecast_floor_warning(r, subject)
  return forecast_floor_warning_of(r, subject, layout_of(r))
end

--- `neusight search`'s floor warning (M.search_floor), told once for its ranking: `r` one layout's inputs as
--- M.compute gets them (latency_s its iteration, parallel and the layout, flops_forward, flops_backward,
--- flops_accumulate, dtype,
--- peak_tflops, floor_s or device_floor_s, calibration_source) and its schedule, recompute and ep; `below` and `ranked`
--- (how many of the ranked layouts are below their floors, of how many), given for the one the warning names: the
--- best-ranked of them. Returns { fields = {}, lines = {}, warnings = { M.forecast_floor_warning's, or none } }.
function M.search_floor_warnings(r)
  local mb = r.microbatches or 1
  local layout = fmt("dp %s tp %s pp %s%s, %s microbatch%s%s%s", tostring(r.dp or 1), tostring(r.tp or 1),
    tostring(r.pp or 1), (r.ep and r.ep > 1) and fmt(" ep %s", tostring(r.ep)) or "", tostring(mb), mb == 1 and "" or "es",
    r.schedule and ", " .. tostring(r.schedule) or "", r.recompute and ", recompute " .. tostring(r.recompute) or "")
  local subject = r.below
    and fmt("%d of the %d layouts ranked are forecast below their roofline floor; the best-ranked, %s, at",
      r.below, r.ranked or r.below, layout)
    or fmt("the forecast of %s", layout)
  return { fields = {}, lines = {}, warnings = { M.forecast_floor_warning(r, subject) } }
end

--- What M.forecast_floor holds a forecast to, as its `r`: `r` the forecast's other inputs (dtype, peak_tflops: the
--- dtype's dense peak, nil: none; calibration_source, nil: none; gpu; floor_s: one GPU's kernel families' floors,
--- floor_s.<family>; and what the caller keeps beside them), filled in and returned with parallel (whether `par` is
--- given) and neusight.report's timing_inputs and layout_inputs of `fc`, the forecast's totals (total,
--- model_flops_forward, model_flops_backward, model_flops_accumulate), and `par`, its parallel report (iteration, figures;
--- nil: one GPU), as predict's figures get them (neusight.report figure_inputs). Search's layouts (M.search_floor) and
--- serve's phases (neusight.serve) are held to their floors through it.
function M.floor_inputs(fc, par, r)
  local needs = require("neusight").needs
  local timing_inputs, layout_inputs = needs("neusight.report", "timing_inputs"), needs("neusight.report", "layout_inputs")
  r.parallel = par ~= nil
  local function add(k, v) r[k] = v end
  timing_inputs(fc, par, add)
  layout_inputs(par, add)
  return r
end

--- Tokens one iteration processes.
---@param mode string
---@param batch integer
---@param seq integer
function M.tokens(mode, batch, seq)
  if mode == "decode" then return batch end
  return batch * seq
end

-- An iteration's throughput and cost, as M.compute and search_figures give them: tokens / latency (nil without a
-- latency) and, from r.price_per_hour_usd (nil, 0: no price), that price, price × gpus × latency in hours and that
-- per million tokens (each nil without a price).
local function rates_of(r, gpus, tokens)
  local latency = r.latency_s
  local tokens_per_s = latency > 0 and tokens / latency or nil
  local price = positive(r.price_per_hour_usd) and r.price_per_hour_usd or nil
  local cost = price and price * gpus * latency / 3600 or nil
  local cost_mtok = cost and tokens > 0 and cost / tokens * 1e6 or nil
  return tokens_per_s, price, cost, cost_mtok
end

-- What an iteration is called in a mode's words (train: iteration, decode: step, else forward pass).
local function per_of(mode) return mode == "train" and "iteration" or mode == "decode" and "step" or "forward pass" end

-- The fields of throughput, MFU and cost, M.compute's and search_figures' (`per` as per_of names the iteration).
local function tokens_per_s_field(v) return { key = "tokens_per_s", value = v, column = "tokens/s", cell = sig(v) } end
local function mfu_field(v)
  return { key = "mfu", value = v, column = "MFU %", cell = v and fmt("%.1f", 100 * v) or "-" }
end
local function cost_fields(cost, cost_mtok, per)
  return { key = "cost_per_iteration_usd", value = cost, column = "$/" .. (per == "forward pass" and "pass" or per),
           cell = money(cost) },
    { key = "cost_per_million_tokens_usd", value = cost_mtok, column = "$/Mtoken", cell = money(cost_mtok) }
end

-- `neusight search`'s figures of one layout shown (M.search_floor's items), M.compute's for the same forecast:
-- tokens_per_s, mfu and, with a price_per_hour_usd (`price`, read once per search; nil: the GPU file gives none),
-- cost_per_iteration_usd and cost_per_million_tokens_usd (without one they are left out, not 0). `r` the layout's
-- inputs as M.search_floor makes them (M.floor_inputs), `shared` the search's (mode, batch, seq). The table shows
-- tokens/s, MFU % and $/Mtoken (fields with a column; cost_per_iteration_usd is in the JSON and CSV only) and the
-- line saying what they are (the same for every layout), without a price why there is no cost.
local function search_figures(r, shared, price)
  r.mode, r.batch, r.seq, r.price_per_hour_usd = shared.mode, shared.batch, shared.seq, price
  local gpus, _, peak, mfu = layout_of(r)
  local tokens_per_s, price, cost, cost_mtok = rates_of(r, gpus, M.tokens(r.mode, r.batch, r.seq))
  local per = per_of(r.mode)
  local fields = { tokens_per_s_field(tokens_per_s), mfu_field(mfu) }
  if cost then
    local per_iteration, per_mtok = cost_fields(cost, cost_mtok, per)
    per_iteration.column, per_iteration.cell = nil, nil  -- JSON and CSV only: the table's width
    fields[#fields + 1] = per_iteration
    fields[#fields + 1] = per_mtok
  end
  local line = fmt("tokens/s = %s per %s; MFU = model FLOPs / GPUs / %s / %s; %s",
    r.mode == "decode" and "global batch" or "global batch x seq", per, per,
    peak and fmt("the %s dense peak (%s TFLOP/s)", tostring(r.dtype), sig(peak))
      or fmt("(- : the GPU file has no %s peak)", tostring(r.dtype)),
    price and fmt("$/Mtoken at %s USD per GPU-hour (%s)", money(price), r.gpu.source)
      or fmt("no cost: %s gives no price_per_hour_usd", r.gpu.source))
  return fields, line
end

--- `neusight search`'s floor check over its whole ranking and the figures of the layouts it shows, in one call
--- (engine/cli/search_cmd.cpp): `layouts` the ranked layouts, best first, each { dp, tp, pp, microbatches, ep,
--- recompute, schedule (nil: none named), fc (its forecast's totals: total, model_flops_forward, model_flops_backward,
--- model_flops_accumulate), par (its parallel report's iteration and figures; nil: no plan, one GPU), floor_s (no plan:
--- its kernel families' floors, floor_s.<family>) }; `shared` what every layout has: dtype, peak_tflops (the dtype's
--- dense peak; nil: none), calibration_source (nil: none), gpu, and for the figures mode, batch, seq and shown (the
--- first `shown` layouts are shown; nil: 0). Each layout's inputs are M.floor_inputs', made once, as predict's figures
--- get them; each is held to its floor as a forecast is (M.forecast_floor, M.below_floor), and the one warning
--- (M.search_floor_warnings) names the best-ranked below it and how many are. Returns { fields = {}, lines = { what
--- the figures are, or none }, warnings = { that warning, or none }, items = { { fields = the figures of shown layout
--- i }, … } }; the GPU's price is read once.
function M.search_floor(layouts, shared)
  local below, best, items, lines = 0, nil, {}, {}
  local shown = shared.shown or 0
  local price = shown > 0 and require("neusight").gpu_optional(shared.gpu, "price_per_hour_usd") or nil
  for i, l in ipairs(layouts) do
    local r = M.floor_inputs(l.fc, l.par, { dp = l.dp, tp = l.tp, pp = l.pp, microbatches = l.microbatches, ep = l.ep,
      recompute = l.recompute, schedule = l.schedule, floor_s = l.floor_s, dtype = shared.dtype,
      peak_tflops = shared.peak_tflops, calibration_source = shared.calibration_source, gpu = shared.gpu })
    if M.below_floor(r.latency_s, (M.forecast_floor(r))) then
      below = below + 1
      best = best or r
    end
    if i <= shown then
      local fields, line = search_figures(r, shared, price)
      items[i], lines[1] = { fields = fields }, lines[1] or line
    end
  end
  local out = { fields = {}, warnings = {} }
  if best then
    best.below, best.ranked = below, #layouts
    out = M.search_floor_warnings(best)
  end
  out.lines, out.items = lines, items
  return out
end

--- The capacity predict holds a run to on `gpu`, in words (neusight.memory capacity_words without "the GPU's "):
--- "80 GB", or "22.44 GB (95 % of the 22.00 GiB it reports; …)" on a part reporting less than its datasheet's GB.
function M.capacity_text(gpu)
  local memory = require "neusight.memory"
  return (memory.capacity_words(gpu.mem_gb, memory.reported_gib(gpu)):gsub("^the GPU's ", ""))
end

--- The figures of one forecast.
--- `r` fields: mode, batch, seq, dtype, latency_s, flops_forward, flops_backward, flops_accumulate (the model's: the
--- mean expert-parallel rank's expert rows, replicated nodes once over tp, the parameters' accumulation once),
--- flops_optimizer (the graph's, one tp rank's microbatch in a parallel run), parallel (boolean), dp, tp, pp,
--- microbatches, distributed_optimizer, step_copies (the parallel report's: copies of the graph's optimizer step the
--- iteration runs; nil: tp · dp, tp under the distributed optimizer), state_gb (per GPU), params_known (false: an imported graph that names no
--- parameters, whose memory is not known), memory_gb and fits (the memory model's, when it ran),
--- kv_cache_gb (serving phases), peak_tflops (the dtype's dense peak; nil when the GPU has no such
--- units), price_per_hour_usd (when the GPU file gives one), gpu (the GPU's read-only table: mem_gb, source),
--- family_s (kernel seconds by predictor family), uncertainty and uncertainty_source (the predictor's error table; see
--- neusight.uncertainty, whose band joins these figures), calibration_source and calibration (the GPU's calibration
--- file the engine applied and its factor by family), calibration_model (the model it was fitted to, when the file
--- says), calibration_stale (the warning of a calibration fitted to another version of the GPU's file) and model (this
--- forecast's).
--- Returns { fields = { { key, value, column, cell, top }, … }, lines = { … }, warnings = { … } }: `value` nil means
--- not available; a field with a `column` is a column of the comparison table (every field is in its JSON and CSV);
--- `top` puts it beside latency_ms in a single forecast's JSON instead of in `figures`.
---@param r table
---@return table
function M.compute(r)
  local gpu = r.gpu
  local gpus, model_flops, peak, mfu = layout_of(r)
  local latency = r.latency_s
  local tokens = M.tokens(r.mode, r.batch, r.seq)
  local tokens_per_s, price, cost, cost_mtok = rates_of(r, gpus, tokens)
  -- the iteration's counted FLOPs: the model FLOPs (the model's forward and backward whatever the layout: replicated
  -- work once, not the FLOPs every GPU executes) and the optimizer step of each tp rank's parameters per dp replica
  -- (once over dp under the distributed optimizer, which shards the step; an expert's once over its dp / ep replicas:
  -- the parallel report's step_copies, neusight.parallel.report; a report without it, as before experts counted)
  local step_copies = r.parallel and (r.step_copies or r.tp * (r.distributed_optimizer and 1 or r.dp)) or 1
  local counted_flops = model_flops + step_copies * r.flops_optimizer
  local achieved = latency > 0 and counted_flops / gpus / latency / 1e12 or nil
  -- memory per GPU: the memory model's (scripts/neusight/memory.lua) when the engine ran it, else model state + KV cache
  local modelled = r.memory_gb ~= nil
  -- an imported graph that counts no parameters (no gradient accumulation rows; neusight.report graph decides it):
  -- its memory is not known (nil)
  local unknown = not modelled and r.params_known == false
  local memory = not unknown and (r.memory_gb or r.state_gb + (r.kv_cache_gb or 0)) or nil
  -- without the memory model's fits (an imported graph): held to the capacity it holds every run to
  -- (neusight.memory capacity: mem_gb, at most 95 % of what the device reports), not to the datasheet's mem_gb
  local M_memory = require "neusight.memory"
  local reported = M_memory.reported_gib(gpu)
  local fits = r.fits
  if fits == nil and memory then fits = memory * 1e9 <= M_memory.capacity(gpu.mem_gb, reported) end

  local per = per_of(r.mode)
  local fields = {
    { key = "gpus", value = gpus, column = "GPUs", cell = fmt("%d", gpus) },
    { key = "tokens", value = tokens },
    tokens_per_s_field(tokens_per_s),
    { key = "tokens_per_s_per_gpu", value = tokens_per_s and tokens_per_s / gpus },
    { key = "model_flops", value = model_flops },
    { key = "flops_per_token", value = tokens > 0 and model_flops / tokens or nil },
    { key = "achieved_tflops", value = achieved, column = "TFLOP/s/GPU", cell = sig(achieved) },
    { key = "peak_tflops", value = peak },
    mfu_field(mfu),
    -- the model's forward and backward FLOPs counted kernel by kernel from its graph (not 6·N·tokens)
    { key = "mfu_convention", value = "graph_forward_backward_flops" },
    { key = "memory_gb", value = memory, column = "memory GB", cell = memory and fmt("%.1f", memory) or "-" },
    { key = "gpu_memory_gb", value = gpu.mem_gb },
    { key = "fits", value = fits, column = "fits", cell = fits == nil and "-" or fits and "yes" or "no" },
    { key = "price_per_hour_usd", value = price },
  }
  for _, f in ipairs { cost_fields(cost, cost_mtok, per) } do fields[#fields + 1] = f end

  local lines = {}
  lines[#lines + 1] = fmt("throughput       %12s tokens/s   (%s per GPU; %d tokens per %s%s)", sig(tokens_per_s),
    sig(tokens_per_s and tokens_per_s / gpus), tokens, per, gpus > 1 and fmt(" on %d GPUs", gpus) or "")
  lines[#lines + 1] = fmt("compute          %12s TFLOP/s per GPU achieved; MFU %s (%s)", sig(achieved),
    mfu and fmt("%.1f %%", 100 * mfu) or "-",
    peak and fmt("model FLOPs %s per token = the graph's %s, over the %s dense peak %s TFLOP/s",
      sig(tokens > 0 and model_flops / tokens or nil), r.mode == "train" and "forward + backward" or "forward",
      r.dtype, sig(peak))
      or fmt("the GPU file has no %s peak", r.dtype))
  if unknown then  -- its warning says why
    lines[#lines + 1] = fmt("memory                 not known (the graph names no parameters; activations not counted)")
  elseif not modelled then  -- the memory model's own lines say it otherwise
    lines[#lines + 1] = fmt("memory           %12.1f GB   per GPU of %s: %s (model state%s, activations not counted)",
      memory, M.capacity_text(gpu), fits and "fits" or "does not fit",
      r.kv_cache_gb and " + KV cache" or "")
  end
  if cost then
    lines[#lines + 1] = fmt("cost             %12s USD per %s, %s USD per million tokens (%s USD per GPU-hour × %d GPU%s, %s)",
      money(cost), per, money(cost_mtok), money(price), gpus, gpus > 1 and "s" or "", gpu.source)
  else
    lines[#lines + 1] = fmt("cost             %12s   (%s gives no price_per_hour_usd)", "-", gpu.source)
  end
  -- the GPU's calibration the engine applied (engine/core/calibration.h; r.calibration: factor by family)
  fields[#fields + 1] = { key = "calibration", value = r.calibration_source }
  if r.calibration_source then
    local names, shown = {}, {}
    for name in pairs(r.calibration or {}) do names[#names + 1] = name end
    table.sort(names)
    for _, name in ipairs(names) do shown[#shown + 1] = fmt("%s x%.3f", name, r.calibration[name]) end
    lines[#lines + 1] = fmt("calibrated       by %s (%s; --no-calibration ignores it)", r.calibration_source,
      table.concat(shown, ", "))
  end
  -- a calibration fitted to another model's measurement: leave one GPU out it helped less and could hurt
  local warnings = {}
  warnings[1] = M.calibration_warning(r.calibration_source, gpu.name, r.calibration_model, r.model,
    r.calibration_model_params, r.model_params)
  -- a calibration fitted to another version of the GPU's file (engine/core/calibration.h calibration_stale_warning)
  warnings[#warnings + 1] = r.calibration_stale
  -- the GPU's calibration fitted to another predictor's forecasts or other weights, not applied, or applied although it
  -- names no predictor (engine/lua/session.h calibration_skipped)
  warnings[#warnings + 1] = r.calibration_skipped
  -- faster than the GPU can be: the forecast under its roofline floor (M.forecast_floor)
  warnings[#warnings + 1] = forecast_floor_warning_of(r, "the forecast", gpus, model_flops, peak, mfu)
  -- the uncertainty band (scripts/neusight/uncertainty.lua): its fields, line and out-of-distribution warnings
  local band = require("neusight.uncertainty").figures(r)
  for _, f in ipairs(band.fields) do fields[#fields + 1] = f end
  table.insert(lines, 1, band.lines[1])
  if r.workload_figures then M.workload_fields(r, fields, lines) end
  for _, w in ipairs(band.warnings) do warnings[#warnings + 1] = w end
  return { fields = fields, lines = lines, warnings = warnings }
end

--- A workload's own figures: its field `figures`, a function(f) called with f = { latency_s, latency_ms, mode, batch,
--- seq, dtype, gpu (the GPU's table), figures = { name → value of the fields above } } and returning
--- { name = value, … } (numbers, strings or booleans). Each becomes one more field (JSON `figures.<name>`, a
--- comparison's column) and a table line, in name order. A name the figures have already, in a comparison's row a name
--- of the row's other cells (`r.row_keys`, comma-separated: its inputs, latency_ms, warnings, error; the engine gives
--- them to comparison rows only; and its settings, neusight.compare SETTINGS), or a value of another type, is an error naming the workload.
function M.workload_fields(r, fields, lines)
  local src = r.workload_source or "workload"
  local known = {}
  for _, f in ipairs(fields) do
    if f.value ~= nil then known[f.key] = f.value end
  end
  local view = { latency_s = r.latency_s, latency_ms = r.latency_s * 1e3, mode = r.mode, batch = r.batch, seq = r.seq,
                 dtype = r.dtype, gpu = r.gpu, figures = known }
  local out = r.workload_figures(view)
  if type(out) ~= "table" then
    error(("%s: field 'figures' must return a table of name = value (got %s)"):format(src, type(out)), 0)
  end
  local names = {}
  for k in pairs(out) do
    if type(k) ~= "string" or not k:match("^[%a_][%w_]*$") then
      error(("%s: field 'figures' returned the name %s: names are identifiers such as tokens_per_joule"):format(src,
        type(k) == "string" and ("'" .. k .. "'") or tostring(k)), 0)
    end
    names[#names + 1] = k
  end
  table.sort(names)
  local taken = {}
  for _, f in ipairs(fields) do taken[f.key] = true end
  for k in tostring(r.row_keys or ""):gmatch("[^,]+") do taken[k] = true end -- a comparison row's other columns
  if r.row_keys then -- and its settings (neusight.compare settings_of: kernels, schedule, …)
    for _, s in ipairs(require("neusight.compare").SETTINGS or {}) do taken[s.key] = true end
  end
  for _, k in ipairs(names) do
    local v = out[k]
    if taken[k] then
      error(("%s: field 'figures' returned '%s', a figure or column the report has already"):format(src, k), 0)
    end
    local tv = type(v)
    if not (tv == "string" or tv == "boolean" or (tv == "number" and v == v and v > -huge and v < huge)) then
      error(("%s: field 'figures' returned %s = %s: a figure is a finite number, a string or a boolean"):format(src, k,
        tostring(v)), 0)
    end
    local cell = tv == "number" and sig(v) or tostring(v)
    fields[#fields + 1] = { key = k, value = v, column = k, cell = cell }
    lines[#lines + 1] = fmt("%-16s %12s   (%s)", k, cell, src)
  end
end

return M
