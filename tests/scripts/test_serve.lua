-- tests/scripts/test_serve.lua — scripts/neusight/serve.lua with a synthetic phase(): closed-form latencies make the
-- static batch, the interpolation grid and the simulation checkable exactly.
local S = require "neusight.serve"

local function eq(got, want, what)
  if got ~= want then error(("%s:\n  expected %s\n  got      %s"):format(what, tostring(want), tostring(got)), 2) end
end
local function near(got, want, rel, what)
  if math.abs(got - want) > rel * math.abs(want) then
    error(("%s:\n  expected %.17g\n  got      %.17g"):format(what, want, got), 2)
  end
end

-- Synthetic model: decode(b, c) = 5 + 0.01 b + 1e-4 b (c + 1) ms (attention part 1e-4 b (c + 1)); prefill(b, s) =
-- 2 + 0.05 b s ms plus attention 1e-5 b s² ms. KV 1e-4 GB per token, weights 16 GB, an 80 GB GPU.
local calls = 0
local function phase(f)
  calls = calls + 1
  local b = f.batch
  local attn, rest, tokens
  if f.mode == "decode" then
    attn, rest, tokens = 1e-4 * b * (f.context + 1), 5 + 0.01 * b, b * (f.context + 1)
  else
    attn, rest, tokens = 1e-5 * b * f.seq * f.seq, 2 + 0.05 * b * f.seq, b * f.seq
  end
  return {
    latency_ms = rest + attn, kv_cache_gb = 1e-4 * tokens, state_gb = 16, params = 8e9, flops = 1, launch = f.launch,
    dtype = f.dtype, model = f.model, gpu = { name = "fake", source = "fake.toml", mem_gb = 80, mem_bw_gbps = 1000 },
    kernels = {
      { name = "attn", op = "sdpa", kernel = "A", kind = "attention", kernel_op = "", count = 1, ms = attn,
        compute_ms = f.mode == "decode" and 0 or attn, memory_ms = f.mode == "decode" and attn or 0 },
      { name = "mlp", op = "linear", kernel = "Linear", kind = "gemm", kernel_op = "", count = 1, ms = rest,
        compute_ms = f.mode == "decode" and 0.1 or rest, memory_ms = f.mode == "decode" and rest or 0.1 },
    },
  }
end
local function decode_ms(b, c) return 5 + 0.01 * b + 1e-4 * b * (c + 1) end
local function prefill_ms(b, s) return 2 + 0.05 * b * s + 1e-5 * b * s * s end

-- The first of report `r`'s warnings that holds `text`, or nil.
local function warning_with(r, text)
  for _, w in ipairs(r.warnings) do
    if w:find(text, 1, true) then return w end
  end
end

local M = {}

function M.test_rng_is_deterministic_and_uniform()
  local a, b = S.rng(42), S.rng(42)
  local sum = 0
  for _ = 1, 1000 do
    local x = a()
    eq(x, b(), "same seed, same stream")
    assert(x >= 0 and x < 1)
    sum = sum + x
  end
  near(sum / 1000, 0.5, 0.05, "mean of uniforms")
  assert(S.rng(1)() ~= S.rng(2)(), "different seeds differ")
end

