-- tests/scripts/test_autocast.lua — precision amp under torch.autocast (eager kernels): the dtype flow of HF's modules
-- (neusight.nodes autocast_cast / stream_dtype, the Llama-family and GPT-2 builders, neusight.workload opts.autocast):
-- saved activations against closed forms, the cast kernels and their bytes, the fp32 residual stream.
local llama = require "neusight.models.llama"
local gpt = require "neusight.models.gpt"
local memory = require "neusight.memory"
local workload = require "neusight.workload"

local t = require("neusight.testing").bind(load_op, make_node)
local eq = t.eq

local T = {}

-- A tiny Llama (GQA: 4 query heads, 2 key/value heads) with b = 2, s = 32, h = 64, I = 128.
local CFG = { name = "tiny_llama", arch = "llama", hidden_size = 64, intermediate_size = 128, num_hidden_layers = 2,
              num_attention_heads = 4, num_key_value_heads = 2, vocab_size = 500, max_position_embeddings = 256 }
local B, S, H, I, NH, KVH, HD, V = 2, 32, 64, 128, 4, 2, 16, 500
local TOK = B * S

local function build(autocast, attention)
  return llama.build(CFG, { batch = B, seq = S, training = true, dtype = "bf16", attention = attention or "sdpa",
                            autocast = autocast })
end

local function layer_saved(nodes, layer)
  local sum = 0
  for _, n in ipairs(nodes) do
    if n.layer == (layer or "layers") then sum = sum + memory.node_saved(n, load_op(n.op)) end
  end
  return sum
end

local function by_name(nodes)
  local by = {}
  for _, n in ipairs(nodes) do by[n.name] = n end
  return by
end

local function fw_bytes(n)
  local sum = 0
  for _, k in ipairs(load_op(n.op).forward(make_node(n))) do sum = sum + k.bytes end
  return sum
end

