-- tests/scripts/test_quant.lua — quantised serving: the KV cache's element type (workload field kv_dtype: cache
-- bytes, KV-cache writes, decode-attention reads) and weight-only quantisation (weight_dtype: weight bytes of the
-- GEMMs and of the model state), their validation and warnings; and where fp8's dynamic activation quantisation
-- (attrs.act_quant, workload.quantise_activations) applies.
local llama = require "neusight.models.llama"
local presets = require "neusight.models.presets"
local workload = require "neusight.workload"
local K = require "neusight.kernels"
local tiling = require "tiling.attention"

local testing = require "neusight.testing"
local t = testing.bind(load_op, make_node)
local eq, kernels = t.eq, t.kernels

local T = {}

local function decode_opts(b, C, kv_dtype)
  return { batch = b, seq = 1, phase = "decode", context = C, dtype = "bf16", attention = "sdpa", kv_dtype = kv_dtype }
end

local function find(nodes, op)
  for _, n in ipairs(nodes) do if n.op == op then return n end end
end

local function err_of(fn, ...)
  local ok, e = pcall(fn, ...)
  assert(not ok, "expected an error")
  return tostring(e)
end

-- fp8 KV: exactly half the bf16 cache bytes; the decode attention reads the cache at 1 B (Q and O at 2 B) with
-- the same FLOPs; the default (nil) and an explicit kv_dtype = the compute dtype build the same graph.
function T.test_kv_dtype_fp8_halves_cache_and_attention_reads()
  local cfg, b, C = presets.llama3_8b, 32, 4096
  local bf = llama.build(cfg, decode_opts(b, C))
  local same = llama.build(cfg, decode_opts(b, C, "bf16"))
  local f8 = llama.build(cfg, decode_opts(b, C, "fp8"))
  t.same(same, bf)
  eq(workload.kv_cache_bytes(f8) * 2, workload.kv_cache_bytes(bf), "fp8 cache = half the bf16 cache")
  eq(workload.kv_cache_bytes(bf), 2 * 32 * b * 8 * (C + 1) * 128 * 2, "bf16 cache: 2 · layers · b · kvh · (C+1) · d · 2 B")
  local ka = kernels(find(bf, "decode_attention"), false)[1]
  local kq = kernels(find(f8, "decode_attention"), false)[1]
  eq(kq.flops, ka.flops, "FLOPs unchanged")
  eq(kq.kv_dtype, "fp8", "kernel kv_dtype")
  eq(ka.kv_dtype, nil, "bf16 cache: no kv_dtype on the kernel")
  local q_io, kv_io = 32 * 1 * (128 + 128), 8 * (C + 1) * (128 + 128)
  eq(ka.bytes, 2 * b * (q_io + kv_io), "bf16 bytes")
  eq(kq.bytes, b * (2 * q_io + 1 * kv_io), "fp8 bytes: the cache at 1 B")
  -- the prefill / decode KV-cache write writes the cache at kv_dtype bytes
  local wa = kernels(find(bf, "setitem"), false)[1]
  local wq = kernels(find(f8, "setitem"), false)[1]
  local out = 2 * b * 8 * 1 * 128
  eq(wa.bytes - wq.bytes, out * (2 - 1), "the write's output at 1 B")
end

function T.test_kv_dtype_tile_bytes()
  local gpu = { num_sm = 132 }
  local k = { op = "decode", b = 32, m = 1, k = 4097, n = 128, rows = 32, hidden = 8, dtype = "bf16" }
  local a = tiling.select(k, gpu)
  k.kv_dtype = "fp8"
  local q = tiling.select(k, gpu)
  eq(q.blocks, a.blocks, "same launch")
  eq(q.flops, a.flops, "same FLOPs per block")
  assert(q.bytes < a.bytes, "fewer bytes per block")
  assert(q.kernel:find("_kvfp8"), q.kernel)
end

function T.test_kv_dtype_prefill_write()
  local cfg = presets.llama3_8b
  local o = { batch = 4, seq = 512, phase = "prefill", dtype = "bf16", attention = "sdpa" }
  local bf = llama.build(cfg, o)
  o.kv_dtype = "fp8"
  local f8 = llama.build(cfg, o)
  eq(workload.kv_cache_bytes(f8) * 2, workload.kv_cache_bytes(bf), "prefill cache halves")
  -- the prefill attention itself runs on the fresh K, V at the compute dtype
  local a, q = kernels(find(bf, "sdpa"), false)[1], kernels(find(f8, "sdpa"), false)[1]
  eq(q.bytes, a.bytes, "prefill attention unchanged")
