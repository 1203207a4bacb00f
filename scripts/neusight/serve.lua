-- scripts/neusight/serve.lua — `neusight serve`: LLM serving latency and throughput from prefill/decode forecasts.
--
-- The engine hands run() two primitives: phase(fields), one serving phase forecast exactly as `neusight predict
-- --mode prefill|decode` makes it (latency, KV cache, weights, and per kernel its predicted ms and the roofline's
-- FLOP and DRAM terms), and progress(text), a throttled line on stderr. Everything else is here:
--
-- Static batch (`batch`): B requests prefilled together, then decoded to the end, all of the same lengths.
--   TTFT = prefill(B, I); the O - 1 decode steps run at contexts I, I+1, …, I+O-2 (the first of the O output tokens
--   comes from the prefill); TPOT = their mean, end-to-end = TTFT + their sum. Up to `static_decode_samples`
--   steps every one is forecast; beyond that, that many evenly spaced contexts are, the rest linearly interpolated.
--
-- Continuous batching (`rate`, `requests`): a discrete-event simulation of a vLLM-like server.
--   * Arrivals (neusight.arrivals): Poisson at `rate` requests/s (exponential gaps), or with `burstiness` B ≠ 1
--     gamma gaps of shape B and the same mean (vLLM benchmark_serving's --burstiness: B < 1 burstier), lengths fixed
--     or uniform:LO:HI, all drawn from one splitmix64 stream seeded by `seed` (same seed, same result, on any
--     machine); or a trace (`requests_text`, the text of `requests_file`: a CSV or JSON Lines file of arrival times
--     and lengths, neusight.arrivals parse; its arrival times times `time_scale`) instead of `rate`, `input_len` and
--     `output_len`.
--   * KV cache: paged, `block_size` tokens per block; blocks = (gpu_memory_utilization · GPU memory − weights) /
--     block bytes per GPU (activations and CUDA-graph pools not counted). A sliding-window model's windowed layers
--     hold the blocks of at most the window's tokens (kv_paging).
--   * Scheduler without chunking (vLLM V0): a step prefills the waiting requests in arrival order while the running
--     count stays ≤ max_batch, their prompts fit in max_batched_tokens (one is always allowed) and their blocks are
--     free; otherwise it decodes every running request. With `chunked_prefill` = T (vLLM V1): every step decodes the
--     running requests first, then spends what is left of T tokens on prompt chunks (partly prefilled requests first,
--     then new ones). A decode that needs a block when none is free preempts the last admitted request (vLLM's
--     recompute: its blocks are freed and it is prefilled again, prompt + generated tokens, before anyone else).
--   * Step times (cached per grid point, interpolated; see "Step cost model" below) come from the phase forecasts.
-- Mixtures of experts: the routed experts run as grouped GEMMs by default (`experts` = "grouped": permute, one grouped
-- GEMM for gate+up, SwiGLU, one for down, unpermute — vLLM's fused_moe, SGLang, Megatron-Core's GroupedMLP; see
-- neusight/models/moe.lua), not as HF eager's per-expert loop ("loop", `neusight predict`'s default), whose thousands
-- of one-row kernels a serving engine does not launch.
-- Kernels: Megatron-LM's fused set (`kernels` = "megatron", neusight/nodes.lua g.megatron: fused RMSNorm, one QKV
-- GEMM, one gate-up GEMM, fused rotary and SiLU-and-mul — what vLLM, SGLang and TensorRT-LLM run) at every tp, one
-- GPU included (a one-device plan, as `predict --kernels megatron`); "eager" is HF eager's graph (HF transformers'
-- `generate`), predict's one-GPU default.
-- Bounds: each kernel of a phase is classed by its roofline terms — compute (FLOPs / peak ≥ bytes / bandwidth),
-- else by what it streams: weights (GEMMs), kv_cache (attention), activations (everything else), communication
-- (collectives) — and the phase is bound by the class with the largest sum of roofline times.
local type, tostring, tonumber, error, pairs, ipairs, pcall = type, tostring, tonumber, error, pairs, ipairs, pcall
local floor, ceil, max, min, huge = math.floor, math.ceil, math.max, math.min, math.huge
local fmt, concat, sort = string.format, table.concat, table.sort

local M = {}

M.DEFAULTS = {
  dtype = "bf16",                 -- serving runs 16-bit weights
  launch = "graph",               -- serving engines replay CUDA graphs (scripts/neusight/launch.lua)
  experts = "grouped",            -- MoE models: grouped-GEMM experts as vLLM / SGLang run them (fused_moe), not HF's
                                  -- per-expert loop (workload field `experts`; dense models ignore it)
  kernels = "megatron",           -- serving engines' fused kernels at every tp (predict's one-GPU default is "eager")
  tp = 1,
  requests = 1000,
  seed = 0,
  burstiness = 1,                 -- gamma shape of the inter-arrival gaps (vLLM --burstiness); 1: Poisson
  max_batch = 256,                -- vLLM max_num_seqs
  max_batched_tokens = 8192,      -- prompt tokens per prefill step without chunking
  block_size = 16,                -- vLLM's default KV block
  gpu_memory_utilization = require("neusight.memory").SERVING_UTILIZATION, -- vLLM's default, 0.9
  static_decode_samples = 64,
}

local KNOWN = { "model", "gpu", "dtype", "kv_dtype", "weight_dtype", "tp", "kernels", "launch", "attention", "experts", "predictor", "input_len", "output_len", "batch",
  "rate", "requests", "seed", "burstiness", "requests_file", "requests_text", "time_scale", "chunked_prefill", "max_batch", "max_batched_tokens", "block_size",
  "gpu_memory_utilization", "static_decode_samples" }

local function fail(msg, ...) error("serve: " .. fmt(msg, ...), 0) end
-- A setting that cannot be served (the weights leave no room for a KV cache, tp does not divide the heads): the
-- setting's reason, not the input's bug (neusight.infeasible): `serve --sweep` makes a row of it.
local function infeasible(msg, ...) require("neusight").infeasible("serve: " .. fmt(msg, ...)) end

-- (none of these requires neusight.serve or neusight.sweep: no cycle, so each is required once, not per forecast)
local is_count = require("neusight.topology").is_count
local W = require "neusight.workload"
local Fg = require "neusight.figures"
local U = require "neusight.uncertainty"
local rotary_positions_warning = require("neusight.models.check").rotary_positions_warning
local kv_cache_tokens = require("neusight.nodes").kv_cache_tokens
local rank_share = require("neusight.report").rank_share
local spread_note = require("neusight.uncertainty").spread_note
local memory = require "neusight.memory"
local budget_gb_of = memory.budget_gb

---------------------------------------------------------------------------------------------------
-- Lengths and random numbers

--- A length spec: an integer N (or "N") or "uniform:LO:HI" (inclusive). Returns { kind, lo, hi, mean, text }.
--- A length reaches at most `MAX_SIZE` tokens (neusight.workload's bound of a sequence or context) in one request: the
--- forecasts take nothing longer. The one bound of a length (the command line hands --input-len and --output-len over
--- as given): a whole number beyond it is refused by it, with or without an integer representation (1e20 has none).
function M.length_spec(v, what)
  local max_size = W.MAX_SIZE
  if type(v) == "number" or (type(v) == "string" and v:match("^%s*%-?%d+%s*$")) then
    local x = tonumber(v)
    if x > max_size and x == floor(x) then fail("%s must be at most %d tokens (got %s)", what, max_size, tostring(v)) end
    local n = math.tointeger(x)
    if not is_count(n) then fail("%s must be a positive integer (got %s)", what, tostring(v)) end
    return { kind = "fixed", lo = n, hi = n, mean = n, text = tostring(n) }
  end
  if type(v) == "string" then
    local lo, hi = v:match("^uniform:(%-?%d+):(%-?%d+)$")
    lo, hi = tonumber(lo), tonumber(hi)  -- digits: numbers, floats beyond 2^63
    if lo and hi then
      if not (lo >= 1 and hi >= lo) then fail("%s uniform:LO:HI needs 1 <= LO <= HI (got %s)", what, v) end
      if hi > max_size then fail("%s uniform:LO:HI needs HI <= %d tokens (got %s)", what, max_size, v) end
      lo, hi = math.tointeger(lo), math.tointeger(hi)  -- within the bound: integers
      return { kind = "uniform", lo = lo, hi = hi, mean = (lo + hi) / 2, text = v }
    end
  end
  fail("%s must be a positive integer N or uniform:LO:HI (got %s)", what, tostring(v))
end

--- splitmix64: a function returning uniforms in [0, 1), the same sequence for the same seed everywhere.
function M.rng(seed)
  local state = floor(seed)
  return function()
    state = state + 0x9E3779B97F4A7C15
    local z = state
    z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ~ (z >> 27)) * 0x94D049BB133111EB
    z = z ~ (z >> 31)
    return (z >> 11) * (1.0 / 9007199254740992.0)
  end
end