-- Saved bytes of one Llama layer (sdpa), Th = tokens · h:
--   pure bf16 (model.to(bf16)): per RMSNorm 4·Th (pow's fp32 x) + 8·T (rsqrt's and normalize's fp32 (T, 1)) + 2·Th
--     (the weight multiply's bf16 input), q_proj's input 2·Th (k/v_proj share it), SDPA's Q, K, V and fp32 LSE,
--     o_proj's 2·Th, gate_proj's 2·Th (up_proj shares it), SiLU 2·TI, mul 4·TI, down_proj 2·TI:
--     20·Th + 16·T + 4·T·kvh·hd + 4·b·nh·s + 8·TI  (Llama-3-8B, I = 3.5 h, kvh·hd = h/4: 49 sbh)
--   amp autocast: the norms' weight multiply reads the fp32 x (+2·Th each), k_proj, v_proj and up_proj cast the fp32
--     normed x themselves and save their own bf16 copies (+2·Th each): + 10·Th  (59 sbh)
function T.test_llama_layer_saved_under_autocast_closed_form()
  local Th = TOK * H
  local pure = 20 * Th + 16 * TOK + 4 * TOK * KVH * HD + 4 * B * NH * S + 8 * TOK * I
  eq(layer_saved(build(nil)), pure, "pure bf16 layer (as before)")
  eq(layer_saved(build(false)), pure, "autocast = false: the pure graph")
  eq(layer_saved(build(true)), pure + 10 * Th, "amp autocast layer: + 10 Th")
  -- eager attention: softmax(dtype = fp32) saves its fp32 output (4 B per score, was 2)
  local scores = B * NH * S * S
  eq(layer_saved(build(true, "eager")) - layer_saved(build(nil, "eager")), 10 * Th + 2 * scores,
    "eager: + 10 Th + the fp32 probabilities' extra 2 B per score")
end

-- The casts autocast launches: per linear a weight cast (I·O, reads fp32, writes bf16: 6 B per element, no temporary: the
-- parameter is state, the copy autocast's cache), per fp32 input of a lower-precision op a cast of it (6 B per element):
-- q/k/v_proj's, gate/up_proj's, SDPA's q and k, lm_head's. The pure graph has none of them.
function T.test_autocast_cast_kernels_and_bytes()
  local by = by_name(build(true))
  local weights = { ["layers.self_attn.q_proj"] = H * NH * HD, ["layers.self_attn.k_proj"] = H * KVH * HD,
    ["layers.self_attn.v_proj"] = H * KVH * HD, ["layers.self_attn.o_proj"] = NH * HD * H,
    ["layers.mlp.gate_proj"] = H * I, ["layers.mlp.up_proj"] = H * I, ["layers.mlp.down_proj"] = I * H,
    lm_head = H * V }
  for name, elems in pairs(weights) do
    local c = by[name .. ".weight_cast"]
    assert(c and c.op == "cast" and c.dtype == "bf16" and c.attrs.from == "fp32", name .. ": a weight cast")
    eq(fw_bytes(c), elems * (4 + 2), name .. ": weight cast bytes")
    eq(memory.node_temporary(c, load_op("cast")), 0, name .. ": the weight cast holds nothing extra")
    eq(memory.node_saved(c, load_op("cast")), 0, name .. ": and saves nothing")
  end
  local inputs = { ["layers.self_attn.q_proj.input_cast"] = TOK * H, ["layers.self_attn.k_proj.input_cast"] = TOK * H,
    ["layers.self_attn.v_proj.input_cast"] = TOK * H, ["layers.mlp.gate_proj.input_cast"] = TOK * H,
    ["layers.mlp.up_proj.input_cast"] = TOK * H, ["layers.self_attn.sdpa.q_cast"] = TOK * NH * HD,
    ["layers.self_attn.sdpa.k_cast"] = TOK * KVH * HD, ["lm_head.input_cast"] = TOK * H }
  for name, elems in pairs(inputs) do
    local c = by[name]
    assert(c and c.op == "cast" and c.attrs.from == "fp32" and c.dtype == "bf16", name .. ": an input cast")
    eq(fw_bytes(c), elems * (4 + 2), name .. ": input cast bytes")
  end
  assert(not by["layers.self_attn.o_proj.input_cast"] and not by["layers.mlp.down_proj.input_cast"],
    "o_proj and down_proj read bf16: no cast")
  -- the pure graph has no cast but the RMSNorm upcasts and the loss's
  for _, n in ipairs(build(nil)) do
    if n.op == "cast" then
      assert(n.name:match("layernorm%.to_") or n.name:match("^norm%.to_") or n.name == "loss.logits_float", n.name)
    end
  end
end

-- The residual stream is fp32 under autocast: the embedding's fp32 rows, the residual adds (3 × 4 B per element), the
-- norms without their casts; RoPE's products fp32 (cos / sin fp32), −x2 and the cat in q's bf16.
function T.test_autocast_fp32_residual_stream()
  local ac, pure = by_name(build(true)), by_name(build(nil))
  for _, name in ipairs { "embed_tokens", "layers.attn_residual", "layers.mlp_residual",
                          "layers.input_layernorm.scale", "norm.scale", "layers.self_attn.rotary.q.add" } do
    eq(ac[name].dtype, "fp32", name .. " under autocast")
    eq(pure[name].dtype, "bf16", name .. " pure")
  end
  eq(fw_bytes(ac["layers.attn_residual"]), (4 + 2 + 4) * TOK * H, "fp32 residual add bytes: the fp32 stream, the bf16 branch, fp32 out")
  eq(fw_bytes(pure["layers.attn_residual"]), 3 * 2 * TOK * H, "bf16 residual add bytes")
  eq(ac["layers.self_attn.rotary.q.neg"].dtype, "bf16", "−x2 in q's dtype")
  -- q · cos reads bf16 q and the fp32 (b, 1, s, hd) table, writes fp32 (attrs.input_dtypes, neusight.rules io_bytes)
  eq(fw_bytes(ac["layers.self_attn.rotary.q.cos"]), TOK * NH * HD * (2 + 4) + B * S * HD * 4, "RoPE's q · cos bytes")
  eq(fw_bytes(pure["layers.self_attn.rotary.q.cos"]), (TOK * NH * HD * 2 + B * S * HD) * 2, "pure: all bf16")
  assert(not ac["layers.input_layernorm.to_fp32"] and not ac["layers.input_layernorm.to_dtype"],
    "an fp32 input: .to(fp32) and .to(input_dtype) are no-ops")
  assert(pure["layers.input_layernorm.to_fp32"] and pure["layers.input_layernorm.to_dtype"], "pure: the casts")
end

-- GPT-2 under autocast: fp32 LayerNorms (autocast's fp32 list; their fp32 inputs saved: + 2 Th each), Conv1D inputs
-- cast (their bf16 copies saved as before); eager softmax writes fp32 (+ 2 B per score), then .type(value.dtype).
function T.test_gpt2_layer_saved_under_autocast()
  local cfg = { name = "small", n_layer = 3, n_embd = 128, n_head = 4, vocab_size = 1000, n_positions = 128 }
  local b, s, h, a = 2, 64, 128, 4
  local function saved(autocast, attention)
    return layer_saved(gpt.build(cfg, { batch = b, seq = s, training = true, dtype = "bf16", attention = attention,
                                        autocast = autocast }), "h")
  end
  -- + gelu_new from torch.pow on (autocast's fp32 list): pow saves the fp32 copy of a it casts, tanh its fp32 output
  -- and the last product its fp32 (1 + tanh) operand, 2 B more per MLP activation element each (n_inner = 4 h)
  local mlp = 6 * b * s * (4 * h)
  eq(saved(true, "sdpa") - saved(nil, "sdpa"), 4 * b * s * h + mlp, "sdpa: two fp32 LayerNorm inputs, fp32 gelu_new")
  eq(saved(true, "eager") - saved(nil, "eager"), 4 * b * s * h + mlp + 2 * b * a * s * s, "eager: + the fp32 softmax")
  local by = by_name(gpt.build(cfg, { batch = b, seq = s, training = true, dtype = "bf16", attention = "eager",
                                      autocast = true }))
  eq(by["h.attn.softmax"].dtype, "fp32", "softmax on autocast's fp32 list")
  eq(by["h.attn.softmax.to_dtype"].attrs.from, "fp32", "attn_weights.type(value.dtype)")
  eq(fw_bytes(by["h.attn.c_attn.weight_cast"]), h * 3 * h * 6, "c_attn's weight cast")
  eq(fw_bytes(by["lm_head.weight_cast"]), h * 1000 * 6, "the tied lm_head casts wte's weight")
  eq(by["h.attn.residual"].dtype, "fp32", "fp32 residual add")
  -- gelu_new: 0.5 · a stays bf16, torch.pow(a, 3.0) writes fp32 (autocast's fp32 list) and what follows it promotes
  eq(by["h.mlp.act.half"].dtype, "bf16", "0.5 · a")
  eq(by["h.mlp.act.cube"].dtype, "fp32", "pow: autocast's fp32 list")
  eq(by["h.mlp.act.cube.input_cast"].attrs.from, "bf16", "pow casts the bf16 c_fc output to fp32")
  eq(by["h.mlp.act.cube.input_cast"].dtype, "fp32", "pow's fp32 input")
  eq(by["h.mlp.act.inner"].attrs.input_dtypes, "bf16,fp32", "a + 0.044715 · a³")
  eq(by["h.mlp.act.tanh"].dtype, "fp32", "tanh of an fp32 tensor")
  eq(by["h.mlp.act.out"].attrs.input_dtypes, "bf16,fp32", "0.5 · a times (1 + tanh)")
  eq(by["h.mlp.c_proj.input_cast"].attrs.from, "fp32", "c_proj's addmm casts the fp32 activation")
  local pure = by_name(gpt.build(cfg, { batch = b, seq = s, training = true, dtype = "bf16", attention = "eager" }))
  eq(pure["h.mlp.act.tanh"].dtype, "bf16", "pure: gelu_new in bf16")
  assert(not pure["h.mlp.c_proj.input_cast"], "pure: no cast")
end

-- OPT (pre-LN) and BERT under autocast, b = 2, s = 32, h = 64, 4 heads: the LayerNorms keep their fp32 inputs
-- (+ 2 Th each); OPT's k_proj and v_proj cast and save their own copies of the normed x (+ 2 Th each; BERT's three
-- projections were counted apart already); eager attention's scores are fp32 from the fp32 mask's add on: softmax
-- saves 4 B per score (+ 2), OPT's clamp (torch.max, saving its input) + 2 more.
function T.test_opt_and_bert_layers_saved_under_autocast()
  local b, s, h = 2, 32, 64
  local Th, scores = b * s * h, b * 4 * s * s
  local function delta(arch, cfg, layer, attention)
    local m = require("neusight.models." .. arch)
    local function saved(autocast)
      return layer_saved(m.build(cfg, { batch = b, seq = s, training = true, dtype = "bf16", attention = attention,
                                        autocast = autocast }), layer)
    end
    return saved(true) - saved(nil)
  end
  local opt = { name = "o", hidden_size = h, ffn_dim = 256, num_hidden_layers = 2, num_attention_heads = 4,
                vocab_size = 500, max_position_embeddings = 256 }
  local bert = { name = "b", hidden_size = h, intermediate_size = 256, num_hidden_layers = 2, num_attention_heads = 4,
                 vocab_size = 500, max_position_embeddings = 256, type_vocab_size = 2 }
  eq(delta("opt", opt, "layers", "sdpa"), 8 * Th, "OPT sdpa")
  eq(delta("opt", opt, "layers", "eager"), 8 * Th + 4 * scores, "OPT eager")
  eq(delta("bert", bert, "layer", "sdpa"), 4 * Th, "BERT sdpa")
  eq(delta("bert", bert, "layer", "eager"), 4 * Th + 2 * scores, "BERT eager")
end

-- The workload turns it on for precision amp with eager kernels in 16-bit training only: not for pure, Megatron-LM's
-- kernels (its own bf16 parameters) or inference.
function T.test_workload_autocast_only_for_amp_eager_training()
  local function casts(changes)
    local w = { model = "gpt2_med", gpu = "A100-PCIE-40GB", mode = "train", batch = 1, seq = 128, dtype = "bf16",
                optimizer = "none" }
    for k, v in pairs(changes) do w[k] = v end
    local gpu = { interconnect = "nvlink4", interconnect_bw_gbps = 900, pcie_bw_gbps = 64 }
    local count = 0
    for _, n in ipairs(workload.build(w, gpu).nodes) do
      if n.op == "cast" and n.attrs.autocast_weight then count = count + n.count end
    end
    return count
  end
  eq(casts {}, 24 * 4 + 1, "amp (the bf16 training default): a weight cast per GEMM")
  eq(casts { precision = "pure" }, 0, "pure")
  eq(casts { mode = "inference" }, 0, "inference")
  eq(casts { dtype = "fp32" }, 0, "fp32")
  eq(casts { parallel = { kernels = "megatron" } }, 0, "Megatron-LM's kernels")
  eq(casts { parallel = { kernels = "eager" } }, 24 * 4 + 1, "eager kernels")
end

-- MoE (neusight/models/moe.lua, HF's eager expert loop) under autocast: the router's gate casts the fp32 normed x per
-- call and writes bf16 logits; softmax(dtype=float) and top-k stay fp32 and .to(hidden_states.dtype) is a no-op (no
-- routing_weights cast); each expert's w1 and w3 cast their fp32 rows themselves (w3 saves its own copy: + 2 B per
-- routed row element); the bf16 w2 output times the fp32 routing weight is an fp32 product (the mul saves the bf16 y
-- and the fp32 weight: + 2 B per routed row) index_add_-ed into fp32 final_hidden_states; the residual add reads two
-- fp32 tensors. Per sparse layer, Th = tokens · h, R = tokens · k routed rows:
--   Mixtral: + 8·Th (the norms' fp32 x, k/v_proj's copies) + 2·R·h + 2·R; Qwen2-MoE + 2·Th more (the shared
--   expert's up_proj copy); Qwen3-MoE + 2 B per q and k element (q_norm / k_norm's weight multiply keeps the fp32 x).
local moe = require "neusight.models.moe"
local tiny = require("neusight.testing").tiny

local function moe_build(cfg, autocast, experts)
  return moe.build(cfg, { batch = B, seq = S, training = true, dtype = "bf16", attention = "sdpa",
                          autocast = autocast, experts = experts })
end

local function saved_per_layer(nodes, layers)
  local sum = 0
  for _, n in ipairs(nodes) do
    if n.layer == "layers" then sum = sum + memory.node_saved(n, load_op(n.op)) * n.count end
  end
  return sum / layers
end

function T.test_moe_layer_saved_under_autocast_closed_form()
  for _, mt in ipairs { "mixtral", "qwen2_moe", "qwen3_moe" } do
    local cfg = tiny(mt)
    local h, k, L = cfg.hidden_size, cfg.num_experts_per_tok, cfg.num_hidden_layers
    local Th, R = TOK * h, TOK * k
    local extra = 8 * Th + 2 * R * h + 2 * R + (mt == "qwen2_moe" and 2 * Th or 0)
      + (mt == "qwen3_moe" and 2 * TOK * (4 + 2) * cfg.head_dim or 0) -- q_norm / k_norm's weight multiply: fp32 q, k
    eq(saved_per_layer(moe_build(cfg, true), L) - saved_per_layer(moe_build(cfg, nil), L), extra, mt .. ": + closed form")
    eq(saved_per_layer(moe_build(cfg, false), L), saved_per_layer(moe_build(cfg, nil), L), mt .. ": pure unchanged")
  end
end

function T.test_moe_router_and_dispatch_dtypes_under_autocast()
  local cfg = tiny("qwen2_moe")
  local h = cfg.hidden_size
  local ac, pure = moe_build(cfg, true), moe_build(cfg, nil)
  local by, bp = by_name(ac), by_name(pure)
  local m = "layers.mlp"
  local cast = by[m .. ".gate.input_cast"]
  assert(cast and cast.op == "cast" and cast.attrs.from == "fp32", "the gate casts the fp32 x per call")
  eq(fw_bytes(cast), TOK * h * (4 + 2), "gate input cast bytes")
  assert(by[m .. ".gate.weight_cast"] and by[m .. ".shared_expert_gate.input_cast"], "gate weight cast, shared gate cast")
  assert(bp[m .. ".routing_weights.to_dtype"] and not by[m .. ".routing_weights.to_dtype"],
    "routing_weights.to(hidden_states.dtype): a cast in bf16, a no-op under autocast")
  eq(by[m .. ".final_hidden_states"].dtype, "fp32", "final_hidden_states: zeros in the fp32 stream's dtype")
  assert(by[m .. ".experts.gate_proj.input_cast"] and by[m .. ".experts.up_proj.input_cast"], "experts cast per call")
  local cur, w = by[m .. ".experts.current_state"], by[m .. ".experts.weighted"]
  eq(cur.dtype, "fp32", "current_state indexes the fp32 rows")
  local rows = w.output[1]
  eq(w.dtype, "fp32", "bf16 y · fp32 routing weight: fp32")
  eq(fw_bytes(w), rows * h * 2 + rows * 4 + rows * h * 4, "weighted reads y at 2 B, the weight at 4, writes 4")
  eq(fw_bytes(bp[m .. ".experts.weighted"]), (2 * rows * h + rows) * 2, "pure: all bf16")
  eq(by[m .. ".experts.index_add"].dtype, "fp32", "index_add_ into the fp32 buffer")
  local add = by[m .. ".shared_expert_add"]
  eq(add.dtype, "fp32", "experts' fp32 sum + bf16 shared expert")
  eq(add.attrs.input_dtypes, "fp32,bf16", "read at their dtypes")
  eq(by["layers.mlp_residual"].attrs.input_dtypes, nil, "the residual add reads two fp32 tensors")
  eq(by["router_aux_loss.softmax"].dtype, "fp32", "aux loss: softmax on autocast's fp32 list")
  eq(bp["router_aux_loss.softmax"].dtype, "bf16", "pure: as before")
  -- the grouped path keeps the compute dtype (not retyped); its branch is bf16 at the residual add
  local grouped = by_name(moe_build(cfg, true, "grouped"))
  eq(grouped["layers.mlp_residual"].attrs.input_dtypes, "fp32,bf16", "grouped: a bf16 branch")
end

-- Tensor parallelism with eager kernels under autocast: a collective carries its tensor at that tensor's dtype — the
-- vocab-parallel embedding's fp32 rows, the fp32 normed x a tp_in gathers and whose input gradient it reduces (the
-- fp32 stream's), a MoE block's fp32 final_hidden_states; the row-parallel o_proj / down_proj outputs stay 16-bit.
-- They were all priced at the compute dtype.
local function comm_bytes(n)
  local rule, sum = load_op(n.op), 0
  for _, k in ipairs(rule.forward(make_node(n))) do sum = sum + k.bytes end
  for _, k in ipairs(rule.backward and rule.backward(make_node(n)) or {}) do sum = sum + k.bytes end
  return sum
end

function T.test_tp_collectives_at_their_tensor_dtype_under_autocast()
  local plan = require("neusight.testing").tp_plan(2, B)
  local fp32 = { ["embed_tokens.tp_out"] = true, ["layers.self_attn.tp_in"] = true, ["layers.mlp.tp_in"] = true,
                 ["lm_head.tp_in"] = true, ["layers.mlp.tp_out"] = false, ["layers.self_attn.tp_out"] = false }
  for _, sp in ipairs { false, true } do
    local function tp_build(autocast)
      return by_name(llama.build(CFG, { batch = B, seq = S, training = true, dtype = "bf16", attention = "sdpa",
        autocast = autocast, tp = 2, sequence_parallel = sp, parallel = plan }))
    end
    local ac, pure = tp_build(true), tp_build(nil)
    local seen = 0
    for name, wide in pairs(fp32) do
      for _, suffix in ipairs(sp and { ".all_gather", ".reduce_scatter" } or { "" }) do
        local a, p = ac[name .. suffix], pure[name .. suffix]
        assert(a and p, name .. suffix .. ": a collective")
        eq(p.dtype, "bf16", name .. suffix .. ": pure bf16")
        eq(a.dtype, wide and "fp32" or "bf16", name .. suffix .. ": its tensor's dtype under autocast")
        eq(comm_bytes(a), comm_bytes(p) * (wide and 2 or 1), name .. suffix .. ": bytes")
        seen = seen + 1
      end
    end
    eq(seen, sp and 12 or 6, "every collective checked")
  end
  -- a MoE block's sum of the experts' outputs: fp32 under autocast (HF's expert loop)
  local cfg = tiny("mixtral")
  local nodes = by_name(moe.build(cfg, { batch = B, seq = S, training = true, dtype = "bf16", attention = "sdpa",
    autocast = true, tp = 2, parallel = plan }))
  eq(nodes["layers.block_sparse_moe.tp_out"].dtype, "fp32", "MoE: final_hidden_states all-reduced in fp32")
  eq(nodes["layers.block_sparse_moe.tp_in"].dtype, "fp32", "MoE: the router and experts' fp32 input's gradient")
end

-- GPT-2, OPT and BERT with tp = 2 under autocast: the embedding's all-reduce and every tp_in all-reduce carry fp32 (the
-- fp32 rows, the gradients of fp32 LayerNorm outputs), the row-parallel outputs' all-reduces bf16 as before.
function T.test_gpt_opt_bert_tp_collectives_under_autocast()
  local plan = require("neusight.testing").tp_plan(2, 2)
  local models = {
    gpt = { { name = "small", n_layer = 2, n_embd = 128, n_head = 4, vocab_size = 1000, n_positions = 128 },
            { "wte.tp_all_reduce", "h.attn.tp_in", "h.mlp.tp_in", "lm_head.tp_in" }, { "h.attn.tp_out", "h.mlp.tp_out" } },
    opt = { { name = "o", hidden_size = 64, ffn_dim = 256, num_hidden_layers = 2, num_attention_heads = 4,
              vocab_size = 500, max_position_embeddings = 256 },
            { "embed_tokens.tp_all_reduce", "layers.self_attn.tp_in", "layers.fc1.tp_in", "lm_head.tp_in" },
            { "layers.self_attn.tp_out", "layers.fc2.tp_out" } },
    bert = { { name = "b", hidden_size = 64, intermediate_size = 256, num_hidden_layers = 2, num_attention_heads = 4,
               vocab_size = 500, max_position_embeddings = 256, type_vocab_size = 2 },
             { "embeddings.word_embeddings.tp_all_reduce", "layer.attention.self.tp_in", "layer.intermediate.tp_in" },
             { "layer.attention.output.tp_out", "layer.output.tp_out" } },
  }
  for arch, m in pairs(models) do
    local function build_tp(autocast)
      return by_name(require("neusight.models." .. arch).build(m[1], { batch = 2, seq = 32, training = true,
        dtype = "bf16", attention = "sdpa", autocast = autocast, tp = 2, parallel = plan }))
    end
    local ac, pure = build_tp(true), build_tp(nil)
    for _, name in ipairs(m[2]) do
      assert(ac[name], arch .. ": " .. name)
      eq(ac[name].dtype, "fp32", arch .. ": " .. name .. " fp32 under autocast")
      eq(pure[name].dtype, "bf16", arch .. ": " .. name .. " pure")
    end
    for _, name in ipairs(m[3]) do eq(ac[name].dtype, "bf16", arch .. ": " .. name .. " stays bf16") end
  end
end

-- DeepSeek (neusight/models/deepseek.lua, HF's DeepseekV3 / V2 modules) under autocast, per layer, Th = tokens · h,
-- Tq / Tkv = tokens · q_lora_rank / kv_lora_rank, R = tokens · k routed rows, TE = tokens · experts:
--   every layer: the input / post-attention norms keep the fp32 x (+ 4 Th), q_a_layernorm / kv_a_layernorm their bf16
--   latent's fp32 copy (+ 2 Tq + 2 Tkv), kv_a_proj_with_mqa and up_proj cast and save their own copy (+ 2 Th each);
--   dense: + 8 Th + 2 Tq + 2 Tkv;
--   MoE: the shared experts' up_proj as the dense one's, each routed expert's up_proj + 2 R h; the gate's F.linear
--   saves the bf16 cast of x, not the fp32 .type(float32) copy (− 2 Th); V3's router scores are bf16 under autocast
--   (sigmoid on no list: its saved scores − 2 TE); with norm_topk_prob the weights' .sum() is fp32 (sum is on
--   autocast's fp32 list), so the renormalising div saves the bf16 top-k weights and the fp32 sum (− 2 R) and the
--   weighted outputs the bf16 y and the fp32 weight (− 2 R h); without it the div is gone and the weighted outputs save
--   the bf16 y and the bf16 weight (− 2 R h − 2 R); V2's softmax(dtype=fp32) keeps fp32 weights (the weighted outputs
--   save the bf16 y: − 2 R h).
local deepseek = require "neusight.models.deepseek"

local function ds_saved(cfg, autocast, layer, count)
  local nodes = deepseek.build(cfg, { batch = B, seq = S, training = true, dtype = "bf16", attention = "sdpa",
                                      autocast = autocast })
  local sum = 0
  for _, n in ipairs(nodes) do
    if n.layer == layer then sum = sum + memory.node_saved(n, load_op(n.op)) * n.count end
  end
  return sum / count
end

function T.test_deepseek_layers_saved_under_autocast_closed_form()
  local v3 = tiny("deepseek_v3")
  local h, qr, kvr, k, E = v3.hidden_size, v3.q_lora_rank, v3.kv_lora_rank, v3.num_experts_per_tok, v3.n_routed_experts
  local Th, Tq, Tkv, R = TOK * h, TOK * qr, TOK * kvr, TOK * k
  local dense_layers, moe_layers = v3.first_k_dense_replace, v3.num_hidden_layers - v3.first_k_dense_replace
  eq(ds_saved(v3, true, "dense_layers", dense_layers) - ds_saved(v3, nil, "dense_layers", dense_layers),
    8 * Th + 2 * Tq + 2 * Tkv, "V3 dense layer")
  assert(v3.norm_topk_prob ~= false, "the tiny V3 renormalises its top-k weights (DeepSeek-V3's norm_topk_prob)")
  eq(ds_saved(v3, true, "layers", moe_layers) - ds_saved(v3, nil, "layers", moe_layers),
    8 * Th + 2 * Tq + 2 * Tkv - 2 * Th - 2 * TOK * E - 2 * R, "V3 MoE layer (bf16 scores, fp32 renormalised weights)")
  local raw = {}
  for key, v in pairs(v3) do raw[key] = v end
  raw.norm_topk_prob = false
  -- (without the renormalisation pure has no div either: the difference loses the div's − 2 (R + T) … − 2 R only)
  eq(ds_saved(raw, true, "layers", moe_layers) - ds_saved(raw, nil, "layers", moe_layers),
    8 * Th + 2 * Tq + 2 * Tkv - 2 * Th - 2 * TOK * E - 2 * R, "V3 MoE layer without norm_topk_prob (bf16 weights)")
  eq(ds_saved(v3, false, "layers", moe_layers), ds_saved(v3, nil, "layers", moe_layers), "pure unchanged")
  local v2 = require("neusight.models.presets").deepseek_v2_lite -- no q_lora_rank; softmax routing
  local cfg = deepseek.config(v2)
  local v2_moe = cfg.L - cfg.first_dense
  Th, Tkv, R = TOK * cfg.h, TOK * cfg.kvr, TOK * cfg.k
  eq(ds_saved(v2, true, "layers", v2_moe) - ds_saved(v2, nil, "layers", v2_moe), 6 * Th + 2 * Tkv,
    "V2-Lite MoE layer (fp32 routing weights)")
end

function T.test_deepseek_router_and_attention_dtypes_under_autocast()
  local function nodes(cfg, autocast, attention)
    return by_name(deepseek.build(cfg, { batch = B, seq = S, training = true, dtype = "bf16",
      attention = attention or "sdpa", autocast = autocast }))
  end
  local v3 = tiny("deepseek_v3")
  local ac, pure = nodes(v3, true), nodes(v3, nil)
  local m, a = "layers.mlp", "layers.self_attn"
  assert(pure[m .. ".gate.hidden_to_fp32"] and not ac[m .. ".gate.hidden_to_fp32"], ".type(float32): a no-op on fp32")
  assert(ac[m .. ".gate.input_cast"] and ac[m .. ".gate.weight_cast"], "F.linear under autocast casts x and the weight")
  eq(pure[m .. ".gate"].dtype, "fp32", "pure: fp32 router logits")
  eq(ac[m .. ".gate"].dtype, "bf16", "autocast: bf16 router logits")
  eq(ac[m .. ".gate.sigmoid"].dtype, "bf16", "V3: sigmoid keeps bf16")
  -- get_topk_indices: the bf16 scores + the fp32 e_score_correction_bias buffer promote; the selection runs in fp32
  eq(ac[m .. ".gate.e_score_correction_bias"].dtype, "fp32", "bf16 scores + fp32 bias")
  eq(ac[m .. ".gate.e_score_correction_bias"].attrs.input_dtypes, "bf16,fp32", "mixed")
  eq(ac[m .. ".gate.group_scores"].dtype, "fp32", "the selection in fp32")
  eq(ac[m .. ".gate.topk_weights"].dtype, "bf16", "gathered from the bf16 scores")
  -- norm_topk_prob: topk_weights.sum() writes fp32 under autocast (its fp32 list), and the division by it too
  eq(ac[m .. ".gate.topk_sum"].dtype, "fp32", "sum: autocast's fp32 list")
  eq(ac[m .. ".gate.topk_norm"].dtype, "fp32", "bf16 weights / fp32 sum")
  eq(ac[m .. ".gate.topk_norm"].attrs.input_dtypes, "bf16,fp32", "mixed")
  eq(ac[m .. ".final_hidden_states"].dtype, "fp32", "zeros_like(dtype=topk_weights.dtype): the fp32 weights'")
  assert(not ac[m .. ".to_dtype"], ".type(hidden_states.dtype) of an fp32 sum on the fp32 stream: a no-op")
  local raw = {}
  for key, v in pairs(v3) do raw[key] = v end
  raw.norm_topk_prob = false
  local plain = nodes(raw, true)
  eq(plain[m .. ".final_hidden_states"].dtype, "bf16", "no renormalisation: zeros_like in the bf16 weights' dtype")
  eq(plain[m .. ".to_dtype"].dtype, "fp32", ".type(hidden_states.dtype): to the fp32 stream")
  eq(plain[m .. ".to_dtype"].attrs.from, "bf16", "from the bf16 sum")
  eq(ac[m .. ".experts.expert_input"].dtype, "fp32", "the experts index the fp32 rows")
  eq(ac[m .. ".shared_experts_add"].dtype, "fp32", "the fp32 sum + the bf16 shared experts")
  eq(ac[m .. ".shared_experts_add"].attrs.input_dtypes, "fp32,bf16", "mixed")
  eq(ac["layers.mlp_residual"].attrs.input_dtypes, nil, "residual: two fp32 tensors")
  eq(ac["layers.attn_residual"].attrs.input_dtypes, "fp32,bf16", "residual: the fp32 stream + bf16 o_proj")
  eq(ac[a .. ".query_states"].dtype, "fp32", "cat(bf16 q_pass, fp32 q_rot)")
  for _, name in ipairs { ".q_a_proj.input_cast", ".q_b_proj.input_cast", ".kv_a_proj_with_mqa.input_cast",
                          ".kv_b_proj.input_cast", ".sdpa.q_cast", ".sdpa.k_cast" } do
    assert(ac[a .. name] and ac[a .. name].attrs.from == "fp32", name .. ": an autocast cast")
    assert(not pure[a .. name], name .. ": none in pure")
  end
  local eager = nodes(v3, true, "eager")
  eq(eager[a .. ".softmax"].dtype, "fp32", "eager: softmax in fp32")
  assert(eager[a .. ".pv.p_cast"], "eager: the probabilities cast for P·V")
  -- V2: softmax(dtype=fp32) routing weights, an fp32 buffer, no .type cast
  local v2 = nodes(require("neusight.models.presets").deepseek_v2_lite, true)
  eq(v2[m .. ".gate"].dtype, "bf16", "V2: bf16 logits under autocast")
  eq(v2[m .. ".gate.softmax"].dtype, "fp32", "V2: fp32 scores")
  eq(v2[m .. ".final_hidden_states"].dtype, "fp32", "V2: fp32 buffer")
  assert(not v2[m .. ".to_dtype"], "V2: .type(fp32) of an fp32 sum is a no-op")
  eq(v2[m .. ".experts.weighted_output"].attrs.input_dtypes, "bf16,fp32", "V2: bf16 output · fp32 weight")
end

-- attrs.input_dtypes is read strictly (neusight.rules io_bytes, saved_inputs): one engine dtype name per input, by
-- position. An empty entry shifted the positions after it ("bf16,,fp32" priced input #2 as fp32 and input #3 at the
-- node's dtype); it, a misspelled name, a count other than the inputs' and a value that is not a string are errors
-- naming the node and the entry.
function T.test_input_dtypes_are_read_strictly()
  local rules = require "neusight.rules"
  local raises = require("neusight.testing").raises
  local x = { 64, 128 }
  local function node(dtypes, n)
    local inputs = {}
    for i = 1, n or 2 do inputs[i] = x end
    return make_node { name = "h.add", op = "add", inputs = inputs, output = x, dtype = "fp32",
                       attrs = { input_dtypes = dtypes } }
  end
  eq(rules.io_bytes(node("bf16,fp32")), 64 * 128 * (2 + 4 + 4), "bf16 and fp32 inputs, fp32 output")
  eq(rules.io_bytes(node("bf16,fp32,fp16", 3)), 64 * 128 * (2 + 4 + 2 + 4), "three inputs")
  eq(rules.saved_inputs(node("bf16,fp32"), { 1, 2 }), 64 * 128 * (2 + 4), "saved at their dtypes")
  local head = "node 'h.add' (op 'add'): attrs.input_dtypes "
  local per_input = " (one of the engine's dtype names, such as bf16 or fp32, per input)"
  raises(head .. "'bf16,,fp32': entry #2 is empty" .. per_input, rules.io_bytes, node("bf16,,fp32", 3))
  raises(head .. "'bf16,fp32,': entry #3 is empty" .. per_input, rules.io_bytes, node("bf16,fp32,", 3))
  raises(head .. "',bf16': entry #1 is empty" .. per_input, rules.saved_inputs, node(",bf16"), { 1, 2 })
  raises(head .. "'bf16,fp23': entry #2 'fp23' is not a dtype" .. per_input, rules.io_bytes, node("bf16,fp23"))
  raises(head .. "'bf16, fp32': entry #2 ' fp32' is not a dtype" .. per_input, rules.io_bytes, node("bf16, fp32"))
  raises(head .. "'bfloat16,fp32': entry #1 'bfloat16' is not a dtype" .. per_input, rules.io_bytes,
    node("bfloat16,fp32"))
  raises(head .. "'bf16': has 1 entries for 2 input(s) (one dtype per input, by position)", rules.io_bytes, node("bf16"))
  raises(head .. "'bf16,fp32,fp32': has 3 entries for 2 input(s) (one dtype per input, by position)", rules.io_bytes,
    node("bf16,fp32,fp32"))
  raises(head .. "(a number): must be a string of comma-separated dtypes, one per input", rules.io_bytes, node(2))
  -- read once per node and kept (neusight.rules): the same node read again after its string or its inputs changed
  -- is read afresh, a fixed one's error comes back each time
  local same = node("bf16,fp32")
  eq(rules.io_bytes(same), 64 * 128 * (2 + 4 + 4), "first read")
  same.attrs.input_dtypes = "fp16,fp16"
  eq(rules.io_bytes(same), 64 * 128 * (2 + 2 + 4), "the string changed: read again")
  same.inputs[3] = x
  raises(head .. "'fp16,fp16': has 2 entries for 3 input(s) (one dtype per input, by position)", rules.io_bytes, same)
  raises(head .. "'fp16,fp16': has 2 entries for 3 input(s) (one dtype per input, by position)", rules.io_bytes, same)
  -- the element-wise rules' check says it (the engine runs it on every node first and names the node's line)
  local add = load_op("add")
  eq(add.check(node("bf16,fp32")), nil, "check: a good one")
  eq(add.check(node("bf16,,fp32", 3)), "attrs.input_dtypes 'bf16,,fp32': entry #2 is empty" .. per_input, "check")
  eq(add.check(node("bf16")), "attrs.input_dtypes 'bf16': has 1 entries for 2 input(s) (one dtype per input, by "
    .. "position)", "check: the count")
end

-- The builders' one autocast set-up (neusight.nodes autocast_setup): g.autocast for opts.autocast, never under
-- Megatron-LM's kernels; the residual stream's dtype; add_as on g.
function T.test_autocast_setup()
  local N = require "neusight.nodes"
  local function setup(opts)
    local g = N.new("bf16")
    local stream, add_as = N.autocast_setup(g, opts)
    add_as("fp32", "add", "x.add", { { 4, 8 }, { 4, 8 } }, { 4, 8 }, 0)
    return g.autocast, stream, g.nodes[#g.nodes]
  end
  local on, stream, node = setup { autocast = true }
  eq(on, true, "amp")
  eq(stream, "fp32", "the fp32 stream under autocast")
  eq(node.name .. " " .. node.dtype, "x.add fp32", "add_as: the node in the given dtype")
  on, stream = setup { autocast = true, megatron = true }
  eq(on, false, "Megatron-LM's kernels: no autocast")
  eq(stream, "bf16", "the graph's dtype")
  on, stream = setup {}
  eq(on, false, "pure")
  eq(stream, "bf16", "pure: the graph's dtype")
end

return T
