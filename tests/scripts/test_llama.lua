-- tests/scripts/test_llama.lua — Llama-family builder: HF parameter counts, closed-form FLOPs, one layer's kernels
-- against HF's module structure (eager and sdpa), variants (Mistral, Qwen2, Qwen3), tensor/sequence parallelism, errors.
local K = require "neusight.kernels"
local llama = require "neusight.models.llama"
local hf = require "neusight.models.hf"
local presets = require "neusight.models.presets"

local t = require("neusight.testing").bind(load_op, make_node)
local eq, kernels, flops, total_params = t.eq, t.kernels, t.flops, t.params
local tp_plan, matmul_flops = t.tp_plan, t.matmul_flops
local raises = require("neusight.testing").raises

local T = {}

local LLAMA_PRESETS = { "llama2_7b", "llama2_13b", "llama2_70b", "llama3_8b", "llama3_70b", "llama3_405b",
  "llama32_1b", "llama32_3b", "mistral_7b", "qwen25_7b", "qwen25_72b", "qwen3_8b", "qwen3_32b", "phi3_mini", "gemma_7b",
  "gemma2_9b" }

-- A config table derived from `base` with `over` on top (own keys only: the builder checks them).
local function with(base, over)
  local c = {}
  for k, v in pairs(base) do c[k] = v end
  for k, v in pairs(over or {}) do c[k] = v end
  return c
end

-- A tiny GQA config: 4 query heads over 2 key/value heads of 16, SwiGLU 96 wide.
local TINY = { name = "tiny", arch = "llama", vocab_size = 100, hidden_size = 64, intermediate_size = 96,
  num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2 }

---------------------------------------------------------------------------------------------------
-- The two ops the builder added: silu and cast (canonical nodes)

function T.test_silu_op()
  local rule = load_op("silu")
  local node = make_node { op = "silu", name = "act_fn", inputs = { { 1, 4096, 14336 } }, output = { 1, 4096, 14336 },
                           dtype = "bf16" }
  local n = 4096 * 14336
  local fw, bw = rule.forward(node, t.GPU), rule.backward(node, t.GPU)
  eq(K.describe_all(fw) .. " | " .. K.describe_all(bw), "VECsilu(4096,14336) | VECsilu_backward(4096,14336)", "kernels")
  eq(fw[1].flops, 4 * n, "x / (1 + exp(−x)): 4 FLOPs per element")
  eq(fw[1].bytes, 2 * 2 * n, "reads x, writes y")
  eq(bw[1].flops, 9 * n, "dy·σ·(1 + x·(1 − σ)): 9 FLOPs per element")
  eq(bw[1].bytes, 3 * 2 * n, "reads dy and x, writes dx")
  eq(rule.accumulate, nil, "no parameters")
end

function T.test_cast_op()
  local rule = load_op("cast")
  local up = make_node { op = "cast", name = "to_fp32", inputs = { { 2, 8, 64 } }, output = { 2, 8, 64 }, dtype = "fp32",
                         attrs = { from = "bf16" } }
  local fw, bw = rule.forward(up, t.GPU), rule.backward(up, t.GPU)
  eq(K.describe_all(fw) .. " | " .. K.describe_all(bw), "MEM((2,8,64),(2,8,64)) | MEM((2,8,64),(2,8,64))", "kernels")
  eq(fw[1].bytes, 1024 * 2 + 1024 * 4, "bf16 read, fp32 written")
  eq(bw[1].bytes, fw[1].bytes, "the gradient cast back")
  local copy = make_node { op = "cast", name = "copy", inputs = { { 1000 } }, output = { 1000 }, dtype = "bf16" }
  eq(rule.forward(copy, t.GPU)[1].bytes, 4000, "without attrs.from: a copy in the node's dtype")
end

---------------------------------------------------------------------------------------------------
-- Parameter counts

-- HuggingFace's num_parameters() of the published checkpoints.
function T.test_parameter_counts_equal_huggingface()
  local function count(name) return total_params(llama.build(presets[name], { batch = 1, seq = 8, training = true })) end
  eq(count("llama32_1b"), 1235814400, "meta-llama/Llama-3.2-1B")
  eq(count("llama32_3b"), 3212749824, "meta-llama/Llama-3.2-3B")
  eq(count("llama3_8b"), 8030261248, "meta-llama/Llama-3.1-8B")
end

