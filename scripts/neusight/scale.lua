-- scripts/neusight/scale.lua — how a time measured on one GPU moves to another (`neusight scale`).
--
-- The hybrid of issue 6: a measured op time is scaled by the ratio of OUR tile predictor's forecasts for the
-- op's kernels on the two GPUs, so the measurement absorbs what the predictor gets wrong on the origin
-- (Habitat instead divides two MLP outputs trained per destination GPU, which fails on GPUs outside its
-- training set). Edit `route` or `scale` to change the rule; no recompiling.
local M = {}
local K = require("neusight.kernels")

-- Which rule each kernel family of an op takes. "ratio": measured × predicted(to) / predicted(from).
-- Kernel-varying ops (GEMM/BMM: the library picks a different kernel per GPU) must use the ratio; vector
-- and memory kernels could be wave-scaled when the trace has launch data, which per-op label CSVs lack.
-- Every family has its rule here ("none": an op without kernels): a family without one, or a rule other than "ratio"
-- or "keep", is an error (it was taken as "ratio", silently).
M.route = { gemm = "ratio", bmm = "ratio", elementwise = "ratio", softmax = "ratio", layernorm = "ratio",
            memory = "ratio", attention = "ratio", collective = "ratio", none = "keep" }

-- Ops of the reference's graphs that PyTorch runs without a GPU kernel although the reference decomposition charges
-- them one, kept as measured like an op without kernels: operator.getitem is, in these FX graphs, a view (basic
-- slicing, None) or a host-side access to a Python value (size()[i], split()[i]); the reference charges it a MEM copy
-- (8 bytes for size()[i]), so its family was "memory" and it moved by the bandwidth ratio (V100 → T4: 0.010 →
-- 0.028 ms). Every getitem of the label traces measures ≤ 0.025 ms forward and nothing in backward: host time.
M.host_ops = { getitem = true }

--- Scaled time of one op in one phase.
---@param op { name: string, op: string, phase: string, family: string, measured_ms: number, from_ms: number, to_ms: number }
---@param from table origin GPU (read-only)
---@param to table destination GPU (read-only)
---@return number milliseconds on the destination
---@return string the rule it took: "ratio", or "keep" (kept as measured: JSON `method`, the share in `rules`)
function M.scale(op, from, to)
  local rule = M.route[op.family]
  if rule ~= "ratio" and rule ~= "keep" then
    error(("neusight.scale route: family '%s' must have the rule \"ratio\" or \"keep\" (got %s)")
      :format(tostring(op.family), rule == nil and "none" or ("'" .. tostring(rule) .. "'")), 0)
  end
  -- An op without GPU kernels (views, host-side getitem on sizes: M.host_ops) costs host time: it does not move.
  if rule == "keep" or M.host_ops[op.op] or op.from_ms <= 0 then return op.measured_ms, "keep" end
  return op.measured_ms * op.to_ms / op.from_ms, "ratio"
end

