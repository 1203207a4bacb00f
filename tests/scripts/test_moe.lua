-- tests/scripts/test_moe.lua — MoE Llama-family builder (Mixtral, Qwen2-MoE, Qwen3-MoE): the routing ops, HF parameter counts
-- and active parameters from closed forms, FLOPs per token, the block's kernels, uneven routing, layer groups, tensor and
-- expert parallelism, config.json mapping and defaults, errors.
local K = require "neusight.kernels"
local moe = require "neusight.models.moe"
local hf = require "neusight.models.hf"
local presets = require "neusight.models.presets"
local P = require "neusight.parallel"

local t = require("neusight.testing").bind(load_op, make_node)
local eq, flops, total_params, tp_plan, matmul_flops = t.eq, t.flops, t.params, t.tp_plan, t.matmul_flops
local raises = require("neusight.testing").raises

local T = {}

local MOE_PRESETS = { "mixtral_8x7b", "mixtral_8x22b", "qwen3_30b_a3b", "qwen15_moe_a27b" }

local with = require("neusight.testing").with

-- Tiny configs: 4 query heads over 2 kv heads of 16; 4 experts, top 2.
local tiny = require("neusight.testing").tiny
local TINY_MIXTRAL, TINY_QWEN2, TINY_QWEN3 = tiny("mixtral"), tiny("qwen2_moe"), tiny("qwen3_moe")

---------------------------------------------------------------------------------------------------
-- The routing ops (canonical nodes: n = 4096 tokens, h = 4096, E = 8 experts, top 2, m = 1024 rows per expert)

