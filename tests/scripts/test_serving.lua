-- tests/scripts/test_serving.lua — serving phases (workload mode "prefill" / "decode"): the decode graph's kernels per
-- layer, closed-form decode FLOPs, the prefill LM head on the last token, KV-cache bytes, tensor parallelism, errors.
local llama = require "neusight.models.llama"
local gpt = require "neusight.models.gpt"
local presets = require "neusight.models.presets"
local workload = require "neusight.workload"

local t = require("neusight.testing").bind(load_op, make_node)
local eq, kernels, flops, tp_plan = t.eq, t.kernels, t.flops, t.tp_plan
local near = require("neusight.testing").near
local raises = require("neusight.testing").raises

local T = {}

local function decode_opts(b, C, extra)
  local o = { batch = b, seq = 1, phase = "decode", context = C, dtype = "bf16", attention = "sdpa" }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

-- Forward kernels of the nodes of `layer`, grouped by kernel kind (count per layer, not × n.count).
local function layer_kernels(nodes, layer)
  local out = {}
  for _, n in ipairs(nodes) do
    if n.layer == layer then
      for _, k in ipairs((kernels(n, false))) do
        out[k.kind] = out[k.kind] or {}
        table.insert(out[k.kind], { node = n, k = k })
      end
    end
  end
  return out
end

