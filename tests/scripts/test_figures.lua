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

return M
