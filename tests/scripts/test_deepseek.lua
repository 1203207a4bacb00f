-- tests/scripts/test_deepseek.lua — DeepSeek-V3 builder (scripts/neusight/models/deepseek.lua): HF parameter counts and
-- active parameters from closed forms, FLOPs per token, the layer's kernels (MLA, router, experts), attention with a
-- narrower value head dim, no-grad routing, tensor and expert parallelism, serving phases and the KV cache,
-- config.json mapping and defaults, errors.
local K = require "neusight.kernels"
local ds = require "neusight.models.deepseek"
local hf = require "neusight.models.hf"
local presets = require "neusight.models.presets"
local P = require "neusight.parallel"

local t = require("neusight.testing").bind(load_op, make_node)
local eq, flops, total_params, tp_plan, matmul_flops = t.eq, t.flops, t.params, t.tp_plan, t.matmul_flops
local raises = require("neusight.testing").raises
local with = require("neusight.testing").with

local T = {}

-- Tiny config: 4 heads, q latent 32, kv latent 16, heads of 8 + 4 (q/k) and 8 (v); 1 dense layer then 2 MoE layers of
-- 8 experts (4 groups of 2, top 2 of the best 2 groups) + 2 shared.
local TINY = require("neusight.testing").tiny("deepseek_v3")
-- DeepSeek-V2-Lite's attention shape (q_lora_rank null: q_proj) under V3 routing, scaled down.
local TINY_NO_Q_LORA = with(TINY, { q_lora_rank = false })

local function by_name(nodes)
  local by = {}
  for _, n in ipairs(nodes) do by[n.name] = n end
  return by
end

---------------------------------------------------------------------------------------------------
-- Parameter counts

-- The config with HF's defaults (deepseek.DEFAULTS) under the given fields.
local function full(cfg)
  local c = with(ds.DEFAULTS.deepseek_v3, cfg)
  if c.q_lora_rank == false then c.q_lora_rank = nil end
  return c
end

-- Closed form: embed (+ untied lm_head) + final norm + L × (MLA + 2 norms) + dense layers × SwiGLU(intermediate_size)
-- + MoE layers × (router E·h + experts E · 3·h·I_moe + shared experts 3·h·(I_moe · n_shared)); MLA = [q_a_proj h·r_q +
-- q_a_layernorm r_q + q_b_proj r_q · heads·d_qk | q_proj h · heads·d_qk] + kv_a_proj_with_mqa h·(r_kv + d_rope) +
-- kv_a_layernorm r_kv + kv_b_proj r_kv · heads·(d_nope + d_v) + o_proj heads·d_v · h. `k`, when given, counts k routed
-- experts per MoE layer instead of E (the parameters a token uses).
local function closed_form(cfg, k)
  local c = full(cfg)
  local h, L, V, nh = c.hidden_size, c.num_hidden_layers, c.vocab_size, c.num_attention_heads
  local qr, kvr, dn, dr, dv = c.q_lora_rank, c.kv_lora_rank, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim
  local E, I, mI = c.n_routed_experts, c.intermediate_size, c.moe_intermediate_size
  local q = qr and h * qr + qr + qr * nh * (dn + dr) or h * nh * (dn + dr)
  local mla = q + h * (kvr + dr) + kvr + kvr * nh * (dn + dv) + nh * dv * h
  local dense = c.first_k_dense_replace
  local moe = h * E + (k or E) * 3 * h * mI + 3 * h * mI * c.n_shared_experts
  return V * h * (c.tie_word_embeddings and 1 or 2) + h + L * (mla + 2 * h) + dense * 3 * h * I + (L - dense) * moe
end

-- DeepSeek-V3 (HF DeepseekV3ForCausalLM, no MTP layer): 671,026,404,352 parameters; the checkpoint's tensors add the
-- 58 MoE layers' e_score_correction_bias (256 values each), a buffer in transformers (a parameter in DeepSeek's
-- remote code): 671,026,419,200.
function T.test_parameter_counts()
  local cfg = presets.deepseek_v3
  eq(cfg.arch, "deepseek", "arch")
  eq(closed_form(cfg), 671026404352, "closed form")
  eq(total_params(ds.build(cfg, { batch = 1, seq = 8, training = true })), 671026404352, "graph")
  eq(closed_form(cfg) + 58 * 256, 671026419200, "with the e_score_correction_bias buffers")
  -- By hand: MLA 7168·1536 + 1536 + 1536·128·192 + 7168·576 + 512 + 512·128·256 + 128·128·7168 per layer.
  local mla = 7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256 + 128 * 128 * 7168
  eq(mla, 187107328, "MLA parameters per layer")
  local dense = mla + 2 * 7168 + 3 * 7168 * 18432
  local moe = mla + 2 * 7168 + 256 * 7168 + 256 * 3 * 7168 * 2048 + 3 * 7168 * 2048
  eq(dense, 583483392, "dense layer")
  eq(moe, 11507286016, "MoE layer")
  eq(3 * dense + 58 * moe + 2 * 129280 * 7168 + 7168, 671026404352, "total")
  -- The tiny configs, with and without the q latent.
  for _, c in ipairs { TINY, TINY_NO_Q_LORA, with(TINY, { tie_word_embeddings = true, attention_bias = true }) } do
    local bias = c.attention_bias and 3 * (32 + 20 + 64) or 0 -- q_a_proj, kv_a_proj_with_mqa, o_proj biases × 3 layers
    eq(total_params(ds.build(c, { batch = 1, seq = 8 })), closed_form(c) + bias, "tiny")
  end
end

-- Active parameters per token: 8 of the 256 routed experts per MoE layer: 37,552,282,624 ("37B activated").
function T.test_active_parameters()
  local cfg = presets.deepseek_v3
  local active = ds.active_parameters(cfg)
  eq(active, closed_form(cfg, 8), "closed form")
  eq(active, 671026404352 - 58 * 248 * 3 * 7168 * 2048, "all but 248 of 256 experts in 58 layers")
  eq(active, 37552282624, "DeepSeek-V3 active parameters")
  eq(ds.active_parameters(TINY), closed_form(TINY, 2), "tiny")
end