function M.test_percentile_and_lengths()
  eq(S.percentile({ 1, 2, 3, 4 }, 50), 2.5, "median of 4")
  eq(S.percentile({ 7 }, 99), 7, "one value")
  eq(S.percentile({ 0, 10 }, 90), 9, "linear")
  local u = S.length_spec("uniform:10:20", "x")
  eq(u.kind, "uniform", "kind")
  eq(u.mean, 15, "mean")
  eq(S.length_spec(128, "x").lo, 128, "integer")
  local ok, err = pcall(S.length_spec, "0", "the output length")
  eq(ok, false, "0 fails")
  eq(err, "serve: the output length must be a positive integer (got 0)", "message")
  ok = pcall(S.length_spec, "normal:5:1", "x")
  eq(ok, false, "unknown distribution fails")
  -- the one bound of a length, said with its limit: a count with no integer representation (1e20) too, not by
  -- string.format nor as "not a positive integer" (the command line's bound said "at most 999999999999999999")
  ok, err = pcall(S.length_spec, "99999999999999999999", "the output length")
  eq(err, "serve: the output length must be at most 16777216 tokens (got 99999999999999999999)", "no integer representation")
  ok, err = pcall(S.length_spec, 1e20, "the output length")
  eq(err, "serve: the output length must be at most 16777216 tokens (got 1e+20)", "a float")
  ok, err = pcall(S.length_spec, "uniform:1:99999999999999999999", "x")
  eq(err, "serve: x uniform:LO:HI needs HI <= 16777216 tokens (got uniform:1:99999999999999999999)", "HI too")
  ok, err = pcall(S.length_spec, "uniform:99999999999999999999:1", "x")
  eq(err, "serve: x uniform:LO:HI needs 1 <= LO <= HI (got uniform:99999999999999999999:1)", "LO beyond HI")
  ok, err = pcall(S.length_spec, "16777217", "x")
  eq(err, "serve: x must be at most 16777216 tokens (got 16777217)", "beyond a forecast's sequence")
  eq(S.length_spec("16777216", "x").lo, 16777216, "the limit itself")
  eq(S.length_spec("uniform:16777215:16777216", "x").hi, 16777216, "HI at the limit")
  eq(math.type(S.length_spec("uniform:1:16777216", "x").lo), "integer", "integers")
  ok, err = pcall(S.length_spec, 2.5, "x")
  eq(err, "serve: x must be a positive integer (got 2.5)", "a fraction")
end

function M.test_bounds_classify_by_roofline()
  local b = S.bounds {
    { kind = "gemm", ms = 3, compute_ms = 1, memory_ms = 2 },
    { kind = "gemm", ms = 5, compute_ms = 4, memory_ms = 1 },
    { kind = "attention", ms = 1, compute_ms = 0.1, memory_ms = 0.5 },
    { kind = "elementwise", ms = 1, compute_ms = 0, memory_ms = 0.01 },
    { kind = "collective", ms = 0.2, compute_ms = 0, memory_ms = 0 },
  }
  eq(b.roofline_ms.weights, 2, "memory-bound GEMM streams weights")
  eq(b.roofline_ms.compute, 4, "compute-bound GEMM")
  eq(b.roofline_ms.kv_cache, 0.5, "attention reading K/V")
  eq(b.roofline_ms.activations, 0.01, "element-wise")
  eq(b.roofline_ms.communication, 0.2, "collective")
  eq(b.predicted_ms.compute, 5, "predicted per class")
  eq(b.bound, "compute", "largest roofline class")
end

function M.test_static_batch_is_its_phases()
  local r = S.run({ model = "m", gpu = "g", batch = 4, input_len = 100, output_len = 11 }, phase)
  eq(r.ttft_ms, prefill_ms(4, 100), "TTFT = prefill of the batch")
  local sum = 0
  for c = 100, 109 do sum = sum + decode_ms(4, c) end
  near(r.tpot_ms, sum / 10, 1e-12, "TPOT = mean of the 10 decode steps")
  near(r.e2e_ms, r.ttft_ms + sum, 1e-12, "end to end")
  eq(r.decode_sampled, false, "every step forecast")
  -- sampled decode (more steps than samples): exact for a decode time linear in the context
  local s = S.run({ model = "m", gpu = "g", batch = 4, input_len = 100, output_len = 501, static_decode_samples = 8 }, phase)
  sum = 0
  for c = 100, 599 do sum = sum + decode_ms(4, c) end
  near(s.tpot_ms, sum / 500, 1e-12, "sampled TPOT")
  eq(s.decode_sampled, true, "sampled")
  -- memory: (0.9 * 80 - 16) GB / (1e-4 GB x 16 tokens) = 35000 blocks; 38 blocks per sequence of 600 tokens
  eq(s.kv_blocks, 35000, "blocks")
  eq(s.max_concurrency, 35000 // 38, "max concurrency")
end

-- A batch beyond serve's budget says the budget, its flag, and that predict's serving phases count the whole GPU.
-- Issue 13: every phase asks for the serving engines' kernel set, Megatron-LM's fused one, at every tp (tp 1 was
-- HF's eager graph, tp > 1 the fused one); --kernels eager asks for HF's (at tp 1 the model's own graph: no
-- parallel.kernels, which a one-GPU run would call "no effect"); the report and the table say which.
function M.test_every_tp_runs_one_kernel_set()
  local function fields_of(opts)
    local seen = {}
    local function spy(f)
      seen[#seen + 1] = f
      return phase(f)
    end
    local r = S.run(opts, spy)
    return seen, r
  end
  for _, tp in ipairs { 1, 2 } do
    for _, k in ipairs { "megatron", "eager", false } do
      local opts = { model = "m", gpu = "g", batch = 4, input_len = 100, output_len = 3, tp = tp, kernels = k or nil }
      local seen, r = fields_of(opts)
      local want = k or "megatron"
      eq(r.kernels, want, ("tp %d, kernels %s: the report's"):format(tp, tostring(k)))
      assert(S.format_table(r):find(", kernels " .. want .. ", ", 1, true), "the table's header says it")
      for _, f in ipairs(seen) do
        local asked = want  -- (tp 1, eager: none asked)
        if tp == 1 and want == "eager" then asked = nil end
        eq(f["parallel.kernels"], asked,
          ("tp %d, kernels %s: %s phase's parallel.kernels"):format(tp, tostring(k), f.mode))
      end
    end
  end
  local ok, err = pcall(S.run, { model = "m", gpu = "g", batch = 4, input_len = 100, output_len = 3, kernels = "fused" }, phase)
  eq(ok, false, "an unknown kernel set fails")
  eq(err, 'serve: --kernels: "megatron" or "eager" expected, got "fused"', "predict's names")
end

function M.test_static_batch_beyond_budget_names_it()
  local r = S.run({ model = "m", gpu = "g", batch = 6000, input_len = 100, output_len = 11 }, phase)
  eq(r.fits, false, "66 GB of KV cache + 16 GB of weights")
  eq(r.warnings[#r.warnings], "batch 6000 does not fit: weights 16.0 GB + KV cache 66.0 GB exceed 72.0 GB, 90 % of "
    .. "80 GB (--gpu-memory-utilization 0.9, a serving engine's reservation; `predict --mode decode` counts all 80 GB): "
    .. "at most 5000 sequences of 110 tokens", "said")
  -- on a part reporting less than its datasheet's GB predict holds a run to 95 % of that (neusight.memory capacity),
  -- not all of mem_gb: an L4's 22.44 GB (the message said "counts all 24 GB")
  local function l4(f)
    local p = phase(f)
    p.gpu.mem_gb, p.gpu.mem_reported_gib = 24, 22.0
    return p
  end
  local small = S.run({ model = "m", gpu = "g", batch = 6000, input_len = 100, output_len = 11 }, l4)
  eq(small.fits, false, "over an L4's budget")
  assert(small.warnings[#small.warnings]:find("`predict --mode decode` counts 22.44 GB (95 % of the 22.00 GiB it "
    .. "reports; its datasheet's 24 GB is more than that)): at most ", 1, true), small.warnings[#small.warnings])
end

-- The budget is --gpu-memory-utilization of the memory the device reports (the GPU file's mem_reported_gib), as vLLM
-- takes it of torch.cuda.mem_get_info()'s total (tester7 P1: 0.9 of mem_gb read as 1e9 bytes took the ~7 % GB-vs-GiB
-- margin a second time, and Llama-3-70B tp2 on H100s got ~3x too few KV blocks). A file without the figure keeps
-- 0.9 x mem_gb, and a note naming the key says so.
function M.test_budget_is_a_share_of_the_memory_the_device_reports()
  local function reported(f)
    local p = phase(f)
    p.gpu.mem_reported_gib = 79.1
    return p
  end
  local budget = 0.9 * 79.1 * 2 ^ 30 / 1e9  -- 76.44 GB
  local r = S.run({ model = "m", gpu = "g", batch = 4, input_len = 100, output_len = 501 }, reported)
  near(r.memory_budget_gb, budget, 1e-12, "0.9 of the reported 79.1 GiB")
  eq(r.kv_blocks, math.floor((budget - 16) / (1e-4 * 16)), "blocks of (budget - weights)")
  eq(r.gpu_mem_reported_gib, 79.1, "the figure in JSON")
  for _, w in ipairs(r.warnings) do assert(not w:find("mem_reported_gib", 1, true), w) end
  assert(S.format_table(r):find("90 % of the 79.1 GiB the GPU reports (76.4 GB) holds " .. r.kv_blocks, 1, true),
    S.format_table(r))
  local q = S.run({ model = "m", gpu = "g", rate = 1, requests = 3, input_len = 100, output_len = 11 }, reported)
  eq(q.kv_blocks, r.kv_blocks, "continuous batching: the same budget")
  -- without the figure: 0.9 x 80 GB, said
  local s = S.run({ model = "m", gpu = "g", batch = 4, input_len = 100, output_len = 501 }, phase)
  eq(s.memory_budget_gb, 72, "0.9 of mem_gb")
  eq(s.kv_blocks, 35000, "as before")
  eq(S.memory_note(s), "fake.toml gives no mem_reported_gib (the total memory the device reports, GiB: "
    .. "torch.cuda.mem_get_info()[1] / 2**30): the serving budget is 90 % of mem_gb read as 1e9 bytes (72.0 GB), which "
    .. "on an HBM part is ~7 % under a serving engine's (vLLM takes 90 % of what the device reports); add the key to "
    .. "the GPU file for that budget", "the note")
  local found = false
  for _, w in ipairs(s.warnings) do found = found or w == S.memory_note(s) end
  assert(found, "among the warnings")
end

function M.test_trickle_is_one_request_at_a_time()
  local r = S.run({ model = "m", gpu = "g", rate = 0.001, requests = 10, input_len = 64, output_len = 33 }, phase)
  eq(r.max_running, 1, "alone")
  near(r.ttft_ms.p50, prefill_ms(1, 64), 1e-9, "TTFT = prefill(1, I) (arrival times of ~1e4 s cost digits)")
  local sum = 0
  for c = 64, 95 do sum = sum + decode_ms(1, c) end
  near(r.tpot_ms.p99, sum / 32, 1e-9, "TPOT = decode(1) over the contexts (bilinear is exact here)")
end

-- max_running is the running batch of a step (vLLM's num_running, counted as the step runs), not what is left after the
-- step removed its finished requests: ten prompts of one output token, all arriving at once, are prefilled in one step
-- and finish in it, so ten ran at once (before: "at most 0 running"); with chunked prefill likewise; and a decode
-- step's last tokens count the requests they finish.
local function at_once(output)  -- a trace of ten requests arriving together
  local rows = { "arrival_s,input_len,output_len" }
  for i = 2, 11 do rows[i] = "0,64," .. output end
  return table.concat(rows, "\n") .. "\n"
end

function M.test_max_running_counts_the_steps_batch_before_it_finishes()
  local o = { model = "m", gpu = "g", requests_file = "ten.csv", requests_text = at_once(1) }
  local r = S.run(o, phase)
  eq(r.steps.prefill, 1, "one prefill step")
  eq(r.max_running, 10, "one prefill step of ten one-token requests")
  o.chunked_prefill = 2048
  eq(S.run(o, phase).max_running, 10, "chunked: one step of ten prompts")
  o.chunked_prefill, o.requests_text = nil, at_once(2)
  eq(S.run(o, phase).max_running, 10, "two tokens: the decode step that finishes all ten")
end

-- --max-batched-tokens given beside --chunked-prefill does nothing (a chunked step's budget is the chunk's, vLLM's
-- max_num_batched_tokens under chunked prefill) and says so; it was dropped without a word (audit 2026-11-29). Not
-- given, or without chunking (where it bounds a prefill step), nothing is said.
function M.test_max_batched_tokens_beside_chunked_prefill_is_said()
  local says = "max_batched_tokens (--max-batched-tokens 4096) has no effect with --chunked-prefill"
  local function said(o)
    for _, w in ipairs(S.run(o, phase).warnings) do
      if w:find(says, 1, true) then return w end
    end
    return nil
  end
  local o = { model = "m", gpu = "g", requests_file = "ten.csv", requests_text = at_once(2), chunked_prefill = 2048,
              max_batched_tokens = 4096 }
  local w = said(o)
  assert(w and w:find("--chunked-prefill's 2048 tokens", 1, true), w)
  o.max_batched_tokens = nil
  eq(said(o), nil, "not given: nothing said")
  o.max_batched_tokens, o.chunked_prefill = 4096, nil
  eq(said(o), nil, "without chunking it bounds the prefill step: nothing said")
end

-- The LM head runs on one row per request of a step (vLLM V1: the last position of every scheduled request, a partial
-- prefill's included; V0: each prompt's last), not on one row per step: prompt steps of several requests and mixed
-- steps priced it on one (up to 0.17 ms a step too fast). A synthetic model with an lm_head kernel of
-- 0.3 + 0.01 rows ms (the rest as `phase`'s, linear in the tokens: the step costs are exact); ten prompts of 16
-- tokens arriving together, output 200 (S = 215 tokens: every step's tokens within it).
local function with_head(f)
  local p = phase(f)
  local rows = f.batch  -- prefill: each prompt's last token; decode: every sequence
  p.kernels[#p.kernels + 1] = { name = "lm_head", op = "linear", kernel = "Linear", kind = "gemm", kernel_op = "",
    count = 1, ms = 0.3 + 0.01 * rows, compute_ms = 0, memory_ms = 0.3 }
  p.latency_ms = p.latency_ms + 0.3 + 0.01 * rows
  return p
end
function M.test_lm_head_runs_on_every_request_of_a_step()
  local rows = { "arrival_s,input_len,output_len" }
  for i = 2, 11 do rows[i] = "0,16,200" end
  local o = { model = "m", gpu = "g", requests_file = "ten.csv", requests_text = table.concat(rows, "\n") .. "\n" }
  local function rest(t) return 2 + 0.05 * t end  -- prefill's non-attention time of t tokens, LM head aside
  local function attn(s) return 1e-5 * s * s end
  local function head(r) return 0.3 + 0.01 * r end
  -- V0: one prefill step of the ten prompts, the LM head on ten rows
  local v0 = S.run(o, with_head)
  near(v0.ttft_ms.max, rest(160) + 10 * attn(16) + head(10), 1e-9, "V0: ten prompts, ten rows")
  near(v0.ttft_ms.min, v0.ttft_ms.max, 1e-12, "all in that step")
  -- V1, 100 tokens a step: six whole prompts and 4 tokens of the seventh (seven rows), then the six decode alongside
  -- the rest of the seventh and the last three prompts (ten rows, the decodes' attention over 16 cached tokens)
  o.chunked_prefill = 100
  local v1 = S.run(o, with_head)
  local t1 = rest(100) + 6 * attn(16) + attn(4) + head(7)
  local t2 = rest(66) + (attn(16) - attn(4)) + 3 * attn(16) + 1e-4 * 6 * 17 + head(10)
  near(v1.ttft_ms.min, t1, 1e-9, "V1 first step: seven rows")
  near(v1.ttft_ms.max, t1 + t2, 1e-9, "V1 mixed step: ten rows")
  assert(v1.steps.mixed > 0, "a mixed step")
end

-- A static batch above vLLM's default max_num_seqs (256) runs as one batch, as asked, and says so: before, batch 300
-- ran as one batch silently, where a vLLM server would run 256 and queue the rest.
function M.test_static_batch_above_max_num_seqs_says_it_runs_as_one_batch()
  local function said(r) return warning_with(r, "above the 256 sequences vLLM runs at once by default (max_num_seqs)") end
  local big = S.run({ model = "m", gpu = "g", batch = 300, input_len = 16, output_len = 4 }, phase)
  local w = said(big)
  assert(w, "batch 300: said")
  assert(w:find("batch 300 runs as one batch", 1, true), w)
  near(big.ttft_ms, prefill_ms(300, 16), 1e-12, "the forecast is the batch as asked")
  eq(said(S.run({ model = "m", gpu = "g", batch = 256, input_len = 16, output_len = 4 }, phase)), nil, "256: nothing")
end

-- A sliding-window model's paged KV cache: its windowed layers hold the blocks of at most the window (kv_window_share of
-- a cached token's bytes; the rest, full layers, every token). One request alone at a time: the most blocks in use are
-- its last decode step's, I + O - 1 = 1032 tokens: full layers ceil(1032 / 16) = 65 blocks, windowed ceil(256 / 16) = 16.
-- The phase forecasts' caches as a windowed graph holds them (neusight.nodes.kv_cache_tokens: its windowed layers keep
-- min(T, 256) of a sequence's T tokens, prefill and decode alike), `share` of a token's bytes in windowed layers.
local function windowed(share)
  return function(f)
    local r = phase(f)
    local T = f.mode == "decode" and f.context + 1 or f.seq
    r.kv_window, r.kv_window_share = 256, share
    r.kv_cache_gb = 1e-4 * f.batch * ((1 - share) * T + share * math.min(T, 256))
    return r
  end
end

function M.test_sliding_window_pages_the_window_only()
  local o = { model = "m", gpu = "g", rate = 0.001, requests = 3, input_len = 1000, output_len = 33 }
  local full, half = S.run(o, phase), S.run(o, windowed(0.5))
  near(full.kv_peak_gb, 65 * 16 * 1e-4, 1e-12, "no window: every token's blocks")
  eq(full.kv_window, nil, "no window reported")
  near(half.kv_peak_gb, (0.5 * 65 + 0.5 * 16) * 16 * 1e-4, 1e-12, "half the bytes windowed")
  eq(half.kv_window, 256, "the window")
  eq(half.kv_window_share, 0.5, "its share")
  near(half.kv_cache_gb_per_request_max, 1e-4 * (0.5 * 1032 + 0.5 * 256), 1e-12, "the longest request's cache")
  eq(half.ttft_ms.p50, full.ttft_ms.p50, "alone, the same steps")
  -- Under load, long prompts: without the window 135 requests' prompts (256 blocks each) fill the 35000 blocks and
  -- decodes preempt; windowed throughout (share 1), a request holds 16 blocks and every one of them runs at once.
  local load = { model = "m", gpu = "g", rate = 1e6, requests = 200, input_len = 4096, output_len = 64, max_batch = 256,
                 max_batched_tokens = 1e6 }
  local a, b = S.run(load, phase), S.run(load, windowed(1))
  eq(a.max_running, 35000 // 256, "full cache: as many prompts as fit")
  assert(a.preemptions > 0, "full cache: decodes preempt")
  eq(b.max_running, 200, "windowed: all 200 at once")
  eq(b.preemptions, 0, "windowed: no preemption")
  near(b.kv_peak_gb, 200 * 16 * 16 * 1e-4, 1e-12, "windowed: 16 blocks each")
end

-- The static batch's JSON has the sliding-window keys the simulation's has, with the same meaning (tester3 problem 11:
-- they were --rate's only): the window, its share of a token's KV bytes, the cache of the longest request (I + O - 1 =
-- 1032 tokens: half at the full rate, half the window's 256), and the tokens the KV blocks hold.
function M.test_static_batch_reports_the_window_as_the_simulation()
  local st = S.run({ model = "m", gpu = "g", batch = 2, input_len = 1000, output_len = 33 }, windowed(0.5))
  local sim = S.run({ model = "m", gpu = "g", rate = 0.001, requests = 3, input_len = 1000, output_len = 33 },
    windowed(0.5))
  for _, k in ipairs { "kv_window", "kv_window_share", "kv_cache_gb_per_request_max", "kv_tokens", "kv_blocks",
                       "kv_cache_gb_per_token", "kv_budget_gb" } do
    eq(st[k], sim[k], k .. ": static batch as the simulation")
  end
  eq(st.kv_window, 256, "the window")
  near(st.kv_cache_gb_per_request_max, 1e-4 * (0.5 * 1032 + 0.5 * 256), 1e-12, "the longest request's cache")
  eq(st.kv_tokens, st.kv_blocks * 16, "the blocks' tokens")
  local full = S.run({ model = "m", gpu = "g", batch = 2, input_len = 1000, output_len = 33 }, phase)
  eq(full.kv_window, nil, "no window: not reported")
  eq(full.kv_window_share, nil, "nor its share")
end

function M.test_simulation_is_reproducible_and_finishes()
  local o = { model = "m", gpu = "g", rate = 50, requests = 400, input_len = "uniform:16:256",
              output_len = "uniform:1:64", seed = 3, chunked_prefill = 128, max_batch = 32 }
  local a = S.run(o, phase)
  local b = S.run(o, phase)
  eq(a.ttft_ms.p90, b.ttft_ms.p90, "same seed")
  eq(a.e2e_ms.count, 400, "every request finishes")
  assert(a.steps.mixed > 0, "chunked steps mix prefill and decode")
  assert(a.max_running <= 32, "max batch")
  o.chunked_prefill = nil
  local c = S.run(o, phase)
  eq(c.e2e_ms.count, 400, "without chunking too")
  eq(c.steps.mixed, 0, "no mixed steps without chunking")
end

-- The forecast capacity: the requests finished per second once requests queue (all arriving at once), counted from
-- the first burst of finishes to the last one before the last request starts. Bursts of 4 every 2 s: 2 requests/s.
function M.test_saturated_rate_counts_whole_bursts()
  local reqs = {}
  for i = 0, 11 do  -- 12 requests: 4 start at 0 s, 2 s and 4 s; each finishes 2 s after its first token
    local start = 2 * (i // 4)
    reqs[#reqs + 1] = { first = start + 0.1, finish = start + 2 }
  end
  eq(S.saturated_rate(reqs), 4 / 2, "bursts at 2 and 4 s (the one at 6 s comes after the last start)")
  eq(S.saturated_rate { { first = 0.1, finish = 2 }, { first = 0.1, finish = 2.5 } }, nil, "nothing queued")
end

-- An arrival rate beyond the capacity warns that the queue grows without bound (both rates said), one near it that its
-- percentiles still depend on --requests; below, nothing. The numbers stay as simulated. Max batch 8: 8 requests run at
-- once, a saturated server finishes them in bursts of 8.
function M.test_overload_warns_with_both_rates()
  local o = { model = "m", gpu = "g", requests = 400, input_len = 64, output_len = 33, max_batch = 8 }
  local function run(rate)
    o.rate = rate
    local r = S.run(o, phase)
    local said
    for _, w in ipairs(r.warnings) do
      if w:find("forecast capacity", 1, true) then said = w end
    end
    return r, said
  end
  local over, said = run(1000)
  local cap = over.throughput.capacity_requests_per_s
  assert(cap and cap > 30 and cap < 50, tostring(cap))
  -- overloaded, the server runs at its capacity: the simulated throughput is the capacity (up to the first prefill)
  near(over.throughput.requests_per_s, cap, 0.01, "saturated throughput")
  eq(said, ("--rate 1000 req/s exceeds the forecast capacity of %.3g req/s (what this server finishes per second in "
    .. "the steady state with requests queued: a replay of requests of these lengths all arriving at once): the queue "
    .. "grows without bound, so TTFT and end "
    .. "to end grow with every request and their percentiles describe these 400 requests only (--requests); lower "
    .. "--rate or add capacity (--tp, another GPU)"):format(cap), "over capacity")
  local _, near_said = run(0.95 * cap)
  assert(near_said and near_said:find("is 95 % of the forecast capacity", 1, true), tostring(near_said))
  assert(near_said:find("(--requests 400)", 1, true), near_said)
  local under, none = run(0.5 * cap)
  eq(none, nil, "half the capacity: nothing said")
  eq(under.throughput.capacity_requests_per_s, cap, "the capacity does not depend on the rate")
  -- 4 requests under a max batch of 8 run all at once, yet the capacity is the server's own (its replay does not take
  -- the user's requests): the same, and 1000 req/s is beyond it
  local few = S.run({ model = "m", gpu = "g", requests = 4, input_len = 64, output_len = 33, max_batch = 8,
                      rate = 1000 }, phase)
  eq(few.throughput.capacity_requests_per_s, cap, "4 requests under a max batch of 8")
  assert(few.warnings[#few.warnings]:find("exceeds the forecast capacity", 1, true), few.warnings[#few.warnings])
end

-- The capacity is a steady state of the server, not of --requests (tester8 P2: with fixed lengths and at most ~2x the
-- max batch of requests the replay of the user's requests had no burst of finishes after the first while others
-- waited: no capacity, no warning; with short varied lengths its first transient gave twice the capacity). The replay
-- draws its own requests (from the simulated lengths, a seeded stream) and counts after the first cohort finished.
function M.test_capacity_does_not_depend_on_requests()
  local function cap(n, output_len)
    return S.run({ model = "m", gpu = "g", requests = n, input_len = 64, output_len = output_len, max_batch = 32,
                   rate = 1000 }, phase).throughput.capacity_requests_per_s
  end
  local many = cap(1000, 33)
  assert(many, "1000 requests")
  eq(cap(40, 33), many, "fixed lengths: the same replay at 40 requests (1.25x the max batch)")
  eq(cap(64, 33), many, "at 64 (2x the max batch)")
  local varied = cap(1000, "uniform:30:36")
  near(cap(80, "uniform:30:36"), varied, 0.03, "uniform output lengths: 80 requests")
end

-- Without a capacity the user's own run says whether its queue grew: many requests still waiting at the last arrival
-- and TTFT rising with the arrival order (serve.lua queue_growth); a stable run says nothing.
function M.test_a_growing_queue_warns_without_a_capacity()
  local growing, stable = {}, {}
  for i = 1, 100 do  -- an arrival every 0.1 s; served every 0.2 s (the wait grows) or at once (0.05 s)
    growing[i] = { arrival = 0.1 * i, first = 0.2 * i + 0.05 }
    stable[i] = { arrival = 0.1 * i, first = 0.1 * i + 0.05 }
  end
  local g = S.queue_growth(growing)
  eq(g.waiting_at_last_arrival, 51, "requests 50..100 start after the last arrival (10 s)")
  assert(g.grew and g.ttft_growth > 3, tostring(g.ttft_growth))
  local w, kind = S.overload_warning(10, nil, 100, g)
  eq(kind, "grew", "a grown queue without a capacity: said as such, not as a rate beyond one")
  assert(w:find("the queue grew during this run at --rate 10 req/s: 51 of the 100 requests were still waiting", 1,
    true), w)
  -- the ratio said is the one the rule compares: the last quarter's median TTFT over the first half's
  assert(w:find(("median TTFT is %.1f times the first half's"):format(g.ttft_growth), 1, true), w)
  local st = S.queue_growth(stable)
  eq(st.grew, false, "a stable queue")
  eq(S.overload_warning(10, nil, 100, st), nil, "nothing said")
  eq(S.overload_warning(10, 100, 100, st), nil, "nor below the capacity")
end

-- A capacity just under the rate is said with the digits that tell them apart (audit28: a sweep's A100 tp 4 row read
-- "--rate 16 req/s exceeds the forecast capacity of 16 req/s", its capacity 15.98); one well apart keeps 3 digits.
function M.test_overload_warning_capacity_reads_apart_from_the_rate()
  local w, kind = S.overload_warning(16, 15.980572784165691, 300)
  eq(kind, "beyond", "16 req/s beyond a capacity of 15.98")
  assert(w:find("exceeds the forecast capacity of 15.98 req/s", 1, true), w)
  w, kind = S.overload_warning(16, 16.004, 300)
  eq(kind, "near", "16 req/s just under a capacity of 16.004")
  assert(w:find("of the forecast capacity of 16.004 req/s", 1, true), w)
  w = S.overload_warning(16, 9.036019644547025, 300)
  assert(w:find("exceeds the forecast capacity of 9.04 req/s", 1, true), w)
end

-- Weights beyond the utilised memory (100 GB on the 80 GB GPU): no serving engine starts (vLLM finds no memory for a
-- KV cache), so the static batch and continuous batching alike are the setting's error saying the weights alone are
-- the reason (tester7 P5: the static batch used to forecast TTFT/TPOT with a "does not fit" warning).
function M.test_weights_beyond_memory()
  local function heavy(f)
    local r = phase(f)
    r.state_gb = 100
    return r
  end
  local why = "serve: model 'm' cannot be served: the weights alone (100.0 GB per GPU) exceed 90 % of 80 GB (72.0 GB"
  local ok, err = pcall(S.run, { model = "m", gpu = "g", batch = 2, input_len = 100, output_len = 11 }, heavy)
  eq(ok, false, "a static batch without room for a KV cache fails")
  assert(err:find(why, 1, true), err)
  assert(require("neusight").is_infeasible(err), "the setting's reason (a sweep row), not a script's bug")
  ok, err = pcall(S.run, { model = "m", gpu = "g", rate = 1, requests = 5, input_len = 100, output_len = 11 }, heavy)
  eq(ok, false, "continuous batching without room for a KV cache fails")
  assert(err:find(why, 1, true), err)
  -- at exactly the utilised memory there is still no room
  local function full(f)
    local x = phase(f)
    x.state_gb = 72
    return x
  end
  ok, err = pcall(S.run, { model = "m", gpu = "g", batch = 1, input_len = 10, output_len = 2 }, full)
  eq(ok, false, "72 GB of 72")
  assert(err:find("the weights alone (72.0 GB per GPU) exceed 90 % of 80 GB", 1, true), err)
end

-- One sequence of I + O - 1 tokens whose KV cache does not fit beside the weights (56 GB of room: 560 000 tokens of
-- 1e-4 GB): no serving engine starts (vLLM refuses a max_model_len beyond its KV cache), so the static batch fails as
-- the --rate simulation does, naming what makes room (audit25: a 130 000-token prompt of Llama-3.1-8B on one L4 was a
-- forecast with "at most 0 concurrent requests" in a warning, and --rate's error said nothing of what to do).
function M.test_request_beyond_cache_is_the_settings_error()
  for _, how in ipairs { { batch = 1 }, { rate = 1, requests = 3 } } do
    local opts = { model = "m", gpu = "g", input_len = 600000, output_len = 2 }
    for k, v in pairs(how) do opts[k] = v end
    local ok, err = pcall(S.run, opts, phase)
    eq(ok, false, "600 001 tokens beside 560 000 of room")
    assert(err:find("serve: a request of 600001 tokens needs 37501 KV-cache blocks of 16 tokens, but only 35000 fit "
      .. "beside 16.0 GB of weights in 90 % of 80 GB: no serving engine starts with a request longer than its KV cache; "
      .. "shard the KV cache over more GPUs (--tp), store it in fp8 (--kv-dtype fp8), quantise the weights "
      .. "(--weight-dtype), shorten the request or take a GPU with more memory", 1, true), err)
    assert(require("neusight").is_infeasible(err), "the setting's reason (a sweep row)")
  end
  -- one that fits is still a forecast
  local r = S.run({ model = "m", gpu = "g", batch = 1, input_len = 500000, output_len = 2 }, phase)
  eq(r.max_concurrency, 1, "500 001 tokens fit once")
end

-- A request whose attention goes beyond the contexts the attention MLPs were trained on (the weights' manifests'
-- [training.range], the phases' trained_range: prompts of 16384 tokens, caches of 131072) is said of the longest
-- prompt and the longest request's last decode step, against the range of the weights the phases were priced with
-- (audit25: a 120000-token prompt on an L40S said nothing).
function M.test_attention_beyond_training_contexts_is_said()
  -- the phases' trained_range: the manifests' [training.range] of the weights the engine priced them with
  local function nvidia(f)
    local p = phase(f)
    p.gpu.vendor = "nvidia"
    p.trained_range = { attention_prefill = { keys = 16384 }, attention_decode = { cached_tokens = 131072 } }
    return p
  end
  local function said(r) return warning_with(r, "attention MLPs were trained on") end
  local r = S.run({ model = "m", gpu = "g", batch = 1, input_len = 16385, output_len = 2 }, nvidia)
  eq(said(r), "a prefill attention over 16385 tokens (attention_prefill was trained on prompts of up to 16384): "
    .. "beyond the contexts the neusight predictor's attention MLPs were trained on, "
    .. "so their utilisation is extrapolated and these kernels' times are indicative only (held to their roofline floor, "
    .. "not measured)", "the prompt")
  eq(S.attention_warning(r), said(r), "kept for the sweep")
  eq(said(S.run({ model = "m", gpu = "g", batch = 1, input_len = 16384, output_len = 2 }, nvidia)), nil, "at 16384")
  local function shorter(f)  -- weights whose manifest records a shorter prompt (a --weights DIR)
    local p = nvidia(f)
    p.trained_range.attention_prefill.keys = 8192
    return p
  end
  local its = "a prefill attention over 8193 tokens (attention_prefill was trained on prompts of up to 8192)"
  eq(said(S.run({ model = "m", gpu = "g", batch = 1, input_len = 8193, output_len = 2 }, shorter)):sub(1, #its), its,
    "its range")
  -- no range: weights without one, or a predictor without weights (the roofline's phases carry none)
  eq(said(S.run({ model = "m", gpu = "g", batch = 1, input_len = 16385, output_len = 2 }, phase)), nil, "no range")
end

-- A phase forecast below its floor is said by predict's rule (neusight.figures forecast_floor_warning): uncalibrated
-- too, the model FLOPs at the dtype's dense peak (MFU 100 %) hold every predictor. serve used to hold only a calibrated
-- phase, to its kernels' floors, and said nothing of a predictor pricing a phase at 150 % MFU.
function M.test_phase_below_its_model_flops_floor_warns_uncalibrated()
  local function fast(f)
    local r = phase(f)
    -- the forward's FLOPs at the 1 TFLOP/s peak take 1.5 times the forecast; the kernels' floors half of it (the
    -- engine's phase: its totals, the dtype's dense peak and its families' floors, held to them by neusight.figures
    -- floor_inputs)
    r.totals = { total = r.latency_ms / 1e3, model_flops_forward = 1.5e9 * r.latency_ms, model_flops_backward = 0,
                 model_flops_accumulate = 0 }
    r.dtype, r.peak_tflops, r.families = "bf16", 1, { ["family_s.linear"] = r.latency_ms / 1e3,
                                                     ["floor_s.linear"] = r.latency_ms / 2e3 }
    return r
  end
  local o = { model = "m", gpu = "g", batch = 4, input_len = 100, output_len = 11 }
  eq(S.floor_warning(S.run(o, phase)), nil, "no floor inputs: nothing said")
  local r = S.run(o, fast)
  local said = S.floor_warning(r)
  eq(type(said) == "table" and #said, 2, "the prefill's and a decode step's")
  eq(said[1], "the prefill forecast (batch 4, seq 100) 22.40 ms is 33.3 % below what fake's peak FLOP/s and bandwidth "
    .. "allow (33.60 ms: the model FLOPs at the bf16 dense peak, MFU 100 %; MFU 150.0 %); check the peaks and "
    .. "mem_bw_gbps of fake.toml", "the prefill's (22.4 ms)")
  assert(said[2]:find("^the decode step forecast %(batch 4, context 1%d%d%) "), said[2])
  assert(said[2]:find("MFU 150.0 %", 1, true), said[2])
  eq(r.warnings[#r.warnings - 1], said[1], "among the report's warnings")
  -- within its floor: nothing said
  local function slow(f)
    local x = fast(f)
    x.totals.model_flops_forward = 0.5e9 * x.latency_ms
    return x
  end
  eq(S.floor_warning(S.run(o, slow)), nil, "at 50 % MFU")
end

-- A model whose positions the longest request goes beyond is said by the flags, not by the context of whichever
-- sampled step met the limit first (tester3: "context 1025 + 1 new token exceeds n_positions 1024" for --input-len 1000
-- --output-len 100), for a static batch and a simulation alike.
function M.test_position_limit_is_said_by_the_flags()
  local function learned(f)
    local T = f.mode == "decode" and f.context + 1 or f.seq
    if T > 1024 then -- as neusight.models.check position_limit raises it: a setting's reason
      require("neusight").infeasible(("gpt model 'm': %s exceeds n_positions 1024"):format(f.mode == "decode"
        and ("context %d + 1 new token"):format(f.context) or ("seq %d"):format(f.seq)))
    end
    return phase(f)
  end
  local says = "serve: --input-len 1000 + --output-len 100: a request holds up to 1099 tokens (input + output - 1), "
    .. "which model 'm' cannot take: gpt model 'm': "
  local ok, err = pcall(S.run, { model = "m", gpu = "g", batch = 4, input_len = 1000, output_len = 100 }, learned)
  eq(ok, false, "static batch fails")
  eq(err, says .. "context 1098 + 1 new token exceeds n_positions 1024", "static: its last step, by the flags")
  ok, err = pcall(S.run, { model = "m", gpu = "g", rate = 1, requests = 5, input_len = 1000, output_len = 100 }, learned)
  eq(ok, false, "simulation fails")
  eq(err:sub(1, #says), says, "simulation: by the flags")
  eq(S.run({ model = "m", gpu = "g", batch = 4, input_len = 1000, output_len = 25 }, learned).kind, "static", "within")
end

function M.test_errors()
  local function fails(o, msg)
    local ok, err = pcall(S.run, o, phase)
    eq(ok, false, msg)
    assert(err:find(msg, 1, true), ("expected %q in %q"):format(msg, err))
  end
  fails({ model = "m", gpu = "g", rate = 0, input_len = 1, output_len = 1 }, "--rate must be a positive number")
  fails({ model = "m", gpu = "g", batch = 2, rate = 1, input_len = 1, output_len = 1 }, "exclude each other")
  fails({ model = "m", gpu = "g", input_len = 1, output_len = 1 }, "needs --batch N")
  fails({ model = "m", gpu = "g", batch = 1, input_len = 1, output_len = 1, chunk = 3 }, "unknown option 'chunk'")
  for _, u in ipairs { 0, -0.5, 1.5, 0 / 0 } do
    fails({ model = "m", gpu = "g", batch = 1, input_len = 1, output_len = 1, gpu_memory_utilization = u },
      "gpu_memory_utilization must be in (0, 1]")
  end
end

-- A trace (requests_text, as `--requests-file` hands it over): exactly its arrivals and lengths are simulated. Spaced
-- far apart, each request runs alone: its TTFT is prefill(1, I) of its own prompt, its TPOT decode(1) over its contexts.
function M.test_trace_gives_exactly_its_requests()
  local text = "arrival_s,input_len,output_len\n0,64,2\n1000,128,3\n2000,256,2\n"
  local r = S.run({ model = "m", gpu = "g", requests_file = "t.csv", requests_text = text }, phase)
  eq(r.requests, 3, "three requests")
  eq(r.max_running, 1, "alone")
  eq(r.ttft_ms.count, 3, "each has a TTFT")
  near(r.ttft_ms.min, prefill_ms(1, 64), 1e-9, "first: prefill(1, 64)")
  near(r.ttft_ms.p50, prefill_ms(1, 128), 1e-9, "second: prefill(1, 128)")
  near(r.ttft_ms.max, prefill_ms(1, 256), 1e-9, "third: prefill(1, 256)")
  near(r.tpot_ms.min, decode_ms(1, 64), 1e-9, "the first's decode step")
  near(r.tpot_ms.p50, (decode_ms(1, 128) + decode_ms(1, 129)) / 2, 1e-9, "the second's two decode steps")
  near(r.tpot_ms.max, decode_ms(1, 256), 1e-9, "the third's")
  near(r.input_len_mean, (64 + 128 + 256) / 3, 1e-12, "its lengths")
  eq(r.output_len_mean, 7 / 3, "output lengths")
  eq(r.trace.file, "t.csv", "named")
  eq(r.trace.duration_s, 2000, "span")
  eq(r.trace.mean_rate_per_s, 2 / 2000, "mean rate")
  eq(r.rate, 2 / 2000, "rate: the trace's mean")
  eq(r.input_len, "64..256", "the range of its prompts")
  near(r.duration_s, 2000 + prefill_ms(1, 256) / 1e3 + decode_ms(1, 256) / 1e3, 1e-9, "first arrival to last finish")
  assert(S.format_table(r):find("3 requests from t.csv (csv: arrival_s, input_len, output_len)", 1, true), "table")
  -- the same requests as a Poisson run's would be those of its own stream: a trace is not drawn
  local burst = S.run({ model = "m", gpu = "g", requests_file = "b.jsonl",
    requests_text = '{"arrival_s":0,"input_len":64,"output_len":2}\n{"arrival_s":0,"input_len":64,"output_len":2}\n' }, phase)
  eq(burst.rate, nil, "all at once: no mean rate")
  -- --time-scale: the arrival times scaled, the rest as it was
  local fast = S.run({ model = "m", gpu = "g", requests_file = "t.csv", requests_text = text, time_scale = 0.5 }, phase)
  eq(fast.trace.duration_s, 1000, "half the span")
  eq(fast.trace.time_scale, 0.5, "said")
  eq(fast.rate, 2 / 1000, "twice the mean rate")
  near(fast.ttft_ms.p50, r.ttft_ms.p50, 1e-9, "still one request at a time")
  eq(r.trace.time_scale, nil, "not said at 1")
  for _, w in ipairs(burst.warnings) do assert(not w:find("capacity", 1, true), "no rate beyond a capacity: " .. w) end
  eq(burst.trace.format, "jsonl", "JSON Lines")
end

-- A rotary model's position limit is held to a trace's longest request, named by its line (its longest prompt and its
-- longest output are two requests here: 900 + 60 and 100 + 200 tokens, neither beyond 1000).
function M.test_trace_position_warning_names_the_request()
  local function limited(f)
    local r = phase(f)
    r.max_positions = 1000
    return r
  end
  local o = { model = "m", gpu = "g", requests_file = "p.csv",
              requests_text = "arrival_s,input_len,output_len\n0,900,60\n100,100,200\n" }
  for _, w in ipairs(S.run(o, limited).warnings) do
    assert(not w:find("max_position_embeddings", 1, true), "within the limit: " .. w)
  end
  o.requests_text = o.requests_text .. "200,950,51\n"
  local said
  for _, w in ipairs(S.run(o, limited).warnings) do said = said or w:find("max_position_embeddings", 1, true) and w end
  assert(said and said:find("p.csv:4: input 950 + output 51 tokens exceeds", 1, true), tostring(said))
end

-- One request is "1 request" in the table (tester10); a burstiness near 1 is printed as given, not rounded to 1.
function M.test_trace_and_burstiness_as_the_table_says_them()
  local one = S.run({ model = "m", gpu = "g", requests_file = "one.csv",
    requests_text = "arrival_s,input_len,output_len\n0,64,2\n" }, phase)
  local text = S.format_table(one)
  assert(text:find("continuous batching: 1 request from one.csv", 1, true), text)
  local near1 = S.run({ model = "m", gpu = "g", rate = 1, requests = 5, input_len = 64, output_len = 2,
    burstiness = 1.0000001 }, phase)
  text = S.format_table(near1)
  assert(text:find("burstiness 1.0000001", 1, true), text)
  -- a trace's request beyond the KV cache is named by its line (tester10 #7)
  local ok, err = pcall(S.run, { model = "m", gpu = "g", requests_file = "big.csv",
    requests_text = "arrival_s,input_len,output_len\n0,64,2\n1,16000000,2\n" }, phase)
  assert(not ok and tostring(err):find("big.csv:3: a request of 16000001 tokens needs", 1, true), tostring(err))
end

function M.test_trace_refuses_what_it_replaces()
  local o = { model = "m", gpu = "g", requests_file = "t.csv", requests_text = "arrival_s,input_len,output_len\n0,1,1\n" }
  for k, v in pairs { rate = 1, batch = 1, requests = 5, input_len = 8, output_len = 8, burstiness = 0.5 } do
    local c = {}
    for a, b in pairs(o) do c[a] = b end
    c[k] = v
    local ok, err = pcall(S.run, c, phase)
    assert(not ok and tostring(err):find("--requests-file t.csv gives each request's arrival and lengths: --"
      .. k:gsub("_", "-"), 1, true), tostring(err))
  end
  o.requests_text = "arrival_s,input_len,output_len\n0,1,1\n1,16777216,2\n"
  local ok, err = pcall(S.run, o, phase)
  assert(not ok and tostring(err):find("t.csv:3: a request of input 16777216 + output 2 tokens", 1, true), tostring(err))
  ok, err = pcall(S.run, { model = "m", gpu = "g", batch = 2, input_len = 8, output_len = 8, burstiness = 0.5 }, phase)
  assert(not ok and tostring(err):find("--burstiness shapes the gaps between --rate's arrivals: it needs --rate", 1, true),
    tostring(err))
  ok, err = pcall(S.run, { model = "m", gpu = "g", rate = 1, input_len = 8, output_len = 8, time_scale = 2 }, phase)
  assert(not ok and tostring(err):find("--time-scale scales a trace's arrival times: it needs --requests-file", 1, true),
    tostring(err))
  ok, err = pcall(S.run, { model = "m", gpu = "g", rate = 1, input_len = 8, output_len = 8, burstiness = 0 }, phase)
  assert(not ok and tostring(err):find("--burstiness must be a positive number (got 0)", 1, true), tostring(err))
end

-- --burstiness: 1 is today's Poisson run, number for number; below 1 the same mean rate, burstier arrivals (more
-- queueing: a higher TTFT p90), said in the report.
function M.test_burstiness_one_changes_nothing()
  local o = { model = "m", gpu = "g", rate = 50, requests = 400, input_len = "uniform:16:256",
              output_len = "uniform:1:64", seed = 3, max_batch = 32 }
  local a = S.run(o, phase)
  o.burstiness = 1
  local b = S.run(o, phase)
  eq(b.ttft_ms.p90, a.ttft_ms.p90, "burstiness 1: the same TTFT")
  eq(b.e2e_ms.mean, a.e2e_ms.mean, "the same end to end")
  eq(b.burstiness, nil, "not said at 1")
  o.burstiness = 0.1
  local c = S.run(o, phase)
  eq(c.burstiness, 0.1, "said")
  assert(c.ttft_ms.p90 > a.ttft_ms.p90, "bursts queue")
  assert(S.format_table(c):find("gamma arrivals (burstiness 0.1) 50 req/s", 1, true), "table")
end

return M
