-- tests/scripts/test_opt_serving.lua — OPT's serving phases (issue 13: opt.lua had no prefill / decode): decode FLOPs and
-- the KV cache in closed form, prefill's kernels against gpt.lua's on the same shapes, the attention-score clamp only
-- in the eager chain, post-LN and project_in/out configs, the position table's bound, tensor parallelism.
local opt = require "neusight.models.opt"
local gpt = require "neusight.models.gpt"
local presets = require "neusight.models.presets"
local workload = require "neusight.workload"

local t = require("neusight.testing").bind(load_op, make_node)
local eq, kernels, flops, tp_plan, with = t.eq, t.kernels, t.flops, t.tp_plan, require("neusight.testing").with
local near = require("neusight.testing").near
local raises = require("neusight.testing").raises

local T = {}

local function phase_opts(phase, b, n, extra)
  local o = { batch = b, seq = phase == "decode" and 1 or n, context = phase == "decode" and n or nil, phase = phase,
              dtype = "bf16", attention = "sdpa" }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

-- Forward kernels of the nodes whose name `pick` accepts, as "node kernel b/m/n/k…" strings (count per node).
local function kernel_list(nodes, pick)
  local out = {}
  for _, n in ipairs(nodes) do
    if pick(n) then
      for _, k in ipairs((kernels(n, false))) do
        out[#out + 1] = ("%s x%d %s %s %s/%s/%s/%s/%s/%s %.17g %.17g"):format(n.op, n.count, k.name, k.kind,
          tostring(k.b), tostring(k.m), tostring(k.n), tostring(k.k), tostring(k.rows), tostring(k.hidden), k.flops,
          k.bytes or -1)
      end
    end
  end
  return out
end

