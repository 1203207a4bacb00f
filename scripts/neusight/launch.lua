-- scripts/neusight/launch.lua — how kernels are launched: eager PyTorch (one host launch per op) or CUDA-graph replay.
--
-- `launch = "eager"` (the default; `--launch eager`): per-kernel times exactly as the predictors give them. The
-- vector families (element-wise, softmax, layer norm) were trained on the fp32 NeuSight micro-benchmarks, timed per
-- PyTorch op: their smallest kernels take ≈ 25 µs (A100-PCIE 25.8 µs, T4 25.0 µs, V100 31.8 µs minimum over
-- ../shared/data/neusight/dataset/train/collect/add/p2.1.0/*.csv, flat up to ~10 MB moved). That floor is the
-- host's launch path, not GPU time, and the MLP has learnt it: a Llama-3-8B bf16 decode step at batch 8 on an H100
-- is ≈ 22 ms, 15 ms of it ~650 tiny element-wise kernels at 20–27 µs each.
--
-- `launch = "graph"` (`--launch graph`): the step is captured once and replayed as a CUDA graph, as serving engines
-- (vLLM, SGLang, TensorRT-LLM) run decode: the GPU sees the kernels back to back and the host cost is gone.
--   * Tensor-core GEMMs (gemm_tc16, gemm_fp8) and fused attention were trained on CUDA-graph timings
--     (AIConfigurator): unchanged. So are fp32 GEMM/BMM, memory kernels (copies, casts, cache writes: priced by
--     the roofline, no floor) and collectives. Those families' least time is their weights' own, in both modes: the
--     predictor never prices a kernel below min_seconds, the smallest latency measured among the family's training
--     rows (weights/<vendor>/<family>/model.toml; gemm_tc16 1.50 µs, the B300 row below), whatever the host does.
--   * A vector kernel (kind elementwise / softmax / layernorm) takes
--         graph_s = min(eager_s, max(flops / fp32 peak, bytes / (bandwidth_efficiency × DRAM bandwidth)) + floor_s)
--     floor_s = 2 µs: a launch inside a graph plus a near-empty kernel. The smallest kernels AIConfigurator measured
--     under CUDA-graph replay on the six training GPUs take 1.50–1.80 µs (B300 1.50, L40S 1.65, GB300 1.76, GB200
--     1.78, B200 1.79, RTX PRO 6000 1.80 µs: minimum `latency` of ../shared/data/aiconfigurator/<gpu>/gemm.csv, a
--     bf16 GEMM of a few rows), and their near-empty bf16 GEMMs (n, k ≤ 64, 296 rows per GPU) 1.84–2.15 µs
--     (median per GPU); 2 µs lies between the two. The evaluation GPUs' files (weights/HELD_OUT) are not read.
--     bandwidth_efficiency = 0.8: large element-wise adds (≥ 250 MB moved) in the NeuSight data reach 0.82
--     (A100-PCIE), 0.89 (V100), 0.75 (T4), 0.74 (P100) of the datasheet bandwidth (median per GPU); at that size
--     the host floor no longer matters, so the same fraction holds inside a graph.
--     The min() keeps a graph-replayed kernel never slower than its eager forecast (the eager one is the same
--     kernel plus a host floor): large kernels keep the MLP's time, small ones lose the ≈ 25 µs floor.
-- Assumption, not measurement: no CUDA-graph timings of vector kernels exist in the shared data; change floor_s or
-- bandwidth_efficiency here, or per GPU name in PARAMS, without recompiling.
--
-- floor_s is also the least a kernel takes that the neusight predictor prices by the roofline over its family's
-- efficiency (scripts/neusight/efficiency.lua) for want of weights for the GPU's vendor (AMD: tensor-core GEMMs,
-- fused attention), in either launch mode: the tile model has learnt such a floor from the same CUDA-graph timings,
-- the roofline has none (a decode attention kernel at batch 1 over 16 tokens came out at 0.02 µs on an MI300X). The
-- engine reads params(gpu).floor_s once per GPU and session (engine/lua/session_predict.cpp launch_floor_read).
local type, error, tostring, math_max, math_min = type, error, tostring, math.max, math.min

local M = {}

M.PARAMS = {
  default = { floor_s = 2e-6, bandwidth_efficiency = 0.8 },
}

--- The kernel kinds whose eager forecasts carry the per-op host floor.
M.VECTOR_KINDS = { elementwise = true, softmax = true, layernorm = true }

M.MODES = { "eager", "graph" }

--- What a graph replay is on a GPU of `vendor`, as the table names it: a CUDA graph on NVIDIA, a HIP graph on AMD
--- (ROCm's PyTorch captures torch.cuda.CUDAGraph as a hipGraph; vLLM's ROCm build replays those). The floor_s above
--- was read off NVIDIA CUDA-graph timings alone: no graph-replayed AMD kernel is in the shared data.
function M.graph_name(vendor)
  return vendor == "amd" and "HIP-graph (hipGraph) replay" or "CUDA-graph replay"
end

--- The GPU runtime PyTorch runs on a GPU of `vendor`, as the memory line names its context: CUDA on NVIDIA, HIP on AMD
--- (ROCm's runtime; its PyTorch keeps the torch.cuda names). Beside graph_name: the one place a vendor's runtime is
--- spelt (neusight.report runtime_name reads it, vendor-neutral for an older --scripts launch.lua without it).
function M.runtime_name(vendor)
  return vendor == "amd" and "HIP" or "CUDA"
end

--- The parameters for one GPU.
function M.params(gpu)
  return M.PARAMS[gpu.name] or M.PARAMS.default
end

--- Seconds of one vector kernel replayed in a CUDA graph. `k` holds compute_s (flops / the peak it uses) and
--- bytes (DRAM bytes moved); `eager_s` is the predictor's time.
function M.graph_seconds(k, eager_s, gpu)
  local p = M.params(gpu)
  local roof = math_max(k.compute_s, k.bytes / (p.bandwidth_efficiency * gpu.mem_bw_gbps * 1e9))
  return math_min(eager_s, roof + p.floor_s)
end

--- Per-kernel seconds under a launch mode. `kernels[i]` = { kind, bytes, compute_s, memory_s } (the engine's view
--- of kernel i, compute_s/memory_s its roofline terms), `seconds[i]` its predicted time. Returns a new array, or
--- nil when nothing changes ("eager").
function M.apply(kernels, seconds, gpu, mode)
  if mode == "eager" then return nil end
  if mode ~= "graph" then
    error("launch mode must be \"eager\" or \"graph\" (got " .. tostring(mode) .. ")", 0)
  end
  local p = M.params(gpu)
  if type(p.floor_s) ~= "number" or p.floor_s < 0 or type(p.bandwidth_efficiency) ~= "number"
      or not (p.bandwidth_efficiency > 0 and p.bandwidth_efficiency <= 1) then
    error("scripts/neusight/launch.lua: floor_s must be >= 0 and bandwidth_efficiency in (0, 1]", 0)
  end
  local out = {}
  for i = 1, #seconds do
    local k, s = kernels[i], seconds[i]
    if M.VECTOR_KINDS[k.kind] and s > 0 then s = M.graph_seconds(k, s, gpu) end
    out[i] = s
  end
  return out
end

return M
