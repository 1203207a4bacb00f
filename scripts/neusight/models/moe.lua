-- scripts/neusight/models/moe.lua — Mixture-of-Experts Llama-family decoders (HF MixtralForCausalLM, Qwen2MoeForCausalLM,
-- Qwen3MoeForCausalLM) as an op graph: neusight/models/llama.lua's decoder with a sparse MoE block for the MLP.
--
-- Everything but the MLP is llama.lua's (RMSNorm, q/k/v/o projections, RoPE, GQA, sdpa or eager attention, Qwen2's
-- q/k/v biases, Qwen3's q_norm/k_norm, sliding windows, embed_tokens, lm_head, the causal-LM loss, serving phases and
-- the Megatron-style tensor / sequence parallel sharding): this file resolves the config (llama.resolve with
-- M.FAMILY), says which layers are sparse and emits their MoE block through llama.graph's hook.
--   * model_type "mixtral": every layer's MLP is block_sparse_moe — router `gate` Linear(h, num_local_experts),
--     top-k routing (num_experts_per_tok, weights renormalised over the k), experts = SwiGLU MLPs w1 (gate), w3 (up),
--     w2 (down) of intermediate_size; router_jitter_noise > 0 multiplies the input by uniform noise in training.
--     sliding_window as Mistral's (MixtralConfig's default is None).
--   * "qwen2_moe": layer i is sparse unless i is in mlp_only_layers, when (i + 1) % decoder_sparse_step == 0; dense
--     layers keep Qwen2MoeMLP(intermediate_size). Experts are Qwen2MoeMLP(moe_intermediate_size) (gate_proj, up_proj,
--     down_proj); norm_topk_prob renormalises the top-k weights; a shared expert (Qwen2MoeMLP of
--     shared_expert_intermediate_size, on every token) is gated by sigmoid(shared_expert_gate(x)), a Linear(h, 1),
--     and added to the routed experts' sum. q/k/v biases and windows as Qwen2.
--   * "qwen3_moe": as qwen2_moe without the shared expert, with Qwen3's attention (q_norm / k_norm, head_dim,
--     attention_bias).
-- The MoE block as HF's eager code runs it (MixtralSparseMoeBlock / Qwen2MoeSparseMoeBlock / Qwen3MoeSparseMoeBlock
-- of transformers 4.4x–4.5x), on the n = batch · seq tokens (batch · seq / tp under sequence parallelism: the rank's
-- own), E experts, top k:
--   gate Linear(h, E) → softmax in fp32 (F.softmax(dtype=float)) → topk(k) → [renormalise: sum, div] → .to(dtype)
--   → zeros(n, h) output buffer → one_hot(selected, E) mask (int64, permuted: a view) → experts hit (sum of the mask)
--   → per expert: torch.where(mask[e]) (nonzero: the expert's tokens), hidden_states[top_x] (a gather, op index),
--     the expert MLP, × routing_weights[top_x, idx] (a gather and a mul), final.index_add_(0, top_x, ·)
--   → [Qwen2-MoE: shared expert MLP, shared_expert_gate, sigmoid, mul, add].
-- Tokens per expert: routing is data dependent; the builder assumes a uniform, dropless router (HF's eager loop drops
-- nothing). The n tokens reach b = M.experts_reached(E, k, E, n) experts, the expected distinct count E·(1 − (1 −
-- k/E)^n) (all E once n·k ≫ E; at decode 8 tokens of top 6 of 64 reach 35, not 48), and the n·k rows are
-- spread over those b as evenly as integers allow: r = n·k mod b experts get ⌊n·k/b⌋ + 1 rows ("experts" nodes), the
-- others ⌊n·k/b⌋ ("experts_short"); the experts not reached ("experts_short" or "experts_idle") launch nothing (HF
-- loops over the experts hit) and keep only their parameters (a weight node). One expert's nodes are emitted once with count = layers × experts of that kind and
-- attrs.per_layer = experts (neusight.parallel counts the layer once).
-- Backward of the gathers (aten::index → new_zeros + index_put_(accumulate)) writes a full (n, h) gradient per
-- expert, which autograd adds into the input's gradient: ops/index.lua charges all three, so HF eager's MoE backward
-- costs O(E · n · h) memory traffic — the reason it is slow for many experts.
-- Router auxiliary loss (training): HF's load_balancing_loss_func over the router logits of every sparse layer,
-- torch.cat'ed (L_sparse · n, E): softmax, topk, one_hot, mean of the mask (tokens per expert; no gradient), mean of
-- the probabilities, product and sum; appended after the causal-LM loss. HF computes it only with
-- output_router_logits = True, which the published config.json files leave false (an inference setting) and training
-- recipes turn on: training here always includes it (output_router_logits and router_aux_loss_coef are ignored).
-- Megatron's kernels (opts.megatron; neusight.nodes): llama.lua's (fused RMSNorm and RoPE, linear_qkv), and every
-- SwiGLU MLP of the block — each expert of the loop (Megatron-Core's SequentialMLP: one MLP per local expert), Qwen2-MoE's
-- shared expert, the dense layers' MLP — runs linear_fc1, one GEMM for gate and up (w1 and w3: "gate_up_proj", 2 · I
-- outputs), and the fused SwiGLU; the grouped form's gate_up_proj already is one (grouped) GEMM. The router, its
-- softmax / topk and the loop's gathers stay HF's.
-- Tensor parallelism (opts.tp, Megatron-style as switch.lua's experts): every expert's w1/w3 column-parallel and w2
-- row-parallel (intermediate size split), the shared expert likewise, the router and shared_expert_gate replicated;
-- without sequence parallelism (vLLM-style tensor parallelism, as serving engines run it: every rank holds every
-- token and routes all n) one f before the block (the whole expert path's input gradient is a partial sum per rank)
-- and one g after the combine (the per-token routing and gate weights commute with the sum). With sequence
-- parallelism (Megatron-Core's MoELayer, which requires it for tp > 1 in training: "performance may degrade if MoE
-- and tensor parallelism are enabled without also enabling sequence parallelism"), its all-to-all token dispatcher
-- (v0.6–0.9, before expert-tensor-parallel decoupling; M.tp_gather_rows): no gather of the sequence; the router,
-- the routing and the permute / dispatch run on the rank's own n/tp tokens, the ep all-to-alls carry its (n/tp)·k
-- rows, and the tp group all-gathers the received rows before the local (I/tp) experts and reduce-scatters their
-- outputs after (backward: the reverse), so the experts run the tp group's rows — the GEMMs of the block without
-- sequence parallelism. Qwen2-MoE's shared expert is Megatron's SharedExpertMLP, a sequence-parallel MLP (all-gather
-- of the sequence, reduce-scatter of its output) with its gate on the rank's tokens.
-- Expert parallelism (opts.ep = k > 1, DeepSpeed-MoE / Megatron style as switch.lua): each rank holds E/k experts.
-- Routing, the per-expert gathers of all E experts (filling the send buffer) and the combine (routing weight, mul,
-- index_add for all E) stay on every rank; an all-to-all (group "ep") of the (n·k, h) routed rows (n: the rank's
-- tokens, n/tp under sequence parallelism) before the local experts and one after, both again in backward; each
-- local expert gets n·k/(E/k) rows (its share from all k ranks; × tp after the sequence-parallel tp gather).
-- Expert weights carry attrs.expert: their gradients are all-reduced among their dp / k replicas only.
-- Grouped experts (opts.experts = "grouped"; workload field `experts`, CLI --experts, `neusight serve`'s default): the
-- routed experts as serving engines and Megatron run them, following Megatron-Core's MoELayer with the all-to-all
-- token dispatcher and GroupedMLP (moe_utils.permute / unpermute, grouped_gemm's gmm or TE GroupedLinear with the gated
-- linear unit); M.grouped_experts lists its kernels: router as above → permute (routing map, tokens per expert, sorted
-- indices, a gather of the n·k routed rows sorted by expert) → one grouped GEMM gate_up_proj (h → 2·I) → silu, mul (one
-- fused SwiGLU kernel under opts.megatron: neusight.nodes glu) →
-- one grouped GEMM down_proj (I → h) → × routing weight, scatter-add into (n, h). A grouped GEMM (ops/grouped_linear.lua)
-- is priced as BMM(b, ⌈n·k/b⌉, ·, ·) over the b experts that receive rows (the expected distinct experts a uniform
-- router reaches, at most min(local experts, n·k); ops/grouped_linear.lua), reading each active expert's whole weight; its
-- backward is the data- and weight-gradient grouped GEMMs. Tensor, sequence and expert parallelism as the loop's
-- (I split; f / g around the block, or under sequence parallelism the tp gather / scatter of the routed rows around
-- the grouped MLP; all-to-alls of the (n·k, h) rows, plus Megatron's sort_chunks_by_idxs copies). The kernel count does not depend on E; parameters (two (E, ·, ·) tensors, attrs.expert)
-- and active parameters equal the loop's. Differences from vLLM's fused_moe (the gather fused into the first GEMM,
-- silu_and_mul in one kernel, the routing weights applied in the second GEMM, moe_sum over (n, k, h)) are a few
-- memory-bound kernels; the GEMMs are the same. transformers ≥ 4.57's grouped_mm experts are close to this form.
-- Load imbalance (opts.router_skew; workload field `router_skew`, CLI --router-skew; M.busiest_rank_rows): under
-- expert parallelism the ep ranks wait for the busiest one, whose local experts receive more than the mean n·k rows.
-- "uniform" (the default) prices the expected maximum over the ep ranks of the rows a uniform random top-k router
-- sends them (M.expected_max_load, exact for independent binomials); "balanced" spreads the rows evenly (the builder
-- before router_skew: every rank gets n·k); a number f ≥ 1 gives the busiest rank f · n·k rows (a measured
-- max/mean load ratio). Why uniform is the default for trained routers: the auxiliary load-balancing loss (and
-- DeepSeek-V3's bias correction) balances the *expected* load per expert over many batches, i.e. makes the router
-- look uniform on average; it cannot remove the sampling fluctuation of a finite batch's routing, which the
-- multinomial of a uniform router is, and real routing is correlated within a sequence (tokens of one text prefer
-- the same experts), which only adds to it. Uniform is therefore the least imbalance a trained dropless router shows
-- per step, balanced an idealisation no dropless router reaches (it needs capacity-limited, token-dropping routing).
-- Priced with it: the busiest rank's local experts (loop: its expert kernels on its rows; grouped: its grouped GEMMs)
-- and both all-to-alls (the step's all-to-all ends when the rank with the most rows has received / returned them).
-- Counted without it: the model FLOPs (flops_per_token, MFU, achieved TFLOP/s) are the mean rank's work, n·k rows
-- per rank, whatever the skew: the busiest rank's expert nodes carry attrs.model_flops_share = mean / busiest rows
-- (M.mean_rank_share; the engine's phase_model_flops scales their forward and backward FLOPs by it).
-- Not modelled: the host synchronisations of nonzero (expert_hit, torch.where), Python loop overhead beyond one
-- launch per kernel, load imbalance between experts on one GPU (the HF loop runs the experts one after another, so
-- their total rows, not the busiest, set its time to first order; a grouped GEMM's tile waves depend on each
-- expert's row count modulo the tile height — e.g. 256 ± 16 rows per expert in Qwen3-30B-A3B prefill of 4096 tokens
-- straddle a 128-row tile boundary — which BMM(b, ⌈R/b⌉) prices as if balanced), and pipeline-stage placement of the
-- aux loss's logits (it sits on the last stage).
local ipairs, pairs, type, tostring, error = ipairs, pairs, type, tostring, error

local checks = require "neusight.models.check"
local llama = require "neusight.models.llama"
local K = require "neusight.kernels"
local N = require "neusight.nodes"

local M = {}

M.tensor_parallel = true -- build() shards itself when opts.tp > 1 (neusight/workload.lua checks this)
M.sequence_parallel = true
-- under sequence parallelism with tp > 1 Megatron-Core's all-to-all token dispatcher; a Megatron training forecast
-- with tp > 1 without it warns (neusight.workload build: Megatron-Core refuses it)
M.token_dispatcher = true
M.expert_parallel = true -- and spreads the experts when opts.ep > 1
M.attention = { eager = true, sdpa = true }
-- HF's attn_implementation default for this family is sdpa at every dtype, fp32 included (the fp32 NeuSight traces
-- that keep other builders eager in fp32 are GPT-2, BERT and OPT): neusight/workload.lua defaults sdpa for it
M.sdpa_any_dtype = true
M.experts = { loop = true, grouped = true } -- opts.experts: HF's eager loop (default) or grouped GEMMs
M.router_skew = true -- opts.router_skew prices the busiest expert-parallel rank (busiest_rank_rows)
M.serving = { prefill = true, decode = true }
M.rotary_positions = true -- beyond max_position_embeddings: a warning (llama.lua)

--- HuggingFace's config-class defaults (transformers MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig) for the fields
--- that shape the kernels; false is None. num_key_value_heads / head_dim default as in llama.lua, and
--- max_position_embeddings is hf.lua's value for an omitted key as there (MixtralConfig: 4096 * 32).
M.DEFAULTS = {
  mixtral = { vocab_size = 32000, hidden_size = 4096, intermediate_size = 14336, num_hidden_layers = 32,
              num_attention_heads = 32, num_key_value_heads = 8, hidden_act = "silu", tie_word_embeddings = false,
              sliding_window = false, attention_dropout = 0.0, num_local_experts = 8, num_experts_per_tok = 2,
              router_jitter_noise = 0.0, max_position_embeddings = 131072 },
  qwen2_moe = { vocab_size = 151936, hidden_size = 2048, intermediate_size = 5632, num_hidden_layers = 24,
                num_attention_heads = 16, num_key_value_heads = 16, hidden_act = "silu", tie_word_embeddings = false,
                use_sliding_window = false, sliding_window = 4096, max_window_layers = 28, attention_dropout = 0.0,
                decoder_sparse_step = 1, moe_intermediate_size = 1408, shared_expert_intermediate_size = 5632,
                num_experts_per_tok = 4, num_experts = 60, norm_topk_prob = false, mlp_only_layers = false,
                max_position_embeddings = 32768 },
  qwen3_moe = { vocab_size = 151936, hidden_size = 2048, intermediate_size = 6144, num_hidden_layers = 24,
                num_attention_heads = 32, num_key_value_heads = 4, hidden_act = "silu", tie_word_embeddings = false,
                attention_bias = false, use_sliding_window = false, sliding_window = 4096, max_window_layers = 28,
                attention_dropout = 0.0, decoder_sparse_step = 1, moe_intermediate_size = 768, num_experts_per_tok = 8,
                num_experts = 128, norm_topk_prob = false, mlp_only_layers = false, max_position_embeddings = 32768 },
}

local QWEN_MOE = { "num_experts", "num_experts_per_tok", "moe_intermediate_size", "decoder_sparse_step",
  "mlp_only_layers", "norm_topk_prob", "use_sliding_window", "sliding_window", "max_window_layers", "layer_types" }
local function with(list, extra)
  local out = {}
  for _, k in ipairs(list) do out[#out + 1] = k end
  for _, k in ipairs(extra) do out[#out + 1] = k end
  return out
end

--- The family as llama.resolve reads it: model types, defaults, own fields, keys that change no kernel.
M.FAMILY = {
  name = "moe", default_type = "mixtral", defaults = M.DEFAULTS,
  own = {
    mixtral = { "head_dim", "sliding_window", "num_local_experts", "num_experts_per_tok", "router_jitter_noise" },
    qwen2_moe = with(QWEN_MOE, { "shared_expert_intermediate_size" }),
    qwen3_moe = with(QWEN_MOE, { "head_dim", "attention_bias" }),
  },
  neutral = { "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters",
    "output_router_logits", "router_aux_loss_coef" },
  supported = "\"mixtral\", \"qwen2_moe\" or \"qwen3_moe\"",
  window = { mixtral = "mistral", qwen2_moe = "qwen", qwen3_moe = "qwen" },
  qkv_bias = { qwen2_moe = true }, qk_norm = { qwen3_moe = true },
}

--- The builder fields of a model_type (what scripts/neusight/models/hf.lua takes from a config.json).
function M.fields(model_type) return llama.family_fields(M.FAMILY, model_type) end

--- Resolves a config: llama.resolve's numbers plus r.moe = { E, k, I, I_name, shared_I?, norm_topk, jitter, names,
--- sparse_at (0-based layer → bool) }.
function M.config(cfg)
  local r = llama.resolve(cfg, M.FAMILY)
  local c, who, mt = r.c, r.who, r.model_type
  local mixtral = mt == "mixtral"
  local E_name = mixtral and "num_local_experts" or "num_experts"
  checks.counts(who, c, { E_name, "num_experts_per_tok" }, -- first: it stores whole-number floats as integers
    { "moe_intermediate_size", "shared_expert_intermediate_size", "decoder_sparse_step" }, cfg)
  local moe = {
    E = c[E_name], E_name = E_name,
    k = c.num_experts_per_tok, I = mixtral and c.intermediate_size or c.moe_intermediate_size,
    I_name = mixtral and "intermediate_size" or "moe_intermediate_size",
    shared_I = mt == "qwen2_moe" and c.shared_expert_intermediate_size or nil,
    norm_topk = mixtral or c.norm_topk_prob == true, jitter = c.router_jitter_noise or 0,
    names = mixtral and { "w1", "w3", "w2" } or nil, module = mixtral and "block_sparse_moe" or "mlp",
  }
  if moe.k > moe.E then
    checks.fail(cfg, { "num_experts_per_tok", moe.E_name }, ("%s: num_experts_per_tok (%d) exceeds %s (%d)")
      :format(who, moe.k, moe.E_name, moe.E))
  end
  checks.booleans(who, c, { "norm_topk_prob" }, cfg)
  if type(moe.jitter) ~= "number" or moe.jitter < 0 then
    checks.fail(cfg, "router_jitter_noise", ("%s: field 'router_jitter_noise' must be a non-negative number (got %s)")
      :format(who, checks.shown(moe.jitter)))
  end
  -- Which layers are sparse: all for Mixtral; Qwen's decoder_sparse_step and mlp_only_layers.
  local dense = {}
  local only = c.mlp_only_layers
  if only ~= nil and only ~= false then
    if type(only) ~= "table" then
      checks.fail(cfg, "mlp_only_layers", ("%s: field 'mlp_only_layers' must be a list of layer indices (got %s)")
        :format(who, checks.shown(only)))
    end
    for i, v in ipairs(only) do
      if type(v) ~= "number" or v < 0 or v >= r.L or v ~= math.floor(v) then
        checks.fail(cfg, "mlp_only_layers", ("%s: mlp_only_layers[%d] must be a layer index in [0, %d) (got %s)")
          :format(who, i, r.L, checks.shown(v)))
      end
      dense[v] = true
    end
  end
  local step = c.decoder_sparse_step or 1
  function moe.sparse(i) return not dense[i] and (i + 1) % step == 0 end
  r.moe = moe
  return r
end

--- The experts among `local_experts` (of E) that `tokens` tokens reach, each picking k distinct experts of E with a
--- uniform router: the expected distinct count local_experts · (1 − (1 − k/E)^tokens), rounded, at least 1 (exact
--- for one token: k of E). 8 decode tokens of DeepSeek-V2-Lite (top 6 of 64) reach about 35 experts, not 48; once
--- tokens · k ≫ E (most prefill and training batches) they reach them all. A trained router's skew reaches fewer still (not modelled).
function M.experts_reached(local_experts, k, E, tokens)
  return math.max(1, math.floor(local_experts * (1 - (1 - k / E) ^ tokens) + 0.5))
end

--- The expected maximum of `groups` independent Binomial(trials, p) counts: E[max] = Σ_{x ≥ 0} (1 − F(x)^groups),
--- summed exactly over the binomial's pmf (computed by the ratio recursion pmf(x+1)/pmf(x) = (trials−x)/(x+1) · p/q
--- outwards from the mode, normalised, truncated where the pmf falls below 1e-17 of the mode's). Why exact and not the
--- Gaussian mean + σ·sqrt(2·ln G): at decode the counts are small (16 rows over 2 ranks) where the normal
--- approximation is poor, and sqrt(2·ln G) overstates the expected maximum of G normals badly for the small G of
--- expert parallelism (G = 2: 1.18 σ against the true 0.56 σ; G = 8: 2.04 σ against 1.42 σ). M.busiest_rank_rows
--- corrects it for the counts' dependence (a fixed total, distinct picks). Cost: O(σ) steps, memoised. groups = 1 or a
--- degenerate p gives the mean.
local max_memo = {}
function M.expected_max_load(trials, p, groups)
  if groups <= 1 or trials <= 0 or p <= 0 or p >= 1 then return trials * math.min(math.max(p, 0), 1) end
  local key = trials .. ":" .. p .. ":" .. groups
  if max_memo[key] then return max_memo[key] end
  local q = 1 - p
  local mode = math.min(trials, math.floor((trials + 1) * p))
  local w, lo, hi = { [mode] = 1.0 }, mode, mode
  while lo > 0 do -- pmf(x−1) = pmf(x) · x / (trials − x + 1) · q / p
    local v = w[lo] * lo / (trials - lo + 1) * q / p
    if v < 1e-17 then break end
    lo = lo - 1
    w[lo] = v
  end
  while hi < trials do
    local v = w[hi] * (trials - hi) / (hi + 1) * p / q
    if v < 1e-17 then break end
    hi = hi + 1
    w[hi] = v
  end
  local total = 0.0
  for x = lo, hi do total = total + w[x] end
  local F, sum = 0.0, lo -- x < lo: F(x) ≈ 0, each term 1
  for x = lo, hi - 1 do
    F = F + w[x] / total
    sum = sum + (1 - F ^ groups)
  end
  max_memo[key] = sum
  return sum
end

--- The router_skew values (opts.router_skew; the workload field `router_skew`): "uniform" (default), "balanced" or a
--- number ≥ 1 (the busiest rank's rows over the mean). Returns the value, nil → "uniform"; an error otherwise.
M.ROUTER_SKEWS = { "uniform", "balanced" }
function M.router_skew(v, who)
  if v == nil then return "uniform" end
  if v == "uniform" or v == "balanced" then return v end
  if math.type(v) and v >= 1 and v < math.huge then return v end
  local c = type(v) == "string" and require("neusight").closest(v, M.ROUTER_SKEWS) or nil
  error(("%s: router_skew must be \"uniform\", \"balanced\" or a number >= 1 (got %s)%s"):format(who or "moe",
    type(v) == "string" and ("%q"):format(v) or tostring(v), c and (" (did you mean '%s'?)"):format(c) or ""), 0)
end

--- Rows the busiest of `ep` expert-parallel ranks receives when each of the ep ranks routes `n` tokens to k of E
--- experts (E / ep on each rank), rounded to a whole row: the mean n·k when ep = 1 or skew = "balanced" (the builder before
--- router_skew); skew = f: f · n·k; "uniform": mean + (M.expected_max_load(N·k, 1/ep, ep) − mean) · c, N = n·ep
--- tokens in all, c = sqrt(ep/(ep − 1) · (E − k)/(E − 1)). expected_max_load treats the N·k routed rows as landing on a
--- rank independently with probability 1/ep; c corrects the two ways they do not:
---   * a token's k picks are distinct experts, so a rank's rows (a sum of N hypergeometric counts) have variance
---     N·k·(1/ep)(1 − 1/ep)·(E − k)/(E − 1), not N·k·(1/ep)(1 − 1/ep): factor (E − k)/(E − 1) (6/7 for Mixtral's top 2
---     of 8, 120/127 for Qwen3's top 8 of 128);
---   * the ep ranks' rows sum to N·k, so they are correlated −1/(ep − 1); exchangeable loads with that correlation are
---     iid loads less their mean, whose maximum lies sqrt(ep/(ep − 1)) further out (exact for Gaussians: at ep = 2
---     the busiest rank is mean + E|X − mean| = mean + 0.80 σ, not the independent 0.56 σ).
--- The excess over the mean keeps the binomial's shape (skew at small counts) scaled by c. Checked against a
--- Monte-Carlo of top-k routing (tests/scripts/test_moe_imbalance.lua): within 0.1 σ + 0.05 rows from 16 to 2048
--- tokens. At most the rows a rank can get: N · min(k, E/ep) (a token sends one row per distinct local expert).
function M.busiest_rank_rows(skew, n, k, E, ep)
  local mean = n * k
  skew = M.router_skew(skew)
  if ep <= 1 or skew == "balanced" then return mean end
  local cap = n * ep * math.min(k, E // ep)
  local rows
  if skew == "uniform" then
    local c = math.sqrt(ep / (ep - 1) * (E - k) / (E - 1))
    rows = mean + (M.expected_max_load(n * ep * k, 1 / ep, ep) - mean) * c
  else
    rows = skew * mean
    if rows > cap + 0.5 then -- more than every routed row of the ep ranks that can land on one rank's E/ep experts
      -- the setting's (this ep), not the model's (neusight.infeasible: search skips a layout with it as the reason)
      require("neusight").infeasible(("router_skew %g: the busiest of %d expert-parallel ranks can receive at most %g x "
        .. "the mean (each token's %d picks among that rank's %d experts); give a factor from 1 to %g"):format(skew, ep,
        cap / mean, k, E // ep, cap / mean))
    end
  end
  return math.max(mean, math.min(cap, math.floor(rows + 0.5))) -- the nearest whole row (a factor: ⌊f·n·k + ½⌋)
end

-- Rows per expert under dropless routing spread evenly: `rows` routed rows over the `reached` experts of `experts`
-- (default: all of them; at most rows) → { rows = ⌊rows/reached⌋ + 1, per = rows mod reached } and
-- { rows = ⌊rows/reached⌋, per = the rest of the reached }, and the experts not reached with 0 rows (sets with no
-- experts left out; a set of 0 rows is kept: its experts hold parameters and launch nothing).
local function spread(rows, experts, reached)
  reached = math.min(reached or experts, experts, math.max(rows, 1))
  local q, rem = rows // reached, rows % reached
  local sets = {}
  if rem > 0 then sets[#sets + 1] = { rows = q + 1, per = rem, name = "experts" } end
  if reached - rem > 0 then sets[#sets + 1] = { rows = q, per = reached - rem, name = rem > 0 and "experts_short" or "experts" } end
  if experts > reached then
    local named = sets[#sets].name == "experts_short"
    sets[#sets + 1] = { rows = 0, per = experts - reached, name = named and "experts_idle" or "experts_short" }
  end
  return sets
end
M.spread = spread

--- Nodes appended since index `from` run `per` times per layer (one expert's kernels for `per` experts).
function M.replicate(nodes, from, per)
  for i = from, #nodes do
    nodes[i].count = nodes[i].count * per
    nodes[i].attrs.per_layer = per
  end
end

--- Marks the nodes appended since index `from` (the busiest expert-parallel rank's local experts, priced on `busiest`
--- rows) with attrs.model_flops_share = mean / busiest (engine/core/graph.h node_model_flops_share): the latency keeps
--- the busiest rank's rows (every rank waits for it), the model FLOPs (neusight.figures: flops_per_token, MFU, achieved
--- TFLOP/s) count the mean rank's, the work a skewed router does not add to. Nothing when busiest = mean (balanced,
--- one rank): the graph of before.
function M.mean_rank_share(nodes, from, mean, busiest)
  if busiest <= mean then return end
  for i = from, #nodes do nodes[i].attrs.model_flops_share = mean / busiest end
end

--- Megatron-Core's all-to-all token dispatcher under tensor (sequence) parallelism (experts.sequence_tp = tp > 1; MoELayer
--- with the MoEAlltoAllTokenDispatcher of v0.6–0.9, before expert-tensor-parallel decoupling): each tp rank routes its
--- own n/tp tokens; after the expert-parallel all-to-all the tp group gathers the rows its local experts received
--- (gather_from_sequence_parallel_region over tp: every rank then holds the tp group's rows, the expert weights are
--- tp-sharded, I/tp) and reduce-scatters the expert outputs before the all-to-all back. `rows` = the gathered
--- (rows, h) of the local experts; forward all-gather, backward reduce-scatter (M.tp_gather_rows) and the reverse
--- (M.tp_scatter_rows), group "tp". v0.8–0.9 all-to-all the tokens to hidden shards over tp first (all_to_all_sp2hp,
--- (n/tp, h) per rank) and all-gather the last dimension instead: the same row collectives' bytes, plus that one.
function M.tp_gather_rows(g, name, rows)
  g.comm("all_gather", name .. ".all_gather", rows, "forward",
    "Megatron token dispatcher: the tp group's routed rows for the local experts (tp-sharded)")
  g.comm("reduce_scatter", name .. ".reduce_scatter", rows, "backward",
    "Megatron token dispatcher: the rows' input gradient back to their tp rank")
end
function M.tp_scatter_rows(g, name, rows)
  g.comm("reduce_scatter", name .. ".reduce_scatter", rows, "forward",
    "Megatron token dispatcher: sum of the row-parallel expert outputs, each tp rank its own rows")
  g.comm("all_gather", name .. ".all_gather", rows, "backward", "Megatron token dispatcher: the output gradient's rows")
end

-- The all-to-alls' note where the busiest rank sends more rows (`sent`) than this rank's own (`own`), else "".
local function busiest_why(experts, sent, own)
  if sent <= own then return "" end
  return (" (busiest rank: %d rows, router_skew %s)"):format(sent, tostring(experts.router_skew or "uniform"))
end

--- HF's eager expert loop over `routed` = n·k rows (top k) spread evenly over the experts the n tokens reach
--- (M.experts_reached: all E once n·k ≫ E, fewer at small decode batches and short prompts; neusight/models/deepseek.lua routes
--- the same way): per expert set dispatch(name, rows, per), expert_mlp(…), combine(…). With expert parallelism
--- (experts.ep > 1) the dispatches run first, an all-to-all sends the rows of width `h` to their experts, this rank's
--- local experts run, and a second all-to-all brings their outputs back before the combines. Under Megatron's
--- dispatcher with sequence parallelism (experts.sequence_tp = tp > 1) the n tokens are this rank's n/tp: the
--- all-to-alls carry its rows, the tp group gathers the received rows around the local experts (M.tp_gather_rows),
--- which run on the tp group's rows (those of n·tp tokens per ep rank).
function M.run_experts(nodes, g, experts, m, routed, E, h, dispatch, expert_mlp, combine, k)
  local n = routed // k -- this rank's tokens, k experts each: the experts they reach (M.experts_reached)
  local tp = experts.sequence_tp or 1
  local sets = spread(routed, E, M.experts_reached(E, k, E, n))
  if experts.ep == 1 and tp == 1 then
    for _, set in ipairs(sets) do
      local e = m .. "." .. set.name
      dispatch(e, set.rows, set.per)
      expert_mlp(e, set.rows, set.per)
      combine(e, set.rows, set.per)
    end
    return
  end
  -- the busiest rank's rows (M.busiest_rank_rows: its local experts' work and the all-to-alls' volume set the step):
  -- `sent` of this rank's n tokens in the all-to-alls, `busy` of the tp group's n·tp for the local experts
  local busy = M.busiest_rank_rows(experts.router_skew, n * tp, k, E, experts.ep)
  local sent = M.busiest_rank_rows(experts.router_skew, n, k, E, experts.ep)
  local why = busiest_why(experts, sent, routed)
  for _, set in ipairs(sets) do dispatch(m .. "." .. set.name, set.rows, set.per) end
  if experts.ep > 1 then
    experts.all_to_all(nodes, g, m .. ".dispatch_all_to_all", { sent, h }, "expert parallel: routed tokens to their experts" .. why)
  end
  if tp > 1 then M.tp_gather_rows(g, m .. ".tp_gather", { busy, h }) end
  local from = #nodes + 1
  for _, set in ipairs(spread(busy, experts.local_experts,
      M.experts_reached(experts.local_experts, k, E, n * tp * experts.ep))) do
    expert_mlp(m .. ".local_" .. set.name, set.rows, set.per)
  end
  M.mean_rank_share(nodes, from, routed * tp, busy) -- the model FLOPs count the mean rank's rows
  if tp > 1 then M.tp_scatter_rows(g, m .. ".tp_scatter", { busy, h }) end
  if experts.ep > 1 then
    experts.all_to_all(nodes, g, m .. ".combine_all_to_all", { sent, h }, "expert parallel: expert outputs back" .. why)
  end
  for _, set in ipairs(sets) do combine(m .. "." .. set.name, set.rows, set.per) end
end

--- The experts implementations a builder can emit (workload field `experts`, opts.experts; neusight.workload checks
--- the value against the builder's M.experts).
M.IMPLEMENTATIONS = { "loop", "grouped" }

--- opts.experts checked: nil → "loop" (HF eager), "loop" or "grouped"; anything else an error naming the closest.
function M.implementation(opts, who)
  local impl = opts.experts
  if impl == nil then return "loop" end
  if impl == "loop" or impl == "grouped" then return impl end
  local c = type(impl) == "string" and require("neusight").closest(impl, M.IMPLEMENTATIONS) or nil
  error(("%s: opts.experts must be \"loop\" or \"grouped\" (got %s)%s"):format(who, type(impl) == "string" and
    ("%q"):format(impl) or tostring(impl), c and (" (did you mean '%s'?)"):format(c) or ""), 0)
end

--- The routed experts as grouped GEMMs (opts.experts = "grouped"), Megatron-Core's MoELayer with the all-to-all token
--- dispatcher and GroupedMLP (moe_utils.permute / unpermute, grouped_gemm.ops.gmm or TE GroupedLinear, gated linear
--- unit), on the n tokens routed to k of E experts with weights `weights` (the (n, k) routing weights), hidden size h,
--- expert intermediate size I (this tensor-parallel rank's share), under prefix m (names m.experts.*):
---   routing_map: the top-k indices scattered into an (n, E) mask; tokens_per_expert: its column sums (the group
---   sizes; no gradient); sorted_indices: masked_select of the token ids (a nonzero); permute: index_select of the
---   n·k routed rows sorted by expert (a gather, (n·k, h)); permuted_probs: the routing weights in the same order;
---   [expert parallel: all-to-all of the (n·k, h) rows, sort_chunks_by_idxs (a copy grouping the rows from all
---   ranks by local expert)]
---   gate_up_proj: one grouped GEMM (n·k, h) → (n·k, 2·I) over the experts that receive rows (ops/grouped_linear.lua:
---   BMM(b, ⌈n·k/b⌉, h, 2I), b = the local experts the n·ep tokens' routing reaches, uniformly: the expected distinct
---   count, at most min(local experts, n·k)); act_fn: silu of the gate half and mul
---   with the up half (n·k, I); down_proj: one grouped GEMM (n·k, I) → (n·k, h)
---   [expert parallel: the unsort copy and the all-to-all back]
---   unpermute: × permuted_probs (mul), zeros (n, h) and scatter_add of the n·k rows into it (index_add).
--- The kernel count does not depend on E. The weights are two (E_local, ·, ·) parameters (gate_up_proj E·h·2I,
--- down_proj E·I·h: the loop form's E · 3·h·I), attrs.expert. vLLM's fused_moe runs the same two GEMMs with the
--- gather fused into the first one's loads, silu_and_mul as one kernel, the routing weights applied in the second
--- GEMM and moe_sum over (n, k, h) in place of the scatter-add: a few memory-bound kernels fewer, same GEMMs.
--- Its other kernels (vllm/model_executor/layers/fused_moe/fused_moe.py) are not added, as they do not move the
--- numbers materially: topk_softmax (one kernel for this form's softmax and topk: fewer launches, not more) and
--- moe_align_block_size (the expert-sorted token ids padded per expert to BLOCK_SIZE_M: one small kernel of n·k ids,
--- microseconds). The padding's GEMM work is the BMM(b, ⌈R/b⌉) pricing's own tile padding where an expert gets
--- fewer rows than a tile (decode); where experts get hundreds of rows (prefill) the per-expert remainder modulo the
--- tile height is the single-GPU imbalance effect this file does not model (see the header's "Not modelled").
function M.grouped_experts(g, experts, m, n, k, E, h, I)
  local add = g.add
  local R = n * k
  local rows, e = { R, h }, m .. ".experts"
  local El = experts.local_experts
  add("one_hot", e .. ".routing_map", { { n, k } }, { n, E })
  add("sum", e .. ".tokens_per_expert", { { n, E } }, { E }, 0, { elem_bytes = K.index_bytes, no_grad = true })
  add("nonzero", e .. ".sorted_indices", { { E, n } }, { R })
  add("index", e .. ".permute", { { n, h }, { R } }, rows)
  add("index", e .. ".permuted_probs", { { n, k }, { R } }, { R, 1 })
  -- the rows this rank's local experts run: its own R, or under expert parallelism the busiest rank's
  -- (M.busiest_rank_rows: the ep ranks wait for it; its all-to-alls carry the most rows)
  -- (M.busiest_rank_rows: the ep ranks wait for it; its all-to-alls carry the most rows); under Megatron's dispatcher
  -- with sequence parallelism (experts.sequence_tp = tp) n is this rank's n/tp tokens: the all-to-alls carry its
  -- `sent` rows, the tp group gathers the received ones (M.tp_gather_rows) and the local experts run the rows of n·tp
  local tp = experts.sequence_tp or 1
  local Rl = M.busiest_rank_rows(experts.router_skew, n * tp, k, E, experts.ep)
  local sent = M.busiest_rank_rows(experts.router_skew, n, k, E, experts.ep)
  local lrows, lmid, srows = { Rl, h }, { Rl, I }, { sent, h }
  local why = busiest_why(experts, sent, R)
  if experts.ep > 1 then
    experts.all_to_all(g.nodes, g, m .. ".dispatch_all_to_all", srows, "expert parallel: routed tokens to their experts" .. why)
  end
  local from = #g.nodes + 1 -- the busiest rank's kernels (M.mean_rank_share)
  if experts.ep > 1 then add("contiguous", e .. ".sort_chunks", { srows }, srows) end
  if tp > 1 then M.tp_gather_rows(g, m .. ".tp_gather", lrows) end
  -- the local experts that n tokens on each of the ep ranks (n·tp: the tp group's) reach (ops/grouped_linear.lua reads
  -- those weights)
  local attrs = { expert = true, experts = El, experts_reached = M.experts_reached(El, k, E, n * tp * experts.ep) }
  add("grouped_linear", e .. ".gate_up_proj", { lrows }, { Rl, 2 * I }, El * h * 2 * I, attrs)
  require("neusight.nodes").glu(g, e, lmid, "silu") -- act_fn and mul, or Megatron's fused SwiGLU (g.megatron)
  add("grouped_linear", e .. ".down_proj", { lmid }, lrows, El * I * h, attrs)
  if tp > 1 then M.tp_scatter_rows(g, m .. ".tp_scatter", lrows) end
  if experts.ep > 1 then add("contiguous", e .. ".unsort_chunks", { srows }, srows) end
  M.mean_rank_share(g.nodes, from, R * tp, Rl) -- the model FLOPs count the mean rank's rows
  if experts.ep > 1 then
    experts.all_to_all(g.nodes, g, m .. ".combine_all_to_all", srows, "expert parallel: expert outputs back" .. why)
  end
  add("mul", e .. ".weighted", { rows, { R, 1 } }, rows)
  add("zeros", m .. ".final_hidden_states", {}, { n, h })
  add("index_add", e .. ".unpermute", { rows, { R }, { n, h } }, rows)
end

-- The MoE block of layer prefix p (llama.graph's hook; ctx from llama.graph).
local function block(ctx, p)
  local g, r, opts = ctx.g, ctx.r, ctx.opts
  local moe = r.moe
  local nodes, add, add_as = g.nodes, g.add, ctx.add_as
  local h, E, k = r.h, moe.E, moe.k
  -- Megatron's token dispatcher under sequence parallelism (M.tp_gather_rows): the router and the dispatch on this
  -- rank's n/tp tokens, no gather of the sequence; without it (vLLM-style tensor parallelism: every rank holds every
  -- token) all n tokens on every rank, f before the block and g after
  local sp = ctx.sp
  local n = ctx.b * ctx.sl -- tokens routed on this rank
  local m = p .. "." .. moe.module
  local shard = ctx.shard
  local I = shard and shard.split(moe.I, moe.I_name) or moe.I
  local experts = require("neusight.parallel").expert_shard(opts, r.who, E)
  experts.sequence_tp = sp and ctx.tp or 1
  experts.router_skew = M.router_skew(opts.router_skew, r.who) -- load imbalance under expert parallelism
  local flat, top = { n, h }, { n, k }

  -- One expert kind: its MLP on `rows` tokens, or its parameters alone when it gets none.
  local function expert_mlp(e, rows, per)
    local from = #nodes + 1
    if rows > 0 then
      ctx.swiglu(e, { rows, h }, { rows, I }, I, false, moe.names, { expert = true })
    else
      add("weight", e .. ".idle", {}, { 3, h, I }, 3 * h * I, { expert = true, note = "no tokens: parameters only" })
    end
    M.replicate(nodes, from, per)
  end
  -- Under torch.autocast (g.autocast) hidden_states is the fp32 residual stream's normed x: the gate casts it per call
  -- (neusight.nodes autocast_cast) and writes bf16 logits; softmax(dtype=float) and the top-k are fp32 and
  -- routing_weights.to(hidden_states.dtype) is a no-op (no cast); current_state indexes the fp32 rows, each expert's
  -- w1 / w3 cast them per call (neusight.nodes swiglu); the bf16 w2 output times the fp32 routing weight promotes to
  -- fp32 and index_add_ accumulates into final_hidden_states, zeros in hidden_states' fp32 (HF transformers 4.46
  -- MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock).
  -- The grouped path (M.grouped_experts) is not retyped: it keeps the compute dtype, as before.
  local grouped = M.implementation(opts, r.who) == "grouped"
  local stream = grouped and g.dtype or N.stream_dtype(g)
  local function dispatch(e, rows, per) -- the tokens of one expert: torch.where(mask[e]), hidden_states[top_x]
    if rows == 0 then return end
    local from = #nodes + 1
    add("nonzero", e .. ".where", { { k, n } }, { 2, rows })
    add_as(stream, "index", e .. ".current_state", { flat, { rows } }, { rows, h })
    M.replicate(nodes, from, per)
  end
  local function combine(e, rows, per) -- × routing_weights[top_x, idx], final.index_add_(0, top_x, ·)
    if rows == 0 then return end
    local from = #nodes + 1
    local y = { rows, h }
    add_as(stream, "index", e .. ".routing_weight", { top, { rows } }, { rows, 1 })
    add_as(stream, "mul", e .. ".weighted", { y, { rows, 1 } }, y, 0, { input_dtypes = N.mixed(g, "dtype", "fp32") })
    add_as(stream, "index_add", e .. ".index_add", { y, { rows }, flat }, y)
    M.replicate(nodes, from, per)
  end

  -- (without sequence parallelism: f on the whole expert path's input; neusight.nodes tp_in)
  if not sp then
    g.tp_in(m .. ".tp_in", ctx.x, "f: input gradient of the column-parallel experts (the whole expert path)")
  end
  if opts.training and moe.jitter > 0 then add_as(stream, "mul", m .. ".jitter", { flat, flat }, flat) end
  N.autocast_cast(g, m .. ".gate.input_cast", flat)
  add("linear", m .. ".gate", { flat }, { n, E }, h * E, { bias = false })
  local probs = { n, E }
  add_as("fp32", "softmax", m .. ".routing_softmax", { probs }, probs)        -- F.softmax(dtype=torch.float)
  add_as("fp32", "topk", m .. ".topk", { probs }, top)
  if moe.norm_topk then
    add_as("fp32", "sum", m .. ".topk_sum", { top }, { n, 1 })
    add_as("fp32", "div", m .. ".topk_norm", { top, { n, 1 } }, top)
  end
  if ctx.upcast and not g.autocast then
    add("cast", m .. ".routing_weights.to_dtype", { top }, top, 0, { from = "fp32" })
  end
  if grouped then
    M.grouped_experts(g, experts, m, n, k, E, h, I)
  else
    add_as(stream, "zeros", m .. ".final_hidden_states", {}, flat)
    local mask = { E, k, n }
    add("one_hot", m .. ".expert_mask", { top }, mask)
    add("sum", m .. ".expert_hit", { mask }, { E }, 0, { elem_bytes = K.index_bytes, no_grad = true })
    M.run_experts(nodes, g, experts, m, n * k, E, h, dispatch, expert_mlp, combine, k)
  end

  if moe.shared_I then -- Qwen2-MoE: sigmoid(shared_expert_gate(x)) · shared_expert(x), added to the experts' sum
    local Is = shard and shard.split(moe.shared_I, "shared_expert_intermediate_size") or moe.shared_I
    local col = { n, 1 }
    if sp then -- Megatron's SharedExpertMLP: a sequence-parallel MLP (gather the sequence, reduce-scatter its output)
      local whole = { ctx.b * ctx.s, h }
      local sx = g.tp_in(m .. ".shared_expert.tp_in", ctx.x, "f: input gradient of the column-parallel shared expert",
        whole, m .. ".shared_expert.gate_up_proj")
      ctx.swiglu(m .. ".shared_expert", sx, { ctx.b * ctx.s, Is }, Is, false)
      g.tp_out(m .. ".shared_expert.tp_out", ctx.x, "g: sum of the row-parallel shared expert down_proj partial outputs")
    else
      ctx.swiglu(m .. ".shared_expert", flat, { n, Is }, Is, false)
    end
    N.autocast_cast(g, m .. ".shared_expert_gate.input_cast", flat)
    add("linear", m .. ".shared_expert_gate", { flat }, col, h, { bias = false })
    add("sigmoid", m .. ".shared_expert_gate.sigmoid", { col }, col)
    add("mul", m .. ".shared_expert_gated", { col, flat }, flat)
    -- the experts' fp32 sum plus the bf16 gated shared expert: fp32 under autocast
    add_as(stream, "add", m .. ".shared_expert_add", { flat, flat }, flat, 0,
      { input_dtypes = N.mixed(g, "fp32", "dtype") })
  end
  if not sp then
    g.tp_out(m .. ".tp_out", ctx.x, "g: sum of the row-parallel expert w2 / down_proj partial outputs",
      not grouped and stream or nil) -- the experts' fp32 final_hidden_states under autocast
  end
  return grouped and nil or stream -- the branch's dtype: final_hidden_states' (the grouped path keeps the compute dtype)
end

-- HF's load_balancing_loss_func over the concatenated router logits of the sparse layers (training).
local function aux_loss(ctx, sparse_layers)
  local opts, r = ctx.opts, ctx.r
  if not opts.training or opts.loss == false or sparse_layers == 0 then return end
  local g, E, k = ctx.g, r.moe.E, r.moe.k
  local add, add_as = g.add, ctx.add_as
  -- the router logits of this rank's tokens (n/tp under Megatron's dispatcher with sequence parallelism)
  local T = sparse_layers * ctx.b * ctx.sl
  local logits, top = { T, E }, { T, k }
  add("contiguous", "router_aux_loss.cat", { logits }, logits)                       -- torch.cat(gate_logits)
  -- under torch.autocast the gate's logits are bf16 and softmax is on autocast's fp32 list: the routing weights and
  -- what follows them are fp32 (F.softmax's kernel reads the bf16 logits: priced at the node's 4 bytes, an over-count)
  local probs = g.autocast and "fp32" or g.dtype
  add_as(probs, "softmax", "router_aux_loss.softmax", { logits }, logits)
  add_as(probs, "topk", "router_aux_loss.topk", { logits }, top)
  add("one_hot", "router_aux_loss.expert_mask", { top }, { T, k, E })
  add("mean", "router_aux_loss.tokens_per_expert", { { T, k, E } }, { k, E }, 0,    -- expert_mask.float().mean(0)
    { elem_bytes = K.index_bytes, no_grad = true })
  add_as(probs, "mean", "router_aux_loss.router_prob_per_expert", { logits }, { E })
  add_as(probs, "mul", "router_aux_loss.product", { { k, E }, { 1, E } }, { k, E })
  add_as(probs, "sum", "router_aux_loss.sum", { { k, E } }, { 1 })
end

--- Builds the op graph of one forward pass (llama.graph with the MoE block in the sparse layers).
---@param cfg table HF config fields (M.DEFAULTS for what may be omitted), plus name and model_type
---@param opts { batch: integer, seq: integer, training?: boolean, dtype?: string, loss?: boolean, attention?: string, experts?: "loop"|"grouped", router_skew?: "uniform"|"balanced"|number, tp?: integer, ep?: integer, parallel?: table, sequence_parallel?: boolean }
---@return neusight.Node[]
function M.build(cfg, opts)
  local r = M.config(cfg)
  return llama.graph(r, opts, { sparse = r.moe.sparse, block = block, epilogue = aux_loss })
end

--- The routed experts per MoE layer (E): `neusight search` tries every expert-parallel degree ep that divides it.
function M.num_experts(cfg) return M.config(cfg).moe.E end

--- The routed experts a token is sent to per MoE layer (num_experts_per_tok): with num_experts, what a forecast's
--- active_params scales the expert weights by (neusight.workload).
function M.top_k(cfg) return M.config(cfg).moe.k end

--- Parameters a token uses: every parameter but the experts it is not routed to (k of E per sparse layer; the shared
--- expert and the router count in full), i.e. Σ params · count with expert weights scaled by k / E.
function M.active_parameters(cfg)
  local r = M.config(cfg)
  return M.active_of(M.build(cfg, { batch = 1, seq = 1 }), r.moe.k, r.moe.E)
end

--- Σ params · count of `nodes` with the routed experts' weights (attrs.expert) scaled by k / E (also deepseek.lua's).
function M.active_of(nodes, k, E)
  local shared, experts = 0, 0
  for _, n in ipairs(nodes) do
    if n.attrs.expert then experts = experts + n.params * n.count else shared = shared + n.params * n.count end
  end
  return shared + experts * k // E -- experts = sparse layers · E · one expert's parameters
end

return M