--- Linear-interpolated percentile (numpy's default) of a sorted array.
function M.percentile(sorted, p)
  local n = #sorted
  if n == 0 then return nil end
  local x = 1 + (n - 1) * p / 100
  local lo = floor(x)
  local hi = min(lo + 1, n)
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (x - lo)
end

local function summary(values)
  local s = {}
  for i = 1, #values do s[i] = values[i] end
  sort(s)
  if #s == 0 then return nil end
  local sum = 0
  for i = 1, #s do sum = sum + s[i] end
  return { mean = sum / #s, p50 = M.percentile(s, 50), p90 = M.percentile(s, 90), p99 = M.percentile(s, 99),
           max = s[#s], min = s[1], count = #s }
end

---------------------------------------------------------------------------------------------------
-- Phase forecasts and bounds

M.BOUND_CLASSES = { "compute", "weights", "kv_cache", "activations", "communication" }

--- The class of one kernel (see the header) from its kind and roofline terms.
function M.bound_class(k)
  if k.kind == "collective" then return "communication" end
  if k.compute_ms > 0 and k.compute_ms >= k.memory_ms then return "compute" end
  if k.kind == "attention" then return "kv_cache" end
  if k.kind == "gemm" or k.op == "grouped_linear" then return "weights" end -- MoE grouped GEMMs stream expert weights
  return "activations"
end

--- Per class: Σ roofline ms (max of the two terms; collectives their priced time) and Σ predicted ms; `bound`
--- is the class with the largest roofline sum.
function M.bounds(kernels)
  local roof, pred = {}, {}
  for _, c in ipairs(M.BOUND_CLASSES) do roof[c], pred[c] = 0, 0 end
  for _, k in ipairs(kernels) do
    local c = M.bound_class(k)
    roof[c] = roof[c] + (c == "communication" and k.ms or max(k.compute_ms, k.memory_ms))
    pred[c] = pred[c] + k.ms
  end
  local bound, most = "compute", -1
  for _, c in ipairs(M.BOUND_CLASSES) do
    if roof[c] > most then bound, most = c, roof[c] end
  end
  return { bound = bound, roofline_ms = roof, predicted_ms = pred }
end

-- neusight.precision fp8_gemm_warning of phase forecast `p` (its kernels' GEMM shapes, priced in bf16 by the serve's
-- predictor on the phase's GPU through ns.predict), or nil; a predictor ns.predict does not have is not compared.
local function fp8_warning(o, p)
  local precision = require "neusight.precision"
  local price = precision.fp8_bf16_price(p.gpu, o.predictor or "neusight")
  if not price then return nil end
  local gemms = {}
  for _, k in ipairs(p.kernels) do
    if (k.kind == "gemm" or k.kind == "bmm") and k.dtype == "fp8" and k.count and k.count > 0 then
      gemms[#gemms + 1] = { node = k.name, kind = k.kind, dtype = k.dtype, b = k.b, m = k.m, n = k.n, k = k.k,
                            weight_bytes = k.weight_bytes, seconds = k.ms / k.count / 1e3, launches = k.count }
    end
  end
  return precision.fp8_gemm_warning(gemms, price)
end

-- Whether a kernel of node `name` works on the logits rows, one per sampled position: the LM head (a linear named
-- lm_head: neusight.workload lm_head_name) and Gemma-2's final soft-capping of its logits (neusight.nodes
-- causal_lm_head). A prefill of b prompts runs them on b rows, a decode step of b requests on b rows.
local function logits_kernel(name)
  return W.lm_head_name(name) or type(name) == "string" and name:match("^final_softcap%.") ~= nil
end

-- A caching forecaster: F(mode, batch, tokens) → { ms, attention_ms, head_ms (logits_kernel's), kv_cache_gb,
-- state_gb, gpu, kernels, … }.
-- Its third return, below(), is by mode ("prefill", "decode") the forecast furthest under its floor (neusight.figures
-- forecast_floor, the rule predict holds a forecast to, of the phase's totals, parallel report, dense peak, calibration
-- and families' floors as neusight.figures floor_inputs makes them), none where none is: what the floor warnings name.
local function forecaster(o, phase)
  local cache, n, worst, fp8 = {}, 0, {}, {}
  local function F(mode, batch, tokens, with_band)
    local key = mode .. ":" .. batch .. ":" .. tokens
    local r = cache[key]
    if r and (r.band_done or not with_band) then return r end
    local fields = { model = o.model, gpu = o.gpu, dtype = o.dtype, launch = o.launch, attention = o.attention,
                     experts = o.experts, mode = mode, batch = batch, kv_dtype = o.kv_dtype, weight_dtype = o.weight_dtype }
    if o.tp > 1 then fields["parallel.tp"] = o.tp end
    -- the kernel set at every tp: a one-GPU "megatron" run is a one-device plan (neusight.workload planned); a
    -- one-GPU "eager" one the model's own graph, which takes no parallel.kernels (it would be "no effect")
    if o.tp > 1 or o.kernels ~= "eager" then fields["parallel.kernels"] = o.kernels end
    if mode == "prefill" then fields.seq = tokens else fields.context = tokens end
    local p = phase(fields, with_band)
    local attn, head = 0, 0
    for _, k in ipairs(p.kernels) do
      if k.kind == "attention" then attn = attn + k.ms end
      if logits_kernel(k.name) then head = head + k.ms end
    end
    local counted = r ~= nil  -- a band asked of a phase forecast before: the same forecast, counted once
    r = { ms = p.latency_ms, p10 = p.latency_ms_p10, p90 = p.latency_ms_p90, band_spread = p.band_spread,
          band_warnings = p.band_warnings, out_of_distribution = p.out_of_distribution, band_widened = p.band_widened,
          band_borrowed_from = p.band_borrowed_from, band_fallback_share = p.band_fallback_share,
          trained_range = p.trained_range,
          band_done = with_band, attention_ms = attn, head_ms = head,
          kv_cache_gb = p.kv_cache_gb, state_gb = p.state_gb, params = p.params, active_params = p.active_params,
          max_positions = p.max_positions, model_warnings = p.model_warnings, layout_warnings = p.layout_warnings,
          kv_window = p.kv_window and math.tointeger(p.kv_window) or p.kv_window,
          kv_window_share = p.kv_window_share,
          model_params = p.model_params,
          calibration = p.calibration, calibration_model = p.calibration_model,
          calibration_model_params = p.calibration_model_params, decode_calibrated = p.decode_calibrated,
          prefill_calibrated = p.prefill_calibrated,
          calibration_stale = p.calibration_stale, calibration_skipped = p.calibration_skipped,
          families = p.families,
          gpu = p.gpu, kernels = p.kernels, model = p.model, dtype = p.dtype, launch = p.launch,
          mode = mode, batch = batch, tokens = tokens }
    cache[key] = r
    if not counted then n = n + 1 end
    -- fp8 (W8A8) GEMMs forecast slower than in bf16 (neusight.precision fp8_gemm_warning), of the first forecast of
    -- each mode: the same GEMM shapes at another batch, said once
    if p.dtype == "fp8" and fp8[mode] == nil then
      fp8[mode] = fp8_warning(o, p) or false
    end
    -- a phase under its floor (neusight.figures forecast_floor: with a calibration its kernels' floors, and always the
    -- model FLOPs at the dtype's dense peak), as predict's forecast of it is held to it, of the inputs search's layouts
    -- get (neusight.figures floor_inputs); an older --scripts figures.lua without the rule, or a phase without its
    -- totals: nothing said
    if p.totals and Fg.floor_inputs and Fg.forecast_floor and Fg.forecast_floor_warning then
      local floors  -- one GPU's: its kernel families' floors (the phase's floor_s.<family>)
      if not p.parallel then
        for k, v in pairs(p.families) do
          local family = k:match("^floor_s%.(.+)$")
          if family then
            floors = floors or {}
            floors[family] = v
          end
        end
      end
      local fl = Fg.floor_inputs(p.totals, p.parallel, { dtype = p.dtype, peak_tflops = p.peak_tflops,
        -- the calibration when it corrects this phase (phase_calibrated false: it corrects the other one only)
        calibration_source = p.phase_calibrated ~= false and p.calibration or nil, floor_s = floors, gpu = p.gpu })
      local floor_s = Fg.forecast_floor(fl)
      local w = worst[mode]
      if Fg.below_floor(fl.latency_s, floor_s) and (not w or fl.latency_s / floor_s < w.below) then
        r.floor, r.below = fl, fl.latency_s / floor_s
        worst[mode] = r
      end
    end
    return r
  end
  return F, function() return n end, function() return worst end, function() return fp8 end
end

-- With the phase's band, what it says the forecast is outside of, under predict's JSON names (README: Uncertainty band):
-- out_of_distribution, band_widened, band_borrowed_from (an AMD GPU's band is NVIDIA's), band_fallback_share (the
-- time the untrained roofline fallback priced); the last three only where predict gives them.
local function phase_report(r)
  local b = M.bounds(r.kernels)
  return { latency_ms = r.ms, batch = r.batch, [r.mode == "prefill" and "seq" or "context"] = r.tokens,
           bound = b.bound, roofline_ms = b.roofline_ms, predicted_ms = b.predicted_ms, kv_cache_gb = r.kv_cache_gb,
           out_of_distribution = r.out_of_distribution, band_widened = r.band_widened,
           band_borrowed_from = r.band_borrowed_from, band_fallback_share = r.band_fallback_share }
end

---------------------------------------------------------------------------------------------------
-- Options

-- The options of a trace (`requests_text`, the text of `requests_file`): its requests (neusight.arrivals parse, each
-- error at file:line) replace rate, requests, input_len and output_len, which are refused beside it, as are batch and
-- burstiness. o.trace = the parse; o.input / o.output = length specs of the trace's range (kind "fixed" when every
-- request has the same length: a point of the step-cost grid; "trace" otherwise).
local function trace_options(o, raw)
  local source = o.requests_file or "requests"
  if type(source) ~= "string" then fail("requests_file must be a file name (got %s)", tostring(source)) end
  for _, k in ipairs { "rate", "batch", "requests", "input_len", "output_len", "burstiness" } do
    if raw[k] ~= nil then
      local flag = "--" .. k:gsub("_", "-")
      fail("--requests-file %s gives each request's arrival and lengths: %s %s", source, flag,
        k == "batch" and "(a static batch) excludes it" or "conflicts with it; drop one")
    end
  end
  if type(o.requests_text) ~= "string" then fail("--requests-file %s: no text read", source) end
  local scale = o.time_scale or 1
  if type(scale) ~= "number" or not (scale > 0) or scale == huge then
    fail("--time-scale must be a positive number (got %s)", tostring(scale))
  end
  local max_size = W.MAX_SIZE
  local trace = require("neusight.arrivals").parse(o.requests_text, source, max_size)
  local reqs = trace.requests
  -- --time-scale: every arrival time times it (0.5 replays the trace twice as fast)
  if scale ~= 1 then
    for _, r in ipairs(reqs) do r.arrival = r.arrival * scale end
  end
  trace.time_scale = scale
  local function spec(key)
    local lo, hi, sum = huge, 0, 0
    for _, r in ipairs(reqs) do lo, hi, sum = min(lo, r[key]), max(hi, r[key]), sum + r[key] end
    return { kind = lo == hi and "fixed" or "trace", lo = lo, hi = hi, mean = sum / #reqs,
             text = lo == hi and tostring(lo) or fmt("%d..%d", lo, hi) }
  end
  o.input, o.output = spec("input"), spec("output")
  -- a request's last token sees its prompt and all but itself of its output: within a forecast's bound (the row that
  -- goes furthest named)
  local worst
  for _, r in ipairs(reqs) do
    if not worst or r.input + r.output > worst.input + worst.output then worst = r end
  end
  if worst.input + worst.output - 1 > max_size then
    error(fmt("%s:%d: a request of input %d + output %d tokens reaches a context of %d tokens; a forecast takes at "
      .. "most %d", source, worst.line, worst.input, worst.output, worst.input + worst.output - 1, max_size), 0)
  end
  o.longest = worst
  o.trace = trace
  o.requests = #reqs
  o.input_len, o.output_len = o.input.text, o.output.text
  if o.chunked_prefill ~= nil and not is_count(o.chunked_prefill) then
    fail("--chunked-prefill must be a positive number of tokens (got %s)", tostring(o.chunked_prefill))
  end
  return o
end

local function options(raw)
  local o = {}
  for k, v in pairs(raw) do o[k] = v end
  local known = {}
  for _, k in ipairs(KNOWN) do known[k] = true end
  for k in pairs(o) do
    if not known[k] then
      local c = W.did_you_mean(k, KNOWN)
      fail("unknown option '%s'%s", tostring(k), c and fmt(" (did you mean '%s'?)", c) or "")
    end
  end
  o.experts_given = raw.experts ~= nil  -- a dense model warns of a given --experts, not of the default
  -- under chunked prefill a step's token budget is the chunk's: a given --max-batched-tokens is said to do nothing
  o.max_batched_tokens_given = raw.max_batched_tokens ~= nil
  for k, v in pairs(M.DEFAULTS) do
    if o[k] == nil then o[k] = v end
  end
  if type(o.model) ~= "string" or o.model == "" then fail("needs a model") end
  if type(o.gpu) ~= "string" or o.gpu == "" then fail("needs a GPU") end
  for _, k in ipairs { "tp", "requests", "max_batch", "max_batched_tokens", "block_size", "static_decode_samples" } do
    if not is_count(o[k]) then fail("%s must be a positive integer (got %s)", k, tostring(o[k])) end
  end
  local config = require "neusight.parallel.config"  -- predict's names of the kernel sets, the one list
  config.one_of(o.kernels, config.CHOICES.kernels, "serve: --kernels")
  if type(o.seed) ~= "number" or o.seed ~= floor(o.seed) then fail("seed must be an integer (got %s)", tostring(o.seed)) end
  if not (type(o.gpu_memory_utilization) == "number" and o.gpu_memory_utilization > 0 and o.gpu_memory_utilization <= 1) then
    fail("gpu_memory_utilization must be in (0, 1] (got %s)", tostring(o.gpu_memory_utilization))
  end
  if type(o.burstiness) ~= "number" or not (o.burstiness > 0) or o.burstiness == huge then
    fail("--burstiness must be a positive number (got %s)", tostring(o.burstiness))
  end
  if o.requests_text ~= nil or o.requests_file ~= nil then
    return trace_options(o, raw)
  end
  if raw.time_scale ~= nil then fail("--time-scale scales a trace's arrival times: it needs --requests-file") end
  if raw.burstiness ~= nil and o.rate == nil then
    fail("--burstiness shapes the gaps between --rate's arrivals: it needs --rate")
  end
  if o.input_len == nil then fail("needs the input length (--input-len)") end
  if o.output_len == nil then fail("needs the output length (--output-len)") end
  o.input = M.length_spec(o.input_len, "the input length (--input-len)")
  o.output = M.length_spec(o.output_len, "the output length (--output-len)")
  -- a request's last token sees the prompt and all but itself of the output (a decode step's context, a preempted
  -- request's prefill again): within the bound of a forecast's context, said by the flags, not as a workload field
  local longest, max_size = o.input.hi + o.output.hi - 1, W.MAX_SIZE
  if longest > max_size then
    fail("a request of input %d + output %d tokens reaches a context of %d tokens; a forecast takes at most %d " ..
      "(--input-len, --output-len)", o.input.hi, o.output.hi, longest, max_size)
  end
  if o.batch ~= nil and o.rate ~= nil then fail("--batch (static batch) and --rate (continuous batching) exclude each other") end
  if o.batch == nil and o.rate == nil then fail("needs --batch N (static batch) or --rate R (continuous batching)") end
  if o.batch ~= nil then
    if not is_count(o.batch) then fail("--batch must be a positive integer (got %s)", tostring(o.batch)) end
    if o.input.kind ~= "fixed" or o.output.kind ~= "fixed" then
      fail("a static batch (--batch) takes fixed lengths; length distributions need --rate")
    end
  else
    if type(o.rate) ~= "number" or not (o.rate > 0) or o.rate == huge then
      fail("--rate must be a positive number of requests per second (got %s)",
        type(o.rate) == "number" and fmt("%g", o.rate) or tostring(o.rate))
    end
  end
  if o.chunked_prefill ~= nil and not is_count(o.chunked_prefill) then
    fail("--chunked-prefill must be a positive number of tokens (got %s)", tostring(o.chunked_prefill))
  end
  return o
end

--- The options checked and completed with the defaults (an error names the bad one); run() starts with it.
M.options = options

-- Runs the first forecast with a message that says why a model cannot be served in this setting (`why`; nil: the
-- model's). Only a setting's reason (neusight.is_infeasible: tp not dividing the heads, a GPU without units for the
-- dtype) is told so; any other error (a script's, an op rule's, a --scripts module without a function it needs:
-- neusight.needs) is the input's and goes on as it was raised.
local function probe(F, o, mode, batch, tokens, with_band, why)
  local ok, r = pcall(F, mode, batch, tokens, with_band)
  if not ok then
    if not require("neusight").is_infeasible(r) then error(r, 0) end
    infeasible("%s: %s", why or fmt("model '%s' cannot be served", o.model), tostring(r))
  end
  return r
end

-- Why a forecast of the longest request's tokens fails (a model it goes beyond: a learned position table, GPT-2's
-- n_positions), said by the flags, not by the context of whichever step met the limit first ("context 1025" for
-- --input-len 1000 --output-len 100): probe()'s `why` for the forecasts beyond the first prefill.
local function longest_why(o)
  local w = o.longest  -- a trace's longest request
  if w then
    return fmt("%s:%d: a request of input %d + output %d tokens holds up to %d tokens, which model '%s' cannot take",
      o.requests_file or "requests", w.line, w.input, w.output, w.input + w.output - 1, o.model)
  end
  return fmt("--input-len %d + --output-len %d: a request holds up to %d tokens (input + output - 1), which model '%s' "
    .. "cannot take", o.input.hi, o.output.hi, o.input.hi + o.output.hi - 1, o.model)
end

-- Each report's calibration model warning (also among its warnings), for neusight.sweep, which says it once per
-- calibration file: kept beside the report, since every field of the report is in its JSON.
local MODEL_WARNING = setmetatable({}, { __mode = "k" })
-- Each report's warning of a calibration fitted to another version of the GPU's file, for neusight.sweep likewise.
local STALE_WARNING = setmetatable({}, { __mode = "k" })
-- Each report's warning of a request beyond a rotary model's max_position_embeddings (also among its warnings), for
-- neusight.sweep, which says it once per sweep: kept beside the report for the same reason.
local POSITION_WARNING = setmetatable({}, { __mode = "k" })
-- Each report's warning of its requests' attention beyond the attention MLPs' training contexts (also among its
-- warnings), for neusight.sweep, which says it once per sweep.
local ATTENTION_WARNING = setmetatable({}, { __mode = "k" })
-- Each report's warnings of its model's config file (also among its warnings, first), for neusight.sweep likewise.
local CONFIG_WARNINGS = setmetatable({}, { __mode = "k" })
-- Each report's warnings of its parallel layout (also among its warnings), for neusight.sweep, which says them once.
local LAYOUT_WARNINGS = setmetatable({}, { __mode = "k" })
-- Each report's note of a GPU file without mem_reported_gib (also among its warnings), for neusight.sweep likewise.
local MEMORY_NOTE = setmetatable({}, { __mode = "k" })
-- Each report's warning of fp8 GEMMs forecast slower than in bf16 (also among its warnings), for neusight.sweep likewise.
local FP8_WARNING = setmetatable({}, { __mode = "k" })
-- Each report's warnings of options given that do nothing (--experts on a dense model, --max-batched-tokens beside
-- --chunked-prefill; also among its warnings), for neusight.sweep, which says them once.
local NO_EFFECT = setmetatable({}, { __mode = "k" })

local function common_report(o, first, count)
  -- a quantised KV cache / weights: what the forecasts do not know (neusight.workload.warnings of a decode phase)
  -- (neither when it names the compute dtype: workload.lua storage_dtypes, whose "no effect" warnings come first)
  local kv_dtype, weight_dtype, storage_notes = W.storage_dtypes(first.dtype, o.kv_dtype, o.weight_dtype)
  local warnings = W.warnings { mode = "decode", dtype = first.dtype, kv_dtype = kv_dtype, weight_dtype = weight_dtype }
  for i, note in ipairs(storage_notes) do table.insert(warnings, i, note) end
  -- what the model's config file says that the forecasts do not read (neusight.workload model_warnings: a
  -- checkpoint's quantization_config), first, as predict's workload warnings have them
  local config_warnings = first.model_warnings or {}
  for i, note in ipairs(config_warnings) do table.insert(warnings, i, note) end
  -- the longest request beyond a rotary model's max_position_embeddings (vLLM's rule: prompt + output tokens)
  -- (a trace's longest request, by its line: its longest prompt and longest output need not be one request's)
  local w = o.longest or { input = o.input.hi, output = o.output.hi }
  local positions = w.input + w.output
  -- a trace says how many of its requests go beyond, not only the longest (tester10 #12: 1000 such rows read as one)
  local beyond = 0
  for _, r in ipairs(o.trace and o.trace.requests or {}) do
    if first.max_positions and r.input + r.output > first.max_positions then beyond = beyond + 1 end
  end
  local position_warning = rotary_positions_warning(fmt("%sinput %d + output %d tokens%s",
    w.line and fmt("%s:%d: ", o.requests_file or "requests", w.line) or "", w.input, w.output,
    beyond > 1 and fmt(" (the longest of %d requests of the trace beyond it)", beyond) or ""), positions,
    first.max_positions)
  warnings[#warnings + 1] = position_warning
  -- the longest prompt's prefill attention (whole or chunk by chunk, its last keys are the prompt's) and the longest
  -- request's last decode step (input + output - 1 cached tokens) beyond what the attention MLPs were trained on
  -- (neusight.uncertainty range_warning, against the manifests of the weights the phases were priced with: their
  -- trained_range, the --weights DIR's): of the requests, not of the grid's forecasts (a power of two past the longest; the
  -- engine leaves their longest.* out of the phases' band)
  local attention_warning = U.range_warning(first.trained_range,
    { attention_prefill = { keys = o.input.hi },
      attention_decode = { cached_tokens = w.output > 1 and w.input + w.output - 1 or nil } })
  warnings[#warnings + 1] = attention_warning
  -- the layout's, as predict says them of the same layout (neusight.report layout_warnings: a tp group priced over
  -- PCIe beyond the GPU's NVLink bridge); every phase runs the same tp, so the first forecast's are the run's
  local layout_warnings = first.layout_warnings or {}
  for _, w in ipairs(layout_warnings) do warnings[#warnings + 1] = w end
  for _, w in ipairs(first.band_warnings or {}) do warnings[#warnings + 1] = w end  -- out of distribution
  -- an older --scripts figures.lua has no calibration_warning: nothing said
  local model_warning = Fg.calibration_warning and Fg.calibration_warning(first.calibration, first.gpu.name,
    first.calibration_model, first.model, first.calibration_model_params, first.model_params) or nil
  warnings[#warnings + 1] = model_warning
  -- a calibration fitted to another version of the GPU's file (engine/core/calibration.h calibration_stale_warning)
  -- and the GPU's calibration's scope (session::calibration_skipped: fitted to another predictor or other weights, not
  -- applied; or applied although it names no predictor). A skipped file is not stale (a stale file is an applied one);
  -- an applied one may be both, and the report keeps the stale warning for sweep.lua (which says it once per GPU)
  local stale_warning = first.calibration_stale or first.calibration_skipped
  warnings[#warnings + 1] = first.calibration_stale
  warnings[#warnings + 1] = first.calibration_skipped
  -- a GPU file without the total its device reports: the budget is a share of mem_gb, said (neusight.memory)
  local memory_note = not first.gpu.mem_reported_gib
    and memory.reported_note(first.gpu.source, o.gpu_memory_utilization, first.gpu.mem_gb) or nil
  warnings[#warnings + 1] = memory_note
  local no_effect = {}
  if o.experts_given and not first.active_params then  -- as predict's no-effect warning (workload.lua ignored_fields)
    no_effect[#no_effect + 1] = fmt("experts (--experts) has no effect: model '%s' has no routed experts; drop it",
      o.model)
  end
  if o.max_batched_tokens_given and o.chunked_prefill then  -- (it was dropped without a word)
    no_effect[#no_effect + 1] = fmt("max_batched_tokens (--max-batched-tokens %d) has no effect with --chunked-prefill: "
      .. "a chunked step's token budget is --chunked-prefill's %d tokens (what vLLM's max_num_batched_tokens is under "
      .. "chunked prefill); drop it, or give its value to --chunked-prefill", o.max_batched_tokens, o.chunked_prefill)
  end
  for _, w in ipairs(no_effect) do warnings[#warnings + 1] = w end
  -- with a calibration: whether it corrects decode steps too (false: its [decode_factors] are empty, no decode step
  -- was measured; nil without one)
  local decode_calibrated, prefill_calibrated
  if first.calibration then
    decode_calibrated = first.decode_calibrated ~= false
    -- and whether it corrects the prefill (false: its [factors] are empty, only a decode step was measured)
    prefill_calibrated = first.prefill_calibrated ~= false
  end
  local report = {
    model = first.model, params = first.params, -- as predict's: the parameters one GPU holds (one tp rank's share)
    params_scope = rank_share { tp = o.tp }, -- said where params is not the whole model
    active_params = first.active_params,      -- mixtures of experts: a token's share of them (nil for dense models)
    calibration = first.calibration,          -- the GPU's calibration file the step forecasts applied (nil: none)
    calibration_model = first.calibration_model,  -- the model that calibration was fitted to (when the file says)
    decode_calibrated = decode_calibrated,
    prefill_calibrated = prefill_calibrated,
    gpu = first.gpu.name, gpu_file = first.gpu.source, gpu_mem_gb = first.gpu.mem_gb,
    gpu_mem_reported_gib = first.gpu.mem_reported_gib, -- the total the device reports (nil: the file does not say)
    memory_budget_gb = M.usable_gb(o, first.gpu),     -- weights + KV cache per GPU (memory.lua budget_gb)
    dtype = first.dtype, kv_dtype = kv_dtype, weight_dtype = weight_dtype, tp = o.tp, launch = first.launch,
    kernels = o.kernels, -- whose kernels every phase ran: "megatron" (serving engines' fused set) or "eager" (HF's)
    -- the cache's dtype, given or not: --kv-dtype, else the activations' (bf16 under fp8: neusight.workload kv_default)
    kv_cache_dtype = kv_dtype or W.kv_default(first.dtype),
    predictor = o.predictor or "neusight",
    attention = o.attention, input_len = o.input.text, output_len = o.output.text, forecasts = count(),
    experts = first.active_params and o.experts or nil, -- mixtures of experts only: how the routed experts ran
    gpu_memory_utilization = o.gpu_memory_utilization, block_size = o.block_size, warnings = warnings,
  }
  MODEL_WARNING[report] = model_warning
  MEMORY_NOTE[report] = memory_note
  NO_EFFECT[report] = no_effect
  STALE_WARNING[report] = stale_warning
  POSITION_WARNING[report] = position_warning
  ATTENTION_WARNING[report] = attention_warning
  CONFIG_WARNINGS[report] = config_warnings
  LAYOUT_WARNINGS[report] = layout_warnings
  return report
end

-- Each report's warning of a phase forecast below its roofline floor (also among its warnings), for neusight.sweep.
local FLOOR_WARNING = setmetatable({}, { __mode = "k" })

--- The warnings of a report of M.run of options given that do nothing (--experts on a dense model,
--- --max-batched-tokens beside --chunked-prefill; among its warnings too), for neusight.sweep, which says them once.
function M.no_effect_warnings(report) return NO_EFFECT[report] or {} end

--- The warnings of a report of M.run's model config file (neusight.workload model_warnings; among its warnings too),
--- for neusight.sweep, which says them once per sweep.
function M.config_warnings(report) return CONFIG_WARNINGS[report] or {} end

--- The warnings of a report of M.run whose phase forecasts go below their roofline floor (among its warnings too; an
--- array, the prefill's and a decode step's), or nil.
function M.floor_warning(report) return FLOOR_WARNING[report] end

--- The warnings of a report of M.run's parallel layout (neusight.report layout_warnings, as predict says them: a tp
--- group priced over PCIe beyond the GPU's bridge; among its warnings too), for neusight.sweep, which says them once.
function M.layout_warnings(report) return LAYOUT_WARNINGS[report] or {} end

--- The note of a report of M.run whose GPU file gives no mem_reported_gib, so that its memory budget is a share of
--- mem_gb (neusight.memory reported_note; among its warnings too), or nil.
function M.memory_note(report) return MEMORY_NOTE[report] end

--- The warning of a report of M.run whose fp8 (W8A8) GEMMs are forecast slower than in bf16 (neusight.precision
--- fp8_gemm_warning; among its warnings too), or nil.
function M.fp8_warning(report) return FP8_WARNING[report] end

--- The calibration model warning of a report of M.run (among its warnings too), or nil.
function M.model_warning(report) return MODEL_WARNING[report] end

--- The warning of a report of M.run whose calibration was fitted to another version of the GPU's file (among its
--- warnings too), or nil.
function M.calibration_stale_warning(report) return STALE_WARNING[report] end

--- The warning of a report of M.run whose longest request runs a rotary model beyond its max_position_embeddings
--- (among its warnings too), or nil.
function M.position_warning(report) return POSITION_WARNING[report] end

--- The warning of a report of M.run whose requests' attention goes beyond the contexts the attention MLPs were trained
--- on (neusight.uncertainty range_warning; among its warnings too), for neusight.sweep, which says it once.
function M.attention_warning(report) return ATTENTION_WARNING[report] end

-- The paged KV cache of one request (continuous batching), from the phase forecast `pre`'s graph: held(tokens) → the
-- tokens its full-attention layers and its sliding-window layers hold with `tokens` tokens cached, tokens and
-- min(tokens, window); blocks(tokens) → the blocks of block_size tokens they take, ceil(tokens / block_size) and
-- ceil(min(tokens, window) / block_size); used(full, windowed) → what so many blocks take of kv_capacity's blocks
-- (block_size tokens at the full per-token rate), or so many tokens of a full-rate token's bytes: full · (1 − share) +
-- windowed · share, `share`
-- the windowed layers' part of a cached token's bytes (pre.kv_window_share, neusight.workload kv_cache_window: the
-- decode graph's rule, windowed layers caching min(context + 1, window) tokens). Without a window share = 0 and used is
-- the full-layer block count itself, exactly. Assumed of the server (vLLM's sliding-window KV manager): a windowed
-- layer's blocks that slide wholly out of the window are freed at once, so it holds ceil(min(tokens, window) / block)
-- blocks, a prompt too (vLLM V0's block manager asks a prompt for at most the window's blocks and caches none of its
-- tokens before the last window) — not counted: the one more block it holds while the window straddles a block
-- boundary; the static batch (run_static) pages by the same rule; the pool is one of full-rate blocks (vLLM's hybrid allocator pages each group of layers apart: the same
-- bytes, up to rounding).
local function kv_paging(o, pre)
  local bs, window, share = o.block_size, pre.kv_window, pre.kv_window_share or 0
  local full = 1 - share
  local function held(tokens) return tokens, kv_cache_tokens(tokens, window) end
  local function blocks(tokens)
    local nf, nw = held(tokens)
    return (nf + bs - 1) // bs, (nw + bs - 1) // bs
  end
  local function used(nf, nw) return full * nf + share * nw end
  return blocks, used, window and share > 0 and window or nil, share, held
end

-- KV bytes per token per GPU at the full rate (GB: a token every layer caches; the prefill `pre` of `batch` prompts of
-- `tokens` holds kv_paging's used(held(tokens)) such tokens per prompt, its sliding-window layers at most the window),
-- the memory left for the KV cache beside the weights (GB; 0 when the weights alone fill the utilised memory: never
-- negative) and the KV blocks that fit in it; and, when the weights alone do not fit, why (nil otherwise).
local function kv_capacity(o, pre, batch, tokens)
  local _, used, _, _, held = kv_paging(o, pre)
  local per_token_gb = pre.kv_cache_gb / (batch * used(held(tokens)))
  local usable_gb = M.usable_gb(o, pre.gpu)  -- predict's rule at this utilization (memory.lua budget_gb)
  local budget_gb = usable_gb - pre.state_gb
  local blocks = budget_gb > 0 and floor(budget_gb / (per_token_gb * o.block_size) + 1e-9) or 0
  local no_room
  if budget_gb <= 0 then
    no_room = fmt("the weights alone (%.1f GB per GPU) exceed %.0f %% of %s (%.1f GB, --gpu-memory-utilization "
      .. "%g): no room for a KV cache; shard them over more GPUs (--tp), quantise them (--weight-dtype) or take a GPU "
      .. "with more memory", pre.state_gb, 100 * o.gpu_memory_utilization, M.memory_text(pre.gpu), usable_gb,
      o.gpu_memory_utilization)
  end
  return per_token_gb, max(budget_gb, 0.0), blocks, no_room
end

--- The GB (1e9 bytes) weights and KV cache may take per GPU: --gpu-memory-utilization of the memory the device
--- reports (the GPU file's mem_reported_gib), else of mem_gb read as 1e9 bytes (neusight.memory budget_gb, the one
--- rule; common_report says which). `gpu`: a phase forecast's gpu table.
function M.usable_gb(o, gpu)
  return budget_gb_of(gpu.mem_gb, o.gpu_memory_utilization, gpu.mem_reported_gib)
end

--- What predict holds a run to on `gpu`, in words (neusight.memory capacity): "all 80 GB" where that is its mem_gb,
--- else "22.44 GB (95 % of the 22.00 GiB it reports; …)" (a part reporting less than its datasheet's GB: L4, L40S, T4).
function M.predict_capacity_text(gpu)
  local reported = memory.reported_gib(gpu)
  if memory.capacity(gpu.mem_gb, reported) >= gpu.mem_gb * 1e9 then return fmt("all %.0f GB", gpu.mem_gb) end
  return Fg.capacity_text(gpu)
end

--- The memory a budget is a share of, in words: "the 79.1 GiB the GPU reports" or "80 GB" (mem_gb, without the
--- figure).
function M.memory_text(gpu)
  return gpu.mem_reported_gib and fmt("the %.1f GiB the GPU reports", gpu.mem_reported_gib) or fmt("%.0f GB", gpu.mem_gb)
end

-- A sliding-window model's report fields (kv_paging), the static batch's and the simulation's alike: its window, its
-- windowed layers' share of kv_cache_gb_per_token (`per_token_gb`), and the cache of the longest request (`tokens`
-- tokens cached), which its windowed layers hold at most the window of (in tokens, not blocks). Nothing without one.
local function window_report(r, o, pre, per_token_gb, tokens)
  local _, used, window, share, held = kv_paging(o, pre)
  if not window then return end
  r.kv_window = window
  r.kv_window_share = share
  r.kv_cache_gb_per_request_max = per_token_gb * used(held(tokens))
end

-- A request of `tokens` tokens whose KV blocks (`need`, kv_paging's used) exceed the `blocks` that fit beside the
-- weights (kv_capacity): no serving engine runs it (vLLM refuses to start with a max_model_len whose cache does not fit
-- one sequence), so it is the setting's error, the static batch's (one sequence of I + O - 1 tokens) and the --rate
-- simulation's (its longest request) alike, naming what would make room. `at`: a trace's "file:line: " or "".
local function request_beyond_cache(o, pre, at, tokens, need, blocks)
  local room = { "shard the KV cache over more GPUs (--tp)" }
  local function named(key, v) return v and (W.spelling(key, v) or v) or nil end
  if named("kv_dtype", o.kv_dtype) ~= "fp8" then room[#room + 1] = "store it in fp8 (--kv-dtype fp8)" end
  if named("weight_dtype", o.weight_dtype) ~= "int4" then room[#room + 1] = "quantise the weights (--weight-dtype)" end
  room[#room + 1] = "shorten the request or take a GPU with more memory"
  infeasible("%sa request of %d tokens needs %s KV-cache blocks of %d tokens, but only %d fit beside %.1f GB of "
    .. "weights in %.0f %% of %s: no serving engine starts with a request longer than its KV cache; %s", at,
    tokens, math.tointeger(need) and fmt("%d", need) or fmt("%.2f", need), o.block_size, blocks, pre.state_gb,
    100 * o.gpu_memory_utilization, M.memory_text(pre.gpu), table.concat(room, ", "))
end

---------------------------------------------------------------------------------------------------
-- Static batch

-- The static batch's decode steps 1 … steps (step j at context I + j - 1): value(j) of every step up to S steps; beyond
-- that of S evenly spaced ones (endpoints included), the rest linearly interpolated. Its mean is the TPOT (run_static)
-- and, per kernel family, what a serve calibration weighs the families by (calibration_inputs).
local function step_series(steps, S, value)
  local ms = {}
  if steps <= S then
    for j = 1, steps do ms[j] = value(j) end
  else
    local at = {}  -- sampled step indices (1-based), endpoints included
    for s = 0, S - 1 do at[#at + 1] = 1 + floor(s * (steps - 1) / (S - 1) + 0.5) end
    for _, j in ipairs(at) do ms[j] = value(j) end
    for s = 1, #at - 1 do
      local a, b = at[s], at[s + 1]
      for j = a + 1, b - 1 do ms[j] = ms[a] + (ms[b] - ms[a]) * (j - a) / (b - a) end
    end
  end
  return ms
end

local function run_static(o, F, count)
  local B, I, O = o.batch, o.input.lo, o.output.lo
  local pre = probe(F, o, "prefill", B, I, true)
  -- weights that alone exceed the memory budget: a serving engine refuses to start (vLLM: no memory left for the KV
  -- cache), so no latency describes it: the setting's error, as the --rate simulation's (a KV cache that overflows
  -- beside weights that fit is a forecast with a warning below: the engine runs fewer sequences at once)
  local per_token_gb, budget_gb, blocks, no_room = kv_capacity(o, pre, B, I)
  if no_room then infeasible("model '%s' cannot be served: %s", o.model, no_room) end
  -- a sequence's blocks once it holds its I + O - 1 tokens: kv_paging's, the --rate simulation's rule (a
  -- sliding-window layer holds the window's blocks, prompt included, as vLLM V0's block manager allocates a prompt at
  -- most the window's blocks), in blocks of block_size full-cache tokens (per_token_gb: the prefill's rate). One such
  -- sequence beyond the cache: the --rate simulation's error (before, a forecast with "at most 0 sequences" in a
  -- warning: Llama-3.1-8B, 130000 + 1000 tokens on one L4)
  local blocks_for, used = kv_paging(o, pre)
  local per_seq_blocks = used(blocks_for(I + O - 1))
  if per_seq_blocks > blocks then request_beyond_cache(o, pre, "", I + O - 1, per_seq_blocks, blocks) end
  local steps = O - 1
  -- the last decode step first (a grid point the batch forecasts anyway): a limit it meets is said by the flags
  if steps > 0 then probe(F, o, "decode", B, I + steps - 1, false, longest_why(o)) end
  local S = o.static_decode_samples
  local ms = step_series(steps, S, function(j) return F("decode", B, I + j - 1).ms end)
  local sum = 0
  for j = 1, steps do sum = sum + ms[j] end
  -- the batch's cache once each sequence holds its I + O - 1 tokens: the last decode step's graph's (predict's rule,
  -- workload.lua kv_cache_bytes: sliding-window layers hold at most the window), the prefill's without a decode step
  local cache_gb = steps > 0 and F("decode", B, I + steps - 1).kv_cache_gb or pre.kv_cache_gb
  local r = common_report(o, pre, count)
  r.kind = "static"
  r.batch = B
  r.ttft_ms = pre.ms
  r.tpot_ms = steps > 0 and sum / steps or nil
  r.e2e_ms = pre.ms + sum
  r.decode_steps = steps
  r.decode_ms_first = ms[1]
  r.decode_ms_last = ms[steps]
  r.decode_sampled = steps > S
  r.output_tokens_per_s = B * O / (r.e2e_ms / 1e3)
  r.output_tokens_per_s_per_gpu = r.output_tokens_per_s / o.tp
  r.weights_gb = pre.state_gb
  r.kv_cache_gb = cache_gb
  r.kv_cache_gb_per_token = per_token_gb
  r.kv_budget_gb = budget_gb
  r.kv_blocks = blocks
  r.kv_tokens = blocks * o.block_size  -- as the simulation's: the tokens its blocks hold
  r.max_concurrency = floor(blocks / per_seq_blocks)
  window_report(r, o, pre, per_token_gb, I + O - 1)  -- a sequence's last decode step caches I + O - 1 tokens
  r.fits = B <= r.max_concurrency
  -- a batch above vLLM's default max_num_seqs (M.DEFAULTS.max_batch, 256): the static batch runs it as one batch, as
  -- asked, where a vLLM server with its defaults would run 256 sequences at once and queue the rest; said, not split
  -- (before the "does not fit" warning: serve --sweep takes the last warning of a batch that does not fit as its error)
  local max_seqs = M.DEFAULTS.max_batch
  if B > max_seqs then
    r.warnings[#r.warnings + 1] = fmt("batch %d runs as one batch (one prefill of %d prompts, then every decode step "
      .. "at %d sequences), above the %d sequences vLLM runs at once by default (max_num_seqs): with that default it "
      .. "would run %d and queue the rest, so this forecast assumes max_num_seqs >= %d; for the scheduler's limit "
      .. "use --rate or --requests-file with --max-batch", B, B, B, max_seqs, max_seqs, B)
  end
  if not r.fits then
    r.warnings[#r.warnings + 1] = fmt("batch %d does not fit: weights %.1f GB + KV cache %.1f GB exceed %.1f GB, %.0f %% "
      .. "of %s (--gpu-memory-utilization %g, a serving engine's reservation; `predict --mode decode` counts %s): "
      .. "at most %d sequences of %d tokens", B, r.weights_gb, r.kv_cache_gb,
      M.usable_gb(o, pre.gpu), 100 * o.gpu_memory_utilization, M.memory_text(pre.gpu),
      o.gpu_memory_utilization, M.predict_capacity_text(pre.gpu), r.max_concurrency, I + O - 1)
  end
  local mid = steps > 0 and F("decode", B, I + floor((steps - 1) / 2), true) or nil
  r.phases = { prefill = phase_report(pre), decode = mid and phase_report(mid) or nil }
  -- the uncertainty band (neusight.uncertainty) of the prefill and of the middle decode step, the latter's ratio to its
  -- forecast applied to every step (the steps' kernels err together: the same families on the same GPU)
  if pre.p10 and (not mid or mid.p10) then
    local lo, hi = mid and mid.p10 / mid.ms or 1, mid and mid.p90 / mid.ms or 1
    r.ttft_ms_p10, r.ttft_ms_p90, r.band_spread = pre.p10, pre.p90, pre.band_spread
    if r.tpot_ms then r.tpot_ms_p10, r.tpot_ms_p90 = r.tpot_ms * lo, r.tpot_ms * hi end
    r.e2e_ms_p10, r.e2e_ms_p90 = pre.p10 + sum * lo, pre.p90 + sum * hi
  end
  r.forecasts = count()
  return r
end

---------------------------------------------------------------------------------------------------
-- Calibration from a measurement of a static batch (`neusight serve --batch … --calibrate FILE`)

--- What scripts/neusight/calibration.lua fit_serve() needs of the static batch `raw` (options as run()'s): the forecast
--- TTFT (ttft_s: the prefill) and TPOT (tpot_s: the mean of the decode steps, as run() averages them), and per
--- kernel family its seconds, effective kernel count and roofline flag in the prefill (prefill_family_s.<family>,
--- prefill_family_n.<family>, prefill_roofline.<family>) and in the mean decode step (decode_…: each step's family
--- time averaged over the steps exactly as TPOT averages their totals, so TPOT is linear in the family factors);
--- `workload` names the run. One flat table: the engine hands it to the fit. Continuous batching is refused: its
--- TTFT and TPOT are percentiles over requests that queue, not one phase forecast each.
function M.calibration_inputs(raw, phase)
  local o = options(raw)
  if not o.batch then
    fail("--calibrate needs a static batch (--batch N): its TTFT is one prefill forecast and its TPOT the mean of its "
      .. "decode steps, so a measurement of them pins the kernel families; with --rate both are percentiles over "
      .. "queueing requests. Measure the same model with a fixed batch (e.g. vLLM's benchmark_latency) to calibrate")
  end
  local F = forecaster(o, phase)
  local B, I, O = o.batch, o.input.lo, o.output.lo
  local pre = probe(F, o, "prefill", B, I)
  local out = {
    ttft_s = pre.ms / 1e3,
    model = pre.model,
    model_params = pre.model_params, -- the whole model's, when the phase holds it (a calibration's model)
    workload = fmt("serve %s %s%s static batch %d, input %d, output %d tokens, launch %s, kernels %s", pre.model,
      pre.dtype, o.tp > 1 and fmt(" tp %d", o.tp) or "", B, I, O, pre.launch, o.kernels),
  }
  for k, v in pairs(pre.families) do out["prefill_" .. k] = v end
  local steps = O - 1
  if steps > 0 then
    local S = o.static_decode_samples
    local function mean(series)
      local sum = 0
      for j = 1, steps do sum = sum + series[j] end
      return sum / steps
    end
    -- one walk over the decode steps: their forecasts (the sampled ones), the TPOT, and each step's family inputs
    local families = {}  -- step j → its families (the steps step_series samples)
    out.tpot_s = mean(step_series(steps, S, function(j)
      local d = F("decode", B, I + j - 1)
      families[j] = d.families
      return d.ms
    end)) / 1e3
    local keys = {}  -- every family key of any decode step
    for _, f in pairs(families) do
      for k in pairs(f) do keys[k] = true end
    end
    for k in pairs(keys) do
      if k:match("^roofline%.") then
        out["decode_" .. k] = true
      else
        out["decode_" .. k] = mean(step_series(steps, S, function(j) return families[j][k] or 0 end))
      end
    end
  end
  return out
end

---------------------------------------------------------------------------------------------------
-- Step cost model (continuous batching)
--
-- Grids, every point one phase forecast (cached), the rest interpolated:
--   decode D(b, c): b at powers of two up to max_batch (and max_batch), c at powers of two up to the longest
--     context (and it); bilinear in (b, c) over the mean context of the running requests — exact for the KV-cache
--     read, which is linear in the total cached tokens.
--   tokens N(t): the non-attention time of t tokens through the model (GEMMs, norms, element-wise: prefill forecast
--     minus its attention kernels) at powers of two up to S, the longest sequence (prompt + output − 1), as
--     prefill(1, t), and beyond S as prefill(t / S, S); linear in t.
--   prompt attention A(s): the attention kernels of prefill(1, s) at powers of two (and S, and a fixed prompt length:
--     the token points too); interpolated in s²
--     (causal attention's work).
--   N(t) holds the kernels on the logits rows (logits_kernel: the LM head) on one row: prefill(1, t)'s; beyond S,
--     prefill(t / S, S)'s on t / S rows are replaced by prefill(1, S)'s on one.
--   more logits rows L(r): what the logits kernels on r rows take beyond one row, D(r, c)'s less D(1, c)'s at the least
--     context point c (r at the batch points, linear in between).
-- A decode-only step costs D(b, c̄). A step with prompt chunks (a chunk of c tokens of a prompt whose first a are
-- cached; a whole prompt is a = 0) costs N(T) + Σ [A(a + c) − A(a)] + L(b + k) + the attention part of D(b, c̄) when
-- b requests decode alongside, T = b + Σ c — one pass of all the step's tokens through the weights — and the LM head
-- on one row per request of the step, its k chunks' included: vLLM V1 computes the logits at the last position of
-- every scheduled request (gpu_model_runner: logits_indices = query_start_loc[1:] - 1; a partial prefill's sampled
-- token is discarded), V0 without chunking at each prompt's last (k prompts of a prefill step: k rows).
-- One request alone: its prefill step costs N(I) + A(I) = prefill(1, I) exactly at grid points (a fixed prompt
-- length I is one).

local function grid_points(limit)
  local pts, p = {}, 1
  while p < limit do pts[#pts + 1] = p; p = p * 2 end
  pts[#pts + 1] = limit
  return pts
end

-- The grid points bracketing x (lo <= x <= hi), x clamped to the grid.
local function bracket(pts, x)
  if x <= pts[1] then return pts[1], pts[1] end
  for i = 2, #pts do
    if x <= pts[i] then return pts[i - 1], pts[i] end
  end
  return pts[#pts], pts[#pts]
end

local function lerp(x, x0, x1, y0, y1)
  if x1 == x0 then return y0 end
  return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
end

local function cost_model(o, F, S, C, B)
  local bpts, cpts, spts = grid_points(B), grid_points(C), grid_points(S)
  -- a fixed prompt length is a point of its own: every prompt's N(I) and A(I) exact, not interpolated
  if o.input.kind == "fixed" then
    for i = 1, #spts do
      if spts[i] == o.input.lo then break end
      if spts[i] > o.input.lo then table.insert(spts, i, o.input.lo); break end
    end
  end
  -- The grid points' forecasts by number (F's cache is keyed by a string built per call; the simulation asks for the
  -- same few points at every step): the first ask of a point is F's, in the same order, so the forecasts are the same.
  local grid = { decode = {}, prefill = {} }
  local function G(mode, batch, tokens)
    local by_batch = grid[mode][batch]
    if not by_batch then by_batch = {}; grid[mode][batch] = by_batch end
    local r = by_batch[tokens]
    if not r then r = F(mode, batch, tokens); by_batch[tokens] = r end
    return r
  end
  local function decode(b, c)  -- returns total ms, attention ms
    local b0, b1 = bracket(bpts, b)
    local c0, c1 = bracket(cpts, c)
    local p00, p01 = G("decode", b0, c0), G("decode", b0, c1)
    local p10, p11 = G("decode", b1, c0), G("decode", b1, c1)
    local t0 = lerp(c, c0, c1, p00.ms, p01.ms)
    local t1 = lerp(c, c0, c1, p10.ms, p11.ms)
    local a0 = lerp(c, c0, c1, p00.attention_ms, p01.attention_ms)
    local a1 = lerp(c, c0, c1, p10.attention_ms, p11.attention_ms)
    return lerp(b, b0, b1, t0, t1), lerp(b, b0, b1, a0, a1)
  end
  local function token_point(t)
    if t <= S then
      local p = G("prefill", 1, t)
      return p.ms - p.attention_ms
    end
    local p = G("prefill", t // S, S)
    return p.ms - p.attention_ms - p.head_ms + G("prefill", 1, S).head_ms
  end
  local function tokens(t)  -- N(t)
    if t <= S then
      local t0, t1 = bracket(spts, t)
      return lerp(t, t0, t1, token_point(t0), token_point(t1))
    end
    local k0 = 1
    while k0 * 2 * S <= t do k0 = k0 * 2 end
    local lo, hi = k0 * S, 2 * k0 * S
    return lerp(t, lo, hi, token_point(lo), token_point(hi))
  end
  local function attention(s)  -- A(s), A(0) = 0
    if s <= 0 then return 0 end
    local s0, s1 = bracket(spts, s)
    local a0, a1 = G("prefill", 1, s0).attention_ms, G("prefill", 1, s1).attention_ms
    return lerp(s * s, s0 * s0, s1 * s1, a0, a1)
  end
  local function logits(r)  -- L(r): r >= 1 rows; 0 at one row (no forecast asked)
    if r <= 1 then return 0 end
    local b0, b1 = bracket(bpts, r)
    local c = cpts[1]
    return lerp(r, b0, b1, G("decode", b0, c).head_ms, G("decode", b1, c).head_ms) - G("decode", 1, c).head_ms
  end
  return { decode = decode, tokens = tokens, attention = attention, logits = logits, batch_points = bpts,
           context_points = cpts, token_points = spts }
end

---------------------------------------------------------------------------------------------------
-- Continuous batching

--- The forecast capacity of a server (requests/s) from a run of its scheduler in which every request of `reqs`
--- arrived at time 0 (vLLM's benchmark_throughput: all prompts queued at once) and holds its `first` token's and its
--- `finish` time: the requests finished per second in the steady state — from the burst that holds the `cohort`-th
--- finish (the start-up transient: the first batch starts together; nil or 1: from the first) to the last finish before
--- the last request's first token (after it the queue empties: the drain), the slope of the least-squares line through
--- the finishes' count against their time (requests finish in bursts, a prefill's batch together: a line through the
--- staircase does not depend on where the window's ends fall between bursts, as a count from end to end does). An
--- arrival rate above it grows the queue without bound. nil when that window holds no two distinct finish times.
function M.saturated_rate(reqs, cohort)
  local finishes, last_first = {}, -huge
  for i, r in ipairs(reqs) do
    finishes[i], last_first = r.finish, max(last_first, r.first)
  end
  sort(finishes)
  local k = min(max(cohort or 1, 1), #finishes)
  while k > 1 and finishes[k - 1] == finishes[k] do k = k - 1 end  -- the whole burst that holds it
  local st, si, count = 0, 0, 0
  for i = k, #finishes do
    if finishes[i] > last_first then break end
    st, si, count = st + finishes[i], si + i, count + 1
  end
  if count < 2 then return nil end
  local mt, mi, stt, sti = st / count, si / count, 0, 0
  for i = k, k + count - 1 do
    local dt = finishes[i] - mt
    stt, sti = stt + dt * dt, sti + dt * (i - mi)
  end
  if stt <= 0 then return nil end
  return sti / stt
end

-- The capacity replay's size (run_simulation): CAPACITY_CYCLES times the steady concurrency c (the requests that run
-- at once: --max-batch, or fewer when the KV cache holds fewer of the mean request half generated), so that after the
-- first cohort several cohorts finish while others still wait; at most CAPACITY_TOKENS generated tokens in all (the
-- replay's time is about proportional to them: Llama-3-8B on an H100, 1024 -> 256 tokens, c = 256: 1024 requests,
-- ~0.25 s of CPU), but never under CAPACITY_MIN_CYCLES cohorts (fewer leave no steady window). So at most
-- max(3 c, 2^18 / mean output) requests, c <= --max-batch: it does not grow with --requests.
M.CAPACITY_CYCLES, M.CAPACITY_MIN_CYCLES, M.CAPACITY_TOKENS = 6, 3, 1 << 18

--- Whether the queue visibly grew in a run of the scheduler over `reqs` (arrival order; `arrival`, `first` times):
--- `waiting_at_last_arrival`, the requests without a first token when the last one arrived, and `ttft_growth`, the
--- median TTFT of the last quarter of the requests (by arrival) over that of the first half (nil under
--- 4 × QUEUE_MIN_QUARTER requests). The queue grew (`grew`) when both say so: at least QUEUE_WAITING of the requests
--- were still waiting at the last arrival, and TTFT rose with the arrival order, the last quarter's median at least
--- QUEUE_GROWTH times the first half's (a queue growing at a steady pace from the start gives 3.5: 7/8 over 1/4 of the
--- run; a stable one about 1, the first requests finding an empty server a little below).
M.QUEUE_MIN_QUARTER, M.QUEUE_GROWTH, M.QUEUE_WAITING = 10, 2, 0.1
function M.queue_growth(reqs)
  local n = #reqs
  local last, waiting = reqs[n].arrival, 0
  for _, r in ipairs(reqs) do
    if r.first > last then waiting = waiting + 1 end
  end
  local q, growth = n // 4, nil
  if q >= M.QUEUE_MIN_QUARTER then
    local function median(from, to)
      local t = {}
      for i = from, to do t[#t + 1] = reqs[i].first - reqs[i].arrival end
      sort(t)
      return M.percentile(t, 50)
    end
    local early = median(1, 2 * q)
    if early > 0 then growth = median(3 * q + 1, n) / early end
  end
  return { waiting_at_last_arrival = waiting, ttft_growth = growth,
           grew = growth ~= nil and growth >= M.QUEUE_GROWTH and waiting >= M.QUEUE_WAITING * n }
end

-- From this share of the capacity on, a queue takes many requests to settle (heavy traffic: a queue's mean wait grows
-- as load / (1 - load), and the number of arrivals until its percentiles settle as 1 / (1 - load)^2).
M.NEAR_CAPACITY = 0.9

-- The capacity as the overload warning says it: 3 significant digits, more (up to 6) where 3 would print the rate itself
-- or a figure on its other side (--rate 16 beyond a capacity of 15.98 req/s read "exceeds the forecast capacity of 16").
local function capacity_text(capacity, rate)
  local text
  for digits = 3, 6 do
    text = fmt("%." .. digits .. "g", capacity)
    local shown = tonumber(text)
    if rate == capacity or (rate > capacity and shown < rate) or (rate < capacity and shown > rate) then break end
  end
  return text
end

--- The warning of an arrival rate beyond the forecast capacity (M.saturated_rate) or near it (from M.NEAR_CAPACITY of
--- it on), or, below that (or without a capacity), of a run whose queue visibly grew (`queue`: M.queue_growth of the
--- run, optional); nil otherwise. Its second result says which: "beyond", "grew" (a grown queue below the capacity or
--- without one) or "near" (neusight.sweep's rows name it in their table).
function M.overload_warning(rate, capacity, requests, queue, rate_text)
  local trace = rate_text ~= nil
  rate_text = rate_text or fmt("--rate %g req/s", rate)
  local what = "(what this server finishes per second in the steady state with requests queued: a replay of requests "
    .. "of these lengths all arriving at once)"
  if capacity and rate > capacity then
    return fmt("%s exceeds the forecast capacity of %s req/s %s: the queue grows without bound, so "
      .. "TTFT and end to end grow with every request and their percentiles describe these %d requests only "
      .. "%s add capacity (--tp, another GPU)", rate_text, capacity_text(capacity, rate), what, requests,
      trace and "of the trace;" or "(--requests); lower --rate or"), "beyond"
  end
  if queue and queue.grew then
    return fmt("the queue grew during this run at %s: %d of the %d requests were still waiting for their "
      .. "first token at the last arrival and the last quarter's median TTFT is %.1f times the first half's, so "
      .. "TTFT and end to end grow with %s and describe these requests only; %sadd capacity "
      .. "(--tp, another GPU)", rate_text,
      queue.waiting_at_last_arrival, requests, queue.ttft_growth, trace and "the trace's length" or "--requests",
      trace and "" or "lower --rate or "), "grew"
  end
  if not capacity or rate < M.NEAR_CAPACITY * capacity then return nil end
  return fmt("%s is %.0f %% of the forecast capacity of %s req/s %s: so near it the queue grows long "
    .. "and settles slowly, so the latency percentiles still depend on the number of requests (%s %d)", rate_text,
    100 * rate / capacity, capacity_text(capacity, rate), what, trace and "the trace's" or "--requests", requests), "near"
end

local function run_simulation(o, F, count, progress)
  -- the requests: a trace's, or drawn (neusight.arrivals generate: today's Poisson stream at burstiness 1)
  local A = require "neusight.arrivals"
  local arrivals = o.trace and o.trace.requests
    or A.generate(o.requests, o.rate, o.burstiness, o.input, o.output, M.rng(o.seed))
  local n = #arrivals
  local reqs = {}
  local S, C = 1, 1
  local longest  -- the request of S tokens (a trace's row: its line)
  for i, a in ipairs(arrivals) do
    local I, O = a.input, a.output
    reqs[i] = { id = i, arrival = a.arrival, input = I, output = O, prompt = I, prefilled = 0, generated = 0, blocks = 0 }
    if I + O - 1 > S then longest = a end
    S = max(S, I + O - 1)
    C = max(C, I + max(O - 2, 0))
  end
  local pre = probe(F, o, "prefill", 1, o.input.lo, true)  -- with its band: the out-of-distribution warnings
  local per_token_gb, budget_gb, total_blocks, no_room = kv_capacity(o, pre, 1, o.input.lo)
  if no_room then infeasible("model '%s' cannot be served: %s", o.model, no_room) end
  local bs = o.block_size
  local blocks_for, used = kv_paging(o, pre)
  local need_most = used(blocks_for(S))
  if need_most > total_blocks then
    -- a trace's request is named by its line (tester10 #7); the memory as the report states it (M.memory_text)
    local at = o.trace and longest and longest.line and fmt("%s:%d: ", o.requests_file or "trace", longest.line) or ""
    request_beyond_cache(o, pre, at, S, need_most, total_blocks)
  end
  -- the grid's forecasts reach the longest request's tokens: a limit they meet is said by the flags (longest_why)
  local why = longest_why(o)
  local cm = cost_model(o, function(mode, batch, tokens) return probe(F, o, mode, batch, tokens, false, why) end, S, C,
    o.max_batch)
  local chunk = o.chunked_prefill

  -- One run of the scheduler over the requests with step costs `cm`; `report` gets progress lines (or nothing). With
  -- `at_once` every request arrives at time 0 (the saturated server of M.capacity below): only the rate at which
  -- requests finish while others still wait comes back.
  local function simulate(cm, report, list, at_once)
    local reqs, n = list, #list
    for _, r in ipairs(reqs) do  -- fresh state: the band's runs replay the same arrivals
      r.prompt, r.prefilled, r.generated, r.first, r.finish = r.input, 0, 0, nil, nil
      r.blocks, r.wblocks = 0, 0  -- its full-attention layers' blocks, its sliding-window layers' (kv_paging)
    end
    -- blocks held by all requests: full-attention layers', sliding-window layers' (kv_paging); the most in use
    local held, wheld, peak = 0, 0, 0
    -- whether `nf` and `nw` more blocks fit in the pool
    local function fits(nf, nw) return used(held + nf, wheld + nw) <= total_blocks end
    local function hold(r, nf, nw)
      held, wheld, r.blocks, r.wblocks = held + nf, wheld + nw, r.blocks + nf, r.wblocks + nw
      local u = used(held, wheld)
      if u > peak then peak = u end
    end
    local function release(r)
      held, wheld, r.blocks, r.wblocks = held - r.blocks, wheld - r.wblocks, 0, 0
    end
    local waiting, whead = {}, 1      -- arrived, never admitted (FCFS)
    local preempted = {}              -- stack: the latest preempted first... served before waiting
    local running = {}                -- admission order
    local next_arrival, finished = 1, 0
    local now = 0
    local steps = { prefill = 0, decode = 0, mixed = 0 }
    local preemptions, decode_batch_sum, decode_steps_n, max_running = 0, 0, 0, 0
    local busy_ms = 0

    local function finish(r)
      r.finish = now
      release(r)
      finished = finished + 1
    end
    -- vLLM's recompute preemption: the request gives its blocks back and is prefilled again later (prompt and the
    -- tokens generated so far), before any request that has not started.
    local function preempt_at(i)
      local v = table.remove(running, i)
      release(v)
      v.prefilled = 0
      v.prompt = v.input + v.generated
      preempted[#preempted + 1] = v
      preemptions = preemptions + 1
    end
    -- Blocks for `tokens` cached tokens of running[i], preempting requests admitted after it; when none is left, it
    -- is preempted itself and false comes back.
    local function grow_at(i, tokens)
      local r = running[i]
      -- no new full-layer block, no new windowed one either (min(tokens, window) stays within the same block): most
      -- decode steps, checked first
      if (tokens + bs - 1) // bs <= r.blocks then return true end
      local nf, nw = blocks_for(tokens)
      nf, nw = nf - r.blocks, nw - r.wblocks
      while not fits(nf, nw) do
        if #running > i then
          preempt_at(#running)
        else
          preempt_at(i)
          return false
        end
      end
      hold(r, nf, nw)
      return true
    end
    local function candidate()
      if #preempted > 0 then return preempted[#preempted], true end
      if whead <= #waiting then return waiting[whead], false end
      return nil
    end
    local function take(from_preempted)
      if from_preempted then preempted[#preempted] = nil else whead = whead + 1 end
    end
    local function first_token(r)
      r.generated = r.generated + 1
      if r.first == nil then r.first = now end
    end

    local step_count = 0
    while finished < n do
      while next_arrival <= n and (at_once or reqs[next_arrival].arrival <= now) do
        waiting[#waiting + 1] = reqs[next_arrival]
        next_arrival = next_arrival + 1
      end
      local ms
      local step_running = 0  -- the running batch of this step (vLLM's num_running), counted before it finishes any
      if not chunk then
        -- vLLM V0: prefill the admissible waiting requests, else decode everyone running.
        local batch, tok = {}, 0
        while #running + #batch < o.max_batch do
          local r, from_p = candidate()
          if not r then break end
          if #batch > 0 and tok + r.prompt > o.max_batched_tokens then break end
          local nf, nw = blocks_for(r.prompt)
          if not fits(nf, nw) then break end
          take(from_p)
          hold(r, nf, nw)
          batch[#batch + 1] = r
          tok = tok + r.prompt
        end
        if #batch > 0 then
          ms = cm.tokens(tok) + cm.logits(#batch)
          for _, r in ipairs(batch) do ms = ms + cm.attention(r.prompt) end
          now = now + ms / 1e3
          steps.prefill = steps.prefill + 1
          step_running = #running + #batch  -- the prompts join the running batch (vLLM V0: scheduled as running)
          for _, r in ipairs(batch) do
            r.prefilled = r.prompt
            first_token(r)
            if r.generated >= r.output then finish(r) else running[#running + 1] = r end
          end
        elseif #running > 0 then
          local i = 1
          while i <= #running do  -- blocks for each request's new token (may preempt later ones)
            local r = running[i]
            if grow_at(i, r.input + r.generated) then i = i + 1 end
          end
          local b, csum = #running, 0
          for _, r in ipairs(running) do csum = csum + r.input + r.generated - 1 end
          ms = cm.decode(b, csum / b)
          now = now + ms / 1e3
          steps.decode = steps.decode + 1
          step_running = b
          decode_batch_sum, decode_steps_n = decode_batch_sum + b, decode_steps_n + 1
          local keep = {}
          for _, r in ipairs(running) do
            r.generated = r.generated + 1
            if r.generated >= r.output then finish(r) else keep[#keep + 1] = r end
          end
          running = keep
        end
      else
        -- chunked prefill (vLLM V1): decodes first, then prompt chunks within the token budget.
        local budget = chunk
        local dec, chunks, csum = {}, {}, 0
        local i = 1
        while i <= #running and budget > 0 do
          local r = running[i]
          if r.prefilled < r.prompt then
            i = i + 1
          elseif grow_at(i, r.input + r.generated) then
            dec[#dec + 1] = r
            csum = csum + r.input + r.generated - 1
            budget = budget - 1
            i = i + 1
          end
        end
        for _, r in ipairs(running) do  -- prompt chunks take free blocks only: never preempt a decode of this step
          if budget <= 0 then break end
          if r.prefilled < r.prompt then
            local c = min(r.prompt - r.prefilled, budget)
            local nf, nw = blocks_for(r.prefilled + c)
            nf, nw = nf - r.blocks, nw - r.wblocks
            if fits(nf, nw) then
              hold(r, nf, nw)
              chunks[#chunks + 1] = { r = r, a = r.prefilled, c = c }
              budget = budget - c
            end
          end
        end
        while budget > 0 and #running < o.max_batch do
          local r, from_p = candidate()
          if not r then break end
          local c = min(r.prompt, budget)
          local nf, nw = blocks_for(c)
          if not fits(nf, nw) then break end
          take(from_p)
          hold(r, nf, nw)
          running[#running + 1] = r
          chunks[#chunks + 1] = { r = r, a = 0, c = c }
          budget = budget - c
        end
        if #chunks == 0 and #dec > 0 then
          ms = cm.decode(#dec, csum / #dec)
          steps.decode = steps.decode + 1
        elseif #chunks > 0 then
          local tok = #dec
          for _, ch in ipairs(chunks) do tok = tok + ch.c end
          ms = cm.tokens(tok) + cm.logits(#dec + #chunks)
          for _, ch in ipairs(chunks) do ms = ms + cm.attention(ch.a + ch.c) - cm.attention(ch.a) end
          if #dec > 0 then
            local _, attn = cm.decode(#dec, csum / #dec)
            ms = ms + attn
            steps.mixed = steps.mixed + 1
          else
            steps.prefill = steps.prefill + 1
          end
        end
        if ms then
          now = now + ms / 1e3
          step_running = #running  -- decodes, prompt chunks and requests admitted this step, before any finishes
          if #dec > 0 then decode_batch_sum, decode_steps_n = decode_batch_sum + #dec, decode_steps_n + 1 end
          local done = {}
          for _, r in ipairs(dec) do
            r.generated = r.generated + 1
            if r.generated >= r.output then done[r] = true end
          end
          for _, ch in ipairs(chunks) do
            local r = ch.r
            r.prefilled = r.prefilled + ch.c
            if r.prefilled >= r.prompt then
              first_token(r)
              if r.generated >= r.output then done[r] = true end
            end
          end
          local keep = {}
          for _, r in ipairs(running) do
            if done[r] then finish(r) else keep[#keep + 1] = r end
          end
          running = keep
        end
      end
      if ms then
        busy_ms = busy_ms + ms
        step_count = step_count + 1
        if step_running > max_running then max_running = step_running end
        if step_count % 256 == 0 then
          report(fmt("%d/%d requests done, %d running, %d waiting, simulated %.1f s", finished, n, #running,
            #waiting - whead + 1 + #preempted, now))
        end
      elseif #running > 0 then
        preempt_at(#running)  -- partly prefilled requests hold every block: the last admitted gives way
      else
        -- nothing could run: idle until the next arrival
        if next_arrival > n then fail("internal: the scheduler stalled with %d requests unfinished", n - finished) end
        now = max(now, reqs[next_arrival].arrival)
      end
    end
    report(nil, true)
    if at_once then return M.saturated_rate(reqs, at_once) end

    local ttft, tpot, e2e, out_tokens, in_tokens = {}, {}, {}, 0, 0
    local first_arrival, last_finish = huge, 0
    for _, r in ipairs(reqs) do
      ttft[#ttft + 1] = (r.first - r.arrival) * 1e3
      e2e[#e2e + 1] = (r.finish - r.arrival) * 1e3
      if r.output > 1 then tpot[#tpot + 1] = (r.finish - r.first) * 1e3 / (r.output - 1) end
      out_tokens, in_tokens = out_tokens + r.output, in_tokens + r.input
      first_arrival, last_finish = min(first_arrival, r.arrival), max(last_finish, r.finish)
    end
    return { ttft = ttft, tpot = tpot, e2e = e2e, out_tokens = out_tokens, in_tokens = in_tokens,
             first_arrival = first_arrival, last_finish = last_finish, busy_ms = busy_ms, steps = steps,
             decode_batch_sum = decode_batch_sum, decode_steps_n = decode_steps_n, max_running = max_running,
             preemptions = preemptions, peak_blocks = peak }
  end
  local sim = simulate(cm, progress, reqs)
  local ttft, tpot, e2e, out_tokens, in_tokens = sim.ttft, sim.tpot, sim.e2e, sim.out_tokens, sim.in_tokens
  local first_arrival, last_finish, busy_ms, steps = sim.first_arrival, sim.last_finish, sim.busy_ms, sim.steps
  local decode_batch_sum, decode_steps_n = sim.decode_batch_sum, sim.decode_steps_n
  local max_running, preemptions = sim.max_running, sim.preemptions
  local duration = last_finish - first_arrival
  -- The forecast capacity: a replay of its own requests all queued at once (M.saturated_rate), so that it does not
  -- depend on --requests: CAPACITY_CYCLES times the steady concurrency (M.CAPACITY_TOKENS bounds it), their lengths
  -- drawn from the simulated requests' (a seeded stream of its own: the same lengths' distribution, and never a request
  -- longer than the step-cost grid and the KV check above were sized to), its window after the first cohort.
  -- the steady concurrency: --max-batch, or the requests of the mean length half generated that the KV cache holds
  local half = max(1, floor(in_tokens / n + out_tokens / n / 2 + 0.5))
  local steady = max(1, min(o.max_batch, floor(total_blocks / used(blocks_for(half)))))
  local m = max(M.CAPACITY_MIN_CYCLES * steady,
    min(M.CAPACITY_CYCLES * steady, floor(M.CAPACITY_TOKENS / (out_tokens / n))))
  local replay, v = {}, M.rng(o.seed + 1)
  for i = 1, m do
    local from = reqs[1 + floor(v() * n)]
    replay[i] = { id = i, arrival = 0, input = from.input, output = from.output }
  end
  local capacity = simulate(cm, function(text, done)
    progress(text and ("capacity replay: " .. text) or nil, done)
  end, replay, steady)
  local queue = M.queue_growth(reqs)
  local r = common_report(o, pre, count)
  r.kind = "simulation"
  r.rate = o.rate
  local rate_text  -- how the overload warning names the arrival rate (nil: --rate's)
  if o.trace then
    local t = A.describe(arrivals)
    t.file, t.format, t.columns, t.ignored_columns = o.requests_file or "requests", o.trace.format, o.trace.columns,
      o.trace.ignored[1] and o.trace.ignored or nil
    t.absolute_times = o.trace.absolute
    t.time_scale = o.trace.time_scale ~= 1 and o.trace.time_scale or nil  -- the arrivals' factor (--time-scale)
    r.trace = t
    r.rate = t.mean_rate_per_s  -- the trace's mean arrival rate (nil: every request at once)
    rate_text = r.rate and fmt("the trace's mean arrival rate of %.3g req/s", r.rate)
      or "the trace's arrival rate (every request at once)"
    if t.ignored_columns then
      r.warnings[#r.warnings + 1] = fmt("%s: column%s %s ignored (serve reads %s, %s and %s)", t.file,
        #t.ignored_columns > 1 and "s" or "", concat(t.ignored_columns, ", "), t.columns.arrival, t.columns.input,
        t.columns.output)
    end
  elseif o.burstiness ~= 1 then
    r.burstiness = o.burstiness
  end
  r.requests = n
  r.seed = o.seed
  r.chunked_prefill = chunk or 0
  r.max_batch = o.max_batch
  r.max_batched_tokens = not chunk and o.max_batched_tokens or nil
  r.input_len_mean = in_tokens / n
  r.output_len_mean = out_tokens / n
  r.ttft_ms = summary(ttft)
  r.tpot_ms = summary(tpot)
  r.e2e_ms = summary(e2e)
  r.duration_s = duration
  r.busy_s = busy_ms / 1e3
  r.throughput = {
    requests_per_s = n / duration,
    capacity_requests_per_s = capacity,  -- nil when no request finished in the replay's steady window
    output_tokens_per_s = out_tokens / duration,
    output_tokens_per_s_per_gpu = out_tokens / duration / o.tp,
    total_tokens_per_s = (in_tokens + out_tokens) / duration,
  }
  r.queue = queue  -- whether the queue visibly grew (M.queue_growth)
  -- (a trace whose requests all arrive at once has no rate to hold against the capacity: its queue alone is said)
  r.warnings[#r.warnings + 1] = (M.overload_warning(r.rate or 0, r.rate and capacity or nil, n, queue, rate_text))
  r.steps = steps
  r.mean_decode_batch = decode_steps_n > 0 and decode_batch_sum / decode_steps_n or 0
  r.max_running = max_running
  r.preemptions = preemptions
  r.weights_gb = pre.state_gb
  r.kv_cache_gb_per_token = per_token_gb
  r.kv_budget_gb = budget_gb
  r.kv_blocks = total_blocks
  r.kv_tokens = total_blocks * bs
  -- the most KV cache in use at once (GB per GPU: kv_paging's blocks at the full per-token rate)
  r.kv_peak_gb = sim.peak_blocks * bs * per_token_gb
  window_report(r, o, pre, per_token_gb, S)
  r.grid = { batch = cm.batch_points, context = cm.context_points, tokens = cm.token_points }
  local mb = max(1, floor(r.mean_decode_batch + 0.5))
  local mean_ctx = max(1, floor(r.input_len_mean + (r.output_len_mean - 1) / 2 + 0.5))
  r.phases = { prefill = phase_report(F("prefill", 1, floor(r.input_len_mean + 0.5))),
               decode = phase_report(F("decode", mb, mean_ctx)) }
  -- The uncertainty band under load: the same arrivals replayed with every prefill step at its p10 (then p90) time and
  -- every decode step at its own (the band ratios of the first prefill and of the mean decode step; the steps' kernels
  -- err together: the same families on the same GPU). Queueing is not linear in step time, so the runs are
  -- simulated, not scaled.
  local mid = F("decode", mb, mean_ctx, true)
  if pre.p10 and mid.p10 and pre.ms > 0 and mid.ms > 0 then
    local function scaled(fp, fd)
      return { decode = function(b, c)
                 local t, a = cm.decode(b, c)
                 return t * fd, a * fd
               end,
               tokens = function(t) return cm.tokens(t) * fp end,
               logits = function(r) return cm.logits(r) * fp end,
               attention = function(s) return cm.attention(s) * fp end }
    end
    local function band_of(fp, fd, label)
      -- progress as the main run (it also renews the script limits per stretch)
      local x = simulate(scaled(fp, fd), function(text, done)
        progress(text and ("band " .. label .. " replay: " .. text) or nil, done)
      end, reqs)
      return { ttft_ms = summary(x.ttft), tpot_ms = summary(x.tpot), e2e_ms = summary(x.e2e),
               output_tokens_per_s_per_gpu = x.out_tokens / (x.last_finish - x.first_arrival) / o.tp,
               prefill_step_factor = fp, decode_step_factor = fd }
    end
    r.band = { p10 = band_of(pre.p10 / pre.ms, mid.p10 / mid.ms, "p10"),
               p90 = band_of(pre.p90 / pre.ms, mid.p90 / mid.ms, "p90"), spread = pre.band_spread }
  end
  r.forecasts = count()
  return r
end

---------------------------------------------------------------------------------------------------

--- Runs `neusight serve`: `raw` are the options (see KNOWN and M.DEFAULTS), `phase` and `progress` the engine's
--- primitives (see the header). Returns the report table.
function M.run(raw, phase, progress)
  local o = options(raw)
  local F, count, below, fp8 = forecaster(o, phase)
  progress = progress or function() end
  local r
  if o.batch then r = run_static(o, F, count) else r = run_simulation(o, F, count, progress) end
  -- a phase forecast faster than the GPU can be (a calibration fitted to such a measurement, the GPU file's peaks, or
  -- a predictor that prices under the model FLOPs at the dense peak): neusight.figures forecast_floor_warning, said of
  -- the forecast furthest below its floor
  local said = {}
  for _, mode in ipairs { "prefill", "decode" } do
    local worst = below()[mode]
    local w = worst and Fg.forecast_floor_warning(worst.floor, fmt("the %s forecast (batch %d, %s %d)",
      mode == "prefill" and "prefill" or "decode step", worst.batch, mode == "prefill" and "seq" or "context",
      worst.tokens)) or nil
    if w then
      r.warnings[#r.warnings + 1] = w
      said[#said + 1] = w
    end
  end
  FLOOR_WARNING[r] = said[1] and said or nil
  -- fp8 GEMMs forecast slower than in bf16: once, of the decode steps (small m), else of the prefill
  -- (first: a batch that does not fit keeps its warning last, which serve --sweep makes the row's error)
  local f8 = fp8().decode or fp8().prefill
  if f8 then table.insert(r.warnings, 1, f8) end
  FP8_WARNING[r] = f8 or nil
  return r
end

---------------------------------------------------------------------------------------------------
-- Table rendering

local function bound_lines(out, name, p)
  if not p then return end
  local parts = {}
  for _, c in ipairs(M.BOUND_CLASSES) do
    if p.roofline_ms[c] > 0 or p.predicted_ms[c] > 0 then
      parts[#parts + 1] = fmt("%s %.3f/%.3f", c, p.roofline_ms[c], p.predicted_ms[c])
    end
  end
  local what = p.seq and fmt("batch %d x %d tokens", p.batch, p.seq) or fmt("batch %d, context %d", p.batch, p.context)
  out[#out + 1] = fmt("  %-8s %-28s %9.3f ms  bound: %s", name, what, p.latency_ms, p.bound)
  out[#out + 1] = fmt("  %-8s roofline/predicted ms by class: %s", "", concat(parts, ", "))
end

local function dist_line(name, d)
  if not d then return fmt("%-14s n/a (every request has one output token)", name) end
  return fmt("%-14s mean %10.2f   p50 %10.2f   p90 %10.2f   p99 %10.2f   max %10.2f", name, d.mean, d.p50, d.p90, d.p99, d.max)
end

-- What a report's memory budget is a share of (M.memory_text of its GPU's fields).
local function budget_of(r)
  return M.memory_text { mem_reported_gib = r.gpu_mem_reported_gib, mem_gb = r.gpu_mem_gb }
end

--- The report as text for people (JSON and CSV carry the same numbers).
function M.format_table(r)
  local out = {}
  out[#out + 1] = fmt("serve     %s on %s%s (%.0f GB), %s%s%s, launch %s, kernels %s, predictor %s", r.model,
    r.tp > 1 and fmt("%d x ", r.tp) or "", r.gpu, r.gpu_mem_gb, r.dtype,
    ", KV cache " .. tostring(r.kv_cache_dtype or r.kv_dtype or r.dtype),
    r.weight_dtype and ", weights " .. r.weight_dtype or "", r.launch, r.kernels or "-", r.predictor)
  if r.experts then out[#out] = out[#out] .. ", experts " .. r.experts end
  if r.calibration then
    out[#out + 1] = fmt("calibrated: kernel times corrected by %s (%s--no-calibration ignores it)", r.calibration,
      r.decode_calibrated == false and "the prefill's only: no decode step was measured; "
      or r.prefill_calibrated == false and "decode steps' only: no prefill was measured; " or "")
  end
  if r.kind == "static" then
    out[#out + 1] = fmt("static batch %d, input %s tokens, output %s tokens", r.batch, r.input_len, r.output_len)
    out[#out + 1] = ""
    out[#out + 1] = fmt("TTFT          %10.2f ms   (prefill of the batch)", r.ttft_ms)
    if r.tpot_ms then
      out[#out + 1] = fmt("TPOT          %10.2f ms   (mean of %d decode steps, %.2f → %.2f ms%s)", r.tpot_ms,
        r.decode_steps, r.decode_ms_first, r.decode_ms_last, r.decode_sampled and ", sampled" or "")
    else
      out[#out + 1] = "TPOT                 n/a   (one output token: no decode step)"
    end
    out[#out + 1] = fmt("end to end    %10.2f ms", r.e2e_ms)
    if r.ttft_ms_p10 then
      out[#out + 1] = fmt("band p10-p90  TTFT %.2f - %.2f ms%s, end to end %.2f - %.2f ms (leave-one-GPU-out errors "
        .. "per kernel family%s)", r.ttft_ms_p10, r.ttft_ms_p90,
        r.tpot_ms_p10 and fmt(", TPOT %.2f - %.2f ms", r.tpot_ms_p10, r.tpot_ms_p90) or "", r.e2e_ms_p10, r.e2e_ms_p90,
        spread_note(r.band_spread, ", "))
    end
    out[#out + 1] = fmt("throughput    %10.1f output tokens/s per GPU (%.1f for the replica)",
      r.output_tokens_per_s_per_gpu, r.output_tokens_per_s)
    out[#out + 1] = fmt("memory        %10.2f GB weights + %.2f GB KV cache per GPU; %.0f %% of %s (%.1f GB) holds %d KV blocks: at most %d concurrent requests%s",
      r.weights_gb, r.kv_cache_gb, 100 * r.gpu_memory_utilization, budget_of(r), r.memory_budget_gb, r.kv_blocks,
      r.max_concurrency,
      r.fits and "" or fmt(" (batch %d does not fit: see the warning)", r.batch))
    if r.kv_window then
      out[#out + 1] = fmt("sliding window %d tokens: %.0f %% of a token's KV bytes held for at most the window (a "
        .. "sequence %.2f GB)", r.kv_window, 100 * r.kv_window_share, r.kv_cache_gb_per_request_max)
    end
  else
    local chunked = r.chunked_prefill > 0 and fmt(", chunked prefill %d tokens", r.chunked_prefill) or ""
    if r.trace then
      local t = r.trace
      out[#out + 1] = fmt("continuous batching: %d request%s from %s (%s: %s, %s, %s), arrivals over %.3f s%s%s%s",
        r.requests, r.requests == 1 and "" or "s", t.file, t.format, t.columns.arrival, t.columns.input, t.columns.output, t.duration_s,
        t.time_scale and fmt(" (its times x %g)", t.time_scale) or "",
        t.mean_rate_per_s and fmt(", mean %.3g req/s", t.mean_rate_per_s) or " (all at once)", chunked)
      out[#out + 1] = fmt("trace         input %s tokens (mean %.1f), output %s tokens (mean %.1f)", r.input_len,
        t.input_len_mean, r.output_len, t.output_len_mean)
    else
      out[#out + 1] = fmt("continuous batching: %d requests, %s %.3g req/s (seed %d), input %s, output %s tokens%s",
        r.requests, r.burstiness and fmt("gamma arrivals (burstiness %.10g)", r.burstiness) or "Poisson", r.rate, r.seed,
        r.input_len, r.output_len, chunked)
    end
    out[#out + 1] = ""
    out[#out + 1] = dist_line("TTFT ms", r.ttft_ms)
    out[#out + 1] = dist_line("TPOT ms", r.tpot_ms)
    out[#out + 1] = dist_line("end to end ms", r.e2e_ms)
    if r.band then
      local lo, hi = r.band.p10, r.band.p90
      out[#out + 1] = fmt("band p10-p90  TTFT p90 %.2f - %.2f ms%s, throughput %.1f - %.1f (every step at its p10 / p90 "
        .. "time: leave-one-GPU-out errors per kernel family, replayed%s)", lo.ttft_ms.p90, hi.ttft_ms.p90,
        lo.tpot_ms and fmt(", TPOT p90 %.2f - %.2f ms", lo.tpot_ms.p90, hi.tpot_ms.p90) or "",
        hi.output_tokens_per_s_per_gpu, lo.output_tokens_per_s_per_gpu,
        spread_note(r.band.spread, "; "))
    end
    out[#out + 1] = fmt("throughput    %10.1f output tokens/s per GPU, %.2f requests/s over %.1f s",
      r.throughput.output_tokens_per_s_per_gpu, r.throughput.requests_per_s, r.duration_s)
    out[#out + 1] = fmt("batching      mean decode batch %.1f, at most %d running, %d prefill / %d decode / %d mixed steps, %d preemptions",
      r.mean_decode_batch, r.max_running, r.steps.prefill, r.steps.decode, r.steps.mixed, r.preemptions)
    out[#out + 1] = fmt("memory        %10.2f GB weights per GPU; KV cache %d blocks = %d tokens (%.2f GB); %.0f %% of %s "
      .. "(%.1f GB) holds both", r.weights_gb, r.kv_blocks, r.kv_tokens, r.kv_budget_gb, 100 * r.gpu_memory_utilization,
      budget_of(r), r.memory_budget_gb)
    if r.kv_window then
      out[#out + 1] = fmt("sliding window %d tokens: %.0f %% of a token's KV bytes held for at most the window (the "
        .. "longest request %.2f GB); at most %.2f GB in use", r.kv_window, 100 * r.kv_window_share,
        r.kv_cache_gb_per_request_max, r.kv_peak_gb)
    end
  end
  out[#out + 1] = ""
  out[#out + 1] = "phases (bound = the class with the largest roofline time; classes: compute, weights = GEMMs streaming"
  out[#out + 1] = "        weights, kv_cache = attention reading K/V, activations = element-wise/norm/copies, communication)"
  bound_lines(out, "prefill", r.phases.prefill)
  bound_lines(out, "decode", r.phases.decode)
  out[#out + 1] = fmt("\n%d phase forecasts", r.forecasts)
  for _, w in ipairs(r.warnings) do out[#out + 1] = "warning: " .. w end
  return concat(out, "\n") .. "\n"
end

return M