-- Closed form: embedding + layers × (attention + MLP + 2 norms [+ q_norm, k_norm; Gemma2: 4 norms]) + final norm +
-- untied lm_head (Phi-3's fused qkv_proj and gate_up_proj hold the same weights as the separate projections).
local function closed_form_params(cfg)
  local h, I, L, V = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.vocab_size
  local nh = cfg.num_attention_heads
  local kvh = cfg.num_key_value_heads or nh
  local hd = cfg.head_dim or h // nh
  local qwen2, qwen3 = cfg.model_type == "qwen2", cfg.model_type == "qwen3"
  local attention = h * nh * hd + 2 * h * kvh * hd + nh * hd * h
  if qwen2 then attention = attention + nh * hd + 2 * kvh * hd end -- q/k/v biases
  local mlp = 3 * h * I
  local norms = (cfg.model_type == "gemma2" and 4 or 2) * h + (qwen3 and 2 * hd or 0)
  return V * h + L * (attention + mlp + norms) + h + (cfg.tie_word_embeddings and 0 or V * h)
end

function T.test_every_preset_matches_the_closed_form()
  for _, name in ipairs(LLAMA_PRESETS) do
    local cfg = presets[name]
    eq(cfg.arch, "llama", name .. " arch")
    eq(total_params(llama.build(cfg, { batch = 1, seq = 8, training = true })), closed_form_params(cfg), name)
  end
  -- The published totals of the others (HF num_parameters()), as a check on the preset shapes.
  local published = { llama2_7b = 6738415616, llama2_13b = 13015864320, llama2_70b = 68976648192,
    llama3_70b = 70553706496, llama3_405b = 405853388800, mistral_7b = 7241732096, qwen25_7b = 7615616512,
    qwen25_72b = 72706203648, qwen3_8b = 8190735360, qwen3_32b = 32762123264, phi3_mini = 3821079552,
    gemma_7b = 8537680896, gemma2_9b = 9241705984 }
  for name, want in pairs(published) do eq(closed_form_params(presets[name]), want, name .. " published") end
end

-- HF's config-class defaults: LlamaConfig() is Llama-2-7B's shape, MistralConfig() Mistral-7B's.
function T.test_config_class_defaults()
  local function count(cfg) return total_params(llama.build(cfg, { batch = 1, seq = 8 })) end
  eq(count({ name = "d" }), 6738415616, "LlamaConfig()")
  eq(count({ name = "d", model_type = "mistral" }), 7241732096, "MistralConfig()")
  local qwen2 = { model_type = "qwen2", vocab_size = 151936, hidden_size = 4096, intermediate_size = 22016,
    num_hidden_layers = 32, num_attention_heads = 32, num_key_value_heads = 32 }
  eq(count({ name = "d", model_type = "qwen2" }), closed_form_params(qwen2), "Qwen2Config()")
  eq(count({ name = "d", model_type = "qwen3" }), closed_form_params(with(qwen2, { model_type = "qwen3", head_dim = 128 })),
    "Qwen3Config()")
  -- Llama: attention_bias on q/k/v/o, mlp_bias on gate/up/down.
  local base = count(TINY)
  eq(count(with(TINY, { attention_bias = true })), base + 2 * (4 * 16 + 2 * 2 * 16 + 64), "attention_bias")
  eq(count(with(TINY, { mlp_bias = true })), base + 2 * (96 + 96 + 64), "mlp_bias")
end

---------------------------------------------------------------------------------------------------
-- FLOPs

-- GEMM FLOPs per token = 2 · (every projection's weights, lm_head included even when tied); attention:
-- sdpa's causal kernel sees s(s+1)/2 query/key pairs at 4·head_dim each, eager's two BMMs the full s × s.
function T.test_flops_per_token_closed_form()
  local b, s = 2, 64
  for _, name in ipairs { "llama32_1b", "qwen25_7b", "qwen3_8b", "llama2_7b", "phi3_mini", "gemma_7b", "gemma2_9b" } do
    local cfg = presets[name]
    local h, I, L, V = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.vocab_size
    local nh = cfg.num_attention_heads
    local kvh, hd = cfg.num_key_value_heads, cfg.head_dim or h // nh
    local matmul_params = L * (2 * h * nh * hd + 2 * h * kvh * hd + 3 * h * I) + V * h
    for _, attention in ipairs { "sdpa", "eager" } do
      local nodes = llama.build(cfg, { batch = b, seq = s, training = true, attention = attention, dtype = "bf16" })
      eq(flops(nodes, true, "fw", "gemm"), 2 * matmul_params * b * s, name .. " GEMM FLOPs, " .. attention)
      eq(flops(nodes, true, "bw", "gemm"), 2 * flops(nodes, true, "fw", "gemm"), name .. " backward GEMMs")
      if attention == "sdpa" then
        eq(flops(nodes, true, "fw", "attention"), 4 * hd * L * nh * b * s * (s + 1) // 2, name .. " causal attention")
        eq(flops(nodes, true, "bw", "attention"), 10 * hd * L * nh * b * s * (s + 1) // 2, name .. " attention bw")
        eq(flops(nodes, true, "fw", "bmm"), 0, name .. " no BMMs with sdpa")
      else
        eq(flops(nodes, true, "fw", "bmm"), 4 * hd * L * nh * b * s * s, name .. " eager QKᵀ and PV")
        eq(flops(nodes, true, "fw", "attention"), 0, name .. " no fused kernel in eager")
      end
    end
  end
end

---------------------------------------------------------------------------------------------------
-- One layer's kernels against HF's module structure

-- Forward kernels of the layer nodes, one string per node that launches any (bf16: RMSNorm casts to fp32).
local function layer_rows(nodes, layer)
  local rows = {}
  for _, n in ipairs(nodes) do
    if n.layer == layer then
      local fw = kernels(n, false)
      if #fw > 0 then rows[#rows + 1] = n.name:gsub("^[%w_]+%.", "") .. " " .. K.describe_all(fw) end
    end
  end
  return rows
end

-- TINY, b = 2, s = 8 (16 tokens), bf16. LlamaDecoderLayer: input_layernorm (LlamaRMSNorm: to(fp32), pow, mean,
-- + eps, rsqrt, mul, to(bf16), weight ·), q/k/v_proj, apply_rotary_pos_emb (q·cos, −q2, cat, ·sin, +; the same
-- for k over 2 heads), attention, o_proj, residual, post_attention_layernorm, gate_proj, SiLU, up_proj, mul,
-- down_proj, residual.
local function rms(p, rows, hidden, shape, col)
  return {
    p .. ".to_fp32 MEM(" .. shape .. "," .. shape .. ")", p .. ".pow VECpowu(" .. rows .. "," .. hidden .. ")",
    p .. ".mean MEM(" .. shape .. "," .. col .. ")", p .. ".eps VECaddu(" .. rows .. ",1)",
    p .. ".rsqrt MEM(" .. col .. "," .. col .. ")", p .. ".normalize VECmul(" .. rows .. "," .. hidden .. ")",
    p .. ".to_dtype MEM(" .. shape .. "," .. shape .. ")", p .. ".scale VECmul(" .. rows .. "," .. hidden .. ")",
  }
end
local function concat(...)
  local out = {}
  for _, list in ipairs { ... } do
    for _, v in ipairs(list) do out[#out + 1] = v end
  end
  return out
end
local PROJ = {
  "self_attn.q_proj Linear(16,64,64)", "self_attn.k_proj Linear(16,64,32)", "self_attn.v_proj Linear(16,64,32)",
  "self_attn.rotary.q.cos VECmul(64,16)", "self_attn.rotary.q.neg VECmulu(64,8)",
  "self_attn.rotary.q.rotate_half MEM((2,4,8,8),(2,4,8,8),(2,4,8,16))", "self_attn.rotary.q.sin VECmul(64,16)",
  "self_attn.rotary.q.add VECadd(64,16)",
  "self_attn.rotary.k.cos VECmul(32,16)", "self_attn.rotary.k.neg VECmulu(32,8)",
  "self_attn.rotary.k.rotate_half MEM((2,2,8,8),(2,2,8,8),(2,2,8,16))", "self_attn.rotary.k.sin VECmul(32,16)",
  "self_attn.rotary.k.add VECadd(32,16)",
}
local EAGER = {
  "self_attn.repeat_kv.k MEM((2,2,8,16),(2,4,8,16))", "self_attn.repeat_kv.v MEM((2,2,8,16),(2,4,8,16))",
  "self_attn.qk BMM(8,8,16,8)", "self_attn.scale VECmulu(64,8)", "self_attn.mask VECadd(64,8)",
  "self_attn.softmax VECsoftmax(64,8)", "self_attn.pv BMM(8,8,8,16)",
  "self_attn.contiguous MEM((2,4,8,16),(2,8,4,16))",
}
local SDPA = { "self_attn.sdpa FlashAttention(causal,b2,q8,kv8,d16,h4/2)" }
local REST = concat({ "self_attn.o_proj Linear(16,64,64)", "attn_residual VECadd(16,64)" },
  rms("post_attention_layernorm", 16, 64, "(2,8,64)", "(2,8,1)"), {
    "mlp.gate_proj Linear(16,64,96)", "mlp.act_fn VECsilu(16,96)", "mlp.up_proj Linear(16,64,96)",
    "mlp.mul VECmul(16,96)", "mlp.down_proj Linear(16,96,64)", "mlp_residual VECadd(16,64)" })

function T.test_one_layer_kernels_eager_and_sdpa()
  local norm = rms("input_layernorm", 16, 64, "(2,8,64)", "(2,8,1)")
  for attention, core in pairs { eager = EAGER, sdpa = SDPA } do
    local nodes = llama.build(TINY, { batch = 2, seq = 8, training = true, dtype = "bf16", attention = attention })
    t.rows_match(layer_rows(nodes, "layers"), concat(norm, PROJ, core, REST))
  end
  -- fp32: no casts around the RMSNorms; MHA (kv heads = heads): no repeat_kv copies.
  local nodes = llama.build(with(TINY, { num_key_value_heads = 4 }), { batch = 2, seq = 8, training = true })
  local ops = {}
  for _, n in ipairs(nodes) do
    if n.layer == "layers" then ops[n.op] = (ops[n.op] or 0) + 1 end
  end
  eq(ops.cast, nil, "no casts in fp32")
  eq(ops.contiguous, 3, "rotate_half ×2 + the output copy, no repeat_kv")
  eq(ops.dropout, nil, "attention_dropout = 0: no dropout kernel")
end

-- Megatron-LM's kernels (opts.megatron: kernels = "megatron", the default of a parallel run): one fused kernel per
-- RMSNorm (not HF's eight), per rotary embedding of q and of k (not five) and for silu(gate) · up (not two); in bf16
-- eager attention, scale + causal mask + softmax as one kernel (gpt.lua's FusedScaleMaskSoftmax); q, k and v in one
-- GEMM (linear_qkv: 4 + 2 · 2 heads of 16), gate and up in one (linear_fc1: 2 · 96).
local MEGATRON_PROJ = { "input_layernorm VECrmsnorm(16,64)", "self_attn.qkv_proj Linear(16,64,128)",
  "self_attn.rotary.q VECrope(64,16)", "self_attn.rotary.k VECrope(32,16)" }
local MEGATRON_EAGER = {
  "self_attn.repeat_kv.k MEM((2,2,8,16),(2,4,8,16))", "self_attn.repeat_kv.v MEM((2,2,8,16),(2,4,8,16))",
  "self_attn.qk BMM(8,8,16,8)", "self_attn.softmax VECsoftmax(64,8)", "self_attn.pv BMM(8,8,8,16)",
  "self_attn.contiguous MEM((2,4,8,16),(2,8,4,16))",
}
local MEGATRON_REST = { "self_attn.o_proj Linear(16,64,64)", "attn_residual VECadd(16,64)",
  "post_attention_layernorm VECrmsnorm(16,64)", "mlp.gate_up_proj Linear(16,64,192)", "mlp.swiglu VECswiglu(16,96)", "mlp.down_proj Linear(16,96,64)", "mlp_residual VECadd(16,64)" }

function T.test_megatron_fused_kernels()
  for attention, core in pairs { eager = MEGATRON_EAGER, sdpa = SDPA } do
    local nodes = llama.build(TINY, { batch = 2, seq = 8, training = true, dtype = "bf16", attention = attention,
                                      megatron = true })
    t.rows_match(layer_rows(nodes, "layers"), concat(MEGATRON_PROJ, core, MEGATRON_REST))
    local plain = llama.build(TINY, { batch = 2, seq = 8, training = true, dtype = "bf16", attention = attention })
    eq(total_params(nodes), total_params(plain), attention .. ": the same parameters (a norm's weight is its node's)")
    local by = {}
    for _, n in ipairs(nodes) do by[n.name] = n end
    eq(by.norm.op, "rms_norm", "the final norm is fused too")
    eq(by["layers.input_layernorm"].params, 0, "γ is a weight node")
    eq(by["layers.input_layernorm.weight"].params, 64, "γ")
  end
  -- fp32: Megatron's fused softmax takes 16-bit only, so eager attention keeps HF's scale and mask (gpt.lua's rule)
  local fp32 = llama.build(TINY, { batch = 2, seq = 8, training = true, attention = "eager", megatron = true })
  local names = {}
  for _, n in ipairs(fp32) do names[n.name] = n.op end
  eq(names["layers.self_attn.scale"], "mul", "fp32: scale kept")
  eq(names["layers.input_layernorm"], "rms_norm", "fp32: the norm fused")
  -- Gemma2's soft-capped scores have no fused kernel: the chain stays, the norms (4 per layer) fuse
  local gemma2 = llama.build(presets.gemma2_9b, { batch = 1, seq = 64, training = true, dtype = "bf16",
                                                  attention = "eager", megatron = true })
  local ops = {}
  for _, n in ipairs(gemma2) do
    if n.layer == "layers" then ops[n.op] = (ops[n.op] or 0) + 1 end
  end
  eq(ops.tanh, 1, "Gemma2: the soft-cap's tanh stays")
  eq(ops.rms_norm, 4, "Gemma2: four fused (1 + weight) norms per layer")
  eq(ops.geglu, 1, "Gemma's GeGLU: Megatron's fused bias_geglu kernel")
  eq(ops.gelu, nil, "no gelu kernel of its own")
  eq(ops.cast, nil, "no fp32 casts")
end

-- Megatron-Core's linear_qkv and linear_fc1: under Megatron's kernels the q/k/v projections are one GEMM each way (the
-- forward GEMM, and in backward one dgrad and one wgrad GEMM), the gate/up projections one more, where HF's eager graph
-- runs three and two (each with its own dgrad and wgrad); with the same parameters, the same GEMM FLOPs and the same
-- saved activations (the normed input once), on one GPU and under tp (heads and intermediate size split; at tp 16 the
-- rank's one key/value head is shared by 2 ranks: the fused node's model FLOPs count tp · its 4 heads over the model's
-- 48, 4 / 3 copies), with or without sequence parallelism. Phi-3's checkpoint fuses them already, in both graphs.
function T.test_megatron_linear_qkv_and_fc1_are_one_gemm_each_way()
  local function gemms(nodes, pattern) return t.gemm_counts(nodes, "layers", pattern, true) end
  local QKV, FC1 = "^layers%.self_attn%.[qkv]+_proj$", "^layers%.mlp%.[gateup_]+proj$"
  local node_saved = require("neusight.memory").node_saved
  for _, case in ipairs { { "llama3_8b", 1 }, { "llama3_8b", 2, true }, { "llama3_8b", 16 }, { "qwen25_7b", 4 },
                          { "phi3_mini", 2 } } do
    local name, tp, sp = case[1], case[2], case[3]
    local cfg = presets[name]
    local function build(megatron)
      return llama.build(cfg, { batch = 2, seq = 64, training = true, dtype = "bf16", attention = "sdpa",
        tp = tp > 1 and tp or nil, parallel = tp > 1 and tp_plan(tp, 2) or nil, sequence_parallel = sp,
        megatron = megatron })
    end
    local what = ("%s tp %d%s"):format(name, tp, sp and " sp" or "")
    local hf_nodes, mg_nodes = build(false), build(true)
    local fused = name == "phi3_mini"
    local fw, bw, names = gemms(hf_nodes, QKV)
    eq(fw .. " " .. bw, fused and "1 2" or "3 6", what .. ": HF's q/k/v projections (" .. names .. ")")
    fw, bw, names = gemms(hf_nodes, FC1)
    eq(fw .. " " .. bw, fused and "1 2" or "2 4", what .. ": HF's gate/up projections (" .. names .. ")")
    fw, bw, names = gemms(mg_nodes, QKV)
    eq(fw .. " " .. bw .. " " .. names, "1 2 layers.self_attn.qkv_proj", what .. ": Megatron's linear_qkv")
    fw, bw, names = gemms(mg_nodes, FC1)
    eq(fw .. " " .. bw .. " " .. names, "1 2 layers.mlp.gate_up_proj", what .. ": Megatron's linear_fc1")
    eq(total_params(mg_nodes), total_params(hf_nodes), what .. ": the same parameters")
    local function proj(n) return n.name:match(QKV) or n.name:match(FC1) end
    eq(matmul_flops(mg_nodes, proj), matmul_flops(hf_nodes, proj), what .. ": the same GEMM FLOPs")
    local function saved_by(nodes)
      local sum = 0
      for _, n in ipairs(nodes) do if proj(n) then sum = sum + node_saved(make_node(n), load_op(n.op)) * n.count end end
      return sum
    end
    eq(saved_by(mg_nodes), saved_by(hf_nodes), what .. ": the normed input saved once")
    for _, n in ipairs(mg_nodes) do
      if n.name == "layers.self_attn.qkv_proj" then
        eq(n.attrs.model_flops_copies, tp == 16 and 4 / 3 or nil, what .. ": the fused node's model-FLOPs copies")
      end
    end
  end
end

-- One node per norm under Megatron's kernels in a parallel run, on s/tp tokens with sequence parallelism, for every
-- builder that shares neusight.nodes' pieces (Llama, Qwen3's q/k norms, Mixtral and DeepSeek, loop and grouped experts):
-- no node of HF's eager chains is left.
function T.test_megatron_kernels_every_llama_family_builder()
  for _, case in ipairs { { "llama3_8b" }, { "qwen3_8b" }, { "mixtral_8x7b", "loop" }, { "mixtral_8x7b", "grouped" },
                          { "qwen3_30b_a3b", "grouped" }, { "deepseek_v2_lite", "loop" }, { "deepseek_v2_lite", "grouped" } } do
    local name, experts = case[1], case[2]
    local cfg = presets[name]
    local builder = require("neusight.models." .. cfg.arch)
    local b, s, tp = 2, 64, 2
    local nodes = builder.build(cfg, { batch = b, seq = s, training = true, dtype = "bf16", attention = "sdpa",
      tp = tp, parallel = tp_plan(tp, b), sequence_parallel = true, megatron = true, experts = experts })
    local ops = {}
    for _, n in ipairs(nodes) do
      ops[n.op] = (ops[n.op] or 0) + 1
      local norm_part = n.name:match("layernorm%.(.*)$") or n.name:match("^norm%.(.*)$") or n.name:match("%.[qk]_norm%.(.*)$")
      if n.op == "silu" or (norm_part and norm_part ~= "weight") or n.name:match("rotary%.[qk]%.") then
        -- a kernel of HF's RMSNorm, RoPE or act_fn
        error(("%s: %s keeps HF's eager %s"):format(name, n.name, n.op))
      end
      if n.name:match("layernorm$") or n.name == "norm" or n.name:match("%.[qk]_norm$") then -- the RMSNorms
        eq(n.op, "rms_norm", name .. " " .. n.name)
        if n.name:match("layernorm$") and not n.name:match("_a_layernorm$") then
          eq(n.output[2], s // tp, name .. " " .. n.name .. ": on s/tp tokens")
        end
      end
      if n.name:match("rotary") then eq(n.op, "rope", name .. " " .. n.name) end
    end
    eq((ops.rms_norm or 0) > 0 and (ops.rope or 0) > 0 and (ops.swiglu or 0) > 0, true, name .. ": fused kernels")
  end
end

-- The node multiset of one layer per op, as HF's modules call them (llama3_8b, bf16).
function T.test_one_layer_op_multiset()
  local want = {
    eager = { linear = 7, cast = 4, pow = 2, mean = 2, rsqrt = 2, weight = 2, add = 7, mul = 12, contiguous = 5,
              matmul = 2, softmax = 1, silu = 1 },
    sdpa = { linear = 7, cast = 4, pow = 2, mean = 2, rsqrt = 2, weight = 2, add = 6, mul = 11, contiguous = 2,
             sdpa = 1, silu = 1 },
  }
  for attention, ops in pairs(want) do
    local got = {}
    for _, n in ipairs(llama.build(presets.llama3_8b, { batch = 1, seq = 128, dtype = "bf16", attention = attention })) do
      if n.layer == "layers" then
        got[n.op] = (got[n.op] or 0) + 1
        eq(n.count, 32, n.name .. " count")
      end
    end
    t.same(got, ops, attention)
  end
end

function T.test_model_prologue_and_epilogue()
  local nodes = llama.build(presets.llama32_1b, { batch = 1, seq = 16, training = true, dtype = "bf16" })
  eq(nodes[1].name, "embed_tokens", "first node")
  eq(nodes[1].attrs.num_embeddings, 128256, "vocabulary")
  local names = {}
  for i, n in ipairs(nodes) do names[n.name] = i end
  assert(names["norm.scale"] and names["norm.scale"] < names["lm_head"], "final norm before lm_head")
  eq(nodes[names["lm_head"]].params, 0, "tied lm_head owns no parameters")
  eq(nodes[names["lm_head"]].attrs.tied, "embed_tokens", "tied to embed_tokens")
  eq(nodes[#nodes].op, "cross_entropy", "loss in training")
  eq(nodes[#nodes - 1].name, "loss.logits_float", "the logits' upcast to fp32 (bf16: HF's logits.float())")
  eq(nodes[#nodes].dtype, "fp32", "the loss in fp32")
  local untied = llama.build(presets.llama3_8b, { batch = 1, seq = 16 })
  eq(untied[#untied].name, "lm_head", "no loss in inference")
  eq(untied[#untied].params, 4096 * 128256, "untied lm_head")
end

---------------------------------------------------------------------------------------------------
-- Variants

function T.test_qwen2_bias_and_qwen3_qk_norm()
  local q2 = llama.build(with(TINY, { model_type = "qwen2" }), { batch = 2, seq = 8, training = true })
  local q3 = llama.build(with(TINY, { model_type = "qwen3", head_dim = 32 }), { batch = 2, seq = 8, training = true })
  local by = {}
  for _, n in ipairs(q2) do by[n.name] = n end
  eq(by["layers.self_attn.q_proj"].params, 64 * 64 + 64, "qwen2 q_proj bias")
  eq(by["layers.self_attn.k_proj"].attrs.bias, true, "qwen2 k_proj bias")
  eq(by["layers.self_attn.o_proj"].attrs.bias, false, "qwen2 o_proj without bias")
  by = {}
  for _, n in ipairs(q3) do by[n.name] = n end
  eq(by["layers.self_attn.q_proj"].params, 64 * 4 * 32, "qwen3 head_dim 32: q_proj 64 → 128")
  eq(by["layers.self_attn.o_proj"].params, 4 * 32 * 64, "o_proj 128 → 64")
  eq(by["layers.self_attn.q_norm.weight"].params, 32, "q_norm over head_dim")
  eq(table.concat(by["layers.self_attn.k_norm.pow"].output, ","), "2,8,2,32", "k_norm over (b, s, kv heads, head_dim)")
  eq(by["layers.self_attn.q_norm.to_fp32"], nil, "fp32 model: no casts")
  assert(by["layers.self_attn.q_norm.scale"], "q_norm")
end

-- Mistral's window: eager unchanged; sdpa gets HF's explicit mask (a non-causal kernel) once s ≥ sliding_window.
function T.test_sliding_window()
  local mistral = with(TINY, { model_type = "mistral", sliding_window = 8 })
  local function sdpa_node(cfg, s, attention)
    for _, n in ipairs(llama.build(cfg, { batch = 1, seq = s, attention = attention or "sdpa" })) do
      if n.op == "sdpa" then return n end
    end
  end
  eq(sdpa_node(mistral, 4).attrs.causal, true, "s < window: causal")
  eq(sdpa_node(mistral, 8).attrs.causal, false, "s = window: HF builds the mask")
  eq(sdpa_node(with(mistral, { sliding_window = false }), 16).attrs.causal, true, "sliding_window None")
  eq(sdpa_node(with(TINY, { model_type = "mistral" }), 16).attrs.causal, true, "default window 4096")
  local a = llama.build(mistral, { batch = 1, seq = 16, attention = "eager" })
  local b = llama.build(with(mistral, { sliding_window = false }), { batch = 1, seq = 16, attention = "eager" })
  t.same(a, b, "eager")
  -- Qwen2: only with use_sliding_window, on layers ≥ max_window_layers: two layer groups.
  local qwen = with(TINY, { model_type = "qwen2", num_hidden_layers = 6, sliding_window = 8, max_window_layers = 4 })
  local function groups(cfg)
    local seen, out = {}, {}
    for _, n in ipairs(llama.build(cfg, { batch = 1, seq = 16, attention = "sdpa" })) do
      if n.layer ~= "" and not seen[n.layer] then
        seen[n.layer] = true
        out[#out + 1] = n.layer .. "×" .. n.count
      end
    end
    return table.concat(out, " ")
  end
  eq(groups(qwen), "layers×6", "use_sliding_window = false")
  eq(groups(with(qwen, { use_sliding_window = true })), "layers×4 sliding_layers×2", "layers 4, 5 windowed")
  eq(groups(with(qwen, { use_sliding_window = true, layer_types = { "full_attention", "sliding_attention",
    "full_attention", "full_attention", "full_attention", "sliding_attention" } })), "layers×4 sliding_layers×2",
    "layer_types")
  eq(groups(with(qwen, { use_sliding_window = true, max_window_layers = 0 })), "sliding_layers×6", "all windowed")
  eq(groups(with(mistral, { num_hidden_layers = 3 })), "sliding_layers×3", "mistral: every layer")
end

-- A serving prefill (opts.phase "prefill") runs the windowed FlashAttention kernel (vLLM, SGLang): causal, attrs.window,
-- FLOPs of the band's pairs (counted here query by query); at s ≤ window the causal kernel of the windowless model, in
-- one layer group; eager keeps HF's masked chain over every pair (PyTorch skips nothing).
function T.test_sliding_window_serving_prefill()
  local mistral = with(TINY, { model_type = "mistral", sliding_window = 8 })
  local function attention(cfg, s, att)
    local out = {}
    for _, n in ipairs(llama.build(cfg, { batch = 2, seq = s, attention = att or "sdpa", phase = "prefill" })) do
      if n.op == "sdpa" or n.op == "matmul" or n.op == "softmax" or n.op == "add" and n.name:find("mask") then
        local k = kernels(n, false)[1]
        out[#out + 1] = n.layer .. " " .. n.op .. " " .. tostring(n.attrs.causal) .. " " .. tostring(n.attrs.window)
          .. " " .. K.describe(k) .. " " .. ("%.17g"):format(k.flops) .. " " .. k.bytes
      end
    end
    return table.concat(out, "\n")
  end
  local none = with(mistral, { sliding_window = false })
  for _, s in ipairs { 4, 8 } do
    eq(attention(mistral, s), attention(none, s), "s = " .. s .. " ≤ window: the windowless kernel")
  end
  for _, s in ipairs { 9, 16, 40 } do
    local n
    for _, x in ipairs(llama.build(mistral, { batch = 2, seq = s, attention = "sdpa", phase = "prefill" })) do
      if x.op == "sdpa" then n = x end
    end
    eq(n.layer .. " " .. tostring(n.attrs.causal) .. " " .. n.attrs.window, "sliding_layers true 8", "s = " .. s)
    local pairs = 0
    for i = 1, s do pairs = pairs + math.min(i, 8) end
    local k = kernels(n, false)[1]
    eq(math.abs(k.flops - 4 * 16 * 2 * 4 * pairs) < 1e-9 * k.flops, true, ("s = %d: band flops %.17g"):format(s, k.flops))
    -- eager: the same chain as the windowless model's (QKᵀ, mask, softmax, ·V over all s × s)
    eq(attention(mistral, s, "eager"):gsub("sliding_layers", "layers"), attention(none, s, "eager"), "eager s = " .. s)
  end
end

function T.test_attention_dropout_kernel_only_when_positive()
  local function count(cfg, attention)
    local c = 0
    for _, n in ipairs(llama.build(cfg, { batch = 1, seq = 8, training = true, attention = attention })) do
      if n.op == "dropout" then c = c + 1 end
      if n.op == "sdpa" and n.attrs.dropout then c = c + 10 end
    end
    return c
  end
  eq(count(TINY, "eager"), 0, "p = 0")
  eq(count(with(TINY, { attention_dropout = 0.1 }), "eager"), 1, "p = 0.1: attention-probability dropout")
  eq(count(with(TINY, { attention_dropout = 0.1 }), "sdpa"), 10, "sdpa: dropout inside the kernel")
end

---------------------------------------------------------------------------------------------------
-- Tensor and sequence parallelism

function T.test_tp1_graph_is_unchanged()
  for _, cfg in ipairs { presets.llama32_1b, presets.qwen3_8b, TINY } do t.tp1_unchanged(llama, cfg, 2, 64) end
end

-- Column/row-parallel GEMMs and the attention split tp ways; with tp > kv heads each rank keeps one key/value head.
function T.test_tp_gemm_flops_split()
  local b, s = 2, 16
  local function kv(n) return n.name:find("k_proj", 1, true) or n.name:find("v_proj", 1, true) end
  local function not_kv(n) return not kv(n) end
  for _, attention in ipairs { "eager", "sdpa" } do
    local one = llama.build(TINY, { batch = b, seq = s, training = true, attention = attention })
    -- tp = 2 divides the 2 kv heads: everything splits.
    local two = llama.build(TINY, { batch = b, seq = s, training = true, attention = attention, tp = 2, parallel = tp_plan(2, b) })
    eq(2 * matmul_flops(two), matmul_flops(one), attention .. ": tp 2 GEMM/BMM FLOPs × tp")
    eq(2 * flops(two, true, "fw", "attention"), flops(one, true, "fw", "attention"), attention .. ": attention × tp")
    -- tp = 4 > 2 kv heads: one kv head per rank, each replicated on 2 ranks.
    local four = llama.build(TINY, { batch = b, seq = s, training = true, attention = attention, tp = 4, parallel = tp_plan(4, b) })
    eq(4 * matmul_flops(four, not_kv), matmul_flops(one, not_kv), attention .. ": tp 4 split GEMM/BMM FLOPs × tp")
    eq(4 * matmul_flops(four, kv), 2 * matmul_flops(one, kv), attention .. ": k/v GEMMs replicated tp / kv heads times")
    eq(4 * flops(four, true, "fw", "attention"), flops(one, true, "fw", "attention"), attention .. ": attention × tp")
    for _, n in ipairs(four) do
      if n.name == "layers.self_attn.k_proj" then eq(n.output[3], 16, "one kv head of 16 per rank") end
      if n.op == "sdpa" then eq(n.inputs[2][2] .. "/" .. n.inputs[1][2], "1/1", "sdpa: 1 query head over 1 kv head") end
    end
  end
  -- Real shapes: Llama-3-70B (64 heads, 8 kv heads) at tp 8 and 16.
  local cfg = presets.llama3_70b
  local one = llama.build(cfg, { batch = 1, seq = 32, training = true, attention = "sdpa" })
  for _, tp in ipairs { 8, 16 } do
    local sharded = llama.build(cfg, { batch = 1, seq = 32, training = true, attention = "sdpa", tp = tp, parallel = tp_plan(tp, 1) })
    local kv_copies = tp // math.min(tp, 8)
    eq(tp * matmul_flops(sharded, not_kv), matmul_flops(one, not_kv), "llama3_70b tp " .. tp)
    eq(tp * matmul_flops(sharded, kv), kv_copies * matmul_flops(one, kv), "llama3_70b k/v tp " .. tp)
  end
end

function T.test_tp_collectives_and_parameters()
  local b, s, tp = 2, 16, 2
  local nodes = llama.build(TINY, { batch = b, seq = s, training = true, tp = tp, parallel = tp_plan(tp, b) })
  local names, per_layer, outside = {}, { forward = 0, backward = 0 }, 0
  for i, n in ipairs(nodes) do
    names[n.name] = i
    if n.attrs.group == "tp" then
      eq(n.op, "all_reduce", n.name)
      if n.layer == "layers" then per_layer[n.attrs.direction] = per_layer[n.attrs.direction] + 1
      else outside = outside + 1 end
    end
  end
  eq(per_layer.forward, 2, "g after o_proj and down_proj")
  eq(per_layer.backward, 2, "f before q/k/v and gate/up")
  eq(outside, 3, "embedding g, lm_head f, cross-entropy")
  eq(names["layers.self_attn.tp_in"] + 1, names["layers.self_attn.q_proj"], "f before q_proj")
  eq(names["layers.self_attn.tp_out"] - 1, names["layers.self_attn.o_proj"], "g after o_proj")
  eq(names["layers.mlp.tp_in"] + 1, names["layers.mlp.gate_proj"], "f before gate_proj")
  eq(names["layers.mlp.tp_out"] - 1, names["layers.mlp.down_proj"], "g after down_proj")
  eq(names["embed_tokens.tp_out"] - 1, names["embed_tokens"], "g after the lookup")
  eq(names["lm_head.tp_in"] + 1, names["lm_head"], "f before lm_head")
  -- Per rank: half of every projection and of the vocabulary; norms replicated.
  local h, I, V = 64, 96, 100
  local per_layer_params = (h * 32 + 2 * h * 16 + 32 * h) + 3 * h * I / tp + 2 * h
  eq(total_params(nodes), 2 * per_layer_params + V / tp * h + h + V / tp * h, "parameters per rank")
end

function T.test_sequence_parallel()
  local b, s, tp = 2, 16, 4
  local nodes = llama.build(with(TINY, { num_key_value_heads = 4 }), { batch = b, seq = s, training = true, tp = tp,
    parallel = tp_plan(tp, b), sequence_parallel = true })
  local ops, by = {}, {}
  for _, n in ipairs(nodes) do
    by[n.name] = n
    if n.attrs.group == "tp" and n.layer == "layers" then ops[n.op] = (ops[n.op] or 0) + 1 end
  end
  eq(ops.all_reduce, nil, "no all-reduce in the layers")
  -- (Megatron's column-parallel linear keeps its input's shard and re-gathers it in backward under the dgrad GEMM:
  -- not a node)
  eq(ops.all_gather, 4, "all-gather forward before q/k/v and gate/up, backward after o_proj and down_proj")
  eq(ops.reduce_scatter, 4, "and their reduce-scatters")
  eq(by["layers.self_attn.q_proj"].attrs.sequence_shard, tp, "q_proj keeps its input's sequence shard")
  eq(by["layers.self_attn.o_proj"].attrs.sequence_shard, nil, "o_proj's input is its own (row-parallel)")
  eq(table.concat(by["layers.input_layernorm.pow"].output, ","), "2,4,64", "norms on s/tp tokens")
  eq(table.concat(by["layers.mlp_residual"].output, ","), "2,4,64", "residual on s/tp tokens")
  eq(table.concat(by["layers.self_attn.q_proj"].inputs[1], ","), "2,16,64", "q_proj sees the gathered sequence")
end

---------------------------------------------------------------------------------------------------
-- Errors

function T.test_errors()
  raises("llama model 'tiny': num_attention_heads (4) must be divisible by num_key_value_heads (3)",
    llama.build, with(TINY, { num_key_value_heads = 3 }), { batch = 1, seq = 8 })
  raises("llama model 'tiny': num_attention_heads = 4 is not divisible by tp = 3: give a tp that divides 4 and "
    .. "intermediate_size = 96 (1, 2, 4)", llama.build, TINY, { batch = 3, seq = 8, tp = 3, parallel = tp_plan(3, 3) })
  -- the degrees listed divide every size the builder splits: Llama-3-70B's shape (64 heads, intermediate 28672 =
  -- 2^12 x 7) at tp 3 was told "give a tp that divides 28672 (1, 2, 4, 7, 8, 14, 16, 28, 32, 56, 64)", and tp 7 then
  -- failed on the heads
  raises("llama model 'tiny': intermediate_size = 112 is not divisible by tp = 3: give a tp that divides 112 and "
    .. "num_attention_heads = 8 (1, 2, 4, 8)", llama.build,
    with(TINY, { num_attention_heads = 8, hidden_size = 64, intermediate_size = 112 }),
    { batch = 3, seq = 8, tp = 3, parallel = tp_plan(3, 3) })
  raises("llama model 'tiny': num_key_value_heads = 6 and tp = 4: tp must divide num_key_value_heads or be a multiple of it",
    llama.build, with(TINY, { num_attention_heads = 12, num_key_value_heads = 6, hidden_size = 192 }),
    { batch = 4, seq = 8, tp = 4, parallel = tp_plan(4, 4) })
  raises("llama model 'tiny': unknown field 'num_key_value_head' (did you mean 'num_key_value_heads'?)",
    llama.build, with(TINY, { num_key_value_head = 2 }), { batch = 1, seq = 8 })
  raises("llama model 'tiny': unknown field 'sliding_window'", -- a Mistral / Qwen field: LlamaConfig has no window
    llama.build, with(TINY, { sliding_window = 8 }), { batch = 1, seq = 8 })
  raises("llama model 'tiny': model_type \"mixtral\" is not supported (\"llama\", \"mistral\", \"qwen2\", \"qwen3\", "
    .. "\"phi3\", \"gemma\" or \"gemma2\")",
    llama.build, with(TINY, { model_type = "mixtral" }), { batch = 1, seq = 8 })
  raises("llama model 'tiny': hidden_act \"gelu\" is not supported (the Llama-family MLP is SwiGLU: \"silu\", or "
    .. "\"swish\", HF's other name for it)", llama.build, with(TINY, { hidden_act = "gelu" }), { batch = 1, seq = 8 })
  -- "swish" is HF's other name for SiLU (ACT2FN["swish"] is nn.SiLU): the same graph as "silu", not a refusal
  local silu, swish = llama.build(TINY, { batch = 1, seq = 8 }), llama.build(with(TINY, { hidden_act = "swish" }), { batch = 1, seq = 8 })
  eq(#swish, #silu, "swish: as many nodes as silu")
  for i, n in ipairs(silu) do eq(swish[i].op .. " " .. swish[i].name, n.op .. " " .. n.name, "swish node " .. i) end
  raises("llama model 'tiny': field 'hidden_size' must be a positive integer (got 0)",
    llama.build, with(TINY, { hidden_size = 0 }), { batch = 1, seq = 8 })
  raises("llama model 'tiny': hidden_size (64) must be divisible by num_attention_heads (6), or head_dim be given",
    llama.build, with(TINY, { num_attention_heads = 6, num_key_value_heads = 6 }), { batch = 1, seq = 8 })
end

---------------------------------------------------------------------------------------------------
-- config.json (scripts/neusight/models/hf.lua)

-- meta-llama/Llama-3.2-1B's config.json, as tests/fixtures/hf/llama32_1b/config.json.
local LLAMA32_1B_JSON = {
  architectures = { "LlamaForCausalLM" }, attention_bias = false, attention_dropout = 0.0, bos_token_id = 128000,
  eos_token_id = 128001, head_dim = 64, hidden_act = "silu", hidden_size = 2048, initializer_range = 0.02,
  intermediate_size = 8192, max_position_embeddings = 131072, mlp_bias = false, model_type = "llama",
  num_attention_heads = 32, num_hidden_layers = 16, num_key_value_heads = 8, pretraining_tp = 1, rms_norm_eps = 1e-05,
  rope_scaling = { factor = 32.0, high_freq_factor = 4.0, low_freq_factor = 1.0,
                   original_max_position_embeddings = 8192, rope_type = "llama3" },
  rope_theta = 500000.0, tie_word_embeddings = true, torch_dtype = "bfloat16", transformers_version = "4.45.0.dev0",
  use_cache = true, vocab_size = 128256,
}

function T.test_config_json_gives_the_preset()
  local cfg = hf.from_config(LLAMA32_1B_JSON, "models/Llama-3.2-1B/config.json", {})
  eq(cfg.arch, "llama", "arch")
  eq(cfg.name, "Llama-3.2-1B", "name")
  eq(cfg.rope_theta, nil, "ignored keys are dropped")
  local opts = { batch = 1, seq = 32, training = true, dtype = "bf16", attention = "sdpa" }
  t.same(llama.build(cfg, opts), llama.build(with(presets.llama32_1b, { name = "Llama-3.2-1B" }), opts), "graph")
  eq(total_params(llama.build(cfg, opts)), 1235814400, "parameters")
end

function T.test_config_json_defaults_and_nulls()
  -- Omitted keys take the config class's defaults (MistralConfig: sliding_window 4096); null is None.
  local m = hf.from_config({ model_type = "mistral" }, "m.json", {})
  eq(m.model_type, "mistral", "model_type passed on")
  eq(total_params(llama.build(m, { batch = 1, seq = 8 })), 7241732096, "MistralConfig()")
  local function causal(cfg)
    for _, n in ipairs(llama.build(cfg, { batch = 1, seq = 4096, attention = "sdpa" })) do
      if n.op == "sdpa" then return n.attrs.causal end
    end
  end
  local small = { model_type = "mistral", num_hidden_layers = 1, hidden_size = 256, intermediate_size = 256,
    num_attention_heads = 2, num_key_value_heads = 1, vocab_size = 100 }
  eq(causal(hf.from_config(small, "m.json", {})), false, "default window 4096 at s = 4096")
  local none = hf.from_config(small, "m.json", { sliding_window = true })
  eq(none.sliding_window, false, "null → false (None)")
  eq(causal(none), true, "no window")
  eq(hf.from_config({ model_type = "qwen3", head_dim = 64 }, "q.json", { rope_scaling = true }).head_dim, 64, "qwen3")
end

function T.test_config_json_unknown_keys()
  raises([[l.json: unknown key 'num_key_value_head' for model_type "llama" (did you mean 'num_key_value_heads'?)]],
    hf.from_config, { model_type = "llama", num_key_value_head = 8 }, "l.json", {})
  -- a checkpoint's quantization_config (FP8/AWQ repos) changes no kernel shape: accepted, with a warning that the
  -- weights' storage is not read from it (--weight-dtype sets it)
  local q = hf.from_config({ model_type = "qwen2", quantization_config = { quant_method = "fp8" } }, "q.json", {})
  eq(q.quantization_config, nil, "quantization_config is not a builder field")
  eq(hf.quantization_note("q.json", { quant_method = "fp8" }), "q.json: quantization_config (quant_method \"fp8\") "
    .. "is not read: the weights are priced in the workload's dtype; give --weight-dtype fp8|int8|int4 (workload field "
    .. "weight_dtype) for weight-only quantisation, or --dtype fp8 for fp8 weights and activations", "the warning")
  -- the warning is the config table's (hf.config_warnings), a workload's warning like any other (workload.warnings,
  -- which every command writes into its JSON `warnings`), not said on stderr alone while the file is read
  local said = hf.config_warnings(q)
  eq(#said, 1, "one warning of q.json")
  eq(said[1], hf.quantization_note("q.json", { quant_method = "fp8" }), "the note")
  eq(#hf.config_warnings(hf.from_config({ model_type = "qwen2" }, "p.json", {})), 0, "none without quantization_config")
  eq(#hf.config_warnings({ arch = "llama" }), 0, "none for a table from_config did not make")
  local W = require "neusight.workload"
  local ws = W.warnings(W.normalize({ model = q, gpu = "h100", mode = "inference", batch = 1, seq = 64 }))
  eq(ws[1], said[1], "the workload's first warning")
  eq(W.model_warnings(q)[1], said[1], "workload.model_warnings")
  eq(#W.model_warnings("llama3_8b"), 0, "a preset name: none")
  -- A key of another model_type: Mistral has no mlp_bias; a null unknown key is still a key.
  raises([[m.json: unknown key 'mlp_bias' for model_type "mistral"]],
    hf.from_config, { model_type = "mistral", mlp_bias = false }, "m.json", {})
  -- every unknown key of a file in one error, each with its line and did-you-mean (not one per run)
  raises([[m.json: 2 unknown keys for model_type "mistral": 'foo' (line 3), 'num_key_value_head' (line 7, did you mean 'num_key_value_heads'?)]],
    hf.from_config, { model_type = "mistral", foo = 1, num_key_value_head = 8 }, "m.json", {},
    { foo = 3, num_key_value_head = 7 })
  raises([[m.json: unknown key 'foo' for model_type "mistral"]], hf.from_config, { model_type = "mistral" }, "m.json",
    { foo = true })
end

-- A config.json's torch_dtype (or v5's dtype) is not read: a workload given no dtype runs in fp32, and when the file
-- names another dtype for its checkpoint the forecast says so, naming the file's line and the --dtype to give (a bf16
-- Llama-3.1-8B forecast at 4 bytes per element passed for the checkpoint unsaid); no warning with a dtype given, or
-- when the file's is the one the forecast runs in.
function T.test_config_json_torch_dtype_not_read_is_warned()
  local W = require "neusight.workload"
  local function dtype_notes(json, lines, dtype)
    local cfg = hf.from_config(json, "l.json", {}, lines)
    local w = W.normalize({ model = cfg, gpu = "h100", mode = "decode", batch = 1, seq = 1, context = 64,
      dtype = dtype })
    local out = {}
    for _, note in ipairs(W.warnings(w)) do
      if note:find("dtype", 1, true) then out[#out + 1] = note end
    end
    return out
  end
  local bf16 = { model_type = "llama", torch_dtype = "bfloat16", num_hidden_layers = 1 }
  local said = dtype_notes(bf16, { torch_dtype = 30 })
  eq(#said, 1, "one warning: torch_dtype bfloat16, no --dtype")
  eq(said[1], [[l.json:30: torch_dtype "bfloat16" is not read: the forecast runs in fp32, the default dtype (the model ]]
    .. [[as from_pretrained loads it without torch_dtype); give --dtype bf16 (workload field dtype) to forecast it in ]]
    .. [[its checkpoint's dtype]], "the warning names the file's line and the flag")
  eq(#dtype_notes(bf16, {}, "bf16"), 0, "a dtype given: none")
  eq(#dtype_notes(bf16, {}, "fp32"), 0, "fp32 given: none")
  eq(#dtype_notes({ model_type = "llama", torch_dtype = "float32", num_hidden_layers = 1 }, {}), 0, "float32: none")
  eq(#dtype_notes({ model_type = "llama", num_hidden_layers = 1 }, {}), 0, "no torch_dtype: none")
  -- a value naming no dtype ("auto": from_pretrained's choice at load time) is said, not dropped; a dtype given: none
  local auto = { model_type = "llama", torch_dtype = "auto", num_hidden_layers = 1 }
  eq(dtype_notes(auto, { torch_dtype = 9 })[1], [[l.json:9: torch_dtype "auto" names no dtype neusight knows (float32, ]]
    .. [[bfloat16, float16, …): the forecast runs in fp32, the default dtype; give --dtype (workload field dtype) to ]]
    .. [[forecast another]], "auto: said")
  eq(#dtype_notes(auto, {}, "bf16"), 0, "auto with a dtype given: none")
  local v5 = dtype_notes({ model_type = "qwen3", dtype = "float16", num_hidden_layers = 1 }, {})
  eq(v5[1] and v5[1]:match('^l%.json: dtype "float16" is not read: the forecast runs in fp32') ~= nil, true,
    "transformers v5's dtype: " .. tostring(v5[1]))
  -- M.build normalizes the normalized table again: the note stays (said once)
  local w = W.normalize({ model = hf.from_config(bf16, "l.json", {}), gpu = "h100", mode = "inference", batch = 1,
    seq = 8 })
  local again, n = W.warnings(W.normalize(w)), 0
  for _, note in ipairs(again) do if note:find("torch_dtype", 1, true) then n = n + 1 end end
  eq(n, 1, "kept by a second normalize")
end

-- auto_map (a remote-code checkpoint's pointer to its Python classes) changes no kernel: accepted for every
-- model_type; attention_bias = false where the builder has no attention bias (phi3, mistral, mixtral), true refused.
function T.test_config_json_auto_map_and_attention_bias()
  local auto = { AutoConfig = "configuration_x.XConfig", AutoModelForCausalLM = "modeling_x.XForCausalLM" }
  for _, mt in ipairs(hf.supported()) do
    local cfg = hf.from_config({ model_type = mt, auto_map = auto }, "a.json", {})
    eq(cfg.auto_map, nil, mt .. ": auto_map dropped")
  end
  for _, mt in ipairs { "phi3", "mistral", "mixtral" } do
    local cfg = hf.from_config({ model_type = mt, attention_bias = false }, "b.json", {})
    eq(cfg.attention_bias, nil, mt .. ": attention_bias = false accepted, not passed on")
    raises(("b.json: attention_bias = true is not modelled by the %s builder (scripts/neusight/models/%s.lua builds "
      .. "false only)"):format(cfg.arch, cfg.arch), hf.from_config, { model_type = mt, attention_bias = true }, "b.json", {})
  end
  -- qwen2 has q/k/v biases of its own: the key is not one of its
  raises([[q.json: unknown key 'attention_bias' for model_type "qwen2"]],
    hf.from_config, { model_type = "qwen2", attention_bias = false }, "q.json", {})
end

-- microsoft/Phi-3-mini-4k-instruct's config.json as published (auto_map, attention_bias): the phi3_mini preset.
function T.test_config_json_phi3_mini_published()
  local PHI3_JSON = {
    _name_or_path = "Phi-3-mini-4k-instruct", architectures = { "Phi3ForCausalLM" }, attention_bias = false,
    attention_dropout = 0.0, auto_map = { AutoConfig = "configuration_phi3.Phi3Config",
      AutoModelForCausalLM = "modeling_phi3.Phi3ForCausalLM" }, bos_token_id = 1, embd_pdrop = 0.0,
    eos_token_id = 32000, hidden_act = "silu", hidden_size = 3072, initializer_range = 0.02, intermediate_size = 8192,
    max_position_embeddings = 4096, model_type = "phi3", num_attention_heads = 32, num_hidden_layers = 32,
    num_key_value_heads = 32, original_max_position_embeddings = 4096, pad_token_id = 32000, resid_pdrop = 0.0,
    rms_norm_eps = 1e-05, rope_theta = 10000.0, sliding_window = 2047, tie_word_embeddings = false,
    torch_dtype = "bfloat16", transformers_version = "4.40.2", use_cache = true, vocab_size = 32064,
  }
  local cfg = hf.from_config(PHI3_JSON, "Phi-3-mini-4k-instruct/config.json", { rope_scaling = true })
  local opts = { batch = 1, seq = 64, dtype = "bf16", attention = "sdpa" }
  eq(total_params(llama.build(cfg, opts)), total_params(llama.build(presets.phi3_mini, opts)), "the preset's parameters")
end

---------------------------------------------------------------------------------------------------
-- Phi-3, Gemma, Gemma2 (model_type phi3, gemma, gemma2)

local function named(nodes)
  local out = {}
  for _, n in ipairs(nodes) do out[n.name] = n end
  return out
end

-- Phi-3: one qkv_proj and one gate_up_proj GEMM per layer, the same weights and FLOPs as Llama's separate projections.
function T.test_phi3_fused_projections()
  local cfg = presets.phi3_mini
  local h, I, nh, hd = 3072, 8192, 32, 96
  local opts = { batch = 2, seq = 64, training = true, dtype = "bf16", attention = "sdpa" }
  local nodes = llama.build(cfg, opts)
  local by = named(nodes)
  eq(by["layers.self_attn.qkv_proj"].params, h * 3 * nh * hd, "qkv_proj weights")
  t.same(by["layers.self_attn.qkv_proj"].output, { 2, 64, 3 * nh * hd }, "qkv_proj output")
  eq(by["layers.mlp.gate_up_proj"].params, h * 2 * I, "gate_up_proj weights")
  t.same(by["layers.mlp.gate_up_proj"].output, { 2, 64, 2 * I }, "gate_up_proj output")
  eq(by["layers.mlp.act_fn"].op, "silu", "SwiGLU")
  for _, gone in ipairs { "layers.self_attn.q_proj", "layers.self_attn.k_proj", "layers.mlp.gate_proj", "layers.mlp.up_proj" } do
    eq(by[gone], nil, gone .. " (fused)")
  end
  local separate = llama.build(with(cfg, { model_type = "mistral" }), opts) -- the same shapes, separate projections
  eq(total_params(nodes), total_params(separate), "parameters")
  eq(flops(nodes, true, "fw", "gemm"), flops(separate, true, "fw", "gemm"), "forward GEMM FLOPs")
  eq(flops(nodes, true, "bw", "gemm"), flops(separate, true, "bw", "gemm"), "backward GEMM FLOPs")
  -- sliding_window 2047 on every layer (Mistral's rule): the sdpa kernel is the masked one from s = 2047
  local long = named(llama.build(cfg, { batch = 1, seq = 2048, dtype = "bf16", attention = "sdpa" }))
  eq(long["sliding_layers.self_attn.sdpa"].count, 32, "all 32 layers windowed")
end

-- Gemma: embeddings · sqrt(hidden), (1 + weight) RMSNorm in fp32, GeGLU (one gelu kernel), head_dim 256, tied lm_head.
function T.test_gemma_kernels()
  local nodes = llama.build(presets.gemma_7b, { batch = 1, seq = 32, training = true, dtype = "bf16", attention = "sdpa" })
  local by = named(nodes)
  eq(by.embed_scale.op, "mul", "embedding scale")
  eq(by["layers.mlp.act_fn"].op, "gelu", "GeGLU")
  eq(by["layers.self_attn.q_proj"].params, 3072 * 16 * 256, "q_proj: 16 heads of 256 from 3072")
  eq(by["layers.input_layernorm.one_plus"].dtype, "fp32", "1 + weight in fp32")
  eq(by["layers.input_layernorm.scale"].dtype, "fp32", "weight mul in fp32 (before the cast back)")
  eq(by.lm_head.params, 0, "tied lm_head")
  eq(by["layers.post_feedforward_layernorm.pow"], nil, "no sandwich norms in Gemma")
  eq(by["final_softcap.tanh"], nil, "no soft-capping in Gemma")
  -- the Llama family keeps its norm: no one_plus
  eq(named(llama.build(TINY, { batch = 1, seq = 8, dtype = "bf16" }))["layers.input_layernorm.one_plus"], nil, "llama norm")
end

-- Gemma2: sandwich norms, alternating sliding-window layers (HF: layer i windowed when i is even), attention soft-capping
-- (eager: / cap, tanh, · cap over the scores) and final logit soft-capping (the same three over the logits).
function T.test_gemma2_kernels()
  local cfg = presets.gemma2_9b
  local eager = named(llama.build(cfg, { batch = 1, seq = 64, training = true, dtype = "bf16", attention = "eager" }))
  for _, norm in ipairs { "input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                          "post_feedforward_layernorm" } do
    eq(eager["layers." .. norm .. ".weight"].params, 3584, norm)
  end
  for _, k in ipairs { "div", "tanh", "mul" } do
    eq(eager["layers.self_attn.softcap." .. k].op, k, "attention soft-cap " .. k)
    t.same(eager["layers.self_attn.softcap." .. k].output, { 1, 16, 64, 64 }, "over the scores")
    t.same(eager["final_softcap." .. k].output, { 1, 64, 256000 }, "final soft-cap over the logits")
  end
  -- sdpa at s ≥ window: the 21 even layers are windowed (the masked kernel), the 21 odd ones causal
  local long = named(llama.build(cfg, { batch = 1, seq = 4096, dtype = "bf16", attention = "sdpa" }))
  eq(long["sliding_layers.self_attn.sdpa"].count, 21, "windowed layers")
  eq(long["layers.self_attn.sdpa"].count, 21, "global layers")
  eq(long["layers.self_attn.softcap.tanh"], nil, "sdpa: HF's sdpa path applies no soft-cap")
  -- layer_types overrides the alternation; sliding_window None: no window
  local lt = {}
  for i = 1, 42 do lt[i] = i <= 40 and "sliding_attention" or "full_attention" end
  local typed = named(llama.build(with(cfg, { layer_types = lt }), { batch = 1, seq = 4096, dtype = "bf16", attention = "sdpa" }))
  eq(typed["sliding_layers.self_attn.sdpa"].count, 40, "layer_types")
  local none = named(llama.build(with(cfg, { sliding_window = false }), { batch = 1, seq = 4096, dtype = "bf16", attention = "sdpa" }))
  eq(none["layers.self_attn.sdpa"].count, 42, "sliding_window null: every layer global")
  -- decode past the window: the windowed layers cache 4096 tokens, the global ones C + 1
  local dec = named(llama.build(cfg, { batch = 1, seq = 1, phase = "decode", context = 8191, dtype = "bf16" }))
  eq(dec["sliding_layers.self_attn.decode_attention"].inputs[2][3], 4096, "windowed decode")
  eq(dec["layers.self_attn.decode_attention"].inputs[2][3], 8192, "global decode")
end

-- A config.json's float where HF's config holds an int ("num_hidden_layers": 32.0) is refused with the file, line and
-- key; the same whole float in a Lua config table (2^4) stays a count.
function T.test_config_json_float_count()
  local t = {}
  for k, v in pairs(LLAMA32_1B_JSON) do t[k] = v end
  t.num_hidden_layers = 16.0
  raises([[c.json:7: llama model 'c': field 'num_hidden_layers' must be an integer (got 16.0, a JSON number with a fraction part or exponent: write 16)]],
    llama.build, hf.from_config(t, "c.json", {}, { num_hidden_layers = 7 }), { batch = 1, seq = 8 })
  t.num_hidden_layers, t.num_key_value_heads = 16, 8e0
  raises([[c.json: llama model 'c': field 'num_key_value_heads' must be an integer (got 8.0, a JSON number with a fraction part or exponent: write 8)]],
    llama.build, hf.from_config(t, "c.json", {}), { batch = 1, seq = 8 })
  llama.build(with(TINY, { num_hidden_layers = 2^1 }), { batch = 1, seq = 8 }) -- a Lua table's 2.0: a count
  -- integer fields outside the counts too: a whole-float sliding_window reached a decode step's K shape as {…, 64.0, …}
  -- and stopped at ops/decode_attention.lua naming "command line", not the file; max_window_layers alike
  local mistral = { model_type = "mistral", hidden_size = 64, intermediate_size = 128, num_hidden_layers = 2,
    num_attention_heads = 4, num_key_value_heads = 2, vocab_size = 100, sliding_window = 16.0 }
  local decode = { batch = 1, seq = 1, phase = "decode", context = 64, dtype = "bf16" }
  raises([[c.json:4: llama model 'c': field 'sliding_window' must be an integer (got 16.0, a JSON number with a fraction part or exponent: write 16)]],
    llama.build, hf.from_config(mistral, "c.json", {}, { sliding_window = 4 }), decode)
  mistral.model_type, mistral.sliding_window, mistral.use_sliding_window, mistral.max_window_layers = "qwen2", 16, true, 1.0
  raises([[c.json: llama model 'c': field 'max_window_layers' must be an integer (got 1.0, a JSON number with a fraction part or exponent: write 1)]],
    llama.build, hf.from_config(mistral, "c.json", {}), decode)
  -- a Lua config's whole float is the integer it equals: the decode step's cache holds 16 tokens
  local dec = llama.build(with(TINY, { model_type = "mistral", sliding_window = 2.0^4 }), decode)
  local cached
  for _, n in ipairs(dec) do if n.op == "decode_attention" then cached = n.inputs[2][3] end end
  eq(math.type(cached), "integer", "Lua sliding_window 16.0: an integer cache length")
  eq(cached, 16, "Lua sliding_window 16.0: 16 tokens cached")
end

-- What the builder does not model is refused with the field named, never priced as something else.
function T.test_phi3_gemma_refusals()
  local function from(t) return hf.from_config(t, "c.json", {}) end
  local function build(t) return llama.build(from(t), { batch = 1, seq = 8 }) end
  raises([[c.json: partial_rotary_factor = 0.75 is not modelled by the llama builder (scripts/neusight/models/llama.lua builds 1 only)]],
    from, { model_type = "phi3", partial_rotary_factor = 0.75 })
  raises([[c.json: resid_pdrop = 0.1 is not modelled by the llama builder (scripts/neusight/models/llama.lua builds 0 only)]],
    from, { model_type = "phi3", resid_pdrop = 0.1 })
  raises([[c.json: llama model 'c': hidden_act "gelu_new" is not supported (Gemma's MLP is GeGLU with one GELU kernel: "gelu" or "gelu_pytorch_tanh")]],
    build, { model_type = "gemma", hidden_act = "gelu_new" })
  raises([[c.json: llama model 'c': hidden_activation "silu" is not supported (Gemma's MLP is GeGLU with one GELU kernel: "gelu" or "gelu_pytorch_tanh")]],
    build, { model_type = "gemma2", hidden_activation = "silu" })
  raises([[c.json: llama model 'c': hidden_act "gelu" is not supported (the Llama-family MLP is SwiGLU: "silu", or "swish", HF's other name for it)]],
    build, { model_type = "phi3", hidden_act = "gelu" })
  raises([[c.json: llama model 'c': field 'attn_logit_softcapping' must be a positive number or null (got -1)]],
    build, { model_type = "gemma2", attn_logit_softcapping = -1 })
  raises([[c.json: unknown key 'query_pre_attn_scalar' for model_type "gemma"]],
    from, { model_type = "gemma", query_pre_attn_scalar = 256 })
  raises([[c.json: key 'query_pre_attn_scalar' must be a positive number (got 0)]],
    from, { model_type = "gemma2", query_pre_attn_scalar = 0 })
  -- null soft-caps are None (no soft-capping), as HF
  local capless = hf.from_config({ model_type = "gemma2" }, "c.json", { attn_logit_softcapping = true,
    final_logit_softcapping = true })
  eq(named(llama.build(capless, { batch = 1, seq = 8, dtype = "bf16", attention = "eager" }))["final_softcap.tanh"], nil,
    "final_logit_softcapping null")
end

-- A preset added later gets its closed-form parameter check: every arch "llama" preset is in LLAMA_PRESETS.
function T.test_every_llama_preset_has_a_parameter_check()
  local listed = {}
  for _, name in ipairs(LLAMA_PRESETS) do listed[name] = true end
  for name, cfg in pairs(presets) do
    if cfg.arch == "llama" and not listed[name] then error(name .. ": add it to LLAMA_PRESETS (closed-form parameters)") end
  end
end

return T
