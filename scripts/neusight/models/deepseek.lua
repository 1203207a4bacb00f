-- scripts/neusight/models/deepseek.lua — DeepSeek-V3 (HF transformers DeepseekV3ForCausalLM, modeling_deepseek_v3.py) as an op
-- graph: multi-head latent attention (MLA) and a DeepSeekMoE block with sigmoid, group-limited top-k routing, eager or
-- sdpa attention, as HuggingFace's modeling code launches the kernels.
--
-- Per decoder layer (layer groups "dense_layers" — the first first_k_dense_replace layers, DeepseekV3MLP of
-- intermediate_size — and "layers", the MoE layers):
--   input_layernorm (RMSNorm) → attention → o_proj → residual add → post_attention_layernorm → MLP or MoE → residual add.
-- Around them: embed_tokens, the final norm, lm_head (untied unless tie_word_embeddings) and, in training, HF's
-- causal-LM loss (neusight.nodes.causal_lm_loss). No multi-token-prediction module: HF's model has none (the
-- checkpoint's layer 61 is dropped when loading; num_nextn_predict_layers is ignored). No router auxiliary loss:
-- DeepseekV3ForCausalLM computes none (the aux-loss-free balancing updates e_score_correction_bias outside the model).
--
-- DeepseekV3Attention (d_qk = qk_nope_head_dim + qk_rope_head_dim, heads = num_attention_heads):
--   q: q_lora_rank set → q_a_proj Linear(h, q_lora_rank, bias = attention_bias) → q_a_layernorm (RMSNorm) → q_b_proj
--      Linear(q_lora_rank, heads · d_qk, no bias); q_lora_rank null → q_proj Linear(h, heads · d_qk, no bias). The
--      (b, heads, s, d_qk) view splits into q_pass (nope) and q_rot (rope) views.
--   kv: kv_a_proj_with_mqa Linear(h, kv_lora_rank + qk_rope_head_dim, bias = attention_bias) → split: k_pass → kv_a_layernorm
--      (RMSNorm over kv_lora_rank) → kv_b_proj Linear(kv_lora_rank, heads · (qk_nope_head_dim + v_head_dim), no bias)
--      → split into k_pass (nope) and value_states (v_head_dim) views; k_rot (b, 1, s, qk_rope_head_dim), one head.
--   RoPE on q_rot and k_rot (llama.lua's kernels: ·cos, rotate_half = neg + cat, ·sin, add); rope_interleave (HF's
--      default, true) first de-interleaves each: view(…, d/2, 2).transpose(4, 3).reshape — one copy of q_rot and of k_rot.
--   query_states = cat(q_pass, q_rot), key_states = cat(k_pass, k_rot.expand(heads)): one copy each, (b, heads, s, d_qk).
--   attention with scores over d_qk and values of v_head_dim: eager (llama.lua's eager_attention_forward kernels: QKᵀ,
--      × scaling, + causal mask, softmax, [dropout], ·V, transpose(1, 2).contiguous(); num_key_value_heads must equal
--      num_attention_heads, so repeat_kv copies nothing) or sdpa (one `sdpa` node with V narrower than Q and K:
--      PyTorch's FlashAttention backend needs equal head dims, so the memory-efficient kernel runs it).
--   o_proj Linear(heads · v_head_dim, h, bias = attention_bias).
--   The softmax scale (qk_head_dim^-0.5, × mscale² with YaRN rope_scaling) changes no kernel.
-- DeepseekV3MoE (layers i ≥ first_k_dense_replace with i % moe_layer_freq == 0; transformers' class reads no
--   moe_layer_freq — DeepSeek's remote code does, and both agree at its value 1), on n = b · s tokens:
--   router DeepseekV3TopkRouter: F.linear(x.float(), weight.float()) (casts of x and of the (E, h) weight unless the
--   model is fp32, an fp32 GEMM), sigmoid; under torch.no_grad() (get_topk_indices): + e_score_correction_bias,
--   view (n, n_group, E / n_group) → topk(2) → sum → topk(topk_group) over the groups → zeros_like + scatter_ (group
--   mask) → expand + reshape (a copy to (n, E)) → .bool(), ~ and masked_fill → topk(num_experts_per_tok); then with
--   gradient scores.gather(1, topk_indices) (ops/gather.lua), [norm_topk_prob: sum, + 1e-20, div], × routed_scaling_factor.
--   moe(): final_hidden_states = zeros (n, h) in fp32 (topk_weights' dtype), one_hot(topk_indices, E) (permuted: a
--   view), per expert torch.where(mask[e]) (nonzero), topk_weights[token_indices, weight_indices] (a gather),
--   hidden_states[token_indices] (a gather), the expert MLP (DeepseekV3MLP of moe_intermediate_size: gate_proj, SiLU,
--   up_proj, mul, down_proj), × the weights (fp32 result), index_add_ into the fp32 buffer; .type(dtype) (a cast
--   unless fp32); + shared_experts(x), one DeepseekV3MLP of moe_intermediate_size · n_shared_experts.
--   opts.experts = "grouped": the routed experts as grouped GEMMs instead (neusight/models/moe.lua M.grouped_experts,
--   Megatron-Core GroupedMLP: permute, gate_up_proj and down_proj grouped GEMMs, SwiGLU, unpermute in the compute
--   dtype; the fp32 routing weights cast once), router and shared experts as above.
--   Tokens per expert: as neusight/models/moe.lua — dropless, spread evenly over the experts the tokens reach
--   (moe.experts_reached, a uniform router; moe.spread: the remainder one row more, experts not reached keep their
--   parameters and launch nothing). Group-limited routing restricts which experts a token may pick, which a uniform
--   router over all E ignores (it reaches somewhat more experts than group-limited routing would).
--   Load imbalance under expert parallelism (opts.router_skew) as neusight/models/moe.lua (M.busiest_rank_rows: the
--   busiest rank's rows, a uniform top-k router over all E by default; group-limited routing, which sends a token to
--   at most topk_group groups, is not reflected in it).
--   e_score_correction_bias is a registered buffer in transformers (not a parameter): counted in no parameter total.
--   Bool tensors (.bool(), ~) are charged at fp32 width; the int64 routing indices as neusight.kernels.index_bytes.
-- Serving phases (opts.phase; neusight.nodes): as llama.lua, with the KV cache of an MLA-aware serving engine (vLLM /
--   SGLang with FlashMLA), not HF's: per token and layer the compressed latent after kv_a_layernorm (kv_lora_rank) and
--   the rotary key k_rot after RoPE (qk_rope_head_dim), 576 values for DeepSeek-V3 — not the decompressed per-head K
--   (d_qk) and V (v_head_dim) of HF's DynamicCache, (d_qk + v_head_dim) · heads = 40,960 (neusight.nodes.latent_cache_write,
--   one copy kernel, vLLM's concat_and_cache_mla). Under tensor parallelism every rank caches the whole latent (it
--   belongs to no head).
--   Prefill decompresses as in training (kv_b_proj on the prompt, attention over per-head K and V) and writes the
--   latent. Decode uses DeepSeek's absorbed formulation (vLLM's MLA decode path, FlashMLA): kv_b_proj's weights are
--   never applied to the cache; W_UK (its key rows, heads × qk_nope_head_dim × kv_lora_rank) takes q_nope into the
--   latent space (a bmm over the heads, kv_b_proj.w_uk), cat(ql_nope, q_rot) (a copy), then one decode_attention over
--   C + 1 cached tokens as multi-query attention: every head against one cached "head" of kv_lora_rank +
--   qk_rope_head_dim, V = its first kv_lora_rank values (attrs.latent: the cache is read once), then W_UV (its value
--   rows, heads × kv_lora_rank × v_head_dim, kv_b_proj.w_uv, a bmm writing o_proj's input) and o_proj. The two bmm
--   nodes carry kv_b_proj's parameters (same total). Not modelled: weight-only quantisation of the two bmm weights
--   (--weight-dtype quantises linears only), FlashMLA's paged-block layout (64-token pages).
-- Tensor parallelism (opts.tp > 1), Megatron-Core's MLA layout: the down projections q_a_proj and kv_a_proj_with_mqa
--   and their RMSNorms replicated, q_b_proj (or q_proj) and kv_b_proj column-parallel (heads split), o_proj
--   row-parallel; f before q_b_proj and kv_b_proj (the all-reduce in backward of the gradient of the replicated
--   latents, (b, s, q_lora_rank) and (b, s, kv_lora_rank + qk_rope_head_dim)), and on x before q_proj when q_lora_rank is
--   null (or with sequence parallelism: the all-gather of the sequence before the replicated projections); g after
--   o_proj. Dense MLP, shared experts and every routed expert: gate/up column-, down row-parallel (as moe.lua: the
--   intermediate sizes split), the router replicated, one f before the MoE block and one g after; with sequence
--   parallelism Megatron-Core's all-to-all token dispatcher instead, as moe.lua (router and dispatch on the rank's
--   n/tp tokens, the tp group's routed rows gathered around the experts, the shared experts a sequence-parallel MLP of
--   their own). embed_tokens and lm_head vocab-parallel. Expert parallelism (opts.ep): as moe.lua — E / ep local
--   experts, an all-to-all of the (n·k, h) routed rows (n: the rank's tokens) before and after them; routing, the
--   gathers and the combine of all E experts on every rank.
--   opts.megatron (kernels = "megatron", a parallel run's default): Megatron-Core's fused RMSNorm, RoPE (the interleaved
--   layout inside the kernel: no copy) and SwiGLU kernels in place of HF's chains (neusight.nodes, as llama.lua), and
--   linear_fc1, one GEMM for gate and up (gate_up_proj, 2 · the intermediate size), in the dense MLP, the shared
--   experts and each expert of the loop (Megatron's SequentialMLP); the eager attention and the router keep HF's
--   kernels. MLA's projections stay as they are: Megatron-Core's MLA runs them as separate GEMMs too (linear_q_down_proj
--   / linear_q_up_proj or linear_q_proj, linear_kv_down_proj, linear_kv_up_proj).
-- DeepSeek-V2 (model_type "deepseek_v2": DeepSeek-V2, V2-Lite; DeepSeek's modeling_deepseek.py of those checkpoints): the
--   same MLA (always de-interleaving RoPE: V2 has no rope_interleave key) and DeepSeekMoE, with MoEGate's routing: the
--   fp32 logits (casts as V3's), softmax scores (scoring_func "softmax", fixed by hf.lua), no correction bias and no
--   no_grad block: topk_method "greedy" takes topk(scores, k) with the values' gradient; "group_limited_greedy" scores
--   each of n_group groups by its best expert (.max(dim=-1), charged as a top-1), keeps topk_group groups (zeros,
--   scatter_, expand + reshape, .bool(), ~) and takes the top k of scores.masked_fill(…) (gradient through both); then
--   renormalised when norm_topk_prob and k > 1, else × routed_scaling_factor (V2's if / else). n_shared_experts None: no
--   shared experts. Approximations: the routed experts run V3's loop (per expert torch.where, gather, MLP, weighted
--   index_add_) where V2's code sorts the token-expert pairs (moe_infer: scatter_, argsort, one gather, the experts on
--   contiguous slices, an index_put and a weighted sum over k; in training repeat_interleave and masked assignment):
--   the same rows and GEMMs per expert, other gather/scatter kernels. V2's sequence-level auxiliary loss
--   (aux_loss_alpha, seq_aux; training only) is left out. n_routed_experts None (DeepseekV2Config's default, null or
--   omitted in a config.json): DeepseekV2DecoderLayer builds DeepseekV2MoE only where `config.n_routed_experts is not
--   None and layer_idx >= first_k_dense_replace and layer_idx % moe_layer_freq == 0`, so every layer is a dense
--   DeepseekV2MLP of intermediate_size (no router, no experts; num_experts_per_tok, n_group and topk_group unread;
--   expert parallelism has nothing to spread: an error).
-- Left out (as in llama.lua / moe.lua): the rotary tables, the causal-mask construction, the host synchronisations of
--   torch.where, the backward of k_rot.expand (a sum over the heads of (b, heads, s, qk_rope_head_dim) gradients), the
--   torch.where of experts that get no token (a read of the (n, k) mask each), the fp8 block-quantised weights of the
--   published checkpoint (quantization_config: the model runs in the workload's dtype), load imbalance between experts.
local ipairs, pairs, type, tostring, error = ipairs, pairs, type, tostring, error

local checks = require "neusight.models.check"

local M = {}

M.tensor_parallel = true -- build() shards itself when opts.tp > 1 (neusight/workload.lua checks this)
M.sequence_parallel = true
-- under sequence parallelism with tp > 1 Megatron-Core's all-to-all token dispatcher; a Megatron training forecast
-- with tp > 1 without it warns (neusight.workload build: Megatron-Core refuses it)
M.token_dispatcher = true
M.expert_parallel = true
M.attention = { eager = true, sdpa = true }
-- HF's attn_implementation default for this family is sdpa at every dtype, fp32 included (the fp32 NeuSight traces
-- that keep other builders eager in fp32 are GPT-2, BERT and OPT): neusight/workload.lua defaults sdpa for it
M.sdpa_any_dtype = true
M.experts = { loop = true, grouped = true } -- opts.experts: HF's eager loop (default) or grouped GEMMs (moe.lua)
M.router_skew = true -- opts.router_skew: the busiest expert-parallel rank (moe.lua busiest_rank_rows)
M.serving = { prefill = true, decode = true }
M.rotary_positions = true -- beyond max_position_embeddings: a warning (llama.lua)

--- The config-class defaults for the fields that shape the kernels; false is None (q_lora_rank: null → q_proj).
--- num_key_value_heads defaults to num_attention_heads. deepseek_v3: transformers' DeepseekV3Config (DeepSeek-V3's
--- shape). deepseek_v2: DeepSeek's DeepseekV2Config (configuration_deepseek.py of the published checkpoints), whose
--- n_routed_experts and num_experts_per_tok default to None (n_routed_experts None: an all-dense model, see the header;
--- otherwise a config must give num_experts_per_tok), n_shared_experts, n_group and topk_group default to None (no
--- shared experts; groups only for group_limited_greedy).
--- max_position_embeddings shapes no kernel: neusight/models/hf.lua's value for a config.json that omits it (llama.lua).
M.DEFAULTS = {
  deepseek_v3 = { vocab_size = 129280, hidden_size = 7168, intermediate_size = 18432, moe_intermediate_size = 2048,
                  num_hidden_layers = 61, num_attention_heads = 128, num_key_value_heads = 128, n_shared_experts = 1,
                  n_routed_experts = 256, routed_scaling_factor = 2.5, kv_lora_rank = 512, q_lora_rank = 1536,
                  qk_rope_head_dim = 64, v_head_dim = 128, qk_nope_head_dim = 128, n_group = 8, topk_group = 4,
                  num_experts_per_tok = 8, first_k_dense_replace = 3, moe_layer_freq = 1, norm_topk_prob = true,
                  hidden_act = "silu", tie_word_embeddings = false, rope_interleave = true, attention_bias = false,
                  attention_dropout = 0.0, max_position_embeddings = 4096 },
  deepseek_v2 = { vocab_size = 102400, hidden_size = 4096, intermediate_size = 11008, moe_intermediate_size = 1407,
                  num_hidden_layers = 30, num_attention_heads = 32, num_key_value_heads = 32, n_shared_experts = false,
                  n_routed_experts = false, routed_scaling_factor = 1.0, kv_lora_rank = 512, q_lora_rank = 1536,
                  qk_rope_head_dim = 64, v_head_dim = 128, qk_nope_head_dim = 128, topk_method = "greedy",
                  n_group = false, topk_group = false, num_experts_per_tok = false, first_k_dense_replace = 0,
                  moe_layer_freq = 1, norm_topk_prob = false, hidden_act = "silu", tie_word_embeddings = false,
                  attention_bias = false, attention_dropout = 0.0, max_position_embeddings = 2048 },
}

-- The builder fields (config.json keys that change the kernels), and the keys that change none a config may carry.
local FIELDS = { "vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
  "num_attention_heads", "num_key_value_heads", "n_shared_experts", "n_routed_experts", "routed_scaling_factor",
  "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim", "qk_nope_head_dim", "n_group", "topk_group",
  "num_experts_per_tok", "first_k_dense_replace", "moe_layer_freq", "norm_topk_prob", "hidden_act",
  "tie_word_embeddings", "rope_interleave", "attention_bias", "attention_dropout" }
-- DeepSeek-V2 has no rope_interleave key (its modeling code always de-interleaves, as V3's default) and two routing
-- keys V3 fixes: topk_method ("greedy" | "group_limited_greedy") and the softmax scoring (hf.lua fixes scoring_func).
local FIELDS_V2 = {}
for _, k in ipairs(FIELDS) do
  if k ~= "rope_interleave" then FIELDS_V2[#FIELDS_V2 + 1] = k end
end
FIELDS_V2[#FIELDS_V2 + 1] = "topk_method"
local FIELDS_OF = { deepseek_v3 = FIELDS, deepseek_v2 = FIELDS_V2 }
local NEUTRAL = { "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters" }

--- The builder fields of a model_type (what scripts/neusight/models/hf.lua takes from a config.json).
function M.fields(model_type)
  local out = {}
  for i, k in ipairs(FIELDS_OF[model_type] or {}) do out[i] = k end
  return out
end

local function show(v) return type(v) == "string" and ("%q"):format(v) or tostring(v) end

--- Resolves a config (HF field names, any of them omitted) into the numbers the graph needs; errors name the model.
---@return table r
function M.config(cfg)
  local who = ("deepseek model '%s'"):format(tostring(cfg.name or "?"))
  local mt = cfg.model_type or "deepseek_v3"
  if not M.DEFAULTS[mt] then
    checks.fail(cfg, "model_type", ("%s: model_type %s is not supported (\"deepseek_v3\" or \"deepseek_v2\")")
      :format(who, show(mt)))
  end
  local known = M.fields(mt)
  for _, k in ipairs { "name", "arch", "model_type" } do known[#known + 1] = k end
  for _, k in ipairs(NEUTRAL) do known[#known + 1] = k end
  checks.known(who, cfg, known)
  checks.neutral(who, cfg, NEUTRAL) -- no kernel reads them, but 0 positions or a RoPE base of 0 is no model
  local d, c = M.DEFAULTS[mt], {}
  local v2 = mt == "deepseek_v2"
  local NONE = { q_lora_rank = true, num_key_value_heads = true, n_shared_experts = v2, n_group = v2, topk_group = v2,
                 n_routed_experts = v2, num_experts_per_tok = v2 }
  for _, k in ipairs(FIELDS_OF[mt]) do
    local v = cfg[k]
    if v == nil then v = d[k] end
    if v == false and NONE[k] then v = nil end
    c[k] = v
  end
  if v2 then c.rope_interleave = true end
  local method = v2 and c.topk_method or "noaux_tc"
  if v2 and method ~= "greedy" and method ~= "group_limited_greedy" then
    checks.fail(cfg, "topk_method", ("%s: topk_method %s is not supported (\"greedy\" or \"group_limited_greedy\")")
      :format(who, show(method)))
  end
  -- DeepSeek-V2 with n_routed_experts None: every layer dense (the header); the routing fields are then unread
  local all_dense = v2 and c.n_routed_experts == nil
  local grouped = method ~= "greedy" and not all_dense
  local required = { "vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
    "num_attention_heads", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim", "qk_nope_head_dim", "moe_layer_freq" }
  if not all_dense then
    required[#required + 1] = "n_routed_experts"
    required[#required + 1] = "num_experts_per_tok"
  end
  if not v2 then required[#required + 1] = "n_shared_experts" end -- V2: None is no shared expert
  if grouped then required[#required + 1] = "n_group"; required[#required + 1] = "topk_group" end
  checks.counts(who, c, required, { "q_lora_rank", "num_key_value_heads", "n_shared_experts", "n_group", "topk_group" },
    cfg)
  for _, k in ipairs { "tie_word_embeddings", "attention_bias", "norm_topk_prob", "rope_interleave" } do
    if type(c[k]) ~= "boolean" then
      checks.fail(cfg, k, ("%s: field '%s' must be a boolean (got %s)"):format(who, k, checks.shown(c[k])))
    end
  end
  if c.hidden_act ~= "silu" and c.hidden_act ~= "swish" then -- HF's ACT2FN maps "swish" to the same nn.SiLU
    checks.fail(cfg, "hidden_act", ("%s: hidden_act %s is not supported (DeepSeek's MLPs are SwiGLU: \"silu\", or "
      .. "\"swish\", HF's other name for it)")
      :format(who, show(c.hidden_act)))
  end
  local p = c.attention_dropout
  if type(p) ~= "number" or not (p >= 0 and p < 1) then
    checks.fail(cfg, "attention_dropout", ("%s: field 'attention_dropout' must be a number in [0, 1) (got %s)")
      :format(who, checks.shown(p)))
  end
  checks.integer_in_file(who, c, "first_k_dense_replace", cfg)
  local fk = c.first_k_dense_replace
  if type(fk) ~= "number" or fk < 0 or fk ~= math.floor(fk) then
    checks.fail(cfg, "first_k_dense_replace", ("%s: field 'first_k_dense_replace' must be a non-negative integer "
      .. "(got %s)"):format(who, checks.shown(fk)))
  end
  local rsf = c.routed_scaling_factor
  if type(rsf) ~= "number" or not (rsf > 0 and rsf < math.huge) then
    checks.fail(cfg, "routed_scaling_factor", ("%s: field 'routed_scaling_factor' must be a positive number (got %s)")
      :format(who, checks.shown(rsf)))
  end
  local nh = c.num_attention_heads
  if c.num_key_value_heads and c.num_key_value_heads ~= nh then
    checks.fail(cfg, { "num_key_value_heads", "num_attention_heads" }, ("%s: num_key_value_heads (%d) must equal "
      .. "num_attention_heads (%d): kv_b_proj makes a key and a value per query head, and HF's repeat_kv would repeat "
      .. "them %d / %d times"):format(who, c.num_key_value_heads, nh, nh, c.num_key_value_heads))
  end
  if c.qk_rope_head_dim % 2 ~= 0 then
    checks.fail(cfg, "qk_rope_head_dim", ("%s: qk_rope_head_dim (%d) must be even (rotate_half splits it in two)")
      :format(who, c.qk_rope_head_dim))
  end
  local E, G, TG, k = c.n_routed_experts, c.n_group, c.topk_group, c.num_experts_per_tok
  if grouped then
    local least = method == "noaux_tc" and 2 or 1
    if E % G ~= 0 or E // G < least then
      checks.fail(cfg, { "n_group", "n_routed_experts" }, ("%s: n_routed_experts (%d) must be a multiple of n_group "
        .. "(%d)%s"):format(who, E, G, least == 2
        and " with at least 2 experts per group (the group score is the sum of each group's top 2)" or ""))
    end
    if TG > G then
      checks.fail(cfg, { "topk_group", "n_group" }, ("%s: topk_group (%d) exceeds n_group (%d)"):format(who, TG, G))
    end
    if k > TG * (E // G) then
      checks.fail(cfg, { "num_experts_per_tok", "topk_group" }, ("%s: num_experts_per_tok (%d) exceeds the %d "
        .. "experts of topk_group (%d) groups"):format(who, k, TG * (E // G), TG))
    end
  elseif not all_dense and k > E then
    checks.fail(cfg, { "num_experts_per_tok", "n_routed_experts" }, ("%s: num_experts_per_tok (%d) exceeds "
      .. "n_routed_experts (%d)"):format(who, k, E))
  end
  local L = c.num_hidden_layers
  local r = {
    who = who, model_type = mt, c = c, V = c.vocab_size, h = c.hidden_size, I = c.intermediate_size, L = L, nh = nh,
    qr = c.q_lora_rank, kvr = c.kv_lora_rank, dn = c.qk_nope_head_dim, dr = c.qk_rope_head_dim, dv = c.v_head_dim,
    E = E, k = k, mI = c.moe_intermediate_size, ns = c.n_shared_experts, G = G, TG = TG, method = method,
    norm_topk = c.norm_topk_prob, tied = c.tie_word_embeddings, bias = c.attention_bias,
    interleave = c.rope_interleave, p_drop = p, first_dense = fk, freq = c.moe_layer_freq,
  }
  r.dqk = r.dn + r.dr
  --- Whether layer i (0-based) is a MoE layer (none without routed experts: DeepseekV2DecoderLayer's condition).
  function r.sparse(i) return E ~= nil and i >= fk and i % r.freq == 0 end
  return r
end

--- Builds the op graph of one forward pass (the engine derives backward/accumulate from the op rules).
---@param cfg table HF config fields (M.DEFAULTS for what may be omitted), plus name and model_type
---@param opts { batch: integer, seq: integer, training?: boolean, dtype?: string, loss?: boolean, attention?: string, tp?: integer, ep?: integer, parallel?: table, sequence_parallel?: boolean, phase?: string, context?: integer }
---@return neusight.Node[]
function M.build(cfg, opts) return M.graph(M.config(cfg), opts) end

--- The graph of a resolved config `r` (M.config).
function M.graph(r, opts)
  local who = r.who
  local N = require "neusight.nodes"
  local P = require "neusight.parallel"
  local moe_lib = require("neusight.models.moe")
  local serve = N.serving(opts, who)
  if not r.E and (opts.ep or 1) > 1 then
    error(("%s: expert parallelism (ep = %d) needs routed experts, and n_routed_experts is None (null or omitted in "
      .. "a DeepSeek-V2 config: every layer a dense MLP); use ep = 1"):format(who, opts.ep), 0)
  end
  local grouped = moe_lib.implementation(opts, who) == "grouped"
  local decode = serve ~= nil and serve.phase == "decode"
  checks.batch_seq(who, decode and { batch = opts.batch, seq = 1 } or opts)
  local b, s, h = opts.batch, serve and serve.s or opts.seq, r.h
  local dtype = opts.dtype or "fp32"
  local shard = (opts.tp or 1) > 1 and P.tensor_shard(opts, who) or nil
  local tp = shard and shard.tp or 1
  local nh, V = r.nh, r.V
  if shard then
    nh = shard.split(nh, "num_attention_heads")
    V = shard.vocab(V)
  end
  local sp = tp > 1 and opts.sequence_parallel == true
  local sl = sp and shard.split(s, "the sequence length") or s
  local sdpa = opts.attention == "sdpa"
  local dn, dr, dv, dqk, qr, kvr = r.dn, r.dr, r.dv, r.dqk, r.qr, r.kvr

  local g = N.new(dtype, shard, sp)
  g.megatron = opts.megatron == true -- Megatron-LM's fused RMSNorm, RoPE and SwiGLU (neusight.nodes)
  -- torch.autocast over fp32 modules (opts.autocast: neusight.workload; neusight.nodes autocast_cast, stream_dtype):
  -- the fp32 residual stream and norms, the projections' per-call input casts, MLA's fp32 normed latents and rotated
  -- q / k (cat with the 16-bit pass halves promotes: fp32 query and key states), the router below
  local stream, add_as = N.autocast_setup(g, opts)
  local upcast = N.upcasts(g) -- HF's RMSNorm and router compute in fp32
  g.kv_dtype = serve and serve.kv_dtype or nil -- a quantised KV cache (neusight.nodes.kv_dtype)
  local nodes, add, tp_in, tp_out = g.nodes, g.add, g.tp_in, g.tp_out

  -- Shapes are shared between nodes: nodes are read-only for op rules and the engine.
  local x = { b, s, h }
  local xs = sp and { b, sl, h } or x
  local q_flat, q_heads = { b, s, nh * dqk }, { b, nh, s, dqk }
  local q_pass, q_rot, q_half = { b, nh, s, dn }, { b, nh, s, dr }, { b, nh, s, dr // 2 }
  local k_rot, k_half = { b, 1, s, dr }, { b, 1, s, dr // 2 }
  local kv_a, latent = { b, s, kvr + dr }, { b, s, kvr }
  local kv_flat, v_heads = { b, s, nh * (dn + dv) }, { b, nh, s, dv }
  local rope_table = { b, 1, s, dr }
  local scores = { b, nh, s, s }

  -- The HF pieces llama.lua's modules share (neusight.nodes): DeepseekV3RMSNorm, apply_rotary_pos_emb (rope_interleave:
  -- apply_rotary_pos_emb_interleave), nn.Linear, DeepseekV3MLP (down_proj(silu(gate_proj(x)) · up_proj(x)), no bias).
  -- `in_dtype`: the norm's input dtype (nil: the graph's, as the q / kv latents from q_a_proj / kv_a_proj; `stream`)
  local function rms_norm(p, shape, width, in_dtype) N.rms_norm(g, p, shape, width, nil, in_dtype) end
  local attn32 = g.autocast and "fp32" or dtype -- eager attention from the fp32 mask's add on (neusight.models.llama)
  local function rope(p, heads, half) N.rope(g, p, heads, half, rope_table, r.interleave) end
  local function linear(...) N.linear(g, ...) end
  local function swiglu(m, input, mid, width, attrs) N.swiglu(g, m, input, mid, h, width, false, nil, attrs) end

  -- DeepseekV3Attention under prefix `a`; `kv` = the KV-cache tokens per sequence in a serving phase.
  local function attention(a, kv)
    local xin = x -- what the projections read: under sequence parallelism the gathered x (neusight.nodes tp_in)
    if not qr or sp then
      -- (under Megatron's kernels it runs under q_proj's weight-gradient GEMM; with q_lora_rank the replicated down
      -- projections read it, no column-parallel linear: not hidden)
      xin = tp_in(a .. ".tp_in", x, "f: input gradient of the column-parallel q_proj"
        .. (sp and " and the replicated down projections" or ""), nil, not qr and a .. ".q_proj" or nil)
    end
    -- under autocast each projection of the fp32 normed x casts it itself (kv_a_proj_with_mqa saves its own copy),
    -- and q_b_proj / kv_b_proj cast the fp32 output of their latent's norm (its fp32 weight · x promotes)
    if qr then
      N.autocast_cast(g, a .. ".q_a_proj.input_cast", xin)
      linear(a .. ".q_a_proj", xin, h, qr, { b, s, qr }, r.bias)
      rms_norm(a .. ".q_a_layernorm", { b, s, qr }, qr)
      g.all_reduce(a .. ".q_b_proj.tp_in", { b, s, qr }, "backward",
        "f: gradient of the replicated q latent from the column-parallel q_b_proj", a .. ".q_b_proj",
        g.autocast and stream or nil)
      N.autocast_cast(g, a .. ".q_b_proj.input_cast", { b, s, qr })
      linear(a .. ".q_b_proj", { b, s, qr }, qr, nh * dqk, q_flat, false)
    else
      N.autocast_cast(g, a .. ".q_proj.input_cast", xin)
      linear(a .. ".q_proj", xin, h, nh * dqk, q_flat, false)
    end
    N.autocast_cast(g, a .. ".kv_a_proj_with_mqa.input_cast", xin)
    linear(a .. ".kv_a_proj_with_mqa", xin, h, kvr + dr, kv_a, r.bias, not g.autocast)
    rms_norm(a .. ".kv_a_layernorm", latent, kvr)
    if decode then -- absorbed weights over the latent cache (vLLM's MLA decode path); kv_b_proj is W_UK and W_UV
      rope(a .. ".rotary.q", q_rot, q_half)
      rope(a .. ".rotary.k", k_rot, k_half)
      N.latent_cache_write(g, a .. ".kv_cache_write", b, s, kvr, dr, kv)
      -- q_nope (b, heads, dn) · W_UK (heads, dn, kvr): torch.bmm over the heads of the transposed views
      add("matmul", a .. ".kv_b_proj.w_uk", { { nh, b, dn }, { nh, dn, kvr } }, { nh, b, kvr }, nh * dn * kvr,
        { note = "absorbed key up-projection (kv_b_proj's key rows): q_nope into the latent space" })
      add("contiguous", a .. ".query_latent", { { nh, b, kvr }, q_rot }, { b, nh, 1, kvr + dr }) -- cat(ql_nope, q_pe)
      N.decode_attention(g, a .. ".decode_attention", b, nh, 1, kvr + dr, kv, kvr, true)
      -- the latent output (b, heads, kvr) · W_UV (heads, kvr, dv), written into o_proj's input (bmm out=)
      add("matmul", a .. ".kv_b_proj.w_uv", { { nh, b, kvr }, { nh, kvr, dv } }, { nh, b, dv }, nh * kvr * dv,
        { note = "absorbed value up-projection (kv_b_proj's value rows)" })
      add("linear", a .. ".o_proj", { { b, s, nh * dv } }, x, nh * dv * h + (r.bias and h or 0), { bias = r.bias })
      tp_out(a .. ".tp_out", x, "g: sum of the row-parallel o_proj partial outputs")
      return
    end
    -- (not hidden: it carries k_rot's gradient too, which no column-parallel linear's backward launches)
    g.all_reduce(a .. ".kv_b_proj.tp_in", kv_a, "backward",
      "f: gradient of the replicated kv latent and k_rot from the column-parallel kv_b_proj and heads")
    N.autocast_cast(g, a .. ".kv_b_proj.input_cast", latent)
    linear(a .. ".kv_b_proj", latent, kvr, nh * (dn + dv), kv_flat, false)
    rope(a .. ".rotary.q", q_rot, q_half)
    rope(a .. ".rotary.k", k_rot, k_half)
    -- (under autocast the cat of the 16-bit pass half and the fp32 rotated half is fp32: the copy priced at 4 B per
    -- element read and written, an over-count of the pass half's 2)
    add_as(attn32, "contiguous", a .. ".query_states", { q_pass, q_rot }, q_heads)   -- torch.cat((q_pass, q_rot), -1)
    add_as(attn32, "contiguous", a .. ".key_states", { q_pass, k_rot }, q_heads)     -- torch.cat((k_pass, k_rot.expand), -1)
    -- HF's past_key_values keep every head's K (qk_nope + qk_rope wide) and V (v_head_dim) (inference: use_cache)
    N.hf_cache(opts, nodes[#nodes], b, nh, s, dqk, dv, nil, g.autocast and dtype or nil)
    if serve then N.latent_cache_write(g, a .. ".kv_cache_write", b, s, kvr, dr, kv) end
    local core = { core_attention = true }
    if sdpa then
      N.autocast_cast(g, a .. ".sdpa.q_cast", q_heads) -- autocast: the fp32 query and key states cast first
      N.autocast_cast(g, a .. ".sdpa.k_cast", q_heads)
      add("sdpa", a .. ".sdpa", { q_heads, q_heads, v_heads }, v_heads, 0, {
        core_attention = true, causal = true, dropout = r.p_drop > 0 and r.p_drop or nil, core_inputs = "1,2,3",
        output_shared = true, -- o_proj saves O itself (a view: ops/sdpa.lua)
        note = "V narrower than Q and K: PyTorch's memory-efficient kernel" })
    else
      N.autocast_cast(g, a .. ".qk.q_cast", q_heads) -- autocast: matmul casts the fp32 query and key states
      N.autocast_cast(g, a .. ".qk.k_cast", q_heads)
      add("matmul", a .. ".qk", { q_heads, { b, nh, dqk, s } }, scores, 0, { core_attention = true, core_inputs = "1,2" })
      add("mul", a .. ".scale", { scores }, scores, 0, core)
      -- + the causal mask (fp32 under autocast: the fp32 embeddings' dtype), softmax(dtype=fp32).to(query's fp32)
      add_as(attn32, "add", a .. ".mask", { scores, { b, 1, s, s } }, scores, 0,
        { core_attention = true, input_dtypes = N.mixed(g, "dtype", "fp32") })
      add_as(attn32, "softmax", a .. ".softmax", { scores }, scores, 0, core)
      if r.p_drop > 0 then add_as(attn32, "dropout", a .. ".dropout", { scores }, scores, 0, core) end
      N.autocast_cast(g, a .. ".pv.p_cast", scores) -- the fp32 probabilities cast for the P·V matmul
      add("matmul", a .. ".pv", { scores, v_heads }, v_heads, 0, { core_attention = true, core_inputs = "2" })
      add("contiguous", a .. ".contiguous", { v_heads }, { b, s, nh, dv })
    end
    add("linear", a .. ".o_proj", { { b, s, nh * dv } }, x, nh * dv * h + (r.bias and h or 0), { bias = r.bias })
    tp_out(a .. ".tp_out", x, "g: sum of the row-parallel o_proj partial outputs")
  end

  -- DeepseekV3MoE under prefix `m` on this rank's n tokens: the whole sequence, or under sequence parallelism its n/tp
  -- (Megatron's token dispatcher, neusight.models.moe tp_gather_rows; the shared experts gather the sequence)
  local function moe(m)
    local E, k, G, TG = r.E, r.k, r.G, r.TG
    local n = b * sl
    local flat, top = { n, h }, { n, k }
    local I = shard and shard.split(r.mI, "moe_intermediate_size") or r.mI
    local Is = r.ns and (shard and shard.split(r.mI * r.ns, "moe_intermediate_size · n_shared_experts") or r.mI * r.ns)
    local experts = P.expert_shard(opts, who, E)
    experts.sequence_tp = sp and tp or 1
    experts.router_skew = moe_lib.router_skew(opts.router_skew, who) -- load imbalance under expert parallelism (moe.lua)
    local ng = { no_grad = true }
    local function expert_mlp(e, rows, per)
      local from = #nodes + 1
      if rows > 0 then
        swiglu(e, { rows, h }, { rows, I }, I, { expert = true })
      else
        add("weight", e .. ".idle", {}, { 3, h, I }, 3 * h * I, { expert = true, note = "no tokens: parameters only" })
      end
      moe_lib.replicate(nodes, from, per)
    end
    -- Under torch.autocast the gate's F.linear(hidden_states.type(fp32), weight.type(fp32)) (both already fp32: no
    -- casts) is on autocast's lower-precision list: it casts both per call and writes bf16 logits. DeepSeek-V3's
    -- sigmoid (on no list) keeps them bf16 (`sc`: the scores and the gathered top-k weights); get_topk_indices adds
    -- the fp32 e_score_correction_bias buffer, which promotes: its selection runs in fp32 (`sel`). With
    -- norm_topk_prob the weights' .sum() (autocast's fp32 list: sum of a 16-bit tensor writes fp32) and the division
    -- by it make them fp32 again (`w`); without it the zeros_like(dtype=topk_weights.dtype) buffer, the weighted
    -- outputs and their index_add_ stay bf16 and .type(hidden_states.dtype) casts the sum to the fp32 stream's dtype.
    -- DeepSeek-V2's softmax(dtype=fp32) makes everything fp32 (and .type is a no-op). The experts index the fp32 rows
    -- (hidden_states) and cast them per call (neusight.nodes swiglu).
    local sc = (g.autocast and r.method == "noaux_tc") and dtype or "fp32" -- the scores' dtype
    local sel = "fp32" -- get_topk_indices' (the scores + the fp32 bias)
    local renormed = r.norm_topk and (r.method == "noaux_tc" or k > 1) -- V3: norm_topk_prob; V2: and k > 1
    local w = renormed and "fp32" or sc -- the routing weights' dtype after the renormalisation (sum: fp32)
    local expert_in = (g.autocast and not grouped) and stream or dtype
    local function dispatch(e, rows, per) -- torch.where(mask[e]), hidden_states[token_indices]
      if rows == 0 then return end
      local from = #nodes + 1
      add("nonzero", e .. ".where", { top }, { 2, rows })
      add_as(expert_in, "index", e .. ".expert_input", { flat, { rows } }, { rows, h })
      moe_lib.replicate(nodes, from, per)
    end
    local function combine(e, rows, per) -- topk_weights[token_indices, weight_indices] · output, index_add_
      if rows == 0 then return end
      local from = #nodes + 1
      local y = { rows, h }
      add_as(w, "index", e .. ".expert_weights", { top, { rows } }, { rows })
      add_as(w, "mul", e .. ".weighted_output", { y, { rows, 1 } }, y, 0,
        { input_dtypes = w ~= dtype and N.mixed(g, "dtype", w) or nil }) -- the expert's 16-bit output · the weight
      add_as(w, "index_add", e .. ".index_add", { y, { rows }, flat }, y)
      moe_lib.replicate(nodes, from, per)
    end

    -- (without sequence parallelism: f on the whole expert path's input, the tokens whole on every rank)
    if not sp then tp_in(m .. ".tp_in", x, "f: input gradient of the column-parallel experts and shared experts") end
    -- DeepseekV3TopkRouter: fp32 logits, sigmoid scores
    local gate = m .. ".gate"
    local probs = { n, E }
    if upcast and not g.autocast then -- (no-ops on autocast's fp32 stream and fp32 weight)
      add_as("fp32", "cast", gate .. ".hidden_to_fp32", { flat }, flat, 0, { from = dtype })
      add_as("fp32", "cast", gate .. ".weight_to_fp32", { { E, h } }, { E, h }, 0, { from = dtype })
    end
    N.autocast_cast(g, gate .. ".input_cast", flat) -- autocast: F.linear casts the (fp32) hidden states per call
    add_as(g.autocast and dtype or "fp32", "linear", gate, { flat }, probs, E * h, { bias = false })
    -- the group-limited selection's mask (V3's get_topk_indices, V2's group_limited_greedy): the topk_group best of
    -- the (n, G) group scores, scatter into a mask, expand + reshape, .bool(), ~ (charged as a unary op), then
    -- masked_fill of the other groups' scores with attributes `fill` (V3: under no_grad; V2: with gradient)
    local function group_mask(fill)
      add_as(sel, "topk", gate .. ".group_idx", { { n, G } }, { n, TG }, 0, ng)
      add_as(sel, "zeros", gate .. ".group_mask", {}, { n, G }, 0) -- no inputs: no gradient either way
      add_as(sel, "setitem", gate .. ".group_mask.scatter", { { n, TG } }, { n, TG }, 0, ng)
      add_as(sel, "contiguous", gate .. ".score_mask", { { n, G } }, probs, 0, ng) -- expand + reshape
      add_as(sel, "cast", gate .. ".score_mask.bool", { probs }, probs, 0, { no_grad = true, from = sel })
      add_as(sel, "mul", gate .. ".score_mask.not", { probs }, probs, 0, ng)
      add_as(sel, "where", gate .. ".masked_fill", { probs, probs }, probs, 0, fill)
    end
    -- topk_weights / (topk_weights.sum(-1, keepdim) + 1e-20): the sum fp32 (under autocast: sum is on its fp32
    -- list), so the quotient too (`w`)
    local function renormalise()
      add_as(w, "sum", gate .. ".topk_sum", { top }, { n, 1 })
      add_as(w, "add", gate .. ".topk_sum.eps", { { n, 1 } }, { n, 1 })
      add_as(w, "div", gate .. ".topk_norm", { top, { n, 1 } }, top, 0,
        { input_dtypes = sc ~= w and N.mixed(g, sc, w) or nil })
    end
    if r.method == "noaux_tc" then
      add_as(sc, "sigmoid", gate .. ".sigmoid", { probs }, probs)
      -- get_topk_indices, under torch.no_grad()
      local grouped = { n, G, E // G }
      -- (the bf16 scores under autocast + the fp32 buffer: an fp32 sum)
      add_as(sel, "add", gate .. ".e_score_correction_bias", { probs, { E } }, probs, 0,
        { no_grad = true, input_dtypes = sc ~= sel and N.mixed(g, sc, sel) or nil })
      add_as(sel, "topk", gate .. ".group_top2", { grouped }, { n, G, 2 }, 0, ng)
      add_as(sel, "sum", gate .. ".group_scores", { { n, G, 2 } }, { n, G }, 0, ng)
      group_mask(ng)
      add_as(sel, "topk", gate .. ".topk", { probs }, top, 0, ng)
      -- with gradient: the selected scores
      add_as(sc, "gather", gate .. ".topk_weights", { probs, top }, top)
      if r.norm_topk then renormalise() end
      add_as(w, "mul", gate .. ".routed_scaling_factor", { top }, top)
    else -- DeepSeek-V2's MoEGate: softmax scores, top-k values with their gradient (no no_grad block, no gather)
      add_as(sc, "softmax", gate .. ".softmax", { probs }, probs)
      if r.method == "group_limited_greedy" then -- group score = the group's best expert; masked scores keep grad
        add_as(sc, "topk", gate .. ".group_max", { { n, G, E // G } }, { n, G, 1 }, 0, ng) -- .max(dim=-1)
        group_mask(nil)
      end
      add_as(sc, "topk", gate .. ".topk", { probs }, top)
      if r.norm_topk and k > 1 then -- renormalised, else scaled (DeepSeek-V2's if / else)
        renormalise()
      else
        add_as(sc, "mul", gate .. ".routed_scaling_factor", { top }, top)
      end
    end
    if grouped then -- permute, grouped GEMMs, unpermute in the compute dtype (neusight.models.moe.grouped_experts)
      if w ~= dtype then add("cast", m .. ".topk_weights.to_dtype", { top }, top, 0, { from = w }) end
      moe_lib.grouped_experts(g, experts, m, n, k, E, h, I)
    else -- moe(): the routed experts into an fp32 buffer
      add_as(w, "zeros", m .. ".final_hidden_states", {}, flat)
      add("one_hot", m .. ".expert_mask", { top }, { n, k, E })
      moe_lib.run_experts(nodes, g, experts, m, n * k, E, h, dispatch, expert_mlp, combine, k)
      -- .type(hidden_states.dtype): to the graph's dtype, or under autocast to the fp32 stream's (V3's bf16 sum
      -- without norm_topk_prob)
      if w ~= expert_in then add_as(expert_in, "cast", m .. ".to_dtype", { flat }, flat, 0, { from = w }) end
    end
    local branch = expert_in -- the block's output dtype (fp32 under autocast but for the grouped path)
    if r.ns then
      if sp then -- Megatron's SharedExpertMLP: a sequence-parallel MLP (gather the sequence, reduce-scatter its output)
        local whole = { b * s, h }
        swiglu(m .. ".shared_experts", tp_in(m .. ".shared_experts.tp_in", x,
          "f: input gradient of the column-parallel shared experts", whole, m .. ".shared_experts.gate_up_proj"),
          { b * s, Is }, Is)
        tp_out(m .. ".shared_experts.tp_out", x, "g: sum of the row-parallel shared experts' down_proj partial outputs")
      else
        swiglu(m .. ".shared_experts", flat, { n, Is }, Is)
      end
      add_as(branch, "add", m .. ".shared_experts_add", { flat, flat }, flat, 0,
        { input_dtypes = branch ~= dtype and N.mixed(g, "fp32", "dtype") or nil }) -- + the 16-bit shared experts
    end
    if not sp then
      tp_out(m .. ".tp_out", x, "g: sum of the row-parallel down_proj partial outputs (experts and shared experts)",
        branch ~= dtype and branch or nil)
    end
    return branch ~= dtype and branch or nil
  end

  local function layer(p, kv, sparse)
    rms_norm(p .. ".input_layernorm", xs, h, stream)
    attention(p .. ".self_attn", kv)
    add_as(stream, "add", p .. ".attn_residual", { xs, xs }, xs, 0, N.residual_attrs(g))
    rms_norm(p .. ".post_attention_layernorm", xs, h, stream)
    local m = p .. ".mlp"
    local branch
    if sparse then
      branch = moe(m)
    else
      local I = shard and shard.split(r.I, "intermediate_size") or r.I
      swiglu(m, tp_in(m .. ".tp_in", x, "f: input gradient of the column-parallel gate_proj / up_proj"), { b, s, I }, I)
      tp_out(m .. ".tp_out", x, "g: sum of the row-parallel down_proj partial outputs")
    end
    add_as(stream, "add", p .. ".mlp_residual", { xs, xs }, xs, 0, N.residual_attrs(g, branch))
  end

  N.embed_tokens(g, x, V)
  local dense, sparse = 0, 0
  for i = 0, r.L - 1 do
    if r.sparse(i) then sparse = sparse + 1 else dense = dense + 1 end
  end
  local kv = serve and serve.kv
  for _, grp in ipairs { { "dense_layers", dense, false }, { "layers", sparse, true } } do
    if grp[2] > 0 then
      g.layer, g.count = grp[1], grp[2]
      layer(grp[1], kv, grp[3])
    end
  end
  N.causal_lm_head(g, serve, x, xs, V, r.tied, opts)
  return nodes
end

--- The routed experts per MoE layer (n_routed_experts; 1 for a DeepSeek-V2 without them, every layer dense):
--- `neusight search` tries every ep that divides it.
function M.num_experts(cfg) return M.config(cfg).E or 1 end

--- The routed experts a token is sent to per MoE layer (num_experts_per_tok; the shared experts are not routed).
function M.top_k(cfg) return M.config(cfg).k end

--- Parameters a token uses: every parameter but the routed experts it is not sent to (num_experts_per_tok of
--- n_routed_experts per MoE layer; attention, dense MLPs, shared experts, routers, embeddings and lm_head in full).
function M.active_parameters(cfg)
  local r = M.config(cfg)
  -- (without routed experts, every parameter: the graph has no expert nodes, and 1 of 1 leaves the total)
  return require("neusight.models.moe").active_of(M.build(cfg, { batch = 1, seq = 1 }), r.k or 1, r.E or 1)
end

return M