-- Measured traces with launch data (Chrome JSON, wavescale): which rule each op kind takes (spec
-- method-habitat.md §1.11). "ratio": kernel-varying ops (cuBLAS/cuDNN pick a different kernel per GPU, attention
-- libraries too) — our kernels are built from the op's input shapes (M.kernels) and the measured kernel time moves
-- by predicted(to)/predicted(from). "wave": every kernel is wave-scaled (§1.7) and the pass overhead carried over
-- (§1.8). Kinds not listed: "wave". Backward ops (PyTorch autograd node names) take their forward op's shapes.
M.kind_route = {
  ["aten::addmm"] = "ratio", ["aten::mm"] = "ratio", ["aten::bmm"] = "ratio", ["aten::matmul"] = "ratio",
  ["aten::linear"] = "ratio", ["aten::baddbmm"] = "ratio", ["aten::convolution"] = "ratio",
  ["aten::conv2d"] = "ratio", ["aten::_convolution"] = "ratio", ["aten::cudnn_convolution"] = "ratio",
  ["aten::lstm"] = "ratio", ["aten::scaled_dot_product_attention"] = "ratio",
  -- autograd nodes of PyTorch-profiler traces
  MmBackward0 = "ratio", AddmmBackward0 = "ratio", BmmBackward0 = "ratio", BaddbmmBackward0 = "ratio",
  ScaledDotProductEfficientAttentionBackward0 = "ratio", ScaledDotProductFlashAttentionBackward0 = "ratio",
  ScaledDotProductCudnnAttentionBackward0 = "ratio",
  -- mixture-of-experts GEMMs (HF transformers' grouped experts)
  ["aten::_grouped_mm"] = "ratio", GroupedMmBackward0 = "ratio",
  -- wavescale op names (torch function names)
  addmm = "ratio", mm = "ratio", bmm = "ratio", matmul = "ratio", linear = "ratio", baddbmm = "ratio",
  conv2d = "ratio", lstm = "ratio",
}

--- "ratio" or "wave" for one op kind of a measured trace.
---@param kind string
---@return string
function M.route_of(kind)
  return M.kind_route[kind] or "wave"
end

-- Element types as PyTorch's profiler names them ("Input type": float, c10::BFloat16, …) through kernels.lua's
-- dtype_name. A float GEMM is taken as true fp32: PyTorch's default (torch.backends.cuda.matmul.allow_tf32 = False);
-- the trace does not say when TF32 was allowed. fp64 is no compute type of ours (compute_dtype): such ops are not understood.
local function trace_dtype(types)
  if #types == 0 then return "fp32" end -- wavescale traces carry no types: fp32, as their data
  return K.compute_dtype(types[1]) -- a chrome input's "" (no type recorded): nil, nothing guessed
end

-- Position of is_causal among the inputs of the attention ops a trace records (PyTorch's native_functions.yaml).
M.causal_arg = {
  ["aten::scaled_dot_product_attention"] = 6, ["aten::_scaled_dot_product_efficient_attention"] = 7,
  ["aten::_scaled_dot_product_cudnn_attention"] = 7, ["aten::_scaled_dot_product_flash_attention"] = 5,
}

local function prod(t, first, last)
  local n = 1
  for i = first, last do n = n * t[i] end
  return n
end

-- (b, m, n, k) of a[..., M, K] x b[..., K, N] in the data's convention (m rows, n the reduction, k columns):
-- a 2-D right operand folds the left one's leading dims into rows; equal leading dims make a batch.
local function product(a, b)
  if not a or not b or #a < 2 or #b < 2 or a[#a] ~= b[#b - 1] then return nil end
  if #b == 2 then return 1, prod(a, 1, #a - 1), a[#a], b[2] end
  if #a ~= #b then return nil end
  for i = 1, #a - 2 do
    if a[i] ~= b[i] then return nil end
  end
  return prod(a, 1, #a - 2), a[#a - 1], a[#a], b[#b]
end

-- Dims we can price: positive, and small enough that FLOPs stay exact (an empty tensor, or a shape no GPU could
-- hold, is an op we do not understand: wave-scaled and counted in the warning).
local function sane(...)
  local n = 1.0
  for _, d in ipairs({ ... }) do
    if math.type(d) ~= "integer" or d < 1 then return false end
    n = n * d
  end
  return n <= 2 ^ 50
end

local function gemm(b, m, n, k, dtype)
  if not sane(b, m, n, k) or not sane(b, m, n) or not sane(b, n, k) then return nil end
  if b == 1 then return K.linear(m, n, k, dtype) end
  return K.bmm(b, m, n, k, dtype)
end

-- The most new tokens per sequence a decode step attends with (speculative decoding verifies a few at once).
M.decode_queries = 16

--- Our kernels for one op of a measured trace that route_of sends to the ratio: GEMMs from the operands' shapes
--- (a backward op: the two GEMMs of its forward product, dA = dC·Bᵀ and dB = Aᵀ·dC), fused attention from the
--- query/key/value shapes. nil when the shapes are missing or not understood: the op is then wave-scaled and
--- counted in a warning.
---@param op { kind: string, forward: string, phase: string, inputs: integer[][], types: string[], values: string[] }
---@return table[]|nil
function M.kernels(op)
  local fwd = op.forward ~= "" and op.forward or op.kind
  fwd = fwd:gsub("^aten::", "")
  local inputs, types = op.inputs, op.types
  local dtype = trace_dtype(types)
  if not dtype then return nil end
  local backward = op.phase == "backward"
  local b, m, n, k
  if fwd == "addmm" or fwd == "baddbmm" then
    b, m, n, k = product(inputs[2], inputs[3])
  elseif fwd == "mm" or fwd == "bmm" or fwd == "matmul" then
    b, m, n, k = product(inputs[1], inputs[2])
  elseif fwd == "linear" then
    local x, w = inputs[1], inputs[2]
    if x and w and #x >= 2 and #w == 2 and x[#x] == w[2] then b, m, n, k = 1, prod(x, 1, #x - 1), w[2], w[1] end
  elseif fwd == "_grouped_mm" then
    -- tokens x[T, K] sorted by expert, weights w[E, K, N], offsets: the group sizes are data (not in the trace),
    -- taken as balanced, ⌈T / E⌉ rows per expert — a batch of E GEMMs with the tokens' FLOPs and every
    -- expert's weights read once.
    local x, w = inputs[1], inputs[2]
    if x and w and #x == 2 and #w == 3 and x[2] == w[2] then b, m, n, k = w[1], (x[1] + w[1] - 1) // w[1], w[2], w[3] end
  elseif M.causal_arg["aten::" .. fwd] then
    local q, kk, v = inputs[1], inputs[2], inputs[3]
    if not (q and kk and v and #q == 4 and #kk == 4 and #v == 4) then return nil end
    local mask = inputs[4] and #inputs[4] > 0
    local causal = (op.values[M.causal_arg["aten::" .. fwd]] or "") == "True" and not mask
    local kind = (causal and "causal" or "full") .. (backward and "_bwd" or "")
    -- q (B, H, Sq, D), k (B, Hkv, Skv, D), v (B, Hkv, Skv, Dv)
    if not (sane(q[1], q[2], q[3], kk[3], q[4]) and sane(v[4]) and sane(kk[2]) and q[2] % kk[2] == 0 and q[3] <= kk[3]) then
      return nil
    end
    -- PyTorch's is_causal with fewer queries than keys is aligned top-left (the docs' "upper left causal bias"; the
    -- dispatcher keeps such calls off its flash backend, the efficient and cuDNN kernels skip the key blocks past the
    -- diagonal): query i sees keys 0..i, so the keys past Sq are neither read nor multiplied. That is causal
    -- attention over the first Sq keys, not the bottom-right count of a prefill over a cache (kernels.lua's
    -- causal_pairs), which a model graph uses. The flash op itself, called directly with Sq < Skv, is
    -- FlashAttention-2's bottom-right mask: kept.
    local skv = (causal and fwd ~= "_scaled_dot_product_flash_attention") and q[3] or kk[3]
    -- a forward pass of a few queries over more keys: new tokens attending over a KV cache (a decode step, or a
    -- speculative one; HF passes no causal flag there), the kernel ops/decode_attention.lua forecasts, memory-bound
    -- on the cache. The rule goes by the shapes alone, and so does the kernel: the op carries Q, K, V, the mask's
    -- shape and is_causal, nothing that says where K and V came from, and the attention libraries pick their kernel
    -- from the same (FlashAttention-2's forward takes its split-KV path whenever the query blocks cannot fill the
    -- SMs, causal or not; with an explicit mask PyTorch's SDPA takes its memory-efficient or math backend, which does
    -- not split the keys: a masked op of this shape is priced as decode by assumption). So an encoder-decoder's
    -- cross-attention of up to decode_queries decoder tokens over the encoder's keys (Whisper's decoder: 1 new token over 1,500 cached encoder keys a step) is this kernel too:
    -- a few query rows streaming K and V once, which the prefill tiling (one block per query head and 128-query
    -- tile, trained on prompts as long as their keys) does not describe. Its FLOPs count the causal pairs, fewer
    -- than a cross-attention's by decode_queries² / 2 at most (0.5 % of 16 queries over 1,500 keys). More queries
    -- over more keys (chunked prefill over a cache, a cross-attention over a whole target sequence) stay prefill
    -- kernels, as the flags say.
    if not backward and q[3] < skv and q[3] <= M.decode_queries then kind = "decode" end
    return { K.attention(kind, q[1], q[3], skv, q[4], q[2], kk[2], dtype, v[4]) }
  else
    return nil
  end
  if not b or not gemm(b, m, n, k, dtype) then return nil end
  if not backward then return { gemm(b, m, n, k, dtype) } end
  return { gemm(b, m, k, n, dtype), gemm(b, n, m, k, dtype) }
end

--- A wave-scaled kernel under one wave on both GPUs (⌊B / W⌋ = 0 on each, W = SMs × blocks resident per SM): whether
--- its memory-bound share moves with the bandwidth ratio (true), as the share of a kernel of a wave or more does, or
--- the kernel keeps its time (false). Habitat keeps every such kernel (spec method-habitat.md §1.5 case A, §1.6): too
--- small to load the memory system. That holds for a grid of fewer blocks than SMs, which leaves SMs idle (one-block
--- copies, reductions of a few rows); a grid with a block on every SM of both GPUs streams through the whole memory
--- system as a multi-wave one does (PyTorch's foreach optimizers: multi_tensor_apply launches 320 blocks of 512
--- threads, under the 528-block wave of an H100 or H200, each moving megabytes), so its memory-bound share (all of it
--- without counters, the metric-free rule's assumption; γ with them) moves with the bandwidth.
---@param k { blocks: integer, threads_per_block: integer, wave_from: integer, wave_to: integer, duration_ms: number }
---@param from table origin GPU (read-only)
---@param to table destination GPU (read-only)
---@return boolean
function M.sub_wave_streams(k, from, to)
  return k.blocks >= from.num_sm and k.blocks >= to.num_sm and k.duration_ms >= M.sub_wave_stream_min_ms
end
--- The shortest sub-wave kernel sub_wave_streams moves with the bandwidth: one of a few microseconds is its launch
--- and its tail (a GPU's kernel floor is 2–5 µs), not its bytes, whatever its grid (review finding: a 3 µs kernel of
--- 132+ blocks moved × 1.43 from an H200 to an H100). 10 µs: an H100 streams 33 MB in it.
M.sub_wave_stream_min_ms = 0.01

--- Kernels the wave rule does not price (method-habitat.md §1.6: it moves a multi-wave kernel by the memory-bandwidth
--- ratio and keeps a sub-wave one): a collective runs at the interconnect's speed, an attention kernel of an op the
--- ratio rule does not rebuild (flash-attn's own ops, a custom extension's; torch SDPA takes the ratio) mostly at the
--- tensor cores'. `neusight scale` says how many wave-scaled ops launched each and their time, so that they are never
--- priced silently. Plain substrings of the lower-cased kernel name, first match wins; `what` names them in the warning;
--- `unless`: substrings that keep a name out of the entry. FlashInfer's norm, sampling, activation and quantization
--- kernels and its paged-KV append (vLLM's and SGLang's RMSNorm, top-k/top-p, SiLU-and-mul, KV writes) are memory-bound
--- kernels the wave rule does price: not attention (review20: "flash" alone called them FlashAttention).
M.wave_unpriced = {
  { substring = "nccl", what = "collective (NCCL) kernels, which run at the interconnect's speed" },
  { substring = "flash", what = "attention kernels (FlashAttention), which run at the tensor cores' speed",
    unless = { "flashinfer::norm", "flashinfer::sampling", "flashinfer::activation", "flashinfer::quantization",
               "appendpagedkvcache" } },
  { substring = "fmha", what = "attention kernels (FlashAttention), which run at the tensor cores' speed" },
}

--- What a wave-scaled op's kernels are that the wave rule does not price (M.wave_unpriced's `what`), or nil.
---@param names string[] the op's kernel names
---@return string?
function M.wave_unpriced_of(names)
  for _, name in ipairs(names) do
    local n = name:lower()
    for _, w in ipairs(M.wave_unpriced) do
      local kept = n:find(w.substring, 1, true) ~= nil
      for _, u in ipairs(w.unless or {}) do kept = kept and not n:find(u, 1, true) end
      if kept then return w.what end
    end
  end
  return nil
end

--- The least share of a measured step (hf_trace.py's `step_ms_mean`, CUDA events outside the profiler) its kernels may
--- run before `neusight scale` warns that the step is launch- or host-bound: the kernel time scale forecasts is then
--- not what the step takes, on either GPU (the shipped H200 Llama bf16 decode step: 0.53 ms of kernels in a 3.29 ms
--- step, 16 %). A fraction in [0, 1]; 0 never warns.
M.kernel_share_min = 0.2

-- A kernel is bound by the resource whose roofline term is larger on both GPUs; a kernel whose binding resource
-- differs between the two is "mixed".
---@param k { compute_from_s: number, memory_from_s: number, compute_to_s: number, memory_to_s: number }
function M.bound(k)
  local cf, mf, ct, mt = k.compute_from_s, k.memory_from_s, k.compute_to_s, k.memory_to_s
  if cf > mf and ct > mt then return "compute" end
  if mf >= cf and mt >= ct then return "memory" end
  return "mixed"
end

-- What binds a kernel: the GPU fields of its compute and of its memory system. Two GPUs that agree on every
-- field of one set differ only in the other as far as a kernel bound by it can tell. The compute set is the fields
-- every kernel's compute depends on (SMs, clocks, occupancy limits) plus the peak of the one unit the kernel runs on
-- (k.peak: the GPU file key core/roofline.cpp unit_peak_of picks for its kind and dtype — fp32 SIMT for a vector
-- kernel or an fp32 GEMM, the tensor cores of its dtype for a bf16 GEMM): a peak of a unit it does not use (an fp8
-- peak under an fp32 GEMM) cannot move it. A kernel that names no peak is compared on every peak.
M.compute_fields = { "architecture", "num_sm", "cores_per_sm", "base_clock_mhz", "boost_clock_mhz",
                     "max_threads_per_sm", "max_blocks_per_sm", "max_warps_per_sm", "max_regs_per_sm",
                     "max_smem_per_sm_kb", "max_smem_per_block_kb" }
M.peak_fields = { "peak_fp32_tflops", "peak_fp32_matrix_tflops", "peak_tf32_tflops", "peak_fp16_tflops",
                  "peak_bf16_tflops", "peak_fp8_tflops" }
M.memory_fields = { "mem_bw_gbps", "l2_mb" }

local function same(a, b, fields)
  for _, f in ipairs(fields) do
    if a[f] ~= b[f] then return false end
  end
  return true
end

-- Whether two GPUs share the compute a kernel runs on (see compute_fields).
local function same_compute(a, b, k)
  if not same(a, b, M.compute_fields) then return false end
  if k.peak and k.peak ~= "" then return a[k.peak] == b[k.peak] end
  return same(a, b, M.peak_fields)
end

--- The destination time of one kernel the ratio rule scales, with physics over the predictor. When the two GPUs
--- share every compute field (they differ only in memory: an H100 and an H200), a kernel compute-bound on both
--- (roofline terms from its own FLOPs and bytes and the GPUs' ceilings) keeps its origin time, and any other
--- moves at most by the bandwidth ratio, in its direction; when they share the memory system, the same holds with
--- the FLOP peak of the kernel's dtype. Only the peak of the kernel's own unit (k.peak) counts as its compute. A
--- learned predictor's sensitivity to a resource that does not bind (the
--- fp32 GEMM MLPs see bandwidth and capacity whatever binds, tests/core/test_forecast_physics.cpp) then never
--- moves a measured time. Other pairs take the predictor's ratio within M.envelope's bounds: asking it for a hybrid GPU (one GPU's SMs with
--- the other's memory) to separate the two resources extrapolated far outside its training data
--- (tests/bench/scale_pairs.sh: mean 17.0 % → 33.7 %, one pair 599 %).
---@param k { from_s: number, to_s: number, compute_from_s: number, memory_from_s: number, compute_to_s: number, memory_to_s: number, peak: string? }
---@param from table origin GPU (read-only)
---@param to table destination GPU (read-only)
---@return number seconds on the destination
---@return string how: kept, bounded by a resource ratio, or the predictor's (shown as the op's "physics" in JSON)
function M.destination(k, from, to)
  if not (k.from_s > 0) then return k.to_s, "predictor" end
  local b, r, resource = M.bound(k), nil, nil
  if same_compute(from, to, k) then
    if b == "compute" then return k.from_s, "compute-bound, same compute: kept" end
    if k.memory_from_s > 0 then r, resource = k.memory_to_s / k.memory_from_s, "bandwidth" end
  elseif same(from, to, M.memory_fields) then
    if b == "memory" then return k.from_s, "bandwidth-bound, same memory: kept" end
    if k.compute_from_s > 0 then r, resource = k.compute_to_s / k.compute_from_s, "peak" end
  end
  if not r then return M.envelope(k, from, to) end
  local raw = k.to_s / k.from_s
  local ratio = math.min(math.max(raw, math.min(1, r)), math.max(1, r))
  return k.from_s * ratio, ratio == raw and "predictor (within the " .. resource .. " ratio)"
    or "predictor, bounded by the " .. resource .. " ratio"
end

-- The resources a kernel's time can depend on, each a capacity (more is never slower): the SMs and their occupancy
-- limits, the clock (a latency-bound kernel — a dependent chain of instructions, one small block — runs at the clock
-- whatever the lanes: an A100's per-SM bf16 rate is 1.65x an A10G's but its clock 1410 MHz against 1710, so such a
-- kernel may run 21 % slower there; the peaks alone said never slower), the peak of the kernel's unit in all and per
-- SM (its clock × lanes: a kernel of one wave runs at the per-SM rate), the bandwidth and the L2.
M.envelope_fields = { "num_sm", "boost_clock_mhz", "max_threads_per_sm", "max_blocks_per_sm", "max_warps_per_sm",
                      "max_regs_per_sm", "max_smem_per_sm_kb", "mem_bw_gbps", "l2_mb" }

--- The predictor's ratio for two GPUs that differ in compute and memory alike, held to the envelope of their resource
--- ratios: a kernel slows by at most the largest factor any resource it may depend on shrinks by (from / to over
--- M.envelope_fields and the peak of its unit, k.peak, in all and per SM; every peak when it names none), and speeds up
--- by at most the largest factor one grows by. So a GPU with at least every resource of the origin never runs a kernel
--- slower (a B200 against an H200: more SMs, bandwidth, L2, the same per-SM fp32 rate, a boost clock 0.8 % lower: at
--- most 0.8 % slower) — the fp32 GEMM MLPs, outside
--- their training GPUs there, said +29 % for GPT-2's addmm — and the bounds of B → A are those of A → B inverted, so
--- A → B → A returns the origin. A resource neither GPU gives takes no part; one that only one of them gives is an
--- error, never a narrower envelope (the bound it would set is unknown) — except, for a kernel that names no peak
--- (every peak counts), a peak one GPU gives as 0 (its file's "no such units": the kernel cannot be running on them).
---@return number seconds on the destination
---@return string the rule
function M.envelope(k, from, to)
  local lo, hi = 1, 1
  local named = k.peak and k.peak ~= ""
  local function given(v) return type(v) == "number" and v > 0 end
  local function gpu_name(g) return tostring(g.source or g.name or (g == from and "the origin" or "the destination")) end
  -- `what`: the field (nil for the per-SM peaks, derived from fields already taken)
  local function take(a, b, what)
    if given(a) and given(b) then
      lo, hi = math.min(lo, a / b), math.max(hi, a / b)
      return
    end
    if not what or not (given(a) or given(b)) then return end  -- neither GPU gives it: no part
    if not named and what:find("^peak_") and (a == 0 or b == 0) then return end  -- no such units on one GPU
    local has, lacks = from, to
    if given(b) then has, lacks = to, from end
    error(("neusight.scale envelope: %s gives no %s but %s does (%s): the envelope of the GPUs' resource ratios "
      .. "cannot leave it out (that would narrow the bound without a word); give it in the GPU file"):format(gpu_name(lacks),
      what, gpu_name(has), tostring(has[what])), 0)
  end
  for _, f in ipairs(M.envelope_fields) do take(from[f], to[f], f) end
  local peaks = named and { k.peak } or M.peak_fields
  for _, p in ipairs(peaks) do
    take(from[p], to[p], p)
    if type(from[p]) == "number" and type(to[p]) == "number" and (from.num_sm or 0) > 0 and (to.num_sm or 0) > 0 then
      take(from[p] / from.num_sm, to[p] / to.num_sm)
    end
  end
  local raw = k.to_s / k.from_s
  local ratio = math.min(math.max(raw, lo), hi)
  if ratio == raw then return k.to_s, "predictor" end
  return k.from_s * ratio, "predictor, bounded by the resource ratios"
end

return M