end

function T.test_kv_dtype_validation()
  local base = { model = "llama3_8b", gpu = "h100", mode = "decode", batch = 1, context = 128, dtype = "bf16" }
  local function with(over)
    local w = {}
    for k, v in pairs(base) do w[k] = v end
    for k, v in pairs(over) do w[k] = v end
    return w
  end
  eq(workload.normalize(with { kv_dtype = "float8_e4m3fn" }).kv_dtype, "fp8", "aliases")
  eq(workload.normalize(with { kv_dtype = "BF16", dtype = "fp16" }).kv_dtype, "bf16", "case")
  -- the compute dtype itself: nothing quantised, dropped with a warning (workload.lua storage_dtypes)
  local same = workload.normalize(with { kv_dtype = "BF16" })
  eq(same.kv_dtype, nil, "kv_dtype = the compute dtype is dropped")
  assert(table.concat(workload.warnings(same), "\n"):find("kv_dtype (--kv-dtype) has no effect", 1, true))
  local e = err_of(workload.normalize, with { kv_dtype = "fp9" })
  assert(e:find("field 'kv_dtype' must be", 1, true) and e:find("did you mean 'fp8'", 1, true), e)
  e = err_of(workload.normalize, with { kv_dtype = "tf32" })
  assert(e:find("field 'kv_dtype' must be", 1, true), e)
  local train = { model = "llama3_8b", gpu = "h100", mode = "train", batch = 1, seq = 128, dtype = "bf16" }
  train.kv_dtype = "fp8"
  e = err_of(workload.normalize, train)
  assert(e:find("applies to the serving phases only", 1, true), e)
  train.kv_dtype, train.weight_dtype = nil, "int4"
  e = err_of(workload.normalize, train)
  assert(e:find("field 'weight_dtype'", 1, true) and e:find("training", 1, true), e)
  e = err_of(workload.normalize, with { weight_dtype = "in4" })
  assert(e:find("did you mean 'int4'", 1, true), e)
  eq(workload.normalize(with { weight_dtype = "INT8" }).weight_dtype, "int8", "case")
  e = err_of(workload.normalize, with { kvdtype = "fp8" })
  assert(e:find("did you mean 'kv_dtype'", 1, true), e)
end