function T.test_config_class_defaults()
  local opts = { batch = 1, seq = 8 }
  t.same(ds.build({ name = "deepseek_v3" }, opts), ds.build(presets.deepseek_v3, opts), "DeepseekV3Config() is DeepSeek-V3")
end

---------------------------------------------------------------------------------------------------
-- FLOPs

-- GEMM FLOPs per token = 2 · (MLA projections + [dense MLP | router + k experts + shared experts] + lm_head); b·s·k
-- divisible by E (every expert gets b·s·k/E rows). Attention (sdpa, causal): 2·(d_qk + d_v) per visible pair and head.
function T.test_flops_per_token_closed_form()
  local b, s = 2, 64
  for _, cfg in ipairs { presets.deepseek_v3, TINY, TINY_NO_Q_LORA } do
    local c = full(cfg)
    local h, L, V, nh = c.hidden_size, c.num_hidden_layers, c.vocab_size, c.num_attention_heads
    local qr, kvr, dn, dr, dv = c.q_lora_rank, c.kv_lora_rank, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim
    local E, k, mI, dense = c.n_routed_experts, c.num_experts_per_tok, c.moe_intermediate_size, c.first_k_dense_replace
    local mla = (qr and h * qr + qr * nh * (dn + dr) or h * nh * (dn + dr)) + h * (kvr + dr) + kvr * nh * (dn + dv)
      + nh * dv * h
    local per_token = L * mla + dense * 3 * h * c.intermediate_size
      + (L - dense) * (h * E + k * 3 * h * mI + 3 * h * mI * c.n_shared_experts) + V * h
    local nodes = ds.build(cfg, { batch = b, seq = s, training = true, dtype = "bf16", attention = "sdpa" })
    eq(flops(nodes, true, "fw", "gemm"), 2 * per_token * b * s, cfg.name .. " forward GEMM FLOPs")
    eq(flops(nodes, true, "bw", "gemm"), 2 * flops(nodes, true, "fw", "gemm"), cfg.name .. " backward GEMMs")
    eq(flops(nodes, true, "fw", "attention"), L * b * nh * (dn + dr + dv) * s * (s + 1), cfg.name .. " causal attention")
    eq(flops(nodes, true, "bw", "attention"), L * b * nh * (3 * (dn + dr) + 2 * dv) * s * (s + 1), cfg.name .. " backward")
    -- Eager attention: the same two products as BMMs over all s × s pairs.
    local eager = ds.build(cfg, { batch = b, seq = s, dtype = "bf16", attention = "eager" })
    local bmm = 0
    for _, n in ipairs(eager) do
      if n.op == "matmul" then bmm = bmm + n.count * t.kernels(n, false)[1].flops end
    end
    eq(bmm, 2 * L * b * nh * (dn + dr + dv) * s * s, cfg.name .. " eager QKᵀ and PV")
  end
end

---------------------------------------------------------------------------------------------------
-- The layer's kernels

