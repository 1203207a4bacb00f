-- tests/scripts/test_switch.lua — Switch Transformer builder: closed-form FLOPs of a tiny config, parameter count vs HF.
local switch = require "neusight.models.switch"
local presets = require "neusight.models.presets"

local t = require("neusight.testing").bind(load_op, make_node)
local eq, total_params = t.eq, t.params

-- Σ count · forward flops of the given kernel kind (all kinds when nil).
local function fw_flops(nodes, training, kind) return t.flops(nodes, training, "fw", kind) end

local TINY = {
  name = "tiny", arch = "switch", num_layers = 4, num_decoder_layers = 4, d_model = 64, d_ff = 256, d_kv = 16,
  num_heads = 4, num_experts = 2, expert_capacity = 4, encoder_sparse_step = 2, decoder_sparse_step = 2,
  vocab_size = 100, relative_attention_num_buckets = 8,
}

local T = {}

function T.test_tiny_forward_gemm_and_bmm_flops_closed_form()
  local b, s, d, F, inner, E, V = 2, 16, 64, 256, 64, 2, 100
  local cap, tok = b * 4, b * s
  local attn = 2 * tok * 4 * d * inner                       -- q, k, v, o
  local dense_ffn = 2 * tok * 2 * d * F
  local sparse_ffn = 2 * tok * d * E + E * 2 * cap * 2 * d * F -- router; every expert on its full capacity buffer
  local enc = 2 * (attn + dense_ffn) + 2 * (attn + sparse_ffn)
  local dec = 2 * (2 * attn + dense_ffn) + 2 * (2 * attn + sparse_ffn)
  local nodes = switch.build(TINY, { batch = b, seq = s, training = false })
  eq(fw_flops(nodes, false, "gemm"), enc + dec + 2 * tok * d * V, "GEMM forward flops")
  local bmm = 2 * 2 * b * 4 * s * s * 16                      -- QKᵀ and PV per attention
  eq(fw_flops(nodes, false, "bmm"), (4 + 2 * 4) * bmm, "BMM forward flops (4 encoder + 8 decoder attentions)")
end

function T.test_parameter_count_matches_hf()
  local c = presets.switchxl4
  local d, F, inner, E, V = c.d_model, c.d_ff, c.num_heads * c.d_kv, c.num_experts, c.vocab_size
  local bias = c.relative_attention_num_buckets * c.num_heads
  local attn, dense, sparse = 4 * d * inner + d, 2 * d * F + d, d * E + E * 2 * d * F + d
  local half = c.num_layers // 2
  -- SwitchTransformersForConditionalGeneration: shared embedding (lm_head tied), encoder, decoder, final norms.
  local hf = V * d + half * (2 * attn + dense + sparse) + bias + d
    + half * (4 * attn + dense + sparse) + bias + d
  local nodes = switch.build(c, { batch = 1, seq = 512, training = false })
  eq(total_params(nodes), hf, "switchxl4 parameters")
end

function T.test_layers_are_grouped_by_count()
  local nodes = switch.build(presets.switchxl4, { batch = 1, seq = 512, training = true })
  local counts = {}
  for _, n in ipairs(nodes) do counts[n.layer] = n.count end
  eq(counts["encoder.dense"], 12, "dense encoder blocks")
  eq(counts["encoder.sparse"], 12, "sparse encoder blocks")
  eq(counts["decoder.dense"], 12, "dense decoder blocks")
  eq(counts["decoder.sparse"], 12, "sparse decoder blocks")
  eq(counts[""], 1, "prologue/epilogue")
end

function T.test_config_errors()
  local bad = {}
  for k, v in pairs(TINY) do bad[k] = v end
  bad.num_experts = 0
  local ok, err = pcall(switch.build, bad, { batch = 1, seq = 8 })
  assert(not ok and err:find("switch model 'tiny': field 'num_experts' must be a positive integer (got 0)", 1, true),
    tostring(err))
end

---------------------------------------------------------------------------------------------------
-- Tensor parallelism (Megatron-LM sharding, as in the GPT and BERT builders)