function T.test_warnings()
  eq(#workload.warnings { mode = "decode", dtype = "bf16" }, 0, "none by default")
  eq(#workload.warnings { mode = "decode", dtype = "bf16", kv_dtype = "bf16" }, 0, "none at the compute dtype")
  local w = workload.warnings { mode = "decode", dtype = "bf16", kv_dtype = "fp8" }
  eq(#w, 1, "fp8 KV in decode")
  assert(w[1]:find("outside what it was trained on", 1, true), w[1])
  w = workload.warnings { mode = "inference", dtype = "bf16", weight_dtype = "int4" }
  eq(#w, 1, "weight-only")
  assert(w[1]:find("weight-only GEMM kernels", 1, true), w[1])
end

-- weight-only int4: each linear reads W at 0.5 B (X, Y at 2 B), same FLOPs; state bytes per parameter drop below 2.
function T.test_weight_dtype_int4()
  local w = workload.normalize { model = "llama3_8b", gpu = "h100", mode = "decode", batch = 8, context = 1024,
                                 dtype = "bf16", weight_dtype = "int4" }
  local b = workload.build(w)
  local nodes, state = b.nodes, b.state
  local w0 = workload.normalize { model = "llama3_8b", gpu = "h100", mode = "decode", batch = 8, context = 1024,
                                  dtype = "bf16" }
  local b0 = workload.build(w0)
  local nodes0, state0 = b0.nodes, b0.state
  eq(state0.weights, 2, "bf16 weights")
  assert(state.weights < 0.7 and state.weights > 0.5, "int4 weights per parameter: " .. state.weights)
  local function q_proj(ns)
    for _, n in ipairs(ns) do if n.op == "linear" and n.name:find("q_proj") then return n end end
  end
  local a, q = kernels(q_proj(nodes0), false)[1], kernels(q_proj(nodes), false)[1]
  eq(q.flops, a.flops, "FLOPs unchanged")
  eq(q.weight_bytes, 0.5, "kernel weight_bytes")
  eq(a.bytes - q.bytes, (2 - 0.5) * a.n * a.k, "W at 0.5 B")
  eq(K.WEIGHT_BYTES.int8, 1, "int8")
end

-- weight-only quantisation keeps the LM head at the compute dtype, as AWQ / GPTQ / bitsandbytes / vLLM's online fp8
-- checkpoints do: its kernel reads a 2-byte weight, and the model state holds Llama-3-8B's linears at 0.5 B and
-- embed_tokens, lm_head and the norms at 2 B (5.59 GB; quantising lm_head too made it 4.80 GB). A tied LM head holds no
-- parameters of its own and reads the embedding at the compute dtype either way.
function T.test_weight_only_keeps_lm_head()
  local function named(nodes, name)
    for _, n in ipairs(nodes) do if n.op == "linear" and n.name == name then return n end end
  end
  for _, wd in ipairs { "int4", "int8", "fp8" } do
    local b = workload.build(workload.normalize { model = "llama3_8b", gpu = "h100", mode = "decode", batch = 8,
      context = 1024, dtype = "bf16", weight_dtype = wd })
    local head = named(b.nodes, "lm_head")
    eq(kernels(head, false)[1].weight_bytes, nil, wd .. ": the LM head reads its weight at bf16")
    eq(kernels(named(b.nodes, "layers.self_attn.q_proj"), false)[1].weight_bytes, K.WEIGHT_BYTES[wd], wd .. ": q_proj")
    local all = 0
    for _, n in ipairs(b.nodes) do all = all + (n.params or 0) * (n.count or 1) end
    local embed, norms = 128256 * 4096, (32 * 2 + 1) * 4096 -- embed_tokens = lm_head; 2 RMSNorms a layer + the final
    local want = (all - 2 * embed - norms) * K.WEIGHT_BYTES[wd] + (2 * embed + norms) * 2
    assert(math.abs(b.state.weights * all - want) < 1e-6 * want, ("%s: weights %.0f B, want %.0f"):format(wd,
      b.state.weights * all, want))
  end
  -- tied (Llama-3.2-1B): no lm_head parameters, so nothing changes there
  local tied = workload.build(workload.normalize { model = "llama32_1b", gpu = "h100", mode = "decode", batch = 8,
    context = 1024, dtype = "bf16", weight_dtype = "int4" })
  eq(kernels(named(tied.nodes, "lm_head"), false)[1].weight_bytes, nil, "tied: the embedding's bf16 weight")
end

-- fp8 inference: every forward fp8 Linear and grouped expert GEMM carries act_quant = "dynamic_tensor" (vLLM's
-- dynamic per-tensor scaling, which gemm_fp8 prices as a stage); training (Transformer Engine: delayed scaling, no
-- per-row atomic) and the backward GEMMs never do, bf16 neither; fp8 training warns what gemm_fp8 was trained on.
function T.test_fp8_act_quant_where_vllm_quantises()
  local function linears(ns, pattern)
    local out = {}
    for _, n in ipairs(ns) do if n.op == "linear" and n.name:find(pattern) then out[#out + 1] = n end end
    return out
  end
  local base = { model = "llama3_8b", gpu = "h100", batch = 2, seq = 64, dtype = "fp8" }
  for _, mode in ipairs { "inference", "prefill" } do
    local nodes = workload.build(testing.with(base, { mode = mode })).nodes
    local q = linears(nodes, "q_proj")[1]
    eq(kernels(q, false)[1].act_quant, "dynamic_tensor", mode .. ": forward fp8 Linear")
  end
  local dec = workload.build { model = "llama3_8b", gpu = "h100", mode = "decode", batch = 8, context = 256, dtype = "fp8" }.nodes
  eq(kernels(linears(dec, "q_proj")[1], false)[1].act_quant, "dynamic_tensor", "decode: forward fp8 Linear")
  local bf = workload.build(testing.with(base, { mode = "inference", dtype = "bf16" })).nodes
  eq(kernels(linears(bf, "q_proj")[1], false)[1].act_quant, nil, "bf16: none")
  local w = workload.normalize(testing.with(base, { mode = "train" }))
  local tr = workload.build(w).nodes
  local fw, bw = kernels(linears(tr, "q_proj")[1], true)
  eq(fw[1].act_quant, nil, "fp8 training forward: none")
  for i, k in ipairs(bw) do eq(k.act_quant, nil, "fp8 training backward GEMM #" .. i) end
  local said = false
  for _, m in ipairs(workload.warnings(w)) do said = said or m:find("trained on vLLM inference GEMMs", 1, true) ~= nil end
  assert(said, "fp8 training warns that gemm_fp8 was trained on vLLM inference rows")
  for _, m in ipairs(workload.warnings(workload.normalize(testing.with(base, { mode = "inference" })))) do
    assert(not m:find("vLLM inference GEMMs", 1, true), "no such warning in inference: " .. m)
  end
  -- vLLM's fused_moe quantises its routed rows too: the grouped expert GEMM, forward only
  local moe = workload.build { model = "qwen3_30b_a3b", gpu = "h100", mode = "decode", batch = 1, context = 64,
    dtype = "fp8", experts = "grouped" }.nodes
  local g
  for _, n in ipairs(moe) do if n.op == "grouped_linear" then g = n break end end
  eq(kernels(g, false)[1].act_quant, "dynamic_tensor", "grouped expert GEMM")
  local _, gbw = kernels(g, true)
  for i, k in ipairs(gbw) do eq(k.act_quant, nil, "grouped backward #" .. i) end
end


-- fp8 (W8A8) serving as vLLM runs an FP8 checkpoint (tester7 P3 / r7 b): the KV cache in the activations' bf16 unless
-- kv_dtype says fp8 (kv_cache_dtype "auto"), the LM head a bf16 GEMM, and embeddings, norms and the LM head 2 bytes per
-- weight in the model state (Llama-3-8B: 6.98e9 linear weights at 1 B + 1.05e9 at 2 B = 9.08 GB, not 8.03 GB at 1 B).
function T.test_fp8_serving_keeps_what_vllm_keeps_in_bf16()
  local base = { model = "llama3_8b", gpu = "h100", mode = "decode", batch = 8, context = 1024, dtype = "fp8" }
  local f8 = workload.build(base)
  local bf = workload.build(testing.with(base, { dtype = "bf16" }))
  eq(workload.kv_cache_bytes(f8.nodes), workload.kv_cache_bytes(bf.nodes), "a bf16 cache by default")
  local kv8 = workload.build(testing.with(base, { kv_dtype = "fp8" }))
  eq(workload.kv_cache_bytes(kv8.nodes) * 2, workload.kv_cache_bytes(bf.nodes), "kv_dtype fp8: an fp8 cache")
  -- the default cache is what attention_decode was trained on (no warning); an fp8 one is not (its warning)
  eq(#workload.warnings(workload.normalize(base)), 0, "no kv_dtype warning for the default")
  local w = workload.warnings(workload.normalize(testing.with(base, { kv_dtype = "fp8" })))
  eq(#w, 1, "kv_dtype fp8 under fp8")
  assert(w[1]:find("outside what it was trained on", 1, true), w[1])
  -- the attention it names is the bf16 kernel the fp8 graph runs (workload.fp8_dtypes), not an "fp8 kernel"
  assert(w[1]:find("forecast as the bf16 kernel of the same shape reading the cache at fp8 bytes", 1, true), w[1])
  -- kv_dtype bf16 under fp8 is the default: no effect, said
  local same = workload.normalize(testing.with(base, { kv_dtype = "bf16" }))
  eq(same.kv_dtype, nil, "dropped")
  assert(table.concat(workload.warnings(same), "\n"):find("kv_dtype (--kv-dtype) has no effect: bf16 is the "
    .. "activations' dtype under dtype fp8", 1, true), table.concat(workload.warnings(same), "\n"))
  local function named(nodes, name)
    for _, n in ipairs(nodes) do if n.op == "linear" and n.name:find(name, 1, true) then return n end end
  end
  local head = kernels(named(f8.nodes, "lm_head"), false)[1]
  eq(head.dtype, "bf16", "the LM head a bf16 GEMM")
  eq(head.act_quant, nil, "no activation quantisation before it")
  eq(kernels(named(f8.nodes, "q_proj"), false)[1].dtype, "fp8", "the decoder's linears fp8")
  local all = 0
  for _, n in ipairs(f8.nodes) do all = all + (n.params or 0) * (n.count or 1) end
  eq(all, 8030261248, "Llama-3-8B")
  local embed, norms = 128256 * 4096, (32 * 2 + 1) * 4096  -- embed_tokens = lm_head; 2 RMSNorms a layer + the final
  local want = (all - 2 * embed - norms) * 1 + (2 * embed + norms) * 2
  assert(math.abs(f8.state.weights * all - want) < 1e-6 * want, ("weights %.0f B, want %.0f"):format(
    f8.state.weights * all, want))
  -- training in fp8 (Transformer Engine) keeps its recipe's bytes; its LM head is bf16 too (Megatron's output layer
  -- is a plain ColumnParallelLinear, not a TE layer: workload.fp8_training_dtypes), its decoder linears fp8
  local tr = workload.build { model = "llama3_8b", gpu = "h100", mode = "train", batch = 1, seq = 64, dtype = "fp8" }
  eq(kernels(named(tr.nodes, "lm_head"), false)[1].dtype, "bf16", "training: the LM head in bf16")
  eq(kernels(named(tr.nodes, "q_proj"), false)[1].dtype, "fp8", "training: the decoder's linears fp8")
end

-- fp8 (W8A8) inference and serving keep the activations in bf16 as vLLM runs an FP8 checkpoint: only the decoder's
-- Linear GEMMs are fp8 (their input quantised once, act_quant on the GEMM itself: no other quantising node); every other
-- node — embedding, RMSNorm, RoPE, SiLU-mul, residual adds, attention, the LM head, the cache write — has the kernels
-- of the bf16 graph, byte for byte (workload.fp8_dtypes, the rule fp8 training shares). The KV cache keeps its bytes:
-- bf16 by default, fp8 with kv_dtype fp8 (the cache write and decode attention read it at 1 B, as under bf16 compute
-- with kv_dtype fp8); HF's cache of a plain inference forward holds bf16 K and V (0.54 GB at 1 B before, Llama-3-8B
-- 8 × 1024). Before 2026-11-29 every such node ran at 1 byte per element (SDPA 83.9 MB read at batch 8 × 1024).
function T.test_fp8_inference_keeps_activations_in_bf16()
  local function kernel_list(nodes)
    local out = {}
    for _, n in ipairs(nodes) do
      if n.phase ~= "optimizer" then
        for i, k in ipairs((kernels(n, false))) do out[#out + 1] = { node = n, i = i, k = k } end
      end
    end
    return out
  end
  local function fp8_gemm(n)
    return (n.op == "linear" or n.op == "grouped_linear") and (n.params or 0) > 0 and not n.name:find("lm_head", 1, true)
      and n.dtype == "fp8"
  end
  for _, case in ipairs {
    { model = "llama3_8b", gpu = "h100", mode = "inference", batch = 2, seq = 128 },
    { model = "llama3_8b", gpu = "h100", mode = "prefill", batch = 2, seq = 128 },
    { model = "llama3_8b", gpu = "h100", mode = "decode", batch = 4, context = 256 },
    { model = "llama3_8b", gpu = "h100", mode = "decode", batch = 4, context = 256, kv_dtype = "fp8" },
    { model = "qwen3_30b_a3b", gpu = "h100", mode = "decode", batch = 2, context = 64, experts = "grouped" },
    { model = "llama3_8b", gpu = "h100", mode = "prefill", batch = 2, seq = 128, parallel = { tp = 2 } },
    -- MLA's absorbed W_UK / W_UV bmms (parameter-holding matmuls): bf16, as vLLM dequantises kv_b_proj for them
    { model = "deepseek_v2_lite", gpu = "h100", mode = "decode", batch = 2, context = 64 },
  } do
    local what = ("%s %s%s%s"):format(case.model, case.mode, case.kv_dtype and " kv " .. case.kv_dtype or "",
      case.parallel and " tp 2" or "")
    local gpu = { interconnect = "nvlink4", interconnect_bw_gbps = 900, pcie_bw_gbps = 64 } -- prices tp's all-reduces
    local f8 = workload.build(testing.with(case, { dtype = "fp8" }), gpu)
    local bf = workload.build(testing.with(case, { dtype = "bf16" }), gpu)
    local a, b = kernel_list(f8.nodes), kernel_list(bf.nodes)
    eq(#a, #b, what .. ": kernels")
    local gemms, kept, attention = 0, 0, 0
    for j, x in ipairs(a) do
      local y = b[j]
      local at = ("%s: %s kernel %d"):format(what, x.node.name, x.i)
      eq(x.node.name, y.node.name, at)
      if fp8_gemm(x.node) then
        gemms = gemms + 1
        eq(x.k.dtype, "fp8", at)
        eq(x.k.act_quant, "dynamic_tensor", at .. ": its input quantised by the GEMM's own stage")
      else
        kept = kept + 1
        eq(x.k.dtype, y.k.dtype, at .. ": dtype")
        eq(x.k.bytes, y.k.bytes, at .. ": bytes")
        eq(x.k.act_quant, nil, at .. ": no activation quantisation")
        if x.k.kind == "attention" then attention = attention + 1 end
      end
    end
    assert(gemms >= 4 and kept >= 10 and attention >= 1, ("%s: %d fp8 GEMMs, %d kept, %d attention"):format(
      what, gemms, kept, attention))
    if case.mode ~= "inference" then
      eq(workload.kv_cache_bytes(f8.nodes), workload.kv_cache_bytes(bf.nodes), what .. ": the cache's bytes")
    end
  end
  -- the state still counts the dequantised bmms' weights at the checkpoint's 1 B (kv_b_proj is fp8 there), as before
  local ds = workload.build { model = "deepseek_v2_lite", gpu = "h100", mode = "decode", batch = 2, context = 64,
    dtype = "fp8" }
  local w_uk, all, fp8_params = nil, 0, 0
  for _, n in ipairs(ds.nodes) do
    local p = (n.params or 0) * (n.count or 1)
    all = all + p
    if n.op == "matmul" and p > 0 then w_uk = w_uk or n end
    if p > 0 and (n.dtype == "fp8" or n.op == "matmul" or (n.op == "weight" and n.attrs.expert)) then
      fp8_params = fp8_params + p
    end
  end
  eq(kernels(w_uk, false)[1].dtype, "bf16", "MLA's absorbed bmm")
  testing.near(ds.state.weights * all, fp8_params + 2 * (all - fp8_params), "DeepSeek fp8 weight bytes", 1e-9)
  -- HF's inference cache: bf16 K and V, 2 · layers · b · kvh · s · d · 2 B
  local inf = workload.build { model = "llama3_8b", gpu = "h100", mode = "inference", batch = 8, seq = 1024, dtype = "fp8" }
  eq(workload.kv_cache_bytes(inf.nodes), 2 * 32 * 8 * 8 * 1024 * 128 * 2, "HF's cache of bf16 K and V")
  -- the closed form of SDPA at batch 8 × 1024 (Q, K, V, O; 32 query and 8 KV heads of 128): 2 B each, not 1
  local sdpa
  for _, n in ipairs(inf.nodes) do if n.op == "sdpa" then sdpa = kernels(n, false)[1] break end end
  eq(sdpa.dtype, "bf16", "SDPA")
  eq(sdpa.bytes, 2 * (2 * 8 * 32 * 1024 * 128 + 2 * 8 * 8 * 1024 * 128), "SDPA bytes: Q, O, K, V at 2 B")
  -- an fp8 cache under fp8: the cache write and the decode attention read it at 1 B, as under bf16 compute
  local base = { model = "llama3_8b", gpu = "h100", mode = "decode", batch = 4, context = 256, kv_dtype = "fp8" }
  local kv8 = workload.build(testing.with(base, { dtype = "fp8" }))
  local kv8_bf = workload.build(testing.with(base, { dtype = "bf16" }))
  eq(workload.kv_cache_bytes(kv8.nodes), workload.kv_cache_bytes(kv8_bf.nodes), "an fp8 cache: 1 B")
  local default = workload.build { model = "llama3_8b", gpu = "h100", mode = "decode", batch = 4, context = 256, dtype = "fp8" }
  eq(workload.kv_cache_bytes(kv8.nodes) * 2, workload.kv_cache_bytes(default.nodes), "half the default bf16 cache")
end

-- precision.fp8_gemm_warning of `gemms` whose bf16 twins are priced `bf16_seconds`: the warning and the twins it asked for.
local function fp8_warning_asking(gemms, bf16_seconds)
  local asked
  local w = require("neusight.precision").fp8_gemm_warning(gemms, function(twins)
    asked = twins
    return bf16_seconds
  end)
  return w, asked
end

-- fp8 (W8A8) GEMMs forecast slower than the same GEMM in bf16 are said, once, naming the measured kernel gemm_fp8 is
-- fitted on and --weight-dtype fp8 (tester7 P3); each distinct forward fp8 Linear shape is priced once in bf16, a
-- weight-only or bf16 GEMM not at all.
function T.test_fp8_gemms_slower_than_bf16_are_said()
  local precision = require "neusight.precision"
  local gemms = {
    { node = "lm_head", kind = "gemm", dtype = "fp8", b = 1, m = 1, n = 4096, k = 128256, seconds = 425.8e-6, launches = 1 },
    { node = "q_proj", kind = "gemm", dtype = "fp8", b = 1, m = 1, n = 4096, k = 4096, seconds = 9e-6, launches = 32 },
    { node = "o_proj", kind = "gemm", dtype = "fp8", b = 1, m = 1, n = 4096, k = 4096, seconds = 9e-6, launches = 32 },
    { node = "up_proj", kind = "gemm", dtype = "fp8", b = 1, m = 1, n = 4096, k = 14336, seconds = 20e-6, launches = 32,
      weight_bytes = 0.5 },
    { node = "attn", kind = "attention", dtype = "fp8", seconds = 1e-5, launches = 32 },
  }
  local w, asked = fp8_warning_asking(gemms, { 316.0e-6, 10e-6 })
  eq(#asked, 2, "two distinct fp8 Linear shapes")
  eq(asked[1].dtype, "bf16", "priced in bf16")
  eq(asked[1].k, 128256, "of the same shape")
  eq(asked[1].bytes, K.linear(1, 4096, 128256, "bf16").bytes, "bf16 bytes")
  assert(w:find("1 of the 2 fp8 GEMM shapes of this forecast are forecast slower than the same GEMM in bf16", 1, true), w)
  assert(w:find("most of all lm_head, m 1 x n 4096 x k 128256: 425.8 us in fp8, 316.0 us in bf16", 1, true), w)
  assert(w:find(("all fp8 GEMMs %.3f ms, %.3f ms in bf16"):format((425.8 + 64 * 9) * 1e-3, (316 + 64 * 10) * 1e-3),
    1, true), w)
  assert(w:find("CutlassFP8ScaledMMLinearKernel", 1, true) and w:find("--weight-dtype fp8 with --dtype bf16", 1, true), w)
  eq(precision.fp8_gemm_warning(gemms, function() return { 500e-6, 10e-6 } end), nil, "none slower: nothing said")
  eq(precision.fp8_gemm_warning({ gemms[4], gemms[5] }, function() error("not asked") end), nil, "nothing to compare")
end

-- A mixture of experts' grouped expert GEMMs (BMMs of b experts' rows) are fp8 GEMMs too: compared in bf16 (K.bmm of
-- their shape) and counted in "all fp8 GEMMs". They were left out: Qwen3-30B-A3B's fp8 decode on an H100 (batch 16)
-- said "all fp8 GEMMs 1.467 ms, 0.904 ms in bf16" of its attention Linears while its expert GEMMs took 21.4 ms in fp8
-- against 11.1 in bf16 (TPOT 25.4 ms against bf16's 14.6).
function T.test_fp8_grouped_expert_gemms_are_compared()
  local gemms = {
    { node = "o_proj", kind = "gemm", dtype = "fp8", b = 1, m = 16, n = 4096, k = 2048, seconds = 11e-6, launches = 48 },
    { node = "experts.down_proj", kind = "bmm", dtype = "fp8", b = 82, m = 2, n = 768, k = 2048, seconds = 190e-6,
      launches = 48 },
  }
  local w, asked = fp8_warning_asking(gemms, { 6e-6, 72e-6 })
  eq(#asked, 2, "the Linear and the grouped expert GEMM")
  eq(asked[2].kind, "bmm", "the expert GEMM's twin is a BMM")
  eq(asked[2].bytes, K.bmm(82, 2, 768, 2048, "bf16").bytes, "of its shape in bf16")
  assert(w and w:find("2 of the 2 fp8 GEMM shapes", 1, true), w)
  assert(w:find("most of all experts.down_proj, b 82 x m 2 x n 768 x k 2048: 190.0 us in fp8, 72.0 us in bf16", 1,
    true), w)
  assert(w:find(("all fp8 GEMMs %.3f ms, %.3f ms in bf16"):format(48 * (11 + 190) * 1e-3, 48 * (6 + 72) * 1e-3), 1,
    true), w)
end

-- What the fp8-slower warning covers: every fp8 GEMM gemm_fp8 prices (its text is of that fit), batched ones alike, so
-- an fp8 BMM that is not an expert GEMM is compared too; in a workload only the Linear and grouped-expert GEMMs are
-- fp8 (neusight.workload fp8_dtypes), so eager attention's QKᵀ and ·V (bf16) never reach it.
function T.test_fp8_warning_covers_every_fp8_gemm_and_eager_attention_is_bf16()
  local w, asked = fp8_warning_asking({
    { node = "custom.bmm", kind = "bmm", dtype = "fp8", b = 64, m = 512, n = 64, k = 512, seconds = 30e-6, launches = 2 },
  }, { 20e-6 })
  eq(#asked, 1, "the fp8 BMM is compared") eq(asked[1].kind, "bmm", "as a BMM")
  assert(w and w:find("1 of the 1 fp8 GEMM shapes", 1, true), w)
  local b = workload.build(workload.normalize { model = "gpt2_med", gpu = "h100", mode = "inference", batch = 2,
    seq = 128, dtype = "fp8", attention = "eager" })
  local matmuls, linears = 0, 0
  for _, n in ipairs(b.nodes) do
    if n.attrs and n.attrs.core_attention and n.op == "matmul" then
      matmuls = matmuls + 1
      eq(n.dtype, "bf16", n.name .. ": eager attention's matmul runs in bf16 under fp8")
    elseif (n.op == "linear" or n.op == "addmm") and n.dtype == "fp8" then
      linears = linears + 1
    end
  end
  eq(matmuls, 2, "QKᵀ and ·V") assert(linears > 0, "the Linears are fp8")
end

-- fp8 training whose forward GEMMs are forecast slower than in bf16 is said too (matrix sweep: bert, DeepSeek-V2/V3
-- and V2-Lite fp8 training forecast slower than bf16 with only the out-of-data warning), advising --dtype bf16, not
-- --weight-dtype (inference only); predict saying it is tests/cli/test_quant_cli.cpp's.
function T.test_fp8_training_slower_than_bf16_is_said()
  local precision = require "neusight.precision"
  local gemms = { { node = "q", kind = "gemm", dtype = "fp8", b = 1, m = 256, n = 768, k = 768, seconds = 6e-6 } }
  local w = precision.fp8_gemm_warning(gemms, function() return { 3e-6 } end, "train")
  assert(w and w:find("forecast slower than the same GEMM in bf16", 1, true), w)
  assert(w:find("compare with --dtype bf16", 1, true) and not w:find("--weight-dtype", 1, true), w)
end

-- torch.compile-style fusion (fusion = true) never fuses a GEMM, so every fp8 Linear keeps its activation
-- quantisation: the same act_quant kernels with and without it.
function T.test_fp8_act_quant_survives_fusion()
  local function quantised(nodes)
    local n = 0
    for _, node in ipairs(nodes) do
      if node.op ~= "fused_elementwise" then
        for _, k in ipairs((kernels(node, false))) do
          if k.act_quant == "dynamic_tensor" then n = n + 1 end
        end
      end
    end
    return n
  end
  local base = { model = "llama3_8b", gpu = "b200", mode = "prefill", batch = 2, seq = 64, dtype = "fp8" }
  local plain = quantised(workload.build(base).nodes)
  local fused = quantised(workload.build(testing.with(base, { fusion = true })).nodes)
  assert(plain > 0, "fp8 prefill has quantised Linears")
  eq(fused, plain, "fusion keeps every fp8 Linear's act_quant")
end

return T
