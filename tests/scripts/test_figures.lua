-- tests/scripts/test_figures.lua — the figures of a forecast (scripts/neusight/figures.lua) against their definitions,
-- on hand-made inputs whose results can be worked out on paper.
local F = require "neusight.figures"

local function eq(got, want, what)
  if got ~= want then error(("%s:\n  expected %s\n  got      %s"):format(what, tostring(want), tostring(got)), 2) end
end
local function near(got, want, what)
  if type(got) ~= "number" or math.abs(got - want) > 1e-12 * math.abs(want) then
    error(("%s:\n  expected %.17g\n  got      %s"):format(what, want, tostring(got)), 2)
  end
end

local function by_key(out)
  local t = {}
  for _, f in ipairs(out.fields) do t[f.key] = f end
  return t
end

-- A single-GPU training step: 2 × 512 tokens in 0.5 s, 3e12 forward + 6e12 backward FLOPs, 1e9 in the optimizer.
local function single(extra)
  local r = { mode = "train", batch = 2, seq = 512, dtype = "bf16", latency_s = 0.5, flops_forward = 3e12,
              flops_backward = 6e12, flops_optimizer = 1e9, state_gb = 30, parallel = false, peak_tflops = 100,
              gpu = { mem_gb = 40, source = "gpus/x.toml" } }
  for k, v in pairs(extra or {}) do r[k] = v end
  return by_key(F.compute(r)), r
end

local M = {}

function M.test_single_gpu_training()
  local f = single { price_per_hour_usd = 3.6 }
  eq(f.gpus.value, 1, "gpus")
  eq(f.tokens.value, 1024, "tokens = batch x seq")
  near(f.tokens_per_s.value, 1024 / 0.5, "tokens/s = tokens / latency")
  near(f.model_flops.value, 9e12, "model FLOPs = forward + backward")
  near(f.flops_per_token.value, 9e12 / 1024, "FLOPs per token")
  near(f.achieved_tflops.value, (9e12 + 1e9) / 0.5 / 1e12, "achieved = every graph FLOP / latency")
  near(f.mfu.value, 9e12 / 0.5 / 100e12, "MFU = model FLOPs / latency / peak")
  assert(f.mfu.value > 0 and f.mfu.value <= 1, "MFU in (0, 1]")
  near(f.cost_per_iteration_usd.value, 3.6 * 1 * 0.5 / 3600, "cost = price x GPUs x hours")
  near(f.cost_per_million_tokens_usd.value, 3.6 * 0.5 / 3600 / 1024 * 1e6, "cost per million tokens")
  eq(f.memory_gb.value, 30, "memory = model state on one GPU")
  eq(f.fits.value, true, "30 GB in 40")
end

function M.test_without_price_or_peak_or_room()
  local f = single { peak_tflops = 0, state_gb = 50 }  -- 0: the GPU has no units of the dtype
  eq(f.cost_per_iteration_usd.value, nil, "no price: no cost")
  eq(f.cost_per_million_tokens_usd.value, nil, "no price: no cost per token")
  eq(f.price_per_hour_usd.value, nil, "no price")
  eq(f.mfu.value, nil, "no peak of the dtype: no MFU")
  eq(f.fits.value, false, "50 GB in 40")
end

function M.test_serving_phases()
  local f = single { mode = "decode", batch = 8, seq = 1, flops_backward = 0, kv_cache_gb = 5, latency_s = 0.02 }
  eq(f.tokens.value, 8, "decode: one new token per sequence")
  near(f.tokens_per_s.value, 8 / 0.02, "decode tokens/s = batch / step")
  eq(f.memory_gb.value, 35, "state + KV cache")
  local p = single { mode = "prefill", batch = 4, seq = 256, flops_backward = 0 }
  eq(p.tokens.value, 1024, "prefill: batch x seq")
  near(p.mfu.value, 3e12 / 0.5 / 100e12, "prefill MFU counts the forward only")