local tp_plan, same, matmul_flops = t.tp_plan, t.same, t.matmul_flops

local function router(n) return n.name:find("%.mlp%.router%.classifier$") ~= nil end
local function shape(v) return table.concat(v, ",") end

function T.test_switch_tp1_graph_is_unchanged()
  t.tp1_unchanged(switch, presets.switchxl4, 4, 512)
end

function T.test_switch_tp_collectives_per_layer_and_shapes()
  local b, s, tp = 2, 16, 4
  local nodes = switch.build(TINY, { batch = b, seq = s, training = true, tp = tp, parallel = tp_plan(tp, b) })
  local per_layer, outside, names = {}, {}, {}
  for i, n in ipairs(nodes) do
    names[n.name] = i
    if n.attrs.group == "tp" then
      eq(n.op, "all_reduce", n.name .. " op")
      eq(n.attrs.ranks, tp, n.name .. " ranks")
      eq(n.params, 0, n.name .. " params")
      if n.layer ~= "" then
        local c = per_layer[n.layer] or { forward = 0, backward = 0 }
        c[n.attrs.direction] = c[n.attrs.direction] + 1
        per_layer[n.layer] = c
        eq(n.count, 2, n.name .. " count")
        eq(shape(n.output), "2,16,64", n.name .. " activation-sized")
      else
        outside[n.name] = n
      end
    end
  end
  -- encoder block: self-attention (f, g) + FFN (f, g); decoder block: + cross-attention (f on q, f on k/v, g).
  for _, l in ipairs { "encoder.dense", "encoder.sparse" } do
    eq(per_layer[l].forward, 2, l .. " forward all-reduces (g)")
    eq(per_layer[l].backward, 2, l .. " backward all-reduces (f)")
  end
  for _, l in ipairs { "decoder.dense", "decoder.sparse" } do
    eq(per_layer[l].forward, 3, l .. " forward all-reduces (g)")
    eq(per_layer[l].backward, 4, l .. " backward all-reduces (f)")
  end
  local function before(f, layer_name) eq(names[f] + 1, names[layer_name], f .. " right before " .. layer_name) end
  local function after(g, layer_name) eq(names[g] - 1, names[layer_name], g .. " right after " .. layer_name) end
  for _, p in ipairs { "encoder.dense.layer_0.attention", "decoder.sparse.layer_0.attention",
                       "decoder.dense.layer_1.enc_dec_attention" } do
    before(p .. ".tp_in", p .. ".q")
    after(p .. ".tp_out", p .. ".o")
  end
  before("decoder.dense.layer_1.enc_dec_attention.tp_in_kv", "decoder.dense.layer_1.enc_dec_attention.k")
  eq(nodes[names["decoder.dense.layer_1.enc_dec_attention.tp_in_kv"]].attrs.direction, "backward", "k/v f")
  before("encoder.dense.layer_1.mlp.tp_in", "encoder.dense.layer_1.mlp.wi")
  after("encoder.dense.layer_1.mlp.tp_out", "encoder.dense.layer_1.mlp.wo")
  -- MoE: one f on the layer input (before the router), one g after the combine, before the router-prob scaling.
  before("encoder.sparse.layer_1.mlp.tp_in", "encoder.sparse.layer_1.mlp.router.jitter")
  before("encoder.sparse.layer_1.mlp.tp_out", "encoder.sparse.layer_1.mlp.router_probs")
  after("encoder.sparse.layer_1.mlp.tp_out", "encoder.sparse.layer_1.mlp.experts.expert_1.combine_scatter")
  -- outside the layers: both embedding g's and lm_head's f (no token cross-entropy node: no loss all-reduce).
  after("shared.tp_all_reduce", "shared")
  before("decoder.embed_tokens.tp_all_reduce", "decoder.dropout")
  before("lm_head.tp_in", "lm_head")
  eq(outside["shared.tp_all_reduce"].attrs.direction, "forward", "embedding g")
  eq(outside["decoder.embed_tokens.tp_all_reduce"].attrs.direction, "forward", "decoder embedding g")
  eq(outside["lm_head.tp_in"].attrs.direction, "backward", "lm_head f")
  local count = 0
  for _ in pairs(outside) do count = count + 1 end
  eq(count, 3, "collectives outside the layers")
  -- Per-rank shapes: one of the 4 heads, a quarter of d_ff and of the vocabulary.
  eq(shape(nodes[names["encoder.dense.layer_0.attention.q"]].output), "2,16,16", "q: this rank's heads")
  eq(shape(nodes[names["encoder.dense.layer_0.attention.qk"]].output), "2,1,16,16", "scores")
  eq(shape(nodes[names["encoder.dense.layer_0.attention.o"]].inputs[1]), "2,16,16", "row-parallel o input")
  eq(shape(nodes[names["encoder.position_bias.relative_attention_bias"]].output), "16,16,1", "bias split by heads")
  eq(nodes[names["encoder.position_bias.relative_attention_bias"]].params, 8 * 1, "bias table columns")
  eq(shape(nodes[names["encoder.dense.layer_1.mlp.wi"]].output), "2,16,64", "dense wi")
  eq(shape(nodes[names["encoder.sparse.layer_1.mlp.experts.expert_0.wi"]].output), "8,64", "expert wi")
  eq(shape(nodes[names["encoder.sparse.layer_1.mlp.experts.expert_0.wo"]].inputs[1]), "8,64", "expert wo input")
  eq(shape(nodes[names["encoder.sparse.layer_1.mlp.router.classifier"]].output), "2,16,2", "router replicated")
  eq(shape(nodes[names["lm_head"]].output), "2,16,25", "vocab-parallel logits")
  eq(nodes[names["shared"]].params, 25 * 64, "vocab-parallel table")
  -- Inference: the same collectives (the jitter is training-only).
  local inf = switch.build(TINY, { batch = b, seq = s, training = false, tp = tp, parallel = tp_plan(tp, b) })
  local n_comm = 0
  for _, n in ipairs(inf) do if n.attrs.group == "tp" then n_comm = n_comm + 1 end end
  eq(n_comm, 2 * 4 + 2 * 7 + 3, "collectives in inference (distinct nodes)")