-- Decode FLOPs = 2 · (matmul parameters) · B + 4 · B · heads · head_dim · (C + 1) · layers, the matmul parameters being
-- the q/k/v/out, fc1, fc2 weights of every layer and the (tied) LM head: ≈ 2 · parameters · B (the position table and
-- the biases, layer norms: under 1 % of OPT-1.3B's parameters, take no GEMM).
function T.test_opt_decode_flops_closed_form()
  local cfg = presets.opt_13
  local h, L, nh, ffn, V = cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.ffn_dim, cfg.vocab_size
  local hd = h // nh
  local matmul_params = L * (4 * h * h + 2 * h * ffn) + V * h
  for _, b in ipairs { 1, 16 } do
    for _, C in ipairs { 100, 2047 } do
      for _, attention in ipairs { "sdpa", "eager" } do
        local what = ("opt_13 b %d C %d %s"):format(b, C, attention)
        local nodes = opt.build(cfg, phase_opts("decode", b, C, { attention = attention }))
        eq(flops(nodes, false, "fw", "gemm"), 2 * matmul_params * b, what .. ": GEMM FLOPs")
        eq(flops(nodes, false, "fw", "attention"), 4 * b * nh * hd * (C + 1) * L, what .. ": decode attention FLOPs")
        eq(flops(nodes, false, "fw", "bmm"), 0, what .. ": no BMM")
        local attention_flops = 4 * b * nh * hd * (C + 1) * L
        near(flops(nodes, false, "fw"), 2 * matmul_params * b + attention_flops, what .. ": all kernels", 0.01)
        near(flops(nodes, false, "fw"), 2 * t.params(nodes) * b + attention_flops, what .. ": 2 · parameters · B", 0.01)
      end
    end
  end
end

-- KV cache per GPU = 2 · layers · B · tokens · kv heads (this rank's) · head_dim · KV dtype bytes; OPT is multi-head
-- (kv heads = num_attention_heads = 32, head_dim 64, 24 layers).
function T.test_opt_kv_cache_bytes_closed_form()
  local function kv(w)
    w.model, w.gpu, w.dtype = "opt_13", "H100-SXM5-80GB", w.dtype or "bf16"
    return workload.build(w).kv_cache_bytes
  end
  eq(kv { mode = "decode", batch = 8, context = 1000 }, 2 * 24 * 8 * 1001 * 32 * 64 * 2, "decode: C + 1 tokens")
  eq(kv { mode = "prefill", batch = 8, seq = 2048 }, 2 * 24 * 8 * 2048 * 32 * 64 * 2, "prefill: S tokens")
  eq(kv { mode = "decode", batch = 2, context = 100, dtype = "fp32" }, 2 * 24 * 2 * 101 * 32 * 64 * 4, "fp32")
  eq(kv { mode = "decode", batch = 2, context = 100, kv_dtype = "fp8" }, 2 * 24 * 2 * 101 * 32 * 64 * 1, "fp8 cache")
  eq(kv { mode = "inference", batch = 8, seq = 2048 }, 2 * 24 * 8 * 2048 * 32 * 64 * 2, "inference: HF's cache")
  eq(kv { mode = "train", batch = 8, seq = 2048 }, nil, "no cache in training")
  local nodes = opt.build(presets.opt_13, phase_opts("decode", 8, 1000, { tp = 2, parallel = tp_plan(2, 8) }))
  eq(workload.kv_cache_bytes(nodes), 2 * 24 * 8 * 1001 * 16 * 64 * 2, "tp 2: half the heads per rank")
  for _, n in ipairs(nodes) do
    if n.op == "decode_attention" then
      eq(n.inputs[1][2] .. "/" .. n.inputs[2][2] .. "/" .. n.inputs[2][3], "16/16/1001", "16 heads over 16 kv heads")
    end
  end
end

-- OPT and GPT-2 are the same decoder where serving touches it: with equal widths, heads, FFN, vocabulary and positions
-- a prefill (and a decode step) has the same attention kernel, the same KV-cache writes and bytes, the same LM head on
-- each prompt's last token and the same GEMM FLOPs per layer (OPT's q/k/v are three GEMMs where GPT's c_attn is one;
-- its ReLU is one kernel where gelu_new is eight: those differ).
function T.test_opt_prefill_kernels_match_gpt()
  local o = presets.opt_13
  local g = { name = "gpt_like_opt", arch = "gpt", n_layer = o.num_hidden_layers, n_embd = o.hidden_size,
              n_head = o.num_attention_heads, n_inner = o.ffn_dim, vocab_size = o.vocab_size,
              n_positions = o.max_position_embeddings }
  local function named(suffix) return function(n) return n.name:sub(-#suffix) == suffix end end
  for _, case in ipairs { { "prefill", 4, 512, "sdpa" }, { "prefill", 2, 300, "eager" }, { "decode", 4, 700, "sdpa" },
                          { "decode", 3, 2047, "eager" } } do
    local phase, b, n, attention = case[1], case[2], case[3], case[4]
    local what = ("%s b %d n %d %s"):format(phase, b, n, attention)
    local on = opt.build(o, phase_opts(phase, b, n, { attention = attention }))
    local gn = gpt.build(g, phase_opts(phase, b, n, { attention = attention }))
    t.same(kernel_list(on, named("kv_cache_write")), kernel_list(gn, named("kv_cache_write")), what .. ": cache writes")
    eq(workload.kv_cache_bytes(on), workload.kv_cache_bytes(gn), what .. ": KV-cache bytes")
    t.same(kernel_list(on, function(x) return x.name == "lm_head" or x.name == "lm_head.last_token" end),
      kernel_list(gn, function(x) return x.name == "lm_head" or x.name == "lm_head.last_token" end), what .. ": LM head")
    if phase == "decode" then
      t.same(kernel_list(on, named("decode_attention")), kernel_list(gn, named("decode_attention")), what .. ": decode")
    elseif attention == "sdpa" then
      t.same(kernel_list(on, named(".sdpa")), kernel_list(gn, named(".sdpa")), what .. ": FlashAttention")
    end
    eq(flops(on, false, "fw", "gemm"), flops(gn, false, "fw", "gemm"), what .. ": GEMM FLOPs")
    eq(flops(on, false, "fw", "attention"), flops(gn, false, "fw", "attention"), what .. ": attention FLOPs")
    if phase == "prefill" then
      local last = on[#on - 1]
      eq(last.name .. " " .. table.concat(last.output, ","), "lm_head " .. b .. ",1," .. o.vocab_size, what .. ": lm_head")
    end
  end
end

-- The score clamp (torch.max(scores, finfo.min)) is a kernel of HF's eager chain only: an eager prefill keeps it (HF
-- runs it in inference too), the fused kernels (sdpa prefill, decode_attention) have none. Decode builds no causal
-- mask and takes its position from the cumsum over the (b, C + 1) attention mask.
function T.test_opt_clamp_and_masks_by_phase()
  local cfg = presets.opt_13
  local function ops(nodes)
    local by = {}
    for _, n in ipairs(nodes) do by[n.name] = n end
    return by
  end
  local eager = ops(opt.build(cfg, phase_opts("prefill", 2, 128, { attention = "eager" })))
  assert(eager["layers.self_attn.clamp"], "eager prefill: clamp")
  assert(eager["layers.self_attn.kv_cache_write"], "eager prefill: cache write")
  eq(eager["causal_mask.expand"].output[4], 128, "prefill: causal mask over the prompt")
  local sdpa = ops(opt.build(cfg, phase_opts("prefill", 2, 128)))
  eq(sdpa["layers.self_attn.clamp"], nil, "sdpa prefill: no clamp")
  for _, attention in ipairs { "sdpa", "eager" } do
    local dec = ops(opt.build(cfg, phase_opts("decode", 2, 500, { attention = attention })))
    for _, gone in ipairs { "layers.self_attn.clamp", "layers.self_attn.softmax", "layers.self_attn.qk",
                            "layers.self_attn.sdpa", "layers.self_attn.scaling", "causal_mask.cond", "causal_mask.expand" } do
      eq(dec[gone], nil, attention .. " decode: no " .. gone)
    end
    eq(table.concat(dec["embed_positions.cumsum"].inputs[1], ","), "2,501", "decode: positions from the whole mask")
    eq(table.concat(dec["embed_positions.past"].output, ","), "2,1", "decode: the new token's position")
    eq(table.concat(dec["layers.self_attn.kv_cache_write"].inputs[1], ","), "2,32,1,64", "decode: the new K (and V)")
    for _, n in pairs(dec) do
      if n.op == "linear" and n.layer == "layers" then eq(n.inputs[1][1] * (n.inputs[1][3] and n.inputs[1][2] or 1), 2,
        n.name .. ": B rows") end
    end
  end
  -- training and inference graphs keep no serving node
  for _, training in ipairs { true, false } do
    for _, n in ipairs(opt.build(cfg, { batch = 2, seq = 128, training = training, dtype = "bf16", attention = "eager" })) do
      assert(n.op ~= "setitem" and n.op ~= "decode_attention" and n.name ~= "lm_head.last_token", n.name)
    end
  end
end

-- Every configuration the builder takes serves: OPT-350m's post-LN with project_in/project_out (word_embed_proj_dim
-- 512 of hidden 1024) and the reference's one-layer "opt"; the cache is bounded by max_position_embeddings.
function T.test_opt_post_ln_projection_and_position_bound()
  local opt350m = with(presets.opt_13, { name = "opt_350m", num_hidden_layers = 24, hidden_size = 1024,
    num_attention_heads = 16, ffn_dim = 4096, word_embed_proj_dim = 512, do_layer_norm_before = false })
  for _, cfg in ipairs { opt350m, presets.opt } do
    local wep = cfg.word_embed_proj_dim
    for _, phase in ipairs { "prefill", "decode" } do
      local nodes = opt.build(cfg, phase_opts(phase, 3, 200))
      local head, out
      for _, n in ipairs(nodes) do
        if n.name == "lm_head" then head = n end
        if n.name == "project_out" then out = n end
      end
      eq(table.concat(head.inputs[1], ","), "3,1," .. wep, cfg.name .. " " .. phase .. ": lm_head on one token per sequence")
      eq(out.inputs[1][2], phase == "prefill" and 200 or 1, cfg.name .. " " .. phase .. ": project_out on every position")
    end
  end
  raises("opt model 'opt_13': context 2048 + 1 new token exceeds max_position_embeddings 2048, the rows of its learned position table: give a context of at most 2047", opt.build, presets.opt_13,
    phase_opts("decode", 1, 2048))
  raises("opt model 'opt_13': seq 2049 exceeds max_position_embeddings 2048, the rows of its learned position table: give a seq of at most 2048", opt.build, presets.opt_13,
    phase_opts("prefill", 1, 2049))
  opt.build(presets.opt_13, phase_opts("decode", 1, 2047)) -- 2048 positions: the table's last row
end

-- Tensor parallelism: heads and ffn_dim split, the row-parallel all-reduces on B tokens in decode.
function T.test_opt_decode_tp2()
  local one = opt.build(presets.opt_13, phase_opts("decode", 8, 1024))
  local two = opt.build(presets.opt_13, phase_opts("decode", 8, 1024, { tp = 2, parallel = tp_plan(2, 8) }))
  eq(2 * flops(two, false, "fw", "attention"), flops(one, false, "fw", "attention"), "attention split over tp")
  eq(2 * flops(two, false, "fw", "gemm"), flops(one, false, "fw", "gemm"), "GEMMs split over tp")
  local reduces, decoders = {}, 0
  for _, n in ipairs(two) do
    if n.op == "decode_attention" then
      decoders = decoders + n.count
      eq(n.inputs[1][2] .. "/" .. n.inputs[2][2] .. "/" .. n.inputs[2][3], "16/16/1025", "this rank's heads over C + 1")
    end
    if n.op == "all_reduce" and n.attrs.direction == "forward" then
      reduces[#reduces + 1] = n.name .. " " .. table.concat(n.inputs[1], ",")
    end
  end
  t.same(reduces, { "embed_tokens.tp_all_reduce 8,1,2048", "layers.self_attn.tp_out 8,1,2048",
                    "layers.fc2.tp_out 8,2048" }, "forward all-reduces on B tokens")
  eq(decoders, 24, "one decode attention per layer and rank")
end

-- Serving kernels (opts.megatron: serve's default, predict --kernels megatron): q, k and v are one GEMM, as vLLM's OPT
-- runs them (one QKVParallelLinear with bias) and Megatron-Core's linear_qkv (neusight.nodes qkv); --kernels eager keeps
-- HF's three. Per layer, the kernel multiset is HF's but for those GEMMs: eager 3 q/k/v GEMMs forward (6 backward),
-- megatron 1 (2), of three times the width; every other kernel the same, in every phase and attention. The same
-- parameters and FLOPs either way, and under tp = 2 each rank runs half of the unsharded work (heads split, no
-- model-FLOPs copies: OPT is multi-head).
function T.test_opt_megatron_one_qkv_gemm()
  local QKV = "^layers%.self_attn%.[qkv]+_proj$"
  local function layer_kernels(nodes, training, pick)
    local out = {}
    for _, n in ipairs(nodes) do
      if n.layer == "layers" and pick(n) then
        local fw, bw = kernels(n, training)
        for phase, list in pairs { fw = fw, bw = bw } do
          for _, k in ipairs(list) do
            out[#out + 1] = ("%s %s x%d %s %s %s/%s/%s/%s/%s/%s %.17g %.17g"):format(phase, n.op, n.count, k.name, k.kind,
              tostring(k.b), tostring(k.m), tostring(k.n), tostring(k.k), tostring(k.rows), tostring(k.hidden), k.flops,
              k.bytes or -1)
          end
        end
      end
    end
    table.sort(out)
    return out
  end
  local function gemms(nodes, training) return ("%d %d %s"):format(t.gemm_counts(nodes, "layers", QKV, training)) end
  local cfg = presets.opt_13
  local h, nh = cfg.hidden_size, cfg.num_attention_heads
  for _, case in ipairs { { "prefill", 4, 512, "sdpa" }, { "prefill", 2, 300, "eager" }, { "decode", 4, 700, "sdpa" },
                          { "decode", 3, 2047, "eager" }, { "train", 2, 256, "sdpa" }, { "train", 2, 128, "eager" } } do
    local phase, b, n, attention = case[1], case[2], case[3], case[4]
    local training = phase == "train"
    local function build(megatron, tp)
      local o = training and { batch = b, seq = n, training = true, dtype = "bf16", attention = attention }
        or phase_opts(phase, b, n, { attention = attention })
      o.megatron, o.tp, o.parallel = megatron, tp, tp and tp_plan(tp, b) or nil
      return opt.build(cfg, o)
    end
    local what = ("%s b %d n %d %s"):format(phase, b, n, attention)
    local hf, mg = build(false), build(true)
    local three = "layers.self_attn.q_proj layers.self_attn.k_proj layers.self_attn.v_proj"
    eq(gemms(hf, training), (training and "3 6 " or "3 0 ") .. three, what .. ": eager, HF's q/k/v projections")
    eq(gemms(mg, training), (training and "1 2 " or "1 0 ") .. "layers.self_attn.qkv_proj", what .. ": megatron, one GEMM")
    local function other(x) return not x.name:match(QKV) end
    t.same(layer_kernels(mg, training, other), layer_kernels(hf, training, other), what .. ": every other layer kernel")
    for _, x in ipairs(mg) do
      if x.name == "layers.self_attn.qkv_proj" then
        eq(x.output[#x.output], 3 * h, what .. ": q, k and v of every head in one output")
        eq(x.attrs.bias, true, what .. ": with OPT's bias")
        eq(x.attrs.model_flops_copies, nil, what .. ": multi-head: no model-FLOPs copies")
      end
    end
    eq(t.params(mg), t.params(hf), what .. ": the same parameters")
    for _, p in ipairs(training and { "fw", "bw" } or { "fw" }) do
      eq(flops(mg, training, p), flops(hf, training, p), what .. ": the same " .. p .. " FLOPs")
      eq(flops(mg, training, p, "gemm"), flops(hf, training, p, "gemm"), what .. ": the same " .. p .. " GEMM FLOPs")
    end
    local two = build(true, 2)
    for _, x in ipairs(two) do
      if x.name == "layers.self_attn.qkv_proj" then
        eq(x.output[#x.output], 3 * h // 2, what .. ": tp 2, this rank's " .. nh // 2 .. " heads")
        eq(x.attrs.model_flops_copies, nil, what .. ": tp 2, no model-FLOPs copies")
      end
    end
    eq(gemms(two, training), (training and "1 2 " or "1 0 ") .. "layers.self_attn.qkv_proj", what .. ": tp 2, one GEMM")
    local function layer_flops(nodes, p, kind)
      local sum = 0
      for _, x in ipairs(nodes) do
        if x.layer == "layers" and x.name:match(QKV) then
          local fw, bw = kernels(x, training)
          for _, k in ipairs(p == "fw" and fw or bw) do if k.kind == kind then sum = sum + x.count * k.flops end end
        end
      end
      return sum
    end
    for _, p in ipairs(training and { "fw", "bw" } or { "fw" }) do
      eq(2 * layer_flops(two, p, "gemm"), layer_flops(mg, p, "gemm"), what .. ": tp 2, q/k/v " .. p .. " GEMMs × 2")
      eq(2 * flops(two, training, p, "gemm"), flops(mg, training, p, "gemm"), what .. ": tp 2, " .. p .. " GEMMs × 2")
      eq(2 * flops(two, training, p, "attention") + 2 * flops(two, training, p, "bmm"),
        flops(mg, training, p, "attention") + flops(mg, training, p, "bmm"), what .. ": tp 2, " .. p .. " attention × 2")
    end
  end
end

return T