-- One MoE layer in HF's order (bf16 training, sdpa): b·s = 16 tokens, top 2 of 8 experts: 4 rows per expert.
function T.test_moe_layer_nodes()
  local nodes = ds.build(TINY, { batch = 2, seq = 8, training = true, dtype = "bf16", attention = "sdpa" })
  local rows = {}
  for _, n in ipairs(nodes) do
    if n.layer == "layers" and not n.name:find("layernorm", 1, true) then
      rows[#rows + 1] = ("%s %s %s ×%d"):format(n.name:gsub("^layers%.", ""), n.op, n.dtype, n.count)
    end
  end
  local rope = function(p)
    return { p .. ".interleave contiguous bf16 ×2", p .. ".cos mul bf16 ×2", p .. ".neg mul bf16 ×2",
      p .. ".rotate_half contiguous bf16 ×2", p .. ".sin mul bf16 ×2", p .. ".add add bf16 ×2" }
  end
  local want = { "self_attn.q_a_proj linear bf16 ×2", "self_attn.q_b_proj linear bf16 ×2",
    "self_attn.kv_a_proj_with_mqa linear bf16 ×2", "self_attn.kv_b_proj linear bf16 ×2" }
  for _, p in ipairs { "self_attn.rotary.q", "self_attn.rotary.k" } do
    for _, r in ipairs(rope(p)) do want[#want + 1] = r end
  end
  for _, r in ipairs {
    "self_attn.query_states contiguous bf16 ×2", "self_attn.key_states contiguous bf16 ×2", "self_attn.sdpa sdpa bf16 ×2",
    "self_attn.o_proj linear bf16 ×2", "attn_residual add bf16 ×2",
    "mlp.gate.hidden_to_fp32 cast fp32 ×2", "mlp.gate.weight_to_fp32 cast fp32 ×2", "mlp.gate linear fp32 ×2",
    "mlp.gate.sigmoid sigmoid fp32 ×2", "mlp.gate.e_score_correction_bias add fp32 ×2",
    "mlp.gate.group_top2 topk fp32 ×2", "mlp.gate.group_scores sum fp32 ×2", "mlp.gate.group_idx topk fp32 ×2",
    "mlp.gate.group_mask zeros fp32 ×2", "mlp.gate.group_mask.scatter setitem fp32 ×2",
    "mlp.gate.score_mask contiguous fp32 ×2", "mlp.gate.score_mask.bool cast fp32 ×2",
    "mlp.gate.score_mask.not mul fp32 ×2", "mlp.gate.masked_fill where fp32 ×2", "mlp.gate.topk topk fp32 ×2",
    "mlp.gate.topk_weights gather fp32 ×2", "mlp.gate.topk_sum sum fp32 ×2", "mlp.gate.topk_sum.eps add fp32 ×2",
    "mlp.gate.topk_norm div fp32 ×2", "mlp.gate.routed_scaling_factor mul fp32 ×2",
    "mlp.final_hidden_states zeros fp32 ×2", "mlp.expert_mask one_hot bf16 ×2",
    "mlp.experts.where nonzero bf16 ×16", "mlp.experts.expert_input index bf16 ×16",
    "mlp.experts.gate_proj linear bf16 ×16", "mlp.experts.act_fn silu bf16 ×16", "mlp.experts.up_proj linear bf16 ×16",
    "mlp.experts.mul mul bf16 ×16", "mlp.experts.down_proj linear bf16 ×16",
    "mlp.experts.expert_weights index fp32 ×16", "mlp.experts.weighted_output mul fp32 ×16",
    "mlp.experts.index_add index_add fp32 ×16", "mlp.to_dtype cast bf16 ×2",
    "mlp.shared_experts.gate_proj linear bf16 ×2", "mlp.shared_experts.act_fn silu bf16 ×2",
    "mlp.shared_experts.up_proj linear bf16 ×2", "mlp.shared_experts.mul mul bf16 ×2",
    "mlp.shared_experts.down_proj linear bf16 ×2", "mlp.shared_experts_add add bf16 ×2", "mlp_residual add bf16 ×2",
  } do want[#want + 1] = r end
  t.same(rows, want, "MoE layer")
  local by = by_name(nodes)
  local function shape(n) return table.concat(n.output, ",") end
  eq(shape(by["layers.self_attn.q_b_proj"]), "2,8,48", "q_b_proj: 4 heads × (8 + 4)")
  eq(shape(by["layers.self_attn.kv_a_proj_with_mqa"]), "2,8,20", "kv latent 16 + rope 4")
  eq(shape(by["layers.self_attn.kv_b_proj"]), "2,8,64", "kv_b_proj: 4 heads × (8 + 8)")
  eq(table.concat(by["layers.self_attn.sdpa"].inputs[3], ",") .. "→" .. shape(by["layers.self_attn.sdpa"]),
    "2,4,8,8→2,4,8,8", "V and O of v_head_dim")
  eq(by["layers.self_attn.kv_a_layernorm.weight"].params, 16, "kv_a_layernorm over kv_lora_rank")
  eq(by["layers.mlp.experts.gate_proj"].attrs.per_layer, 8, "8 experts per layer")
  eq(by["layers.mlp.shared_experts.gate_proj"].params, 64 * 32, "shared experts: 2 × 16 wide")
  eq(by["layers.mlp.shared_experts.gate_proj"].attrs.expert, nil, "shared experts are no routed experts")
  eq(shape(by["layers.mlp.gate.group_top2"]), "16,4,2", "top 2 per group of 2")
  eq(shape(by["layers.mlp.gate.group_idx"]), "16,2", "topk_group groups")
  eq(by["dense_layers.mlp.gate_proj"].params, 64 * 96, "dense MLP of intermediate_size")
  eq(by["dense_layers.mlp.gate_proj"].count, 1, "first_k_dense_replace dense layer")
  eq(nodes[#nodes].name, "loss", "no router aux loss after the causal-LM loss")
  -- Without a q latent: q_proj straight from the hidden states; norm_topk_prob false: no renormalisation; fp32: no casts.
  local plain = by_name(ds.build(with(TINY_NO_Q_LORA, { norm_topk_prob = false, rope_interleave = false }),
    { batch = 2, seq = 8 }))
  eq(plain["layers.self_attn.q_proj"].params, 64 * 48, "q_proj")
  eq(plain["layers.self_attn.q_a_proj"], nil, "no q_a_proj")
  eq(plain["layers.mlp.gate.topk_norm"], nil, "norm_topk_prob false")
  eq(plain["layers.mlp.gate.hidden_to_fp32"], nil, "fp32 model: no router casts")
  eq(plain["layers.self_attn.rotary.q.interleave"], nil, "rope_interleave false")
  -- moe_layer_freq 2 (DeepSeek's remote code; 1 in every published config): layers 1 dense, 2 MoE, 3 dense, 4 MoE.
  local freq = ds.build(with(TINY, { num_hidden_layers = 5, moe_layer_freq = 2 }), { batch = 1, seq = 8 })
  local byf = by_name(freq)
  eq(byf["dense_layers.mlp.gate_proj"].count .. "+" .. byf["layers.mlp.gate"].count, "3+2", "dense + MoE layers")
end

-- Eager attention: QKᵀ over d_qk, PV over v_head_dim (no repeat_kv: as many key/value heads as query heads).
function T.test_eager_attention_nodes()
  local by = by_name(ds.build(TINY, { batch = 2, seq = 8, training = true, attention = "eager" }))
  local function dims(n) return t.kernels(n, false)[1] end
  local qk, pv = dims(by["layers.self_attn.qk"]), dims(by["layers.self_attn.pv"])
  eq(K.describe(qk) .. " " .. K.describe(pv), "BMM(8,8,12,8) BMM(8,8,8,8)", "QKᵀ and PV")
  eq(table.concat(by["layers.self_attn.contiguous"].output, ","), "2,8,4,8", "transpose(1, 2).contiguous()")
  eq(by["layers.self_attn.repeat_kv.k"], nil, "no repeat_kv")
end

-- hidden_act "swish" is HF's other name for SiLU (ACT2FN["swish"] is nn.SiLU): the same graph as "silu"; another is refused
function T.test_swish_is_silu()
  local silu = ds.build(TINY, { batch = 1, seq = 8 })
  local swish = ds.build(with(TINY, { hidden_act = "swish" }), { batch = 1, seq = 8 })
  eq(#swish, #silu, "swish: as many nodes as silu")
  for i, n in ipairs(silu) do eq(swish[i].op .. " " .. swish[i].name, n.op .. " " .. n.name, "swish node " .. i) end
  raises("deepseek model 'tiny': hidden_act \"gelu\" is not supported (DeepSeek's MLPs are SwiGLU: \"silu\", or \"swish\", "
    .. "HF's other name for it)", ds.build, with(TINY, { hidden_act = "gelu" }), { batch = 1, seq = 8 })
end

-- first_k_dense_replace, an int in HF's config: a config.json's whole float is refused with its line, as the counts are
function T.test_config_json_float_first_k_dense()
  raises([[d.json:3: deepseek model 'd': field 'first_k_dense_replace' must be an integer (got 1.0, a JSON number with a fraction part or exponent: write 1)]],
    ds.build, hf.from_config({ model_type = "deepseek_v3", first_k_dense_replace = 1.0 }, "d.json", {},
      { first_k_dense_replace = 3 }), { batch = 1, seq = 8 })
end

-- The attention kernels with a narrower V (neusight.kernels.attention's dv).
function T.test_attention_kernel_value_head_dim()
  local b, h, s, d, dv = 2, 16, 1024, 192, 128
  local pairs = s * (s + 1) // 2
  local fw = K.attention("causal", b, s, s, d, h, h, "bf16", dv)
  eq(fw.flops, 2 * b * h * (d + dv) * pairs, "Q·Kᵀ over d, P·V over dv")
  eq(fw.bytes, 2 * b * (h * s * (d + dv) + h * s * (d + dv)), "Q, O and K, V")
  eq(fw.n, 160, "the tile model's mean head dim")
  local bw = K.attention("causal_bwd", b, s, s, d, h, h, "bf16", dv)
  eq(bw.flops, 2 * b * h * (3 * d + 2 * dv) * pairs, "QKᵀ, dQ, dK over d; dP, dV over dv")
  -- dv = d (or omitted) is the old kernel.
  t.same(K.attention("causal", b, s, s, 128, h, h, "bf16", 128), K.attention("causal", b, s, s, 128, h, h, "bf16"), "dv = d")
  eq(K.attention("causal", b, s, s, 128, h, h, "bf16").flops, 4 * b * h * 128 * pairs, "4·d per pair")
  local dec = K.attention("decode", 8, 1, 2049, d, h, h, "bf16", dv)
  eq(dec.bytes, 2 * 8 * (h * (d + dv) + h * 2049 * (d + dv)), "decode reads the K and V caches")
end

-- The routing selection runs under torch.no_grad(): no backward kernels, nothing saved; gather has a backward.
function T.test_no_grad_routing()
  local nodes = ds.build(TINY, { batch = 2, seq = 8, training = true, dtype = "bf16", attention = "sdpa" })
  local memory = require "neusight.memory"
  local no_grad = { "e_score_correction_bias", "group_top2", "group_scores", "group_idx", "group_mask.scatter",
    "score_mask", "score_mask.bool", "score_mask.not", "masked_fill", "topk" }
  local by = by_name(nodes)
  for _, name in ipairs(no_grad) do
    local n = by["layers.mlp.gate." .. name]
    local _, bw = t.kernels(n, true)
    eq(#bw, 0, name .. ": no backward")
    eq(memory.node_saved(make_node(n), load_op(n.op)), 0, name .. ": nothing saved")
  end
  local gather = by["layers.mlp.gate.topk_weights"]
  local fw, bw = t.kernels(gather, true)
  eq(fw[1].bytes, 8 * 32 + 2 * 4 * 32, "gather: int64 index, 32 fp32 values read and written")
  eq(K.describe_all(bw), "MEM((16,8)) MEM((32,),(16,2),(16,2),(16,2))", "zero-fill and scatter_add")
  eq(memory.node_saved(make_node(gather), load_op("gather")), 8 * 32, "the index")
  local _, sig_bw = t.kernels(by["layers.mlp.gate.sigmoid"], true)
  eq(#sig_bw, 1, "the scores have a gradient")
end

---------------------------------------------------------------------------------------------------
-- Serving phases

-- Serving phases cache MLA's latent (kv_lora_rank + qk_rope_head_dim = 576 values per token and layer), as vLLM / SGLang
-- do, not HF's decompressed per-head K and V; decode runs the absorbed formulation: W_UK and W_UV bmms around one
-- decode_attention of all heads over one latent "head" that is read once.
function T.test_serving_phases()
  local cfg, b, C = presets.deepseek_v3, 8, 2048
  local nodes = ds.build(cfg, { batch = b, phase = "decode", context = C, dtype = "bf16" })
  local by = by_name(nodes)
  local att = by["layers.self_attn.decode_attention"]
  eq(table.concat(att.inputs[1], ",") .. " " .. table.concat(att.inputs[2], ",") .. " " .. table.concat(att.inputs[3], ","),
    "8,128,1,576 8,1,2049,576 8,1,2049,512", "Q in latent space, the latent cache as K and (its first 512) as V")
  eq(att.attrs.latent, true, "V is read with K")
  local fw = t.kernels(att)
  eq(fw[1].bytes, 2 * b * (128 * (576 + 512) + 2049 * 576), "Q read and O written per head, the cache once")
  eq(fw[1].flops, 2 * b * 128 * (576 + 512) * 2049, "Q·Kᵀ over 576, P·V over 512 for every head")
  -- the tile model sees an equivalent kernel: cache rows of 2 · 288 values, 242 query heads of 288 (4·242·288 FLOPs per
  -- cached token ≈ 2·128·1088)
  eq(fw[1].n .. " " .. fw[1].rows .. " " .. fw[1].hidden, "288 242 1", "tile view")
  local tile = require("tiling.attention").select(fw[1], { num_sm = 132 })
  assert(math.abs(tile.flops * tile.blocks / fw[1].flops - 1) < 0.01, "tile FLOPs ≈ the kernel's")
  eq(tile.blocks * (tile.bytes - 2 * 2 * 242 * 288), b * 9 * 228 * 576 * 2,
    "tile cache bytes: 9 splits of 228 tokens per sequence (slices of at most max_kv_slice), each cached row of 576 values read once")
  local cache = 0
  for _, n in ipairs(nodes) do cache = cache + (n.attrs.kv_cache_bytes or 0) * n.count end
  eq(cache, 61 * b * (C + 1) * (512 + 64) * 2, "KV cache bytes: 61 layers × (kv_lora_rank + qk_rope_head_dim) × 2 B")
  eq(by["layers.self_attn.kv_b_proj"], nil, "decode never decompresses the cache")
  eq(by["layers.self_attn.kv_b_proj.w_uk"].params + by["layers.self_attn.kv_b_proj.w_uv"].params, 512 * 128 * (128 + 128),
    "W_UK and W_UV are kv_b_proj's weights")
  eq(t.flops({ by["layers.self_attn.kv_b_proj.w_uk"] }, false, "fw") // by["layers.self_attn.kv_b_proj.w_uk"].count,
    2 * b * 128 * 128 * 512, "q_nope · W_UK per head")
  -- 8 tokens × top 8 of 256 reach 256·(1 − (248/256)^8) = 57.4 → 57 experts: 7 of 2 rows, 50 of 1, 199 idle
  eq(by["layers.mlp.experts.gate_proj"].attrs.per_layer, 7, "8 tokens × top 8: 7 experts of 2 rows")
  eq(by["layers.mlp.experts_short.gate_proj"].attrs.per_layer, 50, "50 of 1 row")
  eq(by["layers.mlp.experts_idle.idle"].attrs.per_layer, 199, "199 idle ones")
  eq(total_params(nodes), 671026404352, "every parameter in decode")
  eq(by["layers.self_attn.sdpa"], nil, "no prefill attention")
  local pre = by_name(ds.build(cfg, { batch = 2, seq = 512, phase = "prefill", dtype = "bf16", attention = "sdpa" }))
  eq(table.concat(pre["lm_head"].inputs[1], ","), "2,1,7168", "last token")
  eq(pre["layers.self_attn.kv_cache_write"].attrs.kv_cache_bytes, 2 * 512 * 576 * 2, "prefill caches the latent")
  eq(pre["layers.self_attn.kv_b_proj"].params, 512 * 128 * 256, "prefill decompresses (kv_b_proj on the prompt)")
  -- Tensor parallel decode: every rank caches the whole latent; its 16 heads attend to it.
  local tp = by_name(ds.build(cfg, { batch = b, phase = "decode", context = C, dtype = "bf16", tp = 8,
    parallel = tp_plan(8, b) }))
  eq(tp["layers.self_attn.kv_cache_write"].attrs.kv_cache_bytes, b * (C + 1) * 576 * 2, "the latent on every rank")
  eq(tp["layers.self_attn.decode_attention"].inputs[1][2], 16, "16 heads per rank")
  -- an fp8 cache: 1 byte per latent value
  local fp8 = by_name(ds.build(cfg, { batch = b, phase = "decode", context = C, dtype = "bf16", kv_dtype = "fp8" }))
  eq(fp8["layers.self_attn.kv_cache_write"].attrs.kv_cache_bytes, b * (C + 1) * 576, "fp8 latent")
end

---------------------------------------------------------------------------------------------------
-- Tensor and expert parallelism

function T.test_tp1_graph_is_unchanged()
  for _, cfg in ipairs { TINY, TINY_NO_Q_LORA } do t.tp1_unchanged(ds, cfg, 2, 8) end
end

-- Every GEMM but the replicated down projections (q_a_proj, kv_a_proj_with_mqa) and routers splits tp ways; the
-- attention heads split too.
function T.test_tp_shards_times_tp_equal_unsharded()
  local function replicated(n)
    return n.name:find("q_a_proj", 1, true) or n.name:find("kv_a_proj", 1, true) or n.name:find("%.gate$")
  end
  local function split(n) return not replicated(n) end
  for _, case in ipairs { { TINY, 2, 2, 16 }, { TINY, 4, 2, 16 }, { TINY_NO_Q_LORA, 2, 2, 16 },
                          { presets.deepseek_v3, 8, 1, 32 } } do
    local cfg, tp, b, s = case[1], case[2], case[3], case[4]
    local one = ds.build(cfg, { batch = b, seq = s, training = true, attention = "sdpa" })
    local sharded = ds.build(cfg, { batch = b, seq = s, training = true, attention = "sdpa", tp = tp,
      parallel = tp_plan(tp, b) })
    local what = cfg.name .. " tp " .. tp
    eq(tp * matmul_flops(sharded, split), matmul_flops(one, split), what .. " GEMM FLOPs")
    eq(matmul_flops(sharded, replicated), matmul_flops(one, replicated), what .. " replicated down projections, router")
    eq(tp * flops(sharded, true, "fw", "attention"), flops(one, true, "fw", "attention"), what .. " attention")
    local comm = {}
    for _, n in ipairs(sharded) do
      if n.attrs.group == "tp" and n.layer == "layers" then comm[#comm + 1] = n.name:gsub("^layers%.", "") end
    end
    local q = cfg.q_lora_rank == false and { "self_attn.tp_in" } or { "self_attn.q_b_proj.tp_in" }
    for _, c in ipairs { "self_attn.kv_b_proj.tp_in", "self_attn.tp_out", "mlp.tp_in", "mlp.tp_out" } do q[#q + 1] = c end
    t.same(comm, q, what .. " collectives")
  end
  -- DeepSeek-V3 at tp 8: 16 heads per rank, experts 256 wide, the parameters of a rank.
  local by = by_name(ds.build(presets.deepseek_v3, { batch = 1, seq = 32, tp = 8, parallel = tp_plan(8, 1) }))
  eq(by["layers.self_attn.q_b_proj"].params, 1536 * 16 * 192, "q_b_proj column-parallel")
  eq(by["layers.self_attn.q_a_proj"].params, 7168 * 1536, "q_a_proj replicated")
  eq(by["layers.self_attn.o_proj"].params, 16 * 128 * 7168, "o_proj row-parallel")
  eq(by["layers.mlp.experts.gate_proj"].params, 7168 * 256, "expert gate_proj 2048 / 8")
  eq(by["layers.mlp.gate"].params, 256 * 7168, "router replicated")
  -- Sequence parallel: the norms on s / tp tokens, the sequence gathered before the replicated down projections.
  local spn = by_name(ds.build(TINY, { batch = 2, seq = 16, training = true, tp = 2, sequence_parallel = true,
    parallel = P.plan(P.normalize { tp = 2, sequence_parallel = true },
      { interconnect = "nvlink4", interconnect_bw_gbps = 900, pcie_bw_gbps = 64 },
      { batch = 2, dtype = "fp32", mode = "train" }) }))
  eq(table.concat(spn["layers.input_layernorm.pow"].output, ","), "2,8,64", "norm on the sequence shard")
  eq(spn["layers.self_attn.tp_in.all_gather"].op, "all_gather", "gather before q_a_proj / kv_a_proj_with_mqa")
end

-- Expert parallelism: E / ep experts per rank, the same routed rows through them, two all-to-alls per MoE layer.
function T.test_expert_parallel()
  local ep_plan = require("neusight.testing").ep_plan
  local cfg, b, s = TINY, 2, 16 -- 8 experts, top 2: 64 routed rows
  local one = ds.build(cfg, { batch = b, seq = s, training = true })
  local function experts(n) return n.attrs.expert == true end
  for _, ep in ipairs { 2, 4, 8 } do
    local nodes = ds.build(cfg, { batch = b, seq = s, training = true, ep = ep, parallel = ep_plan(ep, 1, b * ep),
      router_skew = "balanced" }) -- the mean n·k rows per rank (test_moe_imbalance.lua: the default's busiest rank)
    local a2a = 0
    for _, n in ipairs(nodes) do
      if n.op == "all_to_all" then
        a2a = a2a + 1
        eq(n.attrs.group .. " " .. table.concat(n.output, ","), "ep 64,64", "n·k rows of h over the ep group")
      end
    end
    eq(a2a, 2, "dispatch and combine")
    local by = by_name(nodes)
    eq(by["layers.mlp.local_experts.gate_proj"].attrs.per_layer, 8 // ep, "local experts")
    eq(by["layers.mlp.local_experts.gate_proj"].inputs[1][1], 64 * ep // 8, "rows per local expert")
    eq(matmul_flops(nodes, experts), matmul_flops(one, experts), "expert GEMM FLOPs per rank unchanged")
    eq(total_params(nodes), total_params(one) - 2 * (8 - 8 // ep) * 3 * 64 * 16, "E / ep experts' parameters")
  end
  raises("deepseek model 'tiny': num_experts = 8 is not divisible by ep = 3: give an ep that divides 8 (1, 2, 4, 8)",
    ds.build, cfg, { batch = b, seq = s, ep = 3, parallel = ep_plan(3, 1, 3 * b) })
end

---------------------------------------------------------------------------------------------------
-- config.json (scripts/neusight/models/hf.lua)

-- deepseek-ai/DeepSeek-V3's config.json (auto_map and quantization_config trimmed to their keys).
local V3_JSON = {
  architectures = { "DeepseekV3ForCausalLM" }, attention_bias = false, attention_dropout = 0.0,
  auto_map = { AutoConfig = "configuration_deepseek.DeepseekV3Config" }, aux_loss_alpha = 0.001, bos_token_id = 0,
  eos_token_id = 1, ep_size = 1, first_k_dense_replace = 3, hidden_act = "silu", hidden_size = 7168,
  initializer_range = 0.02, intermediate_size = 18432, kv_lora_rank = 512, max_position_embeddings = 163840,
  model_type = "deepseek_v3", moe_intermediate_size = 2048, moe_layer_freq = 1, n_group = 8, n_routed_experts = 256,
  n_shared_experts = 1, norm_topk_prob = true, num_attention_heads = 128, num_experts_per_tok = 8,
  num_hidden_layers = 61, num_key_value_heads = 128, num_nextn_predict_layers = 1, q_lora_rank = 1536,
  qk_nope_head_dim = 128, qk_rope_head_dim = 64,
  quantization_config = { activation_scheme = "dynamic", fmt = "e4m3", quant_method = "fp8" }, rms_norm_eps = 1e-06,
  rope_scaling = { beta_fast = 32, beta_slow = 1, factor = 40, mscale = 1.0, mscale_all_dim = 1.0,
    original_max_position_embeddings = 4096, type = "yarn" },
  rope_theta = 10000, routed_scaling_factor = 2.5, scoring_func = "sigmoid", seq_aux = true,
  tie_word_embeddings = false, topk_group = 4, topk_method = "noaux_tc", torch_dtype = "bfloat16",
  transformers_version = "4.33.1", use_cache = true, v_head_dim = 128, vocab_size = 129280,
}

function T.test_config_json_gives_the_preset()
  local opts = { batch = 1, seq = 32, training = true, dtype = "bf16", attention = "sdpa" }
  local m = hf.from_config(V3_JSON, "models/DeepSeek-V3/config.json", {})
  eq(m.arch .. " " .. m.name, "deepseek DeepSeek-V3", "arch and name")
  eq(m.num_nextn_predict_layers, nil, "no MTP")
  t.same(ds.build(m, opts), ds.build(with(presets.deepseek_v3, { name = "DeepSeek-V3" }), opts), "graph")
  eq(total_params(ds.build(hf.from_config({ model_type = "deepseek_v3" }, "d.json", {}), opts)), 671026404352,
    "DeepseekV3Config() defaults")
  -- q_lora_rank null (DeepSeek-V2-Lite's attention): q_proj.
  local no_q = with(V3_JSON)
  no_q.q_lora_rank = nil
  local lite = hf.from_config(no_q, "l.json", { q_lora_rank = true })
  eq(lite.q_lora_rank, false, "null → None")
  assert(by_name(ds.build(lite, { batch = 1, seq = 8 }))["layers.self_attn.q_proj"], "q_proj")
end

function T.test_config_json_unknown_keys()
  raises([[d.json: unknown key 'n_routed_expert' for model_type "deepseek_v3" (did you mean 'n_routed_experts'?)]],
    hf.from_config, { model_type = "deepseek_v3", n_routed_expert = 8 }, "d.json", {})
  raises([[d.json: unknown key 'num_local_experts' for model_type "deepseek_v3"]],
    hf.from_config, { model_type = "deepseek_v3", num_local_experts = 8 }, "d.json", {})
  raises([[d.json: scoring_func = "softmax" is not modelled by the deepseek builder (scripts/neusight/models/deepseek.lua builds "sigmoid" only)]],
    hf.from_config, { model_type = "deepseek_v3", scoring_func = "softmax" }, "d.json", {})
  raises([[d.json: topk_method = "greedy" is not modelled by the deepseek builder (scripts/neusight/models/deepseek.lua builds "noaux_tc" only)]],
    hf.from_config, { model_type = "deepseek_v3", topk_method = "greedy" }, "d.json", {})
end

---------------------------------------------------------------------------------------------------
-- DeepSeek-V2 (model_type deepseek_v2): the same MLA and DeepSeekMoE, softmax routing without correction bias

-- deepseek-ai/DeepSeek-V2-Lite's config.json (the keys that matter; q_lora_rank null).
local V2_LITE_JSON = {
  architectures = { "DeepseekV2ForCausalLM" }, attention_bias = false, attention_dropout = 0.0, aux_loss_alpha = 0.001,
  bos_token_id = 100000, eos_token_id = 100001, first_k_dense_replace = 1, hidden_act = "silu", hidden_size = 2048,
  initializer_range = 0.02, intermediate_size = 10944, kv_lora_rank = 512, max_position_embeddings = 163840,
  model_type = "deepseek_v2", moe_intermediate_size = 1408, moe_layer_freq = 1, n_group = 1, n_routed_experts = 64,
  n_shared_experts = 2, norm_topk_prob = false, num_attention_heads = 16, num_experts_per_tok = 6,
  num_hidden_layers = 27, num_key_value_heads = 16, pretraining_tp = 1, qk_nope_head_dim = 128, qk_rope_head_dim = 64,
  rms_norm_eps = 1e-06, rope_theta = 10000, routed_scaling_factor = 1.0, scoring_func = "softmax", seq_aux = true,
  tie_word_embeddings = false, topk_group = 1, topk_method = "greedy", torch_dtype = "bfloat16",
  transformers_version = "4.33.1", use_cache = true, v_head_dim = 128, vocab_size = 102400,
}

function T.test_deepseek_v2_parameters()
  -- DeepSeek's figures: V2-Lite 15.7 B total, 2.4 B active; V2 236 B, 21 B active (both without the input embedding)
  local lite, v2 = presets.deepseek_v2_lite, presets.deepseek_v2
  eq(total_params(ds.build(lite, { batch = 1, seq = 1 })), 15706484224, "DeepSeek-V2-Lite")
  eq(closed_form(lite), 15706484224, "closed form")
  eq(total_params(ds.build(v2, { batch = 1, seq = 1 })), 235741434880, "DeepSeek-V2")
  eq(closed_form(v2), 235741434880, "closed form")
  eq(ds.active_parameters(lite), closed_form(lite, 6), "6 of 64 routed experts")
  eq(ds.active_parameters(lite) - 102400 * 2048, 2451435008, "2.45 B without the input embedding")
  eq(ds.active_parameters(v2), closed_form(v2, 6), "6 of 160")
  eq(ds.active_parameters(v2) - 102400 * 5120, 20851512320, "20.9 B without the input embedding")
  eq(ds.top_k(v2) .. "/" .. ds.num_experts(v2), "6/160", "routing")
end

-- DeepseekV2Config's n_routed_experts defaults to None, and DeepseekV2DecoderLayer builds DeepseekV2MoE only when it is
-- not None: omitted or null, every layer is a dense DeepseekV2MLP of intermediate_size (it read "(got nil)"). Closed
-- form: embed + lm_head (untied) + final norm + L × (MLA + 2 norms + SwiGLU 3·h·I).
function T.test_deepseek_v2_without_routed_experts_is_dense()
  local v2 = with(TINY, { model_type = "deepseek_v2", rope_interleave = nil, topk_method = "greedy",
                          n_routed_experts = false, num_experts_per_tok = false, n_group = false, topk_group = false })
  local c = with(ds.DEFAULTS.deepseek_v3, v2)
  local h, L, V, nh, I = c.hidden_size, c.num_hidden_layers, c.vocab_size, c.num_attention_heads, c.intermediate_size
  local qr, kvr, dn, dr, dv = c.q_lora_rank, c.kv_lora_rank, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim
  local mla = h * qr + qr + qr * nh * (dn + dr) + h * (kvr + dr) + kvr + kvr * nh * (dn + dv) + nh * dv * h
  local want = 2 * V * h + h + L * (mla + 2 * h + 3 * h * I)
  local nodes = ds.build(v2, { batch = 1, seq = 8, training = true })
  eq(total_params(nodes), want, "all-dense DeepSeek-V2 parameters")
  for _, n in ipairs(nodes) do
    if n.name:match("%.gate$") or (n.attrs and n.attrs.expert) then error("a router or expert node: " .. n.name) end
  end
  eq(by_name(nodes)["dense_layers.mlp.gate_proj"].count, L, "every layer dense")
  eq(ds.active_parameters(v2), want, "every parameter active")
  eq(ds.num_experts(v2), 1, "no experts for search to spread")
  -- a config.json without n_routed_experts (DeepseekV2Config's None) and one with it null: the same model
  local json = { model_type = "deepseek_v2", hidden_size = h, intermediate_size = I, num_attention_heads = nh,
                 num_key_value_heads = nh, num_hidden_layers = L, vocab_size = V, kv_lora_rank = kvr, q_lora_rank = qr,
                 qk_rope_head_dim = dr,
                 qk_nope_head_dim = dn, v_head_dim = dv, moe_intermediate_size = c.moe_intermediate_size }
  eq(total_params(ds.build(hf.from_config(json, "d.json"), { batch = 1, seq = 8 })), want, "config.json: omitted")
  eq(total_params(ds.build(hf.from_config(json, "d.json", { n_routed_experts = true }), { batch = 1, seq = 8 })), want,
    "config.json: null")
end

function T.test_deepseek_v2_router()
  local function gate_of(cfg)
    local by = by_name(ds.build(cfg, { batch = 2, seq = 8, training = true, dtype = "bf16", attention = "sdpa" }))
    return by, function(name) return by["layers.mlp.gate." .. name] end
  end
  -- greedy (V2-Lite): softmax, top-k values with their gradient, × routed_scaling_factor (norm_topk_prob false)
  local by, gate = gate_of(presets.deepseek_v2_lite)
  assert(gate("softmax") and not gate("sigmoid") and not gate("e_score_correction_bias"), "softmax scores, no bias")
  eq(gate("topk_weights"), nil, "the top-k values themselves, no gather")
  local _, bw = t.kernels(gate("topk"), true)
  assert(#bw > 0, "top-k has a backward")
  assert(gate("routed_scaling_factor") and not gate("topk_norm"), "scaled, not renormalised")
  eq(gate("group_idx"), nil, "greedy: no groups")
  assert(by["layers.self_attn.q_proj"] and not by["layers.self_attn.q_a_proj"], "q_lora_rank null: q_proj")
  assert(by["layers.mlp.shared_experts.gate_proj"], "2 shared experts")
  -- group_limited_greedy (V2): each group's best expert scores it, top 3 of 8 groups, masked scores keep their gradient
  by, gate = gate_of(presets.deepseek_v2)
  eq(table.concat(gate("group_max").output, ","), "16,8,1", ".max(dim=-1) of (tokens, 8 groups, 20)")
  eq(gate("group_max").attrs.no_grad, true, "group scores: indices only")
  eq(table.concat(gate("group_idx").output, ","), "16,3", "topk_group 3")
  eq(gate("masked_fill").attrs.no_grad, nil, "tmp_scores carry the gradient")
  eq(gate("topk").attrs.no_grad, nil, "so do the selected values")
  -- no shared experts when n_shared_experts is None
  local none = by_name(ds.build(with(presets.deepseek_v2_lite, { n_shared_experts = false }), { batch = 1, seq = 8 }))
  eq(none["layers.mlp.shared_experts.gate_proj"], nil, "n_shared_experts null")
end

function T.test_deepseek_v2_serving_and_config_json()
  -- decode: the latent cache (27 layers × 576 values), absorbed attention, q_proj
  local cfg, b, C = presets.deepseek_v2_lite, 4, 1000
  local nodes = ds.build(cfg, { batch = b, phase = "decode", context = C, dtype = "bf16" })
  local cache = 0
  for _, n in ipairs(nodes) do cache = cache + (n.attrs.kv_cache_bytes or 0) * n.count end
  eq(cache, 27 * b * (C + 1) * 576 * 2, "latent cache")
  local by = by_name(nodes)
  eq(table.concat(by["layers.self_attn.decode_attention"].inputs[1], ","), "4,16,1,576", "16 heads in latent space")
  eq(total_params(nodes), 15706484224, "every parameter in decode")
  -- the config.json is the preset
  local opts = { batch = 1, seq = 32, training = true, dtype = "bf16", attention = "sdpa" }
  local m = hf.from_config(V2_LITE_JSON, "models/DeepSeek-V2-Lite/config.json", { q_lora_rank = true })
  eq(m.arch .. " " .. m.name .. " " .. m.model_type, "deepseek DeepSeek-V2-Lite deepseek_v2", "arch, name, type")
  t.same(ds.build(m, opts), ds.build(with(presets.deepseek_v2_lite, { name = "DeepSeek-V2-Lite" }), opts), "graph")
  raises([[d.json: scoring_func = "sigmoid" is not modelled by the deepseek builder (scripts/neusight/models/deepseek.lua builds "softmax" only)]],
    hf.from_config, with(V2_LITE_JSON, { scoring_func = "sigmoid" }), "d.json", { q_lora_rank = true })
  raises([[d.json: unknown key 'rope_interleave' for model_type "deepseek_v2"]],
    hf.from_config, with(V2_LITE_JSON, { rope_interleave = true }), "d.json", { q_lora_rank = true })
end

---------------------------------------------------------------------------------------------------
-- Errors

function T.test_errors()
  local o = { batch = 1, seq = 8 }
  raises("deepseek model 'tiny': num_key_value_heads (2) must equal num_attention_heads (4): kv_b_proj makes a key and "
    .. "a value per query head, and HF's repeat_kv would repeat them 4 / 2 times",
    ds.build, with(TINY, { num_key_value_heads = 2 }), o)
  raises("deepseek model 'tiny': unknown field 'n_shared_expert' (did you mean 'n_shared_experts'?)",
    ds.build, with(TINY, { n_shared_expert = 4 }), o)
  raises("deepseek model 'tiny': model_type \"deepseek_v1\" is not supported (\"deepseek_v3\" or \"deepseek_v2\")",
    ds.build, with(TINY, { model_type = "deepseek_v1" }), o)
  raises("deepseek model 'tiny': unknown field 'topk_method'", ds.build, with(TINY, { topk_method = "greedy" }), o)
  local v2 = with(TINY, { model_type = "deepseek_v2", rope_interleave = nil, topk_method = "greedy" })
  raises("deepseek model 'tiny': unknown field 'rope_interleave'", ds.build, with(v2, { rope_interleave = true }), o)
  raises("deepseek model 'tiny': topk_method \"noaux_tc\" is not supported (\"greedy\" or \"group_limited_greedy\")",
    ds.build, with(v2, { topk_method = "noaux_tc" }), o)
  raises("deepseek model 'tiny': expert parallelism (ep = 2) needs routed experts, and n_routed_experts is None (null "
    .. "or omitted in a DeepSeek-V2 config: every layer a dense MLP); use ep = 1", ds.build,
    with(v2, { n_routed_experts = false }), { batch = 1, seq = 8, ep = 2 })
  raises("deepseek model 'tiny': num_experts_per_tok (9) exceeds n_routed_experts (8)", ds.build,
    with(v2, { num_experts_per_tok = 9 }), o)
  raises("deepseek model 'tiny': n_routed_experts (8) must be a multiple of n_group (3)", ds.build,
    with(v2, { topk_method = "group_limited_greedy", n_group = 3 }), o)
  raises("deepseek model 'tiny': n_routed_experts (8) must be a multiple of n_group (3) with at least 2 experts per "
    .. "group (the group score is the sum of each group's top 2)", ds.build, with(TINY, { n_group = 3 }), o)
  raises("deepseek model 'tiny': topk_group (5) exceeds n_group (4)", ds.build, with(TINY, { topk_group = 5 }), o)
  raises("deepseek model 'tiny': num_experts_per_tok (5) exceeds the 4 experts of topk_group (2) groups",
    ds.build, with(TINY, { num_experts_per_tok = 5 }), o)
  raises("deepseek model 'tiny': qk_rope_head_dim (3) must be even (rotate_half splits it in two)",
    ds.build, with(TINY, { qk_rope_head_dim = 3 }), o)
  raises("deepseek model 'tiny': field 'first_k_dense_replace' must be a non-negative integer (got -1)",
    ds.build, with(TINY, { first_k_dense_replace = -1 }), o)
  raises("deepseek model 'tiny': num_attention_heads = 4 is not divisible by tp = 3: give a tp that divides 4 (1, 2, 4)",
    ds.build, TINY, { batch = 3, seq = 8, tp = 3, parallel = tp_plan(3, 3) })
end

-- A preset added later gets its closed-form parameter check: the arch "deepseek" presets are the three checked above
-- (test_parameter_counts: deepseek_v3; test_deepseek_v2_parameters: deepseek_v2, deepseek_v2_lite).
function T.test_every_deepseek_preset_has_a_parameter_check()
  local checked = { deepseek_v3 = true, deepseek_v2 = true, deepseek_v2_lite = true }
  for name, cfg in pairs(presets) do
    if cfg.arch == "deepseek" and not checked[name] then error(name .. ": no closed-form parameter check") end
  end
end

return T