end

function T.test_switch_tp_matmul_flops_split_by_tp()
  local b, s, tp = 2, 16, 4
  for _, training in ipairs { true, false } do
    local one = switch.build(TINY, { batch = b, seq = s, training = training })
    local sharded = switch.build(TINY, { batch = b, seq = s, training = training, tp = tp, parallel = tp_plan(tp, b) })
    local function split(n) return not router(n) end
    assert(matmul_flops(one, router) > 0, "router GEMMs present")
    -- vocab_size = 100, num_heads = 4, d_ff = 256 divide by 4: the split work is exactly a quarter.
    eq(tp * matmul_flops(sharded, split), matmul_flops(one, split), "split GEMM/BMM FLOPs × tp")
    eq(matmul_flops(sharded, router), matmul_flops(one, router), "replicated router GEMM FLOPs")
    eq(tp * matmul_flops(sharded), matmul_flops(one) + (tp - 1) * matmul_flops(one, router), "all GEMM/BMM FLOPs")
  end
  -- switchxl4's 32128 words split 4 ways exactly; tp = 3 pads to 3 · 10710 rows.
  local tiny3 = setmetatable({ num_heads = 6, d_ff = 258, d_kv = 8, vocab_size = 100 }, { __index = TINY })
  local nodes = switch.build(tiny3, { batch = 3, seq = 8, training = true, tp = 3, parallel = tp_plan(3, 3) })
  for _, n in ipairs(nodes) do
    if n.name == "lm_head" then eq(n.output[3], 34, "padded vocab rows per rank") end
    if n.name == "shared" then eq(n.params, 34 * 64, "padded vocab-parallel table") end
  end
end

