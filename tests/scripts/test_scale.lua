-- tests/scripts/test_scale.lua — scripts/neusight/scale.lua on measured traces: the kernels built from an op's
-- shapes (forward and backward GEMMs, grouped MoE GEMMs, fused attention) and the per-kernel physics rule.
local S = require "neusight.scale"

local function eq(got, want, what)
  if got ~= want then error(("%s:\n  expected %s\n  got      %s"):format(what, tostring(want), tostring(got)), 2) end
end

local function dims(k) return ("%s %s b=%d m=%d n=%d k=%d"):format(k.kind, k.dtype, k.b, k.m, k.n, k.k) end

local function op(t)
  t.forward, t.phase = t.forward or "", t.phase or "forward"
  t.types, t.values = t.types or {}, t.values or {}
  return t
end

local M = {}

-- Every kernel family of an op has its rule in S.route: a family without one, or a misspelt rule, is an error (both
-- were taken as "ratio", silently).
-- The reference charges getitem (a view or size()[i] in PyTorch: no GPU kernel) a MEM copy: it was scaled by the
-- bandwidth ratio as a "memory" op; it is host time, kept as measured.
function M.test_scale_keeps_host_side_getitem()
  local item = { name = "getitem", op = "getitem", phase = "forward", family = "memory", measured_ms = 0.010,
                 from_ms = 8.9e-6, to_ms = 2.5e-5 }
  eq(S.scale(item), 0.010, "getitem: kept as measured")
  item.op = "VECadd"
  eq(S.scale(item), 0.010 * 2.5e-5 / 8.9e-6, "a real memory kernel: the ratio")
end

function M.test_scale_route_has_every_family()
  local one = { name = "x", op = "x", phase = "forward", measured_ms = 2, from_ms = 1, to_ms = 3 }
  for _, f in ipairs { "gemm", "bmm", "elementwise", "softmax", "layernorm", "memory", "attention", "collective" } do
    one.family = f
    eq(S.scale(one), 6, f .. ": the ratio")
  end
  one.family = "none"
  eq(S.scale(one), 2, "none: kept")
  one.family = "conv"
  local ok, err = pcall(S.scale, one)
  eq(ok, false, "an unknown family")
  eq(err, "neusight.scale route: family 'conv' must have the rule \"ratio\" or \"keep\" (got none)", "its message")
  S.route.gemm = "ration"
  one.family = "gemm"
  ok, err = pcall(S.scale, one)
  S.route.gemm = "ratio"
  eq(ok, false, "a misspelt rule")
  eq(err, "neusight.scale route: family 'gemm' must have the rule \"ratio\" or \"keep\" (got 'ration')", "its message")
end