end

function M.test_parallel_run()
  -- dp 2 × tp 4 × pp 2 = 16 GPUs, 8 microbatches; the graph is one tp rank's microbatch through all stages
  local f = single { parallel = true, dp = 2, tp = 4, pp = 2, microbatches = 8, distributed_optimizer = false,
                     memory_gb = 70, price_per_hour_usd = 2, batch = 64 }
  eq(f.gpus.value, 16, "gpus = dp x tp x pp")
  local model = 2 * 4 * 8 * 9e12
  near(f.model_flops.value, model, "model FLOPs = dp x tp x microbatches x (forward + backward)")
  near(f.mfu.value, model / 16 / 0.5 / 100e12, "MFU per GPU")
  near(f.achieved_tflops.value, (model + 2 * 4 * 1e9) / 16 / 0.5 / 1e12, "achieved per GPU, step on every dp x tp rank")
  near(f.tokens_per_s_per_gpu.value, 64 * 512 / 0.5 / 16, "tokens/s per GPU")
  near(f.cost_per_iteration_usd.value, 2 * 16 * 0.5 / 3600, "cost = price x 16 GPUs x hours")
  eq(f.memory_gb.value, 70, "the memory model's figure")
  local z = single { parallel = true, dp = 2, tp = 4, pp = 2, microbatches = 8, distributed_optimizer = true,
                     memory_gb = 70 }
  near(z.achieved_tflops.value, (model + 4 * 1e9) / 16 / 0.5 / 1e12, "distributed optimizer: the step once over dp")
end