function T.test_switch_tp_parameters_per_rank()
  local d, F, inner, E, V, B = TINY.d_model, TINY.d_ff, TINY.num_heads * TINY.d_kv, TINY.num_experts,
    TINY.vocab_size, TINY.relative_attention_num_buckets * TINY.num_heads
  local tp = 4
  local one = switch.build(TINY, { batch = 2, seq = 16, training = true })
  local sharded = switch.build(TINY, { batch = 2, seq = 16, training = true, tp = tp, parallel = tp_plan(tp, 2) })
  -- replicated: every RMS norm weight and the router classifiers. Encoder blocks: 2 norms (+0), decoder: 3;
  -- 2 final norms; 2 + 2 routers.
  local half = TINY.num_layers // 2
  local replicated = (half * 2 + half * 2) * d + (half * 3 + half * 3) * d + 2 * d + (half + half) * d * E
  eq(total_params(sharded), (total_params(one) - replicated) // tp + replicated, "parameters per rank")
  -- closed form: attention (q, k, v, o) and FFN weights, both bias tables and the shared table split by tp.
  local attn, dense, sparse = 4 * d * inner / tp + d, 2 * d * F / tp + d, d * E + E * 2 * d * F / tp + d
  eq(total_params(sharded), V / tp * d + half * (2 * attn + dense + sparse) + B / tp + d
    + half * (4 * attn + dense + sparse) + B / tp + d, "closed form")
end

function T.test_switch_tp_errors()
  local ok, err = pcall(switch.build, TINY, { batch = 3, seq = 8, training = true, tp = 3, parallel = tp_plan(3, 3) })
  eq(not ok and err, "switch model 'tiny': num_heads = 4 is not divisible by tp = 3: give a tp that divides 4 (1, 2, 4)", "heads")
  local odd = setmetatable({ d_ff = 258 }, { __index = TINY })
  ok, err = pcall(switch.build, odd, { batch = 4, seq = 8, training = true, tp = 4, parallel = tp_plan(4, 4) })
  eq(not ok and err, "switch model 'tiny': d_ff = 258 is not divisible by tp = 4: give a tp that divides 258 (1, 2, 3, 6, 43)", "d_ff")
  ok, err = pcall(switch.build, TINY, { batch = 2, seq = 8, training = true, tp = 2 })
  eq(not ok and err, "switch model 'tiny': opts.tp > 1 needs opts.parallel (a neusight.parallel plan)", "no plan")
end

function T.test_switch_ep_and_tp_compose()
  local P = require "neusight.parallel"
  local gpu = { interconnect = "nvlink4", interconnect_bw_gbps = 900, pcie_bw_gbps = 64 }
  local b = 2
  local plan = P.plan(P.normalize { dp = 2, ep = 2, tp = 2 }, gpu, { batch = b, dtype = "fp32", mode = "train" })
  local nodes = switch.build(TINY, { batch = b, seq = 16, training = true, ep = 2, tp = 2, parallel = plan })
  local a2a, tp_ar, experts = 0, 0, {}
  for _, n in ipairs(nodes) do
    if n.op == "all_to_all" then
      eq(n.attrs.group, "ep", n.name .. " group")
      a2a = a2a + 1
    end
    if n.op == "all_reduce" and n.attrs.group == "tp" then tp_ar = tp_ar + 1 end
    if n.name == "encoder.sparse.layer_1.mlp.experts.local_0.wi" then experts.wi = n end
    if n.name == "encoder.sparse.layer_1.mlp.experts.local_1.wi" then experts.second = n end
  end
  eq(a2a, 2 * 2, "dispatch + combine all-to-all in each sparse stack (encoder, decoder)")
  eq(tp_ar, 2 * 4 + 2 * 7 + 3, "tp all-reduces")
  -- one local expert (2 experts / ep 2) on ep · capacity rows, d_ff split by tp.
  assert(experts.wi and not experts.second, "one local expert")
  eq(shape(experts.wi.output), (2 * b * TINY.expert_capacity) .. "," .. TINY.d_ff // 2, "local expert wi shard")
  eq(experts.wi.params, TINY.d_model * TINY.d_ff // 2, "local expert wi params")
  assert(experts.wi.attrs.expert, "expert weights keep attrs.expert")
end

return T