function T.test_routing_ops()
  local n, h, E, k, m = 4096, 4096, 8, 2, 1024
  local function run(rule, node)
    local nd = make_node(with({ op = rule.name, name = rule.name }, node))
    local fw = rule.forward(nd, t.GPU)
    local bw = rule.backward and rule.backward(nd, t.GPU) or {}
    return fw, bw
  end
  -- topk over fp32 probabilities: values (n, k) fp32 + int64 indices; backward: zero-fill (n, E), scatter.
  local fw, bw = run(load_op("topk"), { inputs = { { n, E } }, output = { n, k }, dtype = "fp32" })
  eq(fw[1].bytes, 4 * n * E + 4 * n * k + 8 * n * k, "topk reads x, writes values and indices")
  eq(#bw, 2, "topk backward: zero-fill + scatter")
  eq(bw[1].bytes, 4 * n * E, "zero-filled gradient of x")
  -- one_hot: int64 in and out, no backward.
  fw, bw = run(load_op("one_hot"), { inputs = { { n, k } }, output = { E, k, n }, dtype = "bf16" })
  eq(fw[1].bytes, 8 * n * k + 8 * E * k * n, "one_hot: int64 indices → int64 mask")
  eq(#bw, 0, "no gradient")
  -- torch.where on one expert's (k, n) int64 mask → 2 index tensors of m.
  fw, bw = run(load_op("nonzero"), { inputs = { { k, n } }, output = { 2, m }, dtype = "bf16" })
  eq(fw[1].bytes, 8 * k * n + 8 * 2 * m, "nonzero")
  eq(#bw, 0, "no gradient")
  -- hidden_states[top_x]: gather m rows; backward zero-fill (n, h), index_put accumulate, autograd's add over (n, h).
  fw, bw = run(load_op("index"), { inputs = { { n, h }, { m } }, output = { m, h }, dtype = "bf16" })
  eq(fw[1].bytes, 8 * m + 2 * 2 * m * h, "gather")
  eq(K.describe_all(bw), "MEM((4096,4096)) MEM((1024,),(1024,4096),(1024,4096),(1024,4096)) VECadd(4096,4096)", "index bw")
  eq(bw[1].bytes, 2 * n * h, "zero-fill")
  eq(bw[2].bytes, 8 * m + 3 * 2 * m * h, "index_put accumulate")
  eq(bw[3].bytes, 3 * 2 * n * h, "the full-size gradient added into the input's")
  -- final.index_add_(0, top_x, y): read y and the index, read-modify-write m rows; backward an index_select.
  fw, bw = run(load_op("index_add"), { inputs = { { m, h }, { m }, { n, h } }, output = { m, h }, dtype = "bf16" })
  eq(fw[1].bytes, 8 * m + 3 * 2 * m * h, "index_add")
  eq(bw[1].bytes, 8 * m + 2 * 2 * m * h, "index_select of the gradient")
  -- zeros: one write, no backward.
  fw, bw = run(load_op("zeros"), { inputs = {}, output = { n, h }, dtype = "bf16" })
  eq(K.describe_all(fw) .. "|" .. #bw, "MEM((4096,4096))|0", "zeros")
  eq(fw[1].bytes, 2 * n * h, "written once")
  -- sum of an int64 mask (no gradient) and of fp32 weights (a gradient).
  fw, bw = run(load_op("sum"), { inputs = { { E, k, n } }, output = { E }, dtype = "bf16", attrs = { elem_bytes = 8, no_grad = true } })
  eq(fw[1].bytes, 8 * (E * k * n + E), "int64 sum")
  eq(#bw, 0, "no_grad")
  fw, bw = run(load_op("sum"), { inputs = { { n, k } }, output = { n, 1 }, dtype = "fp32" })
  eq(fw[1].bytes, 4 * (n * k + n), "fp32 sum")
  eq(#bw, 2, "memory rule's backward")
  -- sigmoid: one kernel each way.
  fw, bw = run(load_op("sigmoid"), { inputs = { { n, 1 } }, output = { n, 1 }, dtype = "bf16" })
  eq(K.describe_all(fw) .. " | " .. K.describe_all(bw), "VECsigmoid(4096,1) | VECsigmoid_backward(4096,1)", "sigmoid")
  eq(fw[1].flops, 4 * n, "1 / (1 + exp(−x))")
  eq(bw[1].bytes, 3 * 2 * n, "reads dy and y, writes dx")
end

---------------------------------------------------------------------------------------------------
-- Parameter counts

-- Closed form: embed + L × (attention [+ q/k/v biases] [+ q/k norms] + 2 norms + router h·E + E experts · 3·h·I
-- [+ shared expert 3·h·I_s + its gate h]) + final norm + untied lm_head. (Every layer sparse in the presets.)
-- `k`, when given, counts k experts per layer instead of E: the parameters a token uses.
local function closed_form(cfg, k)
  local mt = cfg.model_type
  local h, L, V = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size
  local nh, kvh = cfg.num_attention_heads, cfg.num_key_value_heads
  local hd = cfg.head_dim or h // nh
  local E = mt == "mixtral" and cfg.num_local_experts or cfg.num_experts
  local I = mt == "mixtral" and cfg.intermediate_size or cfg.moe_intermediate_size
  local attention = 2 * h * nh * hd + 2 * h * kvh * hd
  if mt == "qwen2_moe" then attention = attention + nh * hd + 2 * kvh * hd end
  if mt == "qwen3_moe" then attention = attention + 2 * hd end
  local experts = (k or E) * 3 * h * I
  local shared = mt == "qwen2_moe" and 3 * h * cfg.shared_expert_intermediate_size + h or 0
  return 2 * V * h + L * (attention + 2 * h + h * E + experts + shared) + h
end

-- HF's num_parameters() of the published checkpoints.
function T.test_parameter_counts_equal_huggingface()
  local published = {
    mixtral_8x7b = 46702792704,     -- mistralai/Mixtral-8x7B-v0.1 ("46.7B")
    mixtral_8x22b = 140630071296,   -- mistralai/Mixtral-8x22B-v0.1 ("141B")
    qwen3_30b_a3b = 30532122624,    -- Qwen/Qwen3-30B-A3B ("30.5B")
    qwen15_moe_a27b = 14315784192,  -- Qwen/Qwen1.5-MoE-A2.7B ("14.3B")
  }
  for _, name in ipairs(MOE_PRESETS) do
    local cfg = presets[name]
    eq(cfg.arch, "moe", name .. " arch")
    eq(closed_form(cfg), published[name], name .. " closed form")
    eq(total_params(moe.build(cfg, { batch = 1, seq = 8, training = true })), published[name], name .. " graph")
  end
  -- Qwen3-30B-A3B by hand: per layer q 2048·4096, k and v 2048·512, o 4096·2048, q/k norms 2·128, 2 norms 2·2048,
  -- router 2048·128, 128 experts · 3·2048·768; 48 layers; embed and lm_head 151936·2048 each; final norm 2048.
  local layer = 2048 * 4096 + 2 * 2048 * 512 + 4096 * 2048 + 2 * 128 + 2 * 2048 + 2048 * 128 + 128 * 3 * 2048 * 768
  eq(layer, 623120640, "Qwen3-30B-A3B layer")
  eq(48 * layer + 2 * 151936 * 2048 + 2048, 30532122624, "Qwen3-30B-A3B total")
end

-- Active parameters per token: k of the E experts per layer (Mixtral 12.9B, 39B; Qwen3 3.3B; Qwen1.5-MoE 2.7B).
function T.test_active_parameters()
  local published = { mixtral_8x7b = 12.9e9, mixtral_8x22b = 39.1e9, qwen3_30b_a3b = 3.3e9, qwen15_moe_a27b = 2.7e9 }
  for _, name in ipairs(MOE_PRESETS) do
    local cfg = presets[name]
    local k = cfg.num_experts_per_tok
    local active = moe.active_parameters(cfg)
    eq(active, closed_form(cfg, k), name .. " active parameters")
    assert(math.abs(active - published[name]) < 0.05 * published[name], name .. ": " .. active)
  end
  eq(moe.active_parameters(presets.mixtral_8x7b), 12879925248, "Mixtral-8x7B: 46.7B − 32 · 6 · 3·4096·14336")
end

function T.test_config_class_defaults()
  local function count(cfg) return total_params(moe.build(cfg, { batch = 1, seq = 8 })) end
  eq(count { name = "d" }, 46702792704, "MixtralConfig() is Mixtral-8x7B")
  eq(count { name = "d", model_type = "qwen2_moe" }, 14315784192, "Qwen2MoeConfig() is Qwen1.5-MoE-A2.7B's shape")
  -- Qwen3MoeConfig(): 24 layers of 2048, 32 heads (head_dim 2048 / 32 = 64), 4 kv heads, 128 experts of 768.
  eq(count { name = "d", model_type = "qwen3_moe" }, closed_form { model_type = "qwen3_moe", hidden_size = 2048,
    num_hidden_layers = 24, vocab_size = 151936, num_attention_heads = 32, num_key_value_heads = 4, num_experts = 128,
    moe_intermediate_size = 768 }, "Qwen3MoeConfig()")
end

---------------------------------------------------------------------------------------------------
-- FLOPs

-- GEMM FLOPs per token = 2 · (the projections + router + k experts [+ shared expert and its gate] + lm_head);
-- b·s·k divisible by E: every expert gets b·s·k/E tokens.
function T.test_flops_per_token_closed_form()
  local b, s = 2, 64
  for _, name in ipairs(MOE_PRESETS) do
    local cfg = presets[name]
    local h, L, V = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size
    local nh, kvh = cfg.num_attention_heads, cfg.num_key_value_heads
    local hd = cfg.head_dim or h // nh
    local mt = cfg.model_type
    local E = mt == "mixtral" and cfg.num_local_experts or cfg.num_experts
    local I = mt == "mixtral" and cfg.intermediate_size or cfg.moe_intermediate_size
    local k = cfg.num_experts_per_tok
    local shared = mt == "qwen2_moe" and 3 * h * cfg.shared_expert_intermediate_size + h or 0
    local per_token = L * (2 * h * nh * hd + 2 * h * kvh * hd + h * E + k * 3 * h * I + shared) + V * h
    local nodes = moe.build(cfg, { batch = b, seq = s, training = true, dtype = "bf16", attention = "sdpa" })
    eq(flops(nodes, true, "fw", "gemm"), 2 * per_token * b * s, name .. " forward GEMM FLOPs")
    eq(flops(nodes, true, "bw", "gemm"), 2 * flops(nodes, true, "fw", "gemm"), name .. " backward GEMMs")
    eq(flops(nodes, true, "fw", "attention"), 4 * hd * L * nh * b * s * (s + 1) // 2, name .. " causal attention")
  end
end

---------------------------------------------------------------------------------------------------
-- The block's kernels

-- One Mixtral layer's MoE nodes, in HF's order (bf16: the fp32 routing weights cast back), b·s = 16 tokens,
-- 4 experts, top 2: 8 rows per expert.
function T.test_mixtral_block_nodes()
  local nodes = moe.build(TINY_MIXTRAL, { batch = 2, seq = 8, training = true, dtype = "bf16", attention = "sdpa" })
  local rows = {}
  for _, n in ipairs(nodes) do
    if n.name:find("block_sparse_moe", 1, true) then
      rows[#rows + 1] = ("%s %s %s ×%d"):format(n.name:gsub("^layers%.block_sparse_moe%.", ""), n.op, n.dtype, n.count)
    end
  end
  t.same(rows, {
    "gate linear bf16 ×2", "routing_softmax softmax fp32 ×2", "topk topk fp32 ×2", "topk_sum sum fp32 ×2",
    "topk_norm div fp32 ×2", "routing_weights.to_dtype cast bf16 ×2", "final_hidden_states zeros bf16 ×2",
    "expert_mask one_hot bf16 ×2", "expert_hit sum bf16 ×2",
    "experts.where nonzero bf16 ×8", "experts.current_state index bf16 ×8", "experts.w1 linear bf16 ×8",
    "experts.act_fn silu bf16 ×8", "experts.w3 linear bf16 ×8", "experts.mul mul bf16 ×8",
    "experts.w2 linear bf16 ×8", "experts.routing_weight index bf16 ×8", "experts.weighted mul bf16 ×8",
    "experts.index_add index_add bf16 ×8",
  }, "block")
  local by = {}
  for _, n in ipairs(nodes) do by[n.name] = n end
  local w1 = by["layers.block_sparse_moe.experts.w1"]
  eq(table.concat(w1.inputs[1], ",") .. "→" .. table.concat(w1.output, ","), "8,64→8,96", "8 of the 16·2 routed rows")
  eq(w1.attrs.expert, true, "expert weights")
  eq(w1.attrs.per_layer, 4, "four experts per layer")
  eq(w1.params, 64 * 96, "one expert's w1")
  eq(by["layers.block_sparse_moe.gate"].params, 64 * 4, "router")
  -- Training appends the router aux loss over both layers' logits: (2 · 16, 4).
  eq(table.concat(by["router_aux_loss.softmax"].output, ","), "32,4", "aux loss over L · n tokens")
  eq(nodes[#nodes].name, "router_aux_loss.sum", "last node")
  local inference = moe.build(TINY_MIXTRAL, { batch = 2, seq = 8, dtype = "bf16" })
  for _, n in ipairs(inference) do assert(not n.name:find("router_aux_loss", 1, true), "no aux loss in inference") end
  local no_loss = moe.build(TINY_MIXTRAL, { batch = 2, seq = 8, training = true, loss = false })
  eq(no_loss[#no_loss].name, "lm_head", "loss = false: neither loss")
end

function T.test_qwen_shared_expert_and_norm_topk()
  local nodes = moe.build(TINY_QWEN2, { batch = 1, seq = 8, training = true })
  local by, ops = {}, {}
  for _, n in ipairs(nodes) do
    by[n.name] = n
    ops[n.op] = (ops[n.op] or 0) + 1
  end
  eq(by["layers.mlp.topk_norm"], nil, "norm_topk_prob false: no renormalisation")
  eq(by["layers.mlp.routing_weights.to_dtype"], nil, "fp32: no cast")
  eq(by["layers.mlp.shared_expert.gate_proj"].params, 64 * 96, "shared expert")
  eq(by["layers.mlp.shared_expert.gate_proj"].attrs.expert, nil, "the shared expert is no routed expert")
  eq(by["layers.mlp.shared_expert_gate"].params, 64, "Linear(h, 1)")
  eq(by["layers.mlp.shared_expert_gate.sigmoid"].op, "sigmoid", "sigmoid gate")
  eq(by["layers.mlp.experts.gate_proj"].params, 64 * 32, "experts of moe_intermediate_size")
  eq(by["layers.self_attn.q_proj"].attrs.bias, true, "Qwen2 q/k/v bias")
  local q3 = moe.build(TINY_QWEN3, { batch = 1, seq = 8 })
  by = {}
  for _, n in ipairs(q3) do by[n.name] = n end
  assert(by["layers.mlp.topk_norm"], "norm_topk_prob true")
  assert(by["layers.self_attn.q_norm.scale"], "Qwen3 q_norm")
  eq(by["layers.mlp.shared_expert_gate"], nil, "no shared expert")
  eq(by["layers.self_attn.q_proj"].params, 64 * 4 * 32, "head_dim 32")
end

-- The routed rows go to the experts the tokens reach (moe.experts_reached: the expected distinct experts of a uniform
-- router), spread evenly: some get one row more; the experts not reached hold parameters and launch nothing. The
-- routed rows and the parameters always add up.
function T.test_uneven_routing()
  local function experts(nodes, suffix)
    local rows, per = 0, 0
    for _, n in ipairs(nodes) do
      if n.name:sub(-#suffix) == suffix then
        rows, per = rows + n.inputs[1][1] * n.attrs.per_layer, per + n.attrs.per_layer
      end
    end
    return rows, per
  end
  -- 5 tokens · top 2 = 10 rows; they reach 8·(1 − (6/8)^5) = 6.1 → 6 of the 8 experts: 4 of 2 rows, 2 of 1, 2 idle.
  local nodes = moe.build(TINY_QWEN3, { batch = 1, seq = 5 })
  local by = {}
  for _, n in ipairs(nodes) do by[n.name] = n end
  eq(by["layers.mlp.experts.gate_proj"].inputs[1][1] .. "×" .. by["layers.mlp.experts.gate_proj"].attrs.per_layer, "2×4", "fuller experts")
  eq(by["layers.mlp.experts_short.gate_proj"].inputs[1][1] .. "×" .. by["layers.mlp.experts_short.gate_proj"].attrs.per_layer, "1×2", "the others")
  eq(by["layers.mlp.experts_idle.idle"].attrs.per_layer, 2, "not reached")
  local rows, per = experts(nodes, ".gate_proj")
  eq(rows, 10, "every routed row")
  eq(per + by["layers.mlp.experts_idle.idle"].attrs.per_layer, 8, "every expert")
  -- a prefill-sized batch reaches every expert: 64 tokens · top 2 = 128 rows, 16 each
  local big = {}
  for _, n in ipairs(moe.build(TINY_QWEN3, { batch = 8, seq = 8 })) do big[n.name] = n end
  eq(big["layers.mlp.experts.gate_proj"].inputs[1][1] .. "×" .. big["layers.mlp.experts.gate_proj"].attrs.per_layer,
    "16×8", "all 8 experts")
  local full = total_params(moe.build(TINY_QWEN3, { batch = 1, seq = 8 }))
  eq(total_params(nodes), full, "parameters unchanged")
  -- Decode, batch 3: 6 rows; 3 tokens reach 8·(1 − (6/8)^3) = 4.6 → 5 experts: 1 of 2 rows, 4 of 1, 3 idle (a
  -- weight node). One token reaches exactly its k experts.
  local dec = moe.build(TINY_QWEN3, { batch = 3, phase = "decode", context = 16 })
  by = {}
  for _, n in ipairs(dec) do by[n.name] = n end
  eq(by["layers.mlp.experts.gate_proj"].inputs[1][1] .. "×" .. by["layers.mlp.experts.gate_proj"].attrs.per_layer, "2×1", "fuller")
  eq(by["layers.mlp.experts_short.gate_proj"].attrs.per_layer, 4, "busy experts of one row")
  eq(by["layers.mlp.experts_idle.idle"].attrs.per_layer, 3, "idle experts")
  eq(by["layers.mlp.experts_idle.where"], nil, "idle experts launch nothing")
  local one = {}
  for _, n in ipairs(moe.build(TINY_QWEN3, { batch = 1, phase = "decode", context = 16 })) do one[n.name] = n end
  eq(one["layers.mlp.experts.gate_proj"].attrs.per_layer, 2, "one token: its top 2")
  eq(one["layers.mlp.experts_short.idle"].attrs.per_layer, 6, "and 6 idle")
  eq(total_params(dec), full, "parameters unchanged in decode")
end

-- Qwen2-MoE's decoder_sparse_step and mlp_only_layers: dense and sparse layer groups; the pipeline partition counts
-- a layer once however many experts its nodes replicate (attrs.per_layer).
function T.test_layer_groups_and_pipeline_partition()
  local cfg = with(TINY_QWEN2, { num_hidden_layers = 6, decoder_sparse_step = 2, mlp_only_layers = { 5 } })
  local nodes = moe.build(cfg, { batch = 1, seq = 8, training = true })
  local seen, groups = {}, {}
  for _, n in ipairs(nodes) do
    if n.layer ~= "" and not seen[n.layer] then
      seen[n.layer] = true
      groups[#groups + 1] = n.layer .. "×" .. n.count
    end
  end
  -- Layers 1 and 3 sparse ((i + 1) % 2 == 0), 5 listed in mlp_only_layers: 4 dense, 2 sparse.
  eq(table.concat(groups, " "), "dense_layers×4 layers×2", "groups")
  local by = {}
  for _, n in ipairs(nodes) do by[n.name] = n end
  eq(by["dense_layers.mlp.gate_proj"].params, 64 * 128, "dense MLP of intermediate_size")
  local attention = 2 * 64 * 64 + 2 * 64 * 32 + (64 + 2 * 32) + 2 * 64 -- q/k/v/o, q/k/v biases, 2 norms
  local sparse = 4 * 3 * 64 * 32 + 3 * 64 * 96 + 64 + 64 * 4          -- experts, shared expert and gate, router
  eq(total_params(nodes), 2 * 100 * 64 + 64 + 6 * attention + 4 * 3 * 64 * 128 + 2 * sparse, "4 dense + 2 sparse layers")
  -- Two pipeline stages of three layers each, whatever the expert nodes' counts.
  local plan = P.plan(P.normalize { pp = 2, microbatches = 2 },
    { interconnect = "nvlink4", interconnect_bw_gbps = 900, pcie_bw_gbps = 64 },
    { batch = 2, dtype = "fp32", mode = "train" })
  local times = {}
  for i = 1, #nodes do times[i] = { fw = 1e-3, fw_comm = 0, bw = 2e-3, bw_comm = 0, opt = 0 } end
  local tl = P.timeline(plan, nodes, times)
  eq(tl.devices[1].layers .. "+" .. tl.devices[2].layers, "3+3", "layers per stage")
  eq(tl.devices[1].params + tl.devices[2].params, total_params(nodes), "every parameter on a stage")
end

---------------------------------------------------------------------------------------------------
-- Tensor and expert parallelism

function T.test_tp1_graph_is_unchanged()
  for _, cfg in ipairs { TINY_MIXTRAL, TINY_QWEN2, TINY_QWEN3 } do t.tp1_unchanged(moe, cfg, 2, 8) end
end

-- Every GEMM but the replicated router and shared-expert gate splits tp ways (tp divides the kv heads here).
function T.test_tp_shards_times_tp_equal_unsharded()
  local function replicated(n) return n.name:find("%.gate$") or n.name:find("shared_expert_gate", 1, true) end
  local function split(n) return not replicated(n) end
  for _, cfg in ipairs { TINY_MIXTRAL, TINY_QWEN2, TINY_QWEN3, presets.mixtral_8x7b } do
    local b, s = 2, 16
    local one = moe.build(cfg, { batch = b, seq = s, training = true, attention = "sdpa" })
    for _, tp in ipairs { 2 } do
      local sharded = moe.build(cfg, { batch = b, seq = s, training = true, attention = "sdpa", tp = tp,
        parallel = tp_plan(tp, b) })
      eq(tp * matmul_flops(sharded, split), matmul_flops(one, split), cfg.name .. " tp " .. tp .. " GEMM FLOPs")
      eq(matmul_flops(sharded, replicated), matmul_flops(one, replicated), cfg.name .. " replicated router")
      eq(tp * flops(sharded, true, "fw", "attention"), flops(one, true, "fw", "attention"), cfg.name .. " attention")
      local tp_nodes = 0
      for _, n in ipairs(sharded) do
        if n.attrs.group == "tp" and n.name:find("mlp.tp_") or n.name:find("block_sparse_moe.tp_") then tp_nodes = tp_nodes + 1 end
      end
      assert(tp_nodes >= 2, cfg.name .. ": f and g around the MoE block")
    end
  end
  -- Mixtral-8x7B at tp 8: 8 kv heads, one per rank; experts 14336 / 8 wide.
  local cfg = presets.mixtral_8x7b
  local one = moe.build(cfg, { batch = 1, seq = 32, training = true, attention = "sdpa" })
  local eight = moe.build(cfg, { batch = 1, seq = 32, training = true, attention = "sdpa", tp = 8, parallel = tp_plan(8, 1) })
  local function experts(n) return n.attrs.expert == true end
  eq(8 * matmul_flops(eight, experts), matmul_flops(one, experts), "expert GEMMs × tp 8")
  eq(8 * matmul_flops(eight, function(n) return not experts(n) and not n.name:find("%.gate$") end),
    matmul_flops(one, function(n) return not experts(n) and not n.name:find("%.gate$") end), "the rest × tp 8")
end

-- Expert parallelism: E / ep experts per rank, the same routed rows (n·k) through them, two all-to-alls per layer.
function T.test_expert_parallel()
  local ep_plan = require("neusight.testing").ep_plan
  local cfg, b, s = TINY_QWEN3, 2, 16 -- 8 experts, top 2: 64 routed rows
  local one = moe.build(cfg, { batch = b, seq = s, training = true })
  local function experts(n) return n.attrs.expert == true end
  for _, ep in ipairs { 2, 4, 8 } do
    local nodes = moe.build(cfg, { batch = b, seq = s, training = true, ep = ep, parallel = ep_plan(ep, 1, b * ep),
      router_skew = "balanced" }) -- every rank the mean n·k rows (test_moe_imbalance.lua: the default's busiest rank)
    local a2a, by = {}, {}
    for _, n in ipairs(nodes) do
      by[n.name] = n
      if n.op == "all_to_all" then
        a2a[#a2a + 1] = n
        eq(n.attrs.group, "ep", "ep group")
        eq(n.attrs.direction, "both", "forward and backward")
        eq(table.concat(n.output, ","), "64,64", "n·k rows of h")
      end
    end
    eq(#a2a, 2, "dispatch and combine per layer group")
    eq(by["layers.mlp.local_experts.gate_proj"].attrs.per_layer, 8 // ep, "local experts")
    eq(by["layers.mlp.local_experts.gate_proj"].inputs[1][1], 64 * ep // 8, "rows per local expert")
    eq(by["layers.mlp.experts.current_state"].attrs.per_layer, 8, "every expert's gather fills the send buffer")
    eq(matmul_flops(nodes, experts), matmul_flops(one, experts), "expert GEMM FLOPs per rank unchanged")
    eq(total_params(nodes), total_params(one) - (8 - 8 // ep) * 2 * 3 * 64 * 32, "E / ep experts' parameters")
  end
  -- With tp: each local expert split tp ways.
  local both = moe.build(cfg, { batch = b, seq = s, training = true, ep = 2, tp = 2, parallel = ep_plan(2, 2, 2 * b),
    router_skew = "balanced" })
  eq(2 * matmul_flops(both, experts), matmul_flops(one, experts), "ep 2 × tp 2: experts split tp ways")
  raises("moe model 'tiny': num_experts = 8 is not divisible by ep = 3: give an ep that divides 8 (1, 2, 4, 8)",
    moe.build, cfg, { batch = b, seq = s, ep = 3, parallel = ep_plan(3, 1, 3 * b) })
end

---------------------------------------------------------------------------------------------------
-- config.json (scripts/neusight/models/hf.lua)

-- mistralai/Mixtral-8x7B-v0.1's config.json.
local MIXTRAL_JSON = {
  architectures = { "MixtralForCausalLM" }, attention_dropout = 0.0, bos_token_id = 1, eos_token_id = 2,
  hidden_act = "silu", hidden_size = 4096, initializer_range = 0.02, intermediate_size = 14336,
  max_position_embeddings = 32768, model_type = "mixtral", num_attention_heads = 32, num_experts_per_tok = 2,
  num_hidden_layers = 32, num_key_value_heads = 8, num_local_experts = 8, output_router_logits = false,
  rms_norm_eps = 1e-05, rope_theta = 1000000.0, router_aux_loss_coef = 0.02, tie_word_embeddings = false,
  torch_dtype = "bfloat16", transformers_version = "4.36.0.dev0", use_cache = true, vocab_size = 32000,
}
-- Qwen/Qwen3-30B-A3B's config.json (sliding_window and rope_scaling are null).
local QWEN3_JSON = {
  architectures = { "Qwen3MoeForCausalLM" }, attention_bias = false, attention_dropout = 0.0, bos_token_id = 151643,
  decoder_sparse_step = 1, eos_token_id = 151645, head_dim = 128, hidden_act = "silu", hidden_size = 2048,
  initializer_range = 0.02, intermediate_size = 6144, max_position_embeddings = 40960, max_window_layers = 48,
  mlp_only_layers = {}, model_type = "qwen3_moe", moe_intermediate_size = 768, norm_topk_prob = true,
  num_attention_heads = 32, num_experts = 128, num_experts_per_tok = 8, num_hidden_layers = 48,
  num_key_value_heads = 4, output_router_logits = false, rms_norm_eps = 1e-06, rope_theta = 1000000.0,
  router_aux_loss_coef = 0.001, tie_word_embeddings = false, torch_dtype = "bfloat16",
  transformers_version = "4.51.0", use_cache = true, use_sliding_window = false, vocab_size = 151936,
}

function T.test_config_json_gives_the_presets()
  local opts = { batch = 1, seq = 32, training = true, dtype = "bf16", attention = "sdpa" }
  local m = hf.from_config(MIXTRAL_JSON, "models/Mixtral-8x7B-v0.1/config.json", { sliding_window = true })
  eq(m.arch, "moe", "arch")
  eq(m.sliding_window, false, "null → None")
  eq(m.router_aux_loss_coef, nil, "ignored key dropped")
  t.same(moe.build(m, opts), moe.build(with(presets.mixtral_8x7b, { name = "Mixtral-8x7B-v0.1" }), opts), "mixtral graph")
  local q = hf.from_config(QWEN3_JSON, "models/Qwen3-30B-A3B/config.json", { sliding_window = true, rope_scaling = true })
  t.same(moe.build(q, opts), moe.build(with(presets.qwen3_30b_a3b, { name = "Qwen3-30B-A3B" }), opts), "qwen3 graph")
  eq(total_params(moe.build(q, opts)), 30532122624, "Qwen3-30B-A3B parameters")
  -- Qwen1.5-MoE-A2.7B's config.json keeps only what differs from... everything; its defaults make the same model.
  eq(total_params(moe.build(hf.from_config({ model_type = "qwen2_moe" }, "q.json", {}), opts)), 14315784192,
    "Qwen2MoeConfig() defaults")
  eq(total_params(moe.build(hf.from_config({ model_type = "mixtral" }, "m.json", {}), opts)), 46702792704,
    "MixtralConfig() defaults")
end

function T.test_config_json_unknown_keys()
  raises([[m.json: unknown key 'num_experts' for model_type "mixtral" (did you mean 'num_experts_per_tok'?)]],
    hf.from_config, { model_type = "mixtral", num_experts = 8 }, "m.json", {})
  raises([[q.json: unknown key 'shared_expert_intermediate_size' for model_type "qwen3_moe"]],
    hf.from_config, { model_type = "qwen3_moe", shared_expert_intermediate_size = 8 }, "q.json", {})
  raises([[q.json: unknown key 'num_expert_per_tok' for model_type "qwen2_moe" (did you mean 'num_experts_per_tok'?)]],
    hf.from_config, { model_type = "qwen2_moe", num_expert_per_tok = 4 }, "q.json", {})
end

---------------------------------------------------------------------------------------------------
-- Errors

function T.test_errors()
  raises("moe model 'tiny': num_experts_per_tok (5) exceeds num_local_experts (4)",
    moe.build, with(TINY_MIXTRAL, { num_experts_per_tok = 5 }), { batch = 1, seq = 8 })
  raises("moe model 'tiny': model_type \"llama\" is not supported (\"mixtral\", \"qwen2_moe\" or \"qwen3_moe\")",
    moe.build, with(TINY_MIXTRAL, { model_type = "llama" }), { batch = 1, seq = 8 })
  raises("moe model 'tiny': unknown field 'num_experts' (did you mean 'num_experts_per_tok'?)",
    moe.build, with(TINY_MIXTRAL, { num_experts = 4 }), { batch = 1, seq = 8 })
  raises("moe model 'tiny': mlp_only_layers[1] must be a layer index in [0, 4) (got 4)",
    moe.build, with(TINY_QWEN2, { mlp_only_layers = { 4 } }), { batch = 1, seq = 8 })
  raises("moe model 'tiny': field 'num_experts' must be a positive integer (got 0)",
    moe.build, with(TINY_QWEN3, { num_experts = 0 }), { batch = 1, seq = 8 })
  raises("moe model 'tiny': moe_intermediate_size = 32 is not divisible by tp = 3: give a tp that divides 32 (1, 2, 4, 8, 16, 32)",
    moe.build, with(TINY_QWEN3, { num_attention_heads = 6, num_key_value_heads = 3, hidden_size = 96 }),
    { batch = 3, seq = 8, tp = 3, parallel = tp_plan(3, 3) })
end

-- A preset added later gets its closed-form parameter check: every arch "moe" preset is in MOE_PRESETS.
function T.test_every_moe_preset_has_a_parameter_check()
  local listed = {}
  for _, name in ipairs(MOE_PRESETS) do listed[name] = true end
  for name, cfg in pairs(presets) do
    if cfg.arch == "moe" and not listed[name] then error(name .. ": add it to MOE_PRESETS (closed-form parameters)") end
  end
end

return T