-- Llama-3-8B decode, B = 8, C = 2048: 7 GEMMs on 8 rows, one DecodeAttention over 2049 tokens with 8 kv heads (32 query
-- heads), one KV-cache append; no softmax, no BMM — whatever opts.attention says.
function T.test_decode_layer_kernel_multiset()
  local cfg, b, C = presets.llama3_8b, 8, 2048
  for _, attention in ipairs { "sdpa", "eager" } do
    local nodes = llama.build(cfg, decode_opts(b, C, { attention = attention }))
    local ops = {}
    for _, n in ipairs(nodes) do
      if n.layer == "layers" then ops[n.op] = (ops[n.op] or 0) + 1; eq(n.count, 32, n.name .. " count") end
    end
    t.same(ops, { linear = 7, cast = 4, pow = 2, mean = 2, rsqrt = 2, weight = 2, add = 6, mul = 11, contiguous = 2,
                  setitem = 1, decode_attention = 1, silu = 1 }, attention)
    local by = layer_kernels(nodes, "layers")
    eq(#by.gemm, 7, attention .. ": GEMMs per layer")
    for _, e in ipairs(by.gemm) do eq(e.k.m, b, e.node.name .. ": GEMM rows = batch") end
    eq(by.bmm, nil, attention .. ": no BMM")
    eq(#by.attention, 1, attention .. ": one attention kernel per layer")
    local a = by.attention[1].k
    eq(a.name, "DecodeAttention", "decode kernel")
    eq(a.b .. "/" .. a.m .. "/" .. a.k .. "/" .. a.n .. "/" .. a.rows .. "/" .. a.hidden, "8/1/2049/128/32/8",
      "batch / q_len / kv_len = C + 1 / head_dim / heads / kv heads")
    for _, e in ipairs(by.vector or {}) do
      assert(not e.k.name:find("softmax"), attention .. ": no softmax kernel (" .. e.k.name .. ")")
    end
    for _, n in ipairs(nodes) do
      assert(n.op ~= "softmax" and n.op ~= "matmul" and n.op ~= "sdpa", attention .. ": " .. n.name)
      if n.op == "setitem" then
        eq(table.concat(n.inputs[1], ","), "8,8,1,128", "the new token's K (and V) appended")
      end
    end
    eq(nodes[#nodes].name, "lm_head", "no loss")
    eq(nodes[#nodes].inputs[1][1] * nodes[#nodes].inputs[1][2], b, "LM head on B rows")
  end
end

-- Decode FLOPs = 2 · (matmul parameters) · B + 4 · B · heads · head_dim · (C + 1) · layers, the matmul parameters being
-- every parameter but the embedding table (lm_head included): ≈ 2 · params · B.
function T.test_decode_flops_closed_form()
  for _, name in ipairs { "llama3_8b", "llama32_1b", "qwen25_7b" } do
    local cfg = presets[name]
    local h, I, L, V = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.vocab_size
    local nh = cfg.num_attention_heads
    local kvh, hd = cfg.num_key_value_heads, cfg.head_dim or h // nh
    local matmul_params = L * (2 * h * nh * hd + 2 * h * kvh * hd + 3 * h * I) + V * h
    for _, b in ipairs { 1, 16 } do
      for _, C in ipairs { 1000, 4096 } do
        local nodes = llama.build(cfg, decode_opts(b, C))
        eq(flops(nodes, false, "fw", "gemm"), 2 * matmul_params * b, name .. " GEMM FLOPs")
        eq(flops(nodes, false, "fw", "attention"), 4 * b * nh * hd * (C + 1) * L, name .. " decode attention FLOPs")
        local total = flops(nodes, false, "fw")
        local closed = 2 * matmul_params * b + 4 * b * nh * hd * (C + 1) * L
        near(total, closed, name .. " all kernels ≈ closed form", 0.01)
      end
    end
  end
end

-- Prefill = the inference graph plus the KV-cache writes, with the LM head on each prompt's last token.
function T.test_prefill_lm_head_on_last_token()
  local cfg, b, s = presets.llama3_8b, 4, 64
  local pre = llama.build(cfg, { batch = b, seq = s, phase = "prefill", dtype = "bf16", attention = "sdpa" })
  local inf = llama.build(cfg, { batch = b, seq = s, dtype = "bf16", attention = "sdpa" })
  local head
  for _, n in ipairs(pre) do
    if n.name == "lm_head" then head = n end
  end
  local k = kernels(head, false)[1]
  eq(k.m .. "/" .. k.n .. "/" .. k.k, b .. "/4096/128256", "lm_head Linear(B, h, V)")
  -- every other GEMM as in inference: B·S rows
  local function gemm_flops(nodes)
    local sum = 0
    for _, n in ipairs(nodes) do
      if n.name ~= "lm_head" then
        for _, x in ipairs((kernels(n, false))) do if x.kind == "gemm" then sum = sum + n.count * x.flops end end
      end
    end
    return sum
  end
  eq(gemm_flops(pre), gemm_flops(inf), "prefill layers' GEMMs = inference's")
  eq(flops(pre, false, "fw", "attention"), flops(inf, false, "fw", "attention"), "causal prefill attention")
  local writes = 0
  for _, n in ipairs(pre) do if n.op == "setitem" then writes = writes + n.count end end
  eq(writes, 32, "one KV-cache write per layer")
  -- gpt too
  local g = gpt.build(presets.gpt2_large, { batch = b, seq = s, phase = "prefill", dtype = "bf16", attention = "sdpa" })
  eq(g[#g].name .. " " .. table.concat(g[#g].output, ","), "lm_head " .. b .. ",1,50257", "gpt2 prefill lm_head")
end

-- KV cache per GPU = 2 · layers · B · tokens · kv heads (this rank's) · head_dim · dtype bytes.
function T.test_kv_cache_bytes_closed_form()
  local function kv(w)
    w.model, w.gpu, w.dtype = w.model or "llama3_8b", "H100-SXM5-80GB", w.dtype or "bf16"
    return workload.build(w).kv_cache_bytes
  end
  eq(kv { mode = "decode", batch = 8, context = 2048 }, 2 * 32 * 8 * 2049 * 8 * 128 * 2, "decode: C + 1 tokens")
  eq(kv { mode = "prefill", batch = 8, seq = 2048 }, 2 * 32 * 8 * 2048 * 8 * 128 * 2, "prefill: S tokens")
  eq(kv { mode = "decode", batch = 2, context = 100, dtype = "fp32" }, 2 * 32 * 2 * 101 * 8 * 128 * 4, "fp32")
  eq(kv { model = "gpt2_large", mode = "decode", batch = 2, context = 99 }, 2 * 36 * 2 * 100 * 20 * 64 * 2, "gpt2: MHA")
  -- a plain HF forward keeps every layer's K and V of its S tokens in past_key_values (use_cache: neusight.nodes hf_cache)
  eq(kv { mode = "inference", batch = 8, seq = 2048 }, 2 * 32 * 8 * 2048 * 8 * 128 * 2, "inference: HF's cache")
  eq(kv { mode = "train", batch = 8, seq = 2048 }, nil, "no cache in training")
  -- tp 2 (builder level): 4 of the 8 kv heads per rank
  local nodes = llama.build(presets.llama3_8b, decode_opts(8, 2048, { tp = 2, parallel = tp_plan(2, 8) }))
  eq(workload.kv_cache_bytes(nodes), 2 * 32 * 8 * 2049 * 4 * 128 * 2, "tp 2: half the kv heads per rank")
end

-- Tensor parallelism: heads and kv heads split as in training, one decode_attention per rank and layer, the row-parallel
-- all-reduces on B tokens.
function T.test_decode_tp2()
  local one = llama.build(presets.llama3_8b, decode_opts(8, 1024))
  local two = llama.build(presets.llama3_8b, decode_opts(8, 1024, { tp = 2, parallel = tp_plan(2, 8) }))
  eq(2 * flops(two, false, "fw", "attention"), flops(one, false, "fw", "attention"), "attention split over tp")
  eq(2 * flops(two, false, "fw", "gemm"), flops(one, false, "fw", "gemm"), "GEMMs split over tp")
  local reduces = {}
  for _, n in ipairs(two) do
    if n.op == "decode_attention" then
      eq(n.inputs[1][2] .. "/" .. n.inputs[2][2] .. "/" .. n.inputs[2][3], "16/4/1025", "16 heads over 4 kv heads, C + 1")
    end
    if n.op == "all_reduce" and n.attrs.direction == "forward" then reduces[#reduces + 1] = n.name .. " " .. table.concat(n.inputs[1], ",") end
  end
  t.same(reduces, { "embed_tokens.tp_out 8,1,4096", "layers.self_attn.tp_out 8,1,4096", "layers.mlp.tp_out 8,1,4096" },
    "forward all-reduces on B tokens")
end

function T.test_gpt_decode_and_sliding_window()
  local nodes = gpt.build(presets.gpt2_large, decode_opts(4, 511, { attention = "eager" }))
  local by = layer_kernels(nodes, "h")
  eq(#by.attention, 1, "gpt2: one decode attention per layer")
  eq(by.attention[1].k.k .. "/" .. by.attention[1].k.rows .. "/" .. by.attention[1].k.hidden, "512/20/20", "MHA over C + 1")
  for _, e in ipairs(by.gemm) do eq(e.k.m, 4, e.node.name .. " rows") end
  eq(by.bmm, nil, "gpt2 decode: no BMM")
  raises("gpt model 'gpt2_large': context 1024 + 1 new token exceeds n_positions 1024, the rows of its learned position table: give a context of at most 1023", gpt.build, presets.gpt2_large,
    decode_opts(1, 1024))
  -- Mistral: past the 4096-token window every layer attends to (and caches) the last 4096 tokens.
  local m = llama.build(presets.mistral_7b, decode_opts(1, 8191))
  for _, n in ipairs(m) do
    assert(n.layer ~= "layers", "all mistral layers are windowed: " .. n.name)
    if n.op == "decode_attention" then eq(n.inputs[2][3], 4096, "window") end
  end
  local short = llama.build(presets.mistral_7b, decode_opts(1, 100))
  for _, n in ipairs(short) do
    if n.op == "decode_attention" then eq(n.layer .. " " .. n.inputs[2][3], "layers 101", "inside the window") end
  end
end

-- The window's share of a cached token, read off each serving graph's KV-cache writes (workload.lua kv_cache_window):
-- whether the windowed layers have a group of their own (decode past the window) or not (inside it, prefill). The
-- decode graph's cache follows the rule it states: bytes/token · ((1 − share) · (C + 1) + share · min(C + 1, W)).
function T.test_kv_cache_window_from_the_graph()
  local qwen = {}  -- Qwen3-8B with its window on: layers 20 … 35 windowed (max_window_layers 20), window 1024
  for k, v in pairs(presets.qwen3_8b) do qwen[k] = v end
  qwen.use_sliding_window, qwen.sliding_window, qwen.max_window_layers = true, 1024, 20
  local prefill = { batch = 2, seq = 3000, phase = "prefill", dtype = "bf16", attention = "sdpa" }
  for _, case in ipairs { { presets.mistral_7b, 4096, 1 }, { qwen, 1024, 16 / 36 } } do
    local cfg, W, share = case[1], case[2], case[3]
    local per_token = workload.kv_cache_bytes(llama.build(cfg, decode_opts(2, 99))) / (2 * 100)
    for _, C in ipairs { 99, W - 1, W, 3 * W } do
      local nodes = llama.build(cfg, decode_opts(2, C))
      local w, sh = workload.kv_cache_window(nodes)
      eq(w, W, cfg.name .. " window at context " .. C)
      near(sh, share, cfg.name .. " windowed share at context " .. C)
      near(workload.kv_cache_bytes(nodes), 2 * per_token * ((1 - share) * (C + 1) + share * math.min(C + 1, W)),
        cfg.name .. " decode cache at context " .. C)
    end
    local w, sh = workload.kv_cache_window(llama.build(cfg, prefill))
    eq(w, W, cfg.name .. " prefill window")
    near(sh, share, cfg.name .. " prefill share")
  end
  local w, sh = workload.kv_cache_window(llama.build(presets.llama3_8b, decode_opts(2, 9000)))
  eq(w, nil, "llama3_8b: no window")
  eq(sh, nil, "llama3_8b: no share")
  local q = {}
  for k, v in pairs(presets.qwen3_8b) do q[k] = v end  -- use_sliding_window false: no window
  eq(workload.kv_cache_window(llama.build(q, decode_opts(1, 5000))), nil, "qwen3_8b without use_sliding_window")
end

-- One rule for the KV cache a serving step leaves (neusight.nodes.kv_cache_tokens): a prefill of S tokens caches what a
-- decode step holding S tokens (context S - 1) caches — its windowed layers min(S, W) tokens, not all S — whatever
-- the attention kernels; its kernels (the cache writes of all S tokens included) are unchanged by the cap.
function T.test_prefill_and_decode_cache_one_rule()
  local qwen = {}
  for k, v in pairs(presets.qwen3_8b) do qwen[k] = v end
  qwen.use_sliding_window, qwen.sliding_window, qwen.max_window_layers = true, 1024, 20
  for _, cfg in ipairs { presets.mistral_7b, qwen, presets.gemma2_9b, presets.phi3_mini } do
    for _, S in ipairs { 1000, 2047, 4096, 8192 } do
      for _, attention in ipairs { "sdpa", "eager" } do
        local what = ("%s S %d %s"):format(cfg.name, S, attention)
        local pre = llama.build(cfg, { batch = 2, seq = S, phase = "prefill", dtype = "bf16", attention = attention })
        eq(workload.kv_cache_bytes(pre), workload.kv_cache_bytes(llama.build(cfg, decode_opts(2, S - 1))), what)
        local written = 0
        for _, n in ipairs(pre) do
          if n.op == "setitem" then written = written + n.count * n.inputs[1][3] end
        end
        eq(written, cfg.num_hidden_layers * S, what .. ": every layer writes the S tokens")
      end
    end
  end
  -- Mistral-7B, S = 8192 > W = 4096: half of what caching every token would hold
  local pre = llama.build(presets.mistral_7b, { batch = 1, seq = 8192, phase = "prefill", dtype = "bf16", attention = "sdpa" })
  eq(workload.kv_cache_bytes(pre), 2 * 32 * 8 * 128 * 4096 * 2, "mistral_7b prefill 8192: the window's 4096 tokens")
end

function T.test_serving_errors()
  local function err(w)
    local full = { model = "llama3_8b", gpu = "h100", batch = 8, dtype = "bf16" }
    for k, v in pairs(w) do full[k] = v end
    local ok, e = pcall(workload.build, full)
    assert(not ok, "expected an error")
    return e
  end
  eq(err { mode = "decode" },
    "workload: mode \"decode\" needs field 'context': the tokens already in each sequence's KV cache (--context C)",
    "decode without context")
  eq(err { mode = "train", seq = 128, context = 2048 },
    "workload: field 'context' applies to mode \"decode\" only (mode is \"train\"); prefill and inference take the prompt length as 'seq'",
    "context with train")
  eq(err { mode = "decode", context = 2048, seq = 2048 },
    "workload: field 'seq' is the one new token per sequence in mode \"decode\" and must be 1 (got 2048); the KV-cache length is 'context'",
    "seq in decode")
  eq(err { model = "bert_large", mode = "decode", context = 128 },
    "field 'mode': the bert model builder (scripts/neusight/models/bert.lua) has no decode phase (decoder-only models with a KV cache: gpt, opt, llama, moe, deepseek); use mode = \"inference\"",
    "bert decode")
  eq(err { model = "bert_large", mode = "prefill", seq = 128 },
    "field 'mode': the bert model builder (scripts/neusight/models/bert.lua) has no prefill phase (decoder-only models with a KV cache: gpt, opt, llama, moe, deepseek); use mode = \"inference\"",
    "bert prefill")
  -- seq = 1 is accepted (and the default) in decode
  local w = workload.normalize { model = "llama3_8b", gpu = "h100", mode = "decode", batch = 8, context = 16 }
  eq(w.seq, 1, "decode seq default")
  eq(workload.normalize(w).seq, 1, "normalize is idempotent")
end

return T