function M.test_forward_gemms()
  local ks = S.kernels(op { kind = "aten::addmm", inputs = { { 2304 }, { 2048, 768 }, { 768, 2304 }, {}, {} },
                            types = { "float", "float", "float", "Scalar", "Scalar" } })
  eq(#ks, 1, "addmm: one GEMM")
  eq(dims(ks[1]), "gemm fp32 b=1 m=2048 n=768 k=2304", "addmm(bias, A, B): rows, reduction, columns")
  ks = S.kernels(op { kind = "aten::linear", inputs = { { 2, 512, 2048 }, { 8192, 2048 }, {} },
                      types = { "c10::BFloat16", "c10::BFloat16", "" } })
  eq(dims(ks[1]), "gemm bf16 b=1 m=1024 n=2048 k=8192", "linear: leading dims fold into rows, W is [out, in]")
  ks = S.kernels(op { kind = "aten::matmul", inputs = { { 4, 12, 512, 64 }, { 4, 12, 64, 512 } },
                      types = { "c10::Half", "c10::Half" } })
  eq(dims(ks[1]), "bmm fp16 b=48 m=512 n=64 k=512", "matmul: equal leading dims are a batch")
  eq(S.kernels(op { kind = "aten::mm", inputs = { { 8, 4 }, { 5, 6 } }, types = { "float", "float" } }), nil,
     "inner dims disagree: not understood")
  eq(S.kernels(op { kind = "aten::mm", inputs = { { 8, 4 }, { 4, 6 } }, types = { "double", "double" } }), nil,
     "a dtype we have no kernels for")
  eq(S.kernels(op { kind = "aten::mm", inputs = { { 0, 4 }, { 4, 6 } }, types = { "float", "float" } }), nil,
     "an empty tensor")
  eq(S.kernels(op { kind = "aten::mm", inputs = { { 1 << 40, 1 << 20 }, { 1 << 20, 6 } }, types = { "float", "float" } }),
     nil, "a shape no GPU holds")
  eq(S.kernels(op { kind = "aten::scaled_dot_product_attention", inputs = { { 2, 6, 8, 4 }, { 2, 4, 8, 4 }, { 2, 4, 8, 4 } },
                    types = { "float", "float", "float" }, values = {} }), nil, "query heads not a multiple of kv heads")
end

function M.test_backward_gemms_take_the_forward_shapes()
  local ks = S.kernels(op { kind = "MmBackward0", forward = "aten::mm", phase = "backward",
                            inputs = { { 2048, 768 }, { 768, 50257 } }, types = { "float", "float" } })
  eq(#ks, 2, "dA and dB")
  eq(dims(ks[1]), "gemm fp32 b=1 m=2048 n=50257 k=768", "dA = dC·Bᵀ")
  eq(dims(ks[2]), "gemm fp32 b=1 m=768 n=2048 k=50257", "dB = Aᵀ·dC")
  eq(ks[1].flops + ks[2].flops, 2 * 2 * 2048 * 768 * 50257, "twice the forward FLOPs")
  eq(S.kernels(op { kind = "MmBackward0", phase = "backward" }), nil, "no linked forward op: not understood")
end

function M.test_grouped_experts()
  local ks = S.kernels(op { kind = "aten::_grouped_mm", inputs = { { 2048, 4096 }, { 8, 4096, 28672 }, { 8 }, {}, {} },
                            types = { "c10::BFloat16", "c10::BFloat16", "int", "", "" } })
  eq(dims(ks[1]), "bmm bf16 b=8 m=256 n=4096 k=28672", "balanced routing: ⌈T / E⌉ rows per expert")
  eq(ks[1].flops, 2 * 2048 * 4096 * 28672, "the tokens' FLOPs")
end

function M.test_attention_kinds()
  local q, kv = { 2, 32, 512, 64 }, { 2, 8, 512, 64 }
  local t = { "c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "", "Scalar", "Scalar", "Scalar", "Scalar" }
  local ks = S.kernels(op { kind = "aten::scaled_dot_product_attention", inputs = { q, kv, kv, {}, {}, {}, {}, {} },
                            types = t, values = { "", "", "", "", "0.", "True", "0.125", "True" } })
  eq(ks[1].kind .. " " .. ks[1].op .. " " .. ks[1].rows .. "/" .. ks[1].hidden, "attention causal 32/8", "causal GQA")
  ks = S.kernels(op { kind = "ScaledDotProductCudnnAttentionBackward0", phase = "backward",
                      forward = "aten::_scaled_dot_product_cudnn_attention", inputs = { q, kv, kv, {}, {}, {}, {}, {}, {} },
                      types = t, values = { "", "", "", "", "True", "0.", "True", "False", "0.125" } })
  eq(ks[1].op, "causal_bwd", "backward of the cuDNN op: is_causal is its 7th input")
  ks = S.kernels(op { kind = "aten::scaled_dot_product_attention", inputs = { q, kv, kv, { 2, 1, 512, 512 } },
                      types = t, values = { "", "", "", "", "0.", "True" } })
  eq(ks[1].op, "full", "an explicit mask: every pair is computed")
  -- a decode step (tests/fixtures/traces/hf/llama-bf16-decode.json): one query over 1,025 cached keys, no causal flag:
  -- the decode kernel the forecast uses (ops/decode_attention.lua), not a prefill one with one row
  local dq, dkv = { 8, 32, 1, 64 }, { 8, 8, 1025, 64 }
  ks = S.kernels(op { kind = "aten::scaled_dot_product_attention", inputs = { dq, dkv, dkv, {}, {}, {}, {}, {} },
                      types = t, values = { "", "", "", "", "0.", "False", "0.125", "True" } })
  eq(ks[1].op, "decode", "queries over a longer KV cache: decode attention")
  local K = require "neusight.kernels"
  eq(ks[1].bytes, K.attention("decode", 8, 1, 1025, 64, 32, 8, "bf16").bytes, "the decode op's bytes")
  ks = S.kernels(op { kind = "aten::scaled_dot_product_attention", inputs = { q, kv, kv, {}, {}, {}, {}, {} },
                      types = t, values = { "", "", "", "", "0.", "False", "0.125", "True" } })
  eq(ks[1].op, "full", "as many queries as keys, no causal flag: full prefill attention")
  -- cross-attention (decoder queries over encoder keys) and chunked prefill over a cache: more than a few queries
  local cq, ckv = { 2, 8, 128, 64 }, { 2, 8, 512, 64 }
  ks = S.kernels(op { kind = "aten::scaled_dot_product_attention", inputs = { cq, ckv, ckv, {}, {}, {}, {}, {} },
                      types = t, values = { "", "", "", "", "0.", "False", "0.125", "True" } })
  eq(ks[1].op, "full", "128 queries over 512 keys, not causal: full attention, not a decode kernel")
  ks = S.kernels(op { kind = "aten::scaled_dot_product_attention", inputs = { cq, ckv, ckv, { 2, 1, 128, 512 } },
                      types = t, values = { "", "", "", "", "0.", "True" } })
  eq(ks[1].op, "full", "an explicit mask with fewer queries than keys: every pair")
  ks = S.kernels(op { kind = "aten::scaled_dot_product_attention", inputs = { { 8, 32, 4, 64 }, dkv, dkv, {}, {}, {}, {}, {} },
                      types = t, values = { "", "", "", "", "0.", "False", "0.125", "True" } })
  eq(ks[1].op, "decode", "a speculative step of 4 tokens over the cache")
  -- is_causal with fewer queries than keys: PyTorch aligns the mask top-left, so query i sees keys 0..i and the
  -- kernel is causal attention over the first Sq keys (not bottom-right, not the decode kernel)
  local flag = { "", "", "", "", "0.", "True", "0.125", "True" }
  for _, sq in ipairs({ 4, 128 }) do
    ks = S.kernels(op { kind = "aten::scaled_dot_product_attention", inputs = { { 2, 32, sq, 64 }, ckv, ckv, {}, {}, {}, {}, {} },
                        types = t, values = flag })
    local want = K.attention("causal", 2, sq, sq, 64, 32, 8, "bf16")
    eq(ks[1].op, "causal", sq .. " causal queries over 512 keys: causal attention")
    eq(ks[1].flops, want.flops, sq .. " causal queries over 512 keys: the top-left pairs' FLOPs")
    eq(ks[1].bytes, want.bytes, sq .. " causal queries over 512 keys: the first Sq keys' bytes")
  end
  -- the flash op called directly keeps FlashAttention-2's bottom-right mask (PyTorch's dispatcher never sends a
  -- non-square causal call there): all 512 keys, the last query at the last key
  ks = S.kernels(op { kind = "aten::_scaled_dot_product_flash_attention", inputs = { cq, ckv, ckv, {}, {} },
                      types = t, values = { "", "", "", "0.", "True" } })
  eq(ks[1].flops, K.attention("causal", 2, 128, 512, 64, 8, 8, "bf16").flops, "the flash op: bottom-right over every key")
  ks = S.kernels(op { kind = "ScaledDotProductEfficientAttentionBackward0", phase = "backward",
                      forward = "aten::_scaled_dot_product_efficient_attention",
                      inputs = { cq, ckv, ckv, {}, {}, {}, {}, {} }, types = t,
                      values = { "", "", "", "", "False", "0.", "True", "" } })
  eq(ks[1].op .. " " .. ks[1].flops, "causal_bwd " .. K.attention("causal_bwd", 2, 128, 128, 64, 8, 8, "bf16").flops,
     "the backward of top-left causal attention: over the first Sq keys")
end

-- Cross-attention of a few decoder tokens over an encoder's keys (Whisper-large's decoder: 20 heads of 64, 1,500
-- encoder positions) has the very shapes of a decode step over a cache of 1,500 tokens, and the op carries nothing
-- else (no cache or cross marker; is_causal False, a mask only with padding): the libraries run the same kernel for
-- both, so it is priced as the decode kernel ops/decode_attention.lua builds, with or without a mask; 17 queries, or
-- the backward of a training step, are prefill attention.
function M.test_cross_attention_of_few_queries_is_the_decode_kernel()
  local t = { "c10::Half", "c10::Half", "c10::Half", "", "Scalar", "Scalar", "Scalar", "Scalar" }
  local no_flag = { "", "", "", "", "0.", "False", "", "False" }
  local enc = { 1, 20, 1500, 64 }
  local rule = load_op("decode_attention")
  for _, sq in ipairs({ 1, 4, 16 }) do
    local q = { 1, 20, sq, 64 }
    local want = rule.forward(make_node({ op = "decode_attention", name = "x", dtype = "fp16", training = false,
                                          inputs = { q, enc, enc }, output = q }))[1]
    for _, mask in ipairs({ {}, { 1, 1, sq, 1500 } }) do
      local what = ("%d decoder tokens over 1,500 encoder keys%s"):format(sq, #mask > 0 and ", padding mask" or "")
      local ks = S.kernels(op { kind = "aten::scaled_dot_product_attention", inputs = { q, enc, enc, mask, {}, {}, {}, {} },
                                types = t, values = no_flag })
      eq(#ks, 1, what .. ": one kernel")
      for _, f in ipairs({ "name", "op", "b", "m", "k", "n", "rows", "hidden", "flops", "bytes" }) do
        eq(ks[1][f], want[f], what .. ": the decode kernel's " .. f)
      end
      -- the causal count of a decode kernel: short of a cross-attention's every pair by sq (sq - 1) / 2 only
      eq(sq * 1500 * 4 * 20 * 64 - ks[1].flops, 4 * 20 * 64 * sq * (sq - 1) // 2, what .. ": FLOPs")
    end
  end
  local q = { 1, 20, 17, 64 }
  local ks = S.kernels(op { kind = "aten::scaled_dot_product_attention", inputs = { q, enc, enc, {}, {}, {}, {}, {} },
                            types = t, values = no_flag })
  eq(ks[1].op .. " " .. ks[1].name, "full FlashAttention", "17 decoder tokens: prefill attention over every pair")
  ks = S.kernels(op { kind = "ScaledDotProductFlashAttentionBackward0", phase = "backward",
                      forward = "aten::_scaled_dot_product_flash_attention",
                      inputs = { { 1, 20, 4, 64 }, enc, enc, {}, {}, {} }, types = t, values = { "", "", "", "0.", "False" } })
  eq(ks[1].op, "full_bwd", "the backward of a few queries' cross-attention: FlashAttention's backward")
end

function M.test_physics()
  local a = { num_sm = 132, mem_bw_gbps = 4800, l2_mb = 60, peak_bf16_tflops = 989 }
  local b = { num_sm = 132, mem_bw_gbps = 3350, l2_mb = 60, peak_bf16_tflops = 989 }
  local c = { num_sm = 114, mem_bw_gbps = 4800, l2_mb = 60, peak_bf16_tflops = 756 }
  local compute = { from_s = 1e-3, to_s = 1.2e-3, compute_from_s = 9e-4, memory_from_s = 1e-4,
                    compute_to_s = 9e-4, memory_to_s = 2e-4 }
  local memory = { from_s = 1e-3, to_s = 0.9e-3, compute_from_s = 1e-5, memory_from_s = 8e-4,
                   compute_to_s = 1e-5, memory_to_s = 8e-4 }
  eq(S.bound(compute), "compute", "compute-bound on both")
  eq(S.bound(memory), "memory", "bandwidth-bound on both")
  eq(S.destination(compute, a, b), 1e-3, "same compute, other memory: a compute-bound kernel keeps its time")
  eq(select(2, S.destination(compute, a, b)), "compute-bound, same compute: kept", "the rule says so")
  eq(S.destination(memory, a, b), 1e-3, "a bandwidth-bound one slowing down: not faster than its origin")
  local slow = { from_s = 1e-3, to_s = 2e-3, compute_from_s = 1e-5, memory_from_s = 8e-4, compute_to_s = 1e-5,
                 memory_to_s = 8e-4 * 4800 / 3350 }
  local got = S.destination(slow, a, b)
  eq(math.abs(got / (1e-3 * 4800 / 3350) - 1) < 1e-12, true, "at most the bandwidth ratio slower (got " .. got .. ")")
  slow.to_s = 1.2e-3
  eq(S.destination(slow, a, b), 1.2e-3, "within the envelope: the predictor's ratio")
  eq(S.destination(memory, a, c), 1e-3, "same memory, other compute: a bandwidth-bound kernel keeps its time")
  local on_c = { from_s = 1e-3, to_s = 1.1e-3, compute_from_s = 9e-4, memory_from_s = 1e-4,
                 compute_to_s = 9e-4 * 989 / 756, memory_to_s = 1e-4 }
  eq(S.destination(on_c, a, c), 1.1e-3, "a compute-bound one takes the predictor's ratio within the peak ratio")
  eq(select(2, S.destination(on_c, a, c)), "predictor (within the peak ratio)", "the rule says so")
  on_c.to_s = 1.5e-3
  got = S.destination(on_c, a, c)
  eq(math.abs(got / (1e-3 * 989 / 756) - 1) < 1e-12, true, "and at most the peak ratio slower (got " .. got .. ")")
  local mixed = { from_s = 1e-3, to_s = 1.1e-3, compute_from_s = 5e-4, memory_from_s = 4e-4,
                  compute_to_s = 5e-4, memory_to_s = 6e-4 }
  eq(S.bound(mixed), "mixed", "binding resource differs between the GPUs")
  eq(S.destination(mixed, a, b), 1.1e-3, "mixed: the predictor's ratio")
end

-- Two GPUs that differ in compute and memory alike: the predictor's ratio within the envelope of their resource ratios.
-- A B200 has at least every resource of an H200 (its per-SM fp32 rate the same within 0.01 %): an fp32 GEMM the
-- predictor, outside its training GPUs there, put 29 % slower is not slower; back to the H200 the bound inverts, so
-- H200 → B200 → H200 returns the origin.
function M.test_physics_envelope()
  local occ = { max_threads_per_sm = 2048, max_blocks_per_sm = 32, max_warps_per_sm = 64, max_regs_per_sm = 65536,
                max_smem_per_sm_kb = 228 }
  local function gpu(t)
    for f, v in pairs(occ) do t[f] = v end
    return t
  end
  local h200 = gpu { num_sm = 132, mem_bw_gbps = 4800, l2_mb = 50, peak_fp32_tflops = 66.9, peak_bf16_tflops = 989.4 }
  local b200 = gpu { num_sm = 148, mem_bw_gbps = 8000, l2_mb = 126, peak_fp32_tflops = 75, peak_bf16_tflops = 2250 }
  local k = { from_s = 6.2e-5, to_s = 8.0e-5, compute_from_s = 3e-5, memory_from_s = 2e-5, compute_to_s = 2.7e-5,
              memory_to_s = 1.2e-5, peak = "peak_fp32_tflops" }
  local t, how = S.destination(k, h200, b200)
  local per_sm = (66.9 / 132) / (75 / 148)
  eq(math.abs(t / (k.from_s * per_sm) - 1) < 1e-12, true, "at most the per-SM fp32 rate's ratio slower (got " .. t .. ")")
  eq(how, "predictor, bounded by the resource ratios", "the rule says so")
  local back = { from_s = k.to_s, to_s = k.from_s, compute_from_s = k.compute_to_s, memory_from_s = k.memory_to_s,
                 compute_to_s = k.compute_from_s, memory_to_s = k.memory_from_s, peak = k.peak }
  local b = S.destination(back, b200, h200)
  eq(math.abs((t / k.from_s) * (b / back.from_s) - 1) < 1e-12, true, "H200 → B200 → H200 returns the origin")
  k.to_s = 5e-5
  eq(select(2, S.destination(k, h200, b200)), "predictor", "within the envelope: the predictor's ratio")
  eq(S.destination(k, h200, b200), 5e-5, "unchanged")
  -- the slower GPU the other way: not faster than its origin
  local slow = { from_s = 1e-3, to_s = 0.5e-3, compute_from_s = 5e-4, memory_from_s = 4e-4, compute_to_s = 6e-4,
                 memory_to_s = 7e-4, peak = "peak_bf16_tflops" }
  eq(S.destination(slow, b200, h200), 1e-3, "to a GPU with less of every resource: not faster")
end

-- A resource one GPU gives and the other does not is refused, never left out of the envelope (which would bound the
-- kernel by the others alone, a narrower envelope said by nothing); one neither gives takes no part. A kernel naming
-- no peak may meet a peak one GPU gives as 0 (no such units): that peak takes no part.
function M.test_physics_envelope_refuses_a_resource_one_gpu_lacks()
  local function gpus()
    local a = { name = "A", num_sm = 132, mem_bw_gbps = 4800, l2_mb = 50, peak_fp32_tflops = 66.9, peak_fp8_tflops = 1979 }
    local b = { name = "B", num_sm = 148, mem_bw_gbps = 8000, l2_mb = 126, peak_fp32_tflops = 75, peak_fp8_tflops = 0 }
    return a, b
  end
  local k = { from_s = 6.2e-5, to_s = 3e-5, compute_from_s = 3e-5, memory_from_s = 2e-5, compute_to_s = 2.7e-5,
              memory_to_s = 1.2e-5, peak = "peak_fp32_tflops" }
  local a, b = gpus()
  eq(S.destination(k, a, b), 3e-5, "every resource on both: the predictor's ratio, within the envelope")
  b.l2_mb = nil  -- L2 grows 2.5x: the only resource allowing the kernel 2.07x faster
  local ok, err = pcall(S.destination, k, a, b)
  eq(ok, false, "a GPU without l2_mb against one with it is refused")
  eq(err, "neusight.scale envelope: B gives no l2_mb but A does (50): the envelope of the GPUs' resource ratios "
    .. "cannot leave it out (that would narrow the bound without a word); give it in the GPU file", "the message")
  a.l2_mb = nil
  local t = S.destination(k, a, b)
  eq(math.abs(t / (k.from_s * 4800 / 8000) - 1) < 1e-12, true, "neither gives it: bounded by the rest (got " .. t .. ")")
  a, b = gpus()
  k.peak = nil
  eq(S.destination(k, a, b), 3e-5, "no peak named: an fp8 peak of 0 on one GPU takes no part")
  b.peak_fp8_tflops = nil
  eq(pcall(S.destination, k, a, b), false, "but a peak one GPU does not give at all is refused")
end

-- The clock is a resource of the envelope: a latency-bound kernel runs at it whatever the lanes. An A100 has more of
-- every other resource than an A10G (SMs, bf16 peak in all and per SM, bandwidth, L2) but a boost clock of 1410 MHz
-- against 1710: a bf16 kernel the predictor puts 15 % slower there keeps it (the peaks alone bounded it at 1, "never
-- slower"), one put 40 % slower is held to the clock ratio, and A10G → A100 → A10G still returns the origin.
function M.test_physics_envelope_takes_in_the_clock()
  local a10g = { num_sm = 80, boost_clock_mhz = 1710, max_threads_per_sm = 1536, max_blocks_per_sm = 16,
                 max_warps_per_sm = 48, max_regs_per_sm = 65536, max_smem_per_sm_kb = 100, mem_bw_gbps = 600,
                 l2_mb = 6, peak_bf16_tflops = 140.1 }
  local a100 = { num_sm = 108, boost_clock_mhz = 1410, max_threads_per_sm = 2048, max_blocks_per_sm = 32,
                 max_warps_per_sm = 64, max_regs_per_sm = 65536, max_smem_per_sm_kb = 164, mem_bw_gbps = 1935,
                 l2_mb = 40, peak_bf16_tflops = 312 }
  local k = { from_s = 1e-5, to_s = 1.15e-5, compute_from_s = 1e-6, memory_from_s = 1e-6, compute_to_s = 0.3e-6,
              memory_to_s = 0.4e-6, peak = "peak_bf16_tflops" }
  local t, how = S.destination(k, a10g, a100)
  eq(t, 1.15e-5, "within the clock ratio: the predictor's ratio")
  eq(how, "predictor", "the rule says so")
  k.to_s = 1.4e-5
  t, how = S.destination(k, a10g, a100)
  eq(math.abs(t / (k.from_s * 1710 / 1410) - 1) < 1e-12, true, "at most the clock ratio slower (got " .. t .. ")")
  eq(how, "predictor, bounded by the resource ratios", "the rule says so")
  local back = { from_s = k.to_s, to_s = k.from_s, compute_from_s = k.compute_to_s, memory_from_s = k.memory_to_s,
                 compute_to_s = k.compute_from_s, memory_to_s = k.memory_from_s, peak = k.peak }
  local b = S.destination(back, a100, a10g)
  eq(math.abs((t / k.from_s) * (b / back.from_s) - 1) < 1e-12, true, "A10G → A100 → A10G returns the origin")
end

-- "Same compute" is the compute the kernel runs on: an fp8 peak that differs does not make an fp32 kernel's GPUs differ.
function M.test_physics_compares_the_peak_of_the_kernels_unit()
  local a = { num_sm = 132, mem_bw_gbps = 4800, l2_mb = 60, peak_fp32_tflops = 67, peak_bf16_tflops = 989,
              peak_fp8_tflops = 1979 }
  local b = { num_sm = 132, mem_bw_gbps = 3350, l2_mb = 50, peak_fp32_tflops = 67, peak_bf16_tflops = 989,
              peak_fp8_tflops = 2500 }
  local k = { from_s = 1e-3, to_s = 1.2e-3, compute_from_s = 9e-4, memory_from_s = 1e-4, compute_to_s = 9e-4,
              memory_to_s = 2e-4, peak = "peak_fp32_tflops" }
  eq(select(2, S.destination(k, a, b)), "compute-bound, same compute: kept", "fp32: the fp8 peak is no part of it")
  eq(S.destination(k, a, b), 1e-3, "and keeps its time")
  k.peak = "peak_fp8_tflops"
  eq(select(2, S.destination(k, a, b)), "predictor", "fp8: its own peak differs: the predictor's ratio")
  k.peak = nil
  eq(select(2, S.destination(k, a, b)), "predictor", "a kernel that names no peak: every peak counts")
end

-- Habitat keeps kernels under one wave; those with a block on every SM of both GPUs move with the bandwidth.
function M.test_sub_wave_streams()
  local h200, h100, other = { num_sm = 132 }, { num_sm = 132 }, { num_sm = 170 }
  local k = { blocks = 320, threads_per_block = 512, wave_from = 528, wave_to = 528, duration_ms = 0.03 }
  eq(S.sub_wave_streams(k, h200, h100), true, "multi_tensor_apply's 320 blocks: every SM busy")
  k.blocks = 109
  eq(S.sub_wave_streams(k, h200, h100), false, "109 blocks on 132 SMs: kept")
  k.blocks = 150
  eq(S.sub_wave_streams(k, h200, other), false, "fewer blocks than the destination's SMs: kept")
  k.blocks, k.duration_ms = 320, 0.003
  eq(S.sub_wave_streams(k, h200, h100), false, "a 3 µs kernel: its launch, not its bytes: kept")
end

-- The kernels scale warns the wave rule does not price: collectives and attention libraries' (FlashAttention, FlashInfer's
-- attention, cuDNN / xFormers fmha), in any case; FlashInfer's memory-bound norm, sampling, activation and KV-append
-- kernels are wave-priced kernels, not attention (review20: the substring "flash" called them FlashAttention).
function M.test_wave_unpriced_names_attention_and_collectives_only()
  local attention = S.wave_unpriced[2].what
  for _, k in ipairs { "flash_fwd_kernel", "void pytorch_flash::flash_bwd_dq_dk_dv_loop_kernel<Flash_bwd_kernel_traits>",
      "cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90>>",
      "void flashinfer::BatchPrefillWithPagedKVCacheKernel<...>", "fmha_cutlassF_bf16_aligned_64x64_rf_sm80" } do
    eq(S.wave_unpriced_of({ "elementwise_kernel", k }), k:find("fmha") and S.wave_unpriced[3].what or attention, k)
  end
  eq(S.wave_unpriced_of({ "ncclDevKernel_AllReduce_Sum_bf16_RING_LL" }), S.wave_unpriced[1].what, "NCCL")
  eq(S.wave_unpriced_of({ "NCCLKERNEL" }), S.wave_unpriced[1].what, "any case")
  for _, k in ipairs { "void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>",
      "void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u>", "void flashinfer::activation::act_and_mul_kernel<>",
      "void flashinfer::quantization::PackBitsKernel<true>", "void flashinfer::AppendPagedKVCacheKernel<128u>",
      "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>" } do
    eq(S.wave_unpriced_of({ k }), nil, k)
  end
end

return M