function M.test_every_field_has_a_key_and_the_table_lines()
  local out = F.compute { mode = "inference", batch = 1, seq = 8, dtype = "fp32", latency_s = 1e-3, flops_forward = 1e9,
                          flops_backward = 0, flops_optimizer = 0, state_gb = 1, parallel = false, peak_tflops = 10,
                          gpu = { mem_gb = 8, source = "t.toml" } }
  local seen = {}
  for _, f in ipairs(out.fields) do
    assert(type(f.key) == "string" and not seen[f.key], "unique string keys")
    seen[f.key] = true
    if f.column then assert(type(f.cell) == "string", f.key .. ": a column has a cell") end
  end
  eq(#out.lines, 5, "band, throughput, compute, memory, cost")
  assert(out.lines[1]:find("no leave-one-GPU-out error table", 1, true), out.lines[1])
  assert(out.lines[5]:find("no price_per_hour_usd", 1, true), out.lines[5])
  local modelled = F.compute { mode = "inference", batch = 1, seq = 8, dtype = "fp32", latency_s = 1e-3,
                               flops_forward = 1e9, flops_backward = 0, flops_optimizer = 0, state_gb = 1,
                               parallel = false, peak_tflops = 10, memory_gb = 9, fits = false,
                               gpu = { mem_gb = 8, source = "t.toml" } }
  eq(#modelled.lines, 4, "the memory model's lines say memory: no line of its own")
  for _, f in ipairs(modelled.fields) do
    if f.key == "memory_gb" then eq(f.value, 9, "memory_gb: the memory model's") end
    if f.key == "fits" then eq(f.value, false, "fits: the memory model's") end
  end
end

-- An imported graph's fits (no memory model: model state + KV cache) held to the capacity every memory report holds a
-- run to (neusight.memory capacity: at most 95 % of the reported total), not to the datasheet's mem_gb: an L4's 24 GB
-- of which it reports 22.0 GiB (capacity 22.44 GB) does not hold 23 GB of state (was "fits")
function M.test_graph_fits_held_to_the_reported_capacity()
  local function graph_on(gpu, state_gb)
    return F.compute { mode = "train", batch = 1, seq = 8, dtype = "fp32", latency_s = 1e-3, flops_forward = 1e9,
                       flops_backward = 2e9, flops_optimizer = 0, state_gb = state_gb, parallel = false,
                       peak_tflops = 10, gpu = gpu }
  end
  local function fits(out)
    for _, f in ipairs(out.fields) do if f.key == "fits" then return f.value end end
  end
  local l4 = { mem_gb = 24, mem_reported_gib = 22.0, source = "gpus/l4.toml" }
  local over = graph_on(l4, 23)
  eq(fits(over), false, "23 GB on an L4: more than its 22.44 GB capacity")
  assert(over.lines[4]:find("per GPU of 22.44 GB (95 % of the 22.00 GiB it reports", 1, true), over.lines[4])
  assert(over.lines[4]:find("does not fit", 1, true), over.lines[4])
  eq(fits(graph_on(l4, 22)), true, "22 GB fits in 22.44")
  -- a GPU whose file gives no reported total, or whose mem_gb is under 95 % of it: mem_gb, the line as before
  local plain = graph_on({ mem_gb = 24, source = "t.toml" }, 23)
  eq(fits(plain), true, "no mem_reported_gib: mem_gb")
  assert(plain.lines[4]:find("per GPU of 24 GB: fits", 1, true), plain.lines[4])
  local h100 = graph_on({ mem_gb = 80, mem_reported_gib = 79.1, source = "gpus/h100.toml" }, 79.5)
  eq(fits(h100), true, "an H100: mem_gb 80, under 95 % of 79.1 GiB, is the capacity")
  assert(h100.lines[4]:find("per GPU of 80 GB: fits", 1, true), h100.lines[4])
end

-- search's floor check over its whole ranking in one call (F.search_floor): each layout's inputs made by neusight.report
-- (the iteration of a parallel run, the kernels' sum on one GPU; backward FLOPs with gradient accumulation), held to its
-- floor as a forecast is; one warning, of the best-ranked below it, with how many are
function M.test_search_floor_over_the_ranking()
  local gpu = { name = "X", source = "gpus/x.toml" }
  local function layouts()
    return {
      -- dp 2: its iteration 1.0 s over its busiest device's 0.5 s floor
      { dp = 2, tp = 1, pp = 1, microbatches = 1, ep = 1, recompute = "none",
        fc = { total = 3.0, model_flops_forward = 1e12, model_flops_backward = 2e12, model_flops_accumulate = 0 },
        par = { iteration = 1.0, figures = { dp = 2, tp = 1, pp = 1, microbatches = 1, device_floor_s = 0.5 } } },
      -- tp 2: 0.4 s under its device's 0.5 s (kept at the layout's iteration, not the graph's 0.1 s sum)
      { dp = 1, tp = 2, pp = 1, microbatches = 1, ep = 1, recompute = "none",
        fc = { total = 0.1, model_flops_forward = 1e12, model_flops_backward = 2e12, model_flops_accumulate = 0 },
        par = { iteration = 0.4, figures = { dp = 1, tp = 2, pp = 1, microbatches = 1, device_floor_s = 0.5 } } },
      -- one GPU, no plan: 0.19 s; its kernels' floor 0.3 s; its model FLOPs 10 + 5 + 5 (accumulate) TFLOP at
      -- 100 TFLOP/s, 0.2 s (0.15 s without the gradient accumulation's)
      { dp = 1, tp = 1, pp = 1, microbatches = 1, ep = 1, recompute = "none",
        fc = { total = 0.19, model_flops_forward = 10e12, model_flops_backward = 5e12, model_flops_accumulate = 5e12 },
        floor_s = { gemm_tc16 = 0.2, elementwise = 0.1 } },
    }
  end
  local calibrated = F.search_floor(layouts(), { dtype = "bf16", peak_tflops = 100,
    calibration_source = "gpus/x.calibration.toml", gpu = gpu })
  eq(#calibrated.warnings, 1, "one warning for the ranking")
  local w = calibrated.warnings[1]
  assert(w:find("2 of the 3 layouts ranked are forecast below their roofline floor; the best-ranked, dp 1 tp 2 pp 1, "
    .. "1 microbatch, recompute none, at 400.0 ms", 1, true), w)
  assert(w:find("busiest GPU's kernels", 1, true) and w:find("gpus/x.calibration.toml", 1, true), w)
  -- uncalibrated, the model FLOPs floor only: the one-GPU layout, by its gradient accumulation's FLOPs
  local plain = F.search_floor(layouts(), { dtype = "bf16", peak_tflops = 100, gpu = gpu })
  eq(#plain.warnings, 1, "uncalibrated: one warning")
  assert(plain.warnings[1]:find("1 of the 3 layouts ranked are forecast below their roofline floor; the best-ranked, "
    .. "dp 1 tp 1 pp 1, 1 microbatch, recompute none, at 190.0 ms", 1, true), plain.warnings[1])
  assert(plain.warnings[1]:find("the model FLOPs at the bf16 dense peak", 1, true), plain.warnings[1])
  eq(#F.search_floor(layouts(), { dtype = "bf16", gpu = gpu }).warnings, 0, "no peak, no calibration: no floor")
end

-- ... and, in the same call, the figures of the layouts search shows (shared.shown: the ranking's first ones): each
-- from the inputs its floor check made (F.floor_inputs once per layout, not again for its figures), priced at the GPU's
-- price_per_hour_usd; one line saying what the columns are.
function M.test_search_floor_gives_the_shown_layouts_figures()
  local gpu = { name = "X", source = "gpus/x.toml", price_per_hour_usd = 3.6 }
  local layouts = {
    { dp = 2, tp = 1, pp = 1, microbatches = 1, ep = 1, recompute = "none",
      fc = { total = 3.0, model_flops_forward = 1e12, model_flops_backward = 2e12, model_flops_accumulate = 0 },
      par = { iteration = 1.0, figures = { dp = 2, tp = 1, pp = 1, microbatches = 1 } } },
    { dp = 1, tp = 2, pp = 1, microbatches = 1, ep = 1, recompute = "none",
      fc = { total = 0.1, model_flops_forward = 1e12, model_flops_backward = 2e12, model_flops_accumulate = 0 },
      par = { iteration = 2.0, figures = { dp = 1, tp = 2, pp = 1, microbatches = 1 } } },
    { dp = 1, tp = 1, pp = 1, microbatches = 1, ep = 1, recompute = "none",
      fc = { total = 4.0, model_flops_forward = 1e12, model_flops_backward = 2e12, model_flops_accumulate = 0 },
      floor_s = { gemm_tc16 = 0.2 } },
  }
  -- each layout's forecast totals read through a counter: F.floor_inputs (neusight.report timing_inputs) reads
  -- model_flops_forward once each time it makes a layout's inputs
  local made = 0
  for _, l in ipairs(layouts) do
    local fc = l.fc
    l.fc = setmetatable({}, { __index = function(_, k)
      if k == "model_flops_forward" then made = made + 1 end
      return fc[k]
    end })
  end
  local out = F.search_floor(layouts, { dtype = "bf16", peak_tflops = 100, gpu = gpu, mode = "train", batch = 8,
    seq = 1000, shown = 2 })
  eq(made, 3, "each layout's inputs made once")
  eq(#out.items, 2, "the layouts shown")
  local first, second = by_key(out.items[1]), by_key(out.items[2])
  near(first.tokens_per_s.value, 8000, "tokens/s = batch x seq / iteration")
  near(second.tokens_per_s.value, 4000, "the second's iteration")
  near(first.mfu.value, 2 * 3e12 / 2 / 1.0 / 100e12, "dp replicas x model FLOPs / GPUs / iteration / peak")
  near(first.cost_per_iteration_usd.value, 3.6 * 2 * 1.0 / 3600, "price x GPUs x hours")
  near(second.cost_per_million_tokens_usd.value, 3.6 * 2 * 2.0 / 3600 / 8000 * 1e6, "per million tokens")
  eq(#out.lines, 1, "one line")
  assert(out.lines[1]:find("$/Mtoken at 3.60 USD per GPU-hour (gpus/x.toml)", 1, true), out.lines[1])
  -- nothing shown (no `shown`): no items, no line (the floor check alone)
  local bare = F.search_floor(layouts, { dtype = "bf16", peak_tflops = 100, gpu = gpu })
  eq(#bare.items + #bare.lines, 0, "none shown")
end

-- A Lua predictor's answers against each kernel's roofline floor (M.predictor_warnings): one line for those over 100 x
-- max(floor, 10 us), one for those under it, each naming the file:line, the count and the furthest kernel; a tiny
-- kernel's launch microseconds (thousands of times its ns floor) and answers at the floor are not warned of.
function M.test_predictor_warnings()
  local gpu = { name = "G", source = "gpus/g.toml" }
  local function ks(list)
    local out = {}
    for i, k in ipairs(list) do out[i] = { label = "'k" .. i .. "' (gemm)", seconds = k[1], floor_s = k[2] } end
    return out
  end
  local w = F.predictor_warnings { where = "p.lua:2", gpu = gpu, kernels = ks {
    { 1.5e-3, 1e-6 }, { 5e-3, 2e-6 }, { 4e-6, 1e-9 }, { 1e-6, 1e-6 }, { 1e-3, 0 }, { 2e-2, 1e-5 }, { 1e-3, 1e-6 } } }
  eq(#w, 1, "three kernels far above: one warning")
  eq(w[1], "predictor p.lua:2 priced 3 of 7 kernels on G over 100 times their roofline time (max(FLOPs / peak, bytes "
    .. "/ bandwidth)), the furthest 'k2' (gemm) at 5.000 ms against 0.002000 ms (x2500): predict() returns seconds "
    .. "per kernel, not milliseconds", "the above line")
  local below = F.predictor_warnings { where = "p.lua:2", gpu = gpu, kernels = ks {
    { 0.5e-6, 1e-6 }, { 1e-6 * (1 - 1e-7), 1e-6 }, { 0.9e-3, 1e-3 } } }
  eq(#below, 1, "below: one warning (within 1e-6 of the floor is at it)")
  eq(below[1], "predictor p.lua:2 priced 2 of 3 kernels on G below their roofline time (max(FLOPs / peak, bytes / "
    .. "bandwidth)), faster than the GPU's peaks allow, the furthest 'k1' (gemm) at 5.000e-04 ms against 0.001000 ms "
    .. "(50.0 % below); check predict() (seconds per kernel) or the peaks and mem_bw_gbps of gpus/g.toml", "the below line")
  eq(#F.predictor_warnings { where = "p.lua:2", gpu = gpu, kernels = ks { { 1e-6, 1e-6 }, { 5e-6, 1e-9 } } }, 0,
    "in range: none")
end

-- Money as the tables print it: cents from 1 USD with the trailing zero kept (62.40 beside 62.38, tester8 #9), whole
-- dollars from what would round to 100.00, three significant digits below 1 USD, exponent notation below a cent.
function M.test_money_keeps_cents_and_trailing_zeros()
  eq(F.money(nil), "-", "no price")
  eq(F.money(62.4), "62.40", "a trailing zero kept")
  eq(F.money(62.38), "62.38", "cents")
  eq(F.money(5.1), "5.10", "cents below 10")
  eq(F.money(99.99), "99.99", "just below 100")
  eq(F.money(99.996), "100", "what rounds to 100.00: whole dollars")
  eq(F.money(1234.5), "1234", "whole dollars (round half to even)")
  eq(F.money(0.5), "0.500", "three significant digits below 1")
  eq(F.money(0.0123), "0.0123", "three significant digits")
  eq(F.money(0.001), "1.000e-03", "below a cent")
end

return M
