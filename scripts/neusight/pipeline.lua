-- scripts/neusight/pipeline.lua — the steps of a forecast, in order: the workload loaded and expanded into kernels,
-- the predictor made, the kernels' latencies and their sum, the parallel timeline, the memory warnings, the figures'
-- inputs and the figures. The engine keeps loading, expansion and the numerics (prediction, aggregation, the roofline's
-- peak, the kernel families' times) and hands them over as primitives; this file says what runs when and what the
-- result holds. A pipeline.lua of your own under `--scripts DIR` (DIR/neusight/pipeline.lua) replaces it: add a figure
-- input, post-process the kernels' latencies or the figures, skip the timeline (not in a parallel run: its figures
-- need it, neusight.report figure_inputs says so), without recompiling.
--
-- forecast(run) (`run` and `predict` of a workload, each row of a comparison, each phase `serve` forecasts) gets `run`
-- with
--   workload()             → { source, launch, warnings, fields, gpu }: the workload script run and its model built,
--                          once; what finish(run) reads as run.warnings, run.fields and run.gpu
--   expand()               → the number of kernels: every node's op rule hooks → kernels, once
--   predictor()            → the predictor's name: the one the command names, made on first use in the process
-- then goes on as finish(run). finish(run) alone (`predict --graph` and each label of `eval models`: a reference
-- graph's kernels; each layout `search` builds) gets `run` with
--   warnings               the warnings found before (the workload's, or the reference graph's)
--   fields                 the report fields of the workload (scripts/neusight/report.lua workload / graph): what the
--                          report renders; run.timeline() adds `parallel` and `memory` to it
--   gpu                    { name, vendor, file, mem_gb, price_per_hour_usd }
-- and, in both,
--   say                    whether warnings go to stderr as they are found (a single forecast; a comparison row keeps
--                          them in its row only)
--   row_keys               a comparison row: the names it holds besides its figures (a workload's own figure may not
--                          take them); nil for a single forecast
--   lean                   the caller reads the forecast and its timeline only (serve's phase forecasts, hundreds
--                          in a sweep; search's layouts): the figures may be skipped (timeline() is then lean too:
--                          the ranking's numbers, no memory report in run.fields); the warnings are still returned
--                          (search says its layouts' once)
--   forecast()             → totals, predictor warnings: library tiles, the predictor's latencies, the launch mode,
--                          calibration, host overhead and aggregation, once per run; the totals as neusight.report reads
--                          them (total, forward, backward, accumulate, optimizer seconds, flops, flops_<phase>, params);
--                          the warnings the predictor's, then the host overhead's (scripts/neusight/overhead.lua: an
--                          --overhead on that changes nothing on the GPU).
--                          The same in two halves, to post-process the kernels' latencies in between:
--   predict()              → the number of kernels: every kernel's per-launch seconds (all of forecast() but the sum)
--   kernels()              → { kernel, … }: what each is (kind, name, op, dtype, flops, bytes, dims, tile; its node's
--                          node, layer, count, phase), before aggregate()
--   latencies()            → { seconds, … }: the per-launch seconds, in kernels()' order
--   set_latencies(seconds) replaces them (an array of one finite number >= 0 per kernel)
--   aggregate()            → totals, predictor warnings, as forecast()'s
--   timeline()             → whether the workload is parallel: its per-device timeline and report (fields.parallel)
--   gpu_spec()             → the GPU as op rules and predictors receive it (every key of its file, and source): what
--                          ns.predict prices other kernels on (the bf16 twins of fp8 GEMMs, below)
--   peak_tflops(dtype)     → the dense peak of a GEMM of `dtype` (nil: fp32) on the GPU, nil when it has no unit for
--                          it; a dtype name neusight.kernels does not know is an error
--   family_inputs()        → { { key, value }, … }: family_s.<family>, family_n.<family>, roofline.<family>; the
--                          figures get untrained_s.<variant> and untrained_n.<variant> beside them, summed here from
--                          kernels() and latencies() (neusight.uncertainty untrained_inputs)
--   calibration_inputs()   → { { key, value }, … }: the calibration forecast() applied (empty without one)
--   figures(inputs)        → { fields = { { key, value, column, cell, top }, … }, lines, warnings }:
--                          scripts/neusight/figures.lua compute() of `inputs` ({ { key, value }, … }, a later key
--                          replacing an earlier one), with the GPU, the predictor's error table and the workload's
--                          own figures
-- Under fusion (the fields' fused_members, a built-in predictor) finish(run) prices each fused kernel against its
-- members unfused between predict() and aggregate(): neusight.fusion cap, which sets fields.fused_capped.
-- Both return { figures = (figures()'s shape), warnings = { … } }: what the report and a comparison row show. A
-- primitive's error ends the run as the engine reports it; an error of the script itself names its file and line.
local ipairs, type = ipairs, type
local ns = require "neusight"
local report = require "neusight.report"
local precision = require "neusight.precision"

local M = {}

-- Whether the run forecasts fp8 (W8A8) GEMMs of a workload, in inference (inference, prefill, decode) or training
-- (whose forward GEMMs are compared too: fp8 training forecast slower than bf16 was said by nothing but
-- neusight.workload's out-of-data warning): its report fields say the dtype. A run without them (an older --scripts
-- report.lua) is not checked.
local function fp8_run(run)
  local f = run.fields
  -- a finish-only run (a reference graph, search's layouts) has no predictor() to price the bf16 twins with
  -- and a lean one (serve's phases: serve says it of its own, search's layouts) says none
  return type(f) == "table" and f.dtype == "fp8" and type(run.gpu_spec) == "function"
    and type(run.predictor) == "function" and not run.lean
end

-- neusight.precision fp8_gemm_warning of the run's kernels, priced in bf16 by its predictor on its GPU (ns.predict); a
-- predictor ns.predict does not have (a Lua one) is not compared: nil.
local function fp8_slower(run, kernels, seconds)
  local gemms = {}
  for i, k in ipairs(kernels) do
    if (k.kind == "gemm" or k.kind == "bmm") and k.dtype == "fp8" and k.phase ~= "backward" then
      gemms[#gemms + 1] = { node = k.node, kind = k.kind, dtype = k.dtype, b = k.b, m = k.m, n = k.n, k = k.k,
                            weight_bytes = k.weight_bytes, seconds = seconds[i], launches = k.count }
    end
  end
  if #gemms == 0 then return nil end
  local price = precision.fp8_bf16_price(run.gpu_spec(), run.predictor())
  return price and precision.fp8_gemm_warning(gemms, price, run.fields.mode) or nil
end

-- Whether the run's graph holds fused nodes the bound applies to (neusight.fusion cap: a workload forecast under
-- --fusion / --flash-attention whose report fields carry the members) and its predictor is one ns.predict has (a Lua
-- predictor's prices are not compared). A --scripts precision.lua older than built_in_predictor: neusight.needs' error
-- naming the file and the function, not "attempt to call a nil value".
local function fused_run(run)
  local f = run.fields
  return type(f) == "table" and type(f.fused_members) == "table" and next(f.fused_members) ~= nil
    and type(run.gpu_spec) == "function" and type(run.predictor) == "function"
    and require("neusight").needs("neusight.precision", "built_in_predictor")(run.predictor())
end

-- neusight.fusion cap on the run's latencies (run.predict() before): a fused kernel priced above its members summed
-- is priced as them; the fields say which (run.fields.fused_capped, by node name).
local function fusion_cap(run)
  local gpu, name = run.gpu_spec(), run.predictor()
  local seconds, capped = require("neusight.fusion").cap(run.kernels(), run.latencies(), run.fields.fused_members,
    function(kernels) return ns.predict(kernels, gpu, name) end)
  if capped then
    run.set_latencies(seconds)
    run.fields.fused_capped = capped
  end
end

function M.finish(run)
  local warnings = {}
  local function warn(w)
    warnings[#warnings + 1] = w
    if run.say then ns.warn(w) end
  end
  for _, w in ipairs(run.warnings) do warn(w) end
  local totals, predictor_warnings, fp8_warning, untrained
  local fp8, fused = fp8_run(run), fused_run(run)
  if fp8 or fused or not run.lean then
    -- fp8 (W8A8) GEMMs forecast slower than in bf16: said (neusight.precision fp8_gemm_warning); a fused kernel priced
    -- above its members summed: priced as them (neusight.fusion cap); the time of kernels of variants their family's
    -- weights never saw (neusight.uncertainty untrained_inputs: the band's figures say it, beside the kernels beyond
    -- their family's training range: range_warning). From the kernels and their
    -- latencies before they are summed (run.forecast() in two halves)
    run.predict()
    if fused then fusion_cap(run) end
    local kernels, seconds = run.kernels(), run.latencies()
    if fp8 then fp8_warning = fp8_slower(run, kernels, seconds) end
    if not run.lean then
      untrained = require("neusight.uncertainty").untrained_inputs(kernels, seconds)
    end
    totals, predictor_warnings = run.aggregate()
  else
    totals, predictor_warnings = run.forecast()
  end
  for _, w in ipairs(predictor_warnings) do warn(w) end
  if fp8_warning then warn(fp8_warning) end
  run.timeline()  -- before the memory and the figures: a parallel run's come from it
  -- a parallel layout's (neusight.parallel.report: a cluster file built for another GPU), lean too: search says them
  for _, w in ipairs(report.layout_warnings(run.fields)) do warn(w) end
  if run.lean then return { figures = { fields = {}, lines = {}, warnings = {} }, warnings = warnings } end
  for _, w in ipairs(report.memory_warnings(run.fields)) do warn(w) end  -- the table says so too
  local inputs = report.figure_inputs(run.fields, totals, run.gpu)
  local function add(k, v) inputs[#inputs + 1] = { k, v } end
  local dtype  -- the compute dtype: the figures' peak is a GEMM's of it
  for _, kv in ipairs(inputs) do
    if kv[1] == "dtype" and type(kv[2]) == "string" then dtype = kv[2] end
  end
  local peak = run.peak_tflops(dtype)
  if peak then add("peak_tflops", peak) end  -- nil: no MFU
  for _, kv in ipairs(run.family_inputs()) do add(kv[1], kv[2]) end
  for _, kv in ipairs(untrained or {}) do add(kv[1], kv[2]) end
  if run.row_keys then add("row_keys", run.row_keys) end
  for _, kv in ipairs(run.calibration_inputs()) do add(kv[1], kv[2]) end
  local figures = run.figures(inputs)
  for _, w in ipairs(figures.warnings) do warn(w) end
  return { figures = figures, warnings = warnings }
end

function M.forecast(run)
  local w = run.workload()
  run.warnings, run.fields, run.gpu = w.warnings, w.fields, w.gpu
  run.expand()
  run.predictor()  -- after the workload: its errors come first
  return M.finish(run)
end

return M
