-- scripts/neusight/models/opt.lua — OPT decoder (HF OPTForCausalLM, eager attention, ReLU FFN) as an op graph.
--
-- The node sequence mirrors the reference's traced one-layer graph (opgraph/opt_13-train-2048-*.csv, the
-- rows with kernels), so a forecast decomposes into the same kernels. The decoder layer is emitted once
-- with count = num_hidden_layers (layer "layers"), never copied per layer. OPT specifics: learned
-- positions computed from the attention mask (cumsum(mask)·mask − 1, plus an offset of 2, so the
-- table has max_position_embeddings + 2 rows), pre-LN layers (do_layer_norm_before; post-LN, as in
-- OPT-350m, is supported), q scaled by 1/√head_dim before QKᵀ, optional project_in/project_out when
-- word_embed_proj_dim differs from hidden_size, lm_head tied to embed_tokens and bias-free.
--
-- Departures from the trace:
--   * the trace's getitems on size() results (Python ints: MEM of two 1-element shapes) are left out:
--     host-side bookkeeping, not GPU kernels;
--   * lm_head is bias-free: we accumulate no bias gradient (the reference adds VECadd(1, V) anyway);
--   * in training, the HF loss (shift + cross-entropy) is appended unless opts.loss == false; the
--     reference neither traces nor measures a loss.
-- Mirrored as the reference charges them (to keep forecasts comparable):
--   * embed_positions is a lookup like embed_tokens, but the reference classifies it 'misc' (its call
--     is traced as a bare `embedding` node): a zero-kernel "view" node here that owns its parameters;
--   * the causal-mask construction (full, lt, masked_fill) and the padding-mask expand/rsub/masked_fill are
--     'misc' in the reference and left out (once per forward, on (b, 1, s, s) masks);
--   * the attention scores' clamp torch.max(scores, finfo.min) is 'misc' in the reference too, but it is a kernel
--     over (b, heads, s, s) in every layer (4-8 % of the measured per-op time): a "maximum" node (ops/maximum.lua),
--     which the importer adds to the reference's graphs as well (engine/ingest/opgraph.cpp);
--   * the attention output's transpose + reshape is a copy in PyTorch, but the reference's 'reshape'
--     is 'misc': a "reshape" node (no kernels);
--   * logits.contiguous() is a no-op on the already contiguous logits, but the reference charges it
--     as a copy (contiguous_3), so it is kept.
-- Tensor parallelism (opts.tp > 1, opts.parallel = neusight.parallel.plan): the graph is one rank's
-- shard, Megatron-LM style (Shoeybi et al. 2019), as in gpt.lua: q_proj/k_proj/v_proj and fc1 are
-- column-parallel (heads and ffn_dim split), out_proj and fc2 row-parallel (bias replicated),
-- embed_tokens and lm_head vocab-parallel; g (forward all-reduce) follows each row-parallel layer and
-- embed_tokens, f (backward all-reduce) precedes each column-parallel layer and lm_head, and the
-- vocab-parallel cross-entropy all-reduces its max, sum and target logit (3·b·(s−1) values) forward.
-- embed_positions, project_in/project_out, layer norms, dropouts and residual adds are replicated.
-- Serving phases (opts.phase, workload mode "prefill" / "decode"; pieces shared with gpt.lua and llama.lua in
-- neusight.nodes), for every configuration the builder takes (pre-LN and OPT-350m's post-LN, project_in/project_out,
-- ReLU or GELU, with or without biases: none changes what a phase caches or attends to):
--   * prefill: the inference graph over S prompt tokens, plus each layer's KV-cache write (layers.self_attn
--     .kv_cache_write, after the k/v projections), and lm_head on each prompt's last token (after project_out, which
--     OPTDecoder applies to every position);
--   * decode: every layer on one token per sequence (b rows), its K/V appended to the cache, and one decode_attention
--     node over C + 1 cached tokens (num_attention_heads kv heads: OPT is multi-head) in place of the attention chain,
--     eager or sdpa. HF's decode step builds no causal mask (one query token), and its learned positions come from the
--     cumsum over the (b, C + 1) attention mask, of which the last column is kept ([:, past:]), + 2.
--     The cache, C + 1 positions, must fit max_position_embeddings (positions 0 … P − 1, rows 2 … P + 1 of the table).
--   * the attention-score clamp torch.max(scores, finfo.min): HF's eager OPTAttention runs it over the materialised
--     (b, heads, s, s) scores whenever there is a mask, inference included, so an eager prefill keeps it. The fused
--     kernels have no such tensor and no clamp: sdpa's prefill (OPTSdpaAttention passes the mask to the kernel) and
--     decode's decode_attention (FlashDecoding / vLLM's paged attention, which OPT runs with the generic attention
--     backend). The clamp guards the eager chain's additive mask (finfo.min + a negative score rounds to −inf in
--     16-bit, and a row of −inf softmaxes to NaN); the fused kernels skip or −inf the masked keys inside an online
--     softmax accumulated in fp32 and never form that sum, so pricing a clamp there would charge a kernel none runs.
-- opts.megatron (serve's default kernels, predict --kernels megatron; neusight.nodes g.megatron): q, k and v come from one
-- GEMM, as vLLM's OPT runs them (vllm/model_executor/models/opt.py: one QKVParallelLinear with bias) and Megatron-Core's
-- linear_qkv (neusight.nodes qkv: a column-parallel GEMM of 3 · heads · head_dim outputs per rank, bias included; q, k and
-- v views of its output; the same parameters, FLOPs and saved input; forward one GEMM, backward one dgrad and one wgrad,
-- where HF's graph runs three of each), in training and in the serving phases alike. The rest is HF's modules as vLLM
-- keeps them too: out_proj, fc1 and fc2 GEMMs, nn.LayerNorm kernels, one ReLU (get_act_fn) kernel, separate residual
-- adds; the attention is the eager chain, sdpa or decode_attention as opts.attention and the phase say. OPT is
-- multi-head, so the fused node never carries model-FLOPs copies (every rank's key/value heads are its own).
-- `--kernels eager` is HF's graph: three q/k/v GEMMs.
local ipairs, type, tostring, error = ipairs, type, tostring, error

local checks = require "neusight.models.check"

local M = {}

M.tensor_parallel = true -- build() shards itself when opts.tp > 1 (neusight/workload.lua checks this)
M.attention = { eager = true, sdpa = true } -- opts.attention: "sdpa" is HF's OPTSdpaAttention (neusight/workload.lua)
M.serving = { prefill = true, decode = true } -- opts.phase (neusight/workload.lua; neusight.nodes.serving)

-- HF's position offset: OPTLearnedPositionalEmbedding reserves two rows (fairseq padding legacy).
local POSITION_OFFSET = 2


-- activation_function → activation op (ACT2FN["relu"] is nn.ReLU, ["gelu"] GELUActivation: one traced node).
local ACTIVATIONS = { relu = "relu", gelu = "gelu" }

--- The config fields build() reads, plus name and arch: any other key is an error (a typo must not become a default).
M.FIELDS = { "name", "arch", "num_hidden_layers", "hidden_size", "num_attention_heads", "ffn_dim", "vocab_size",
  "max_position_embeddings", "word_embed_proj_dim", "activation_function", "do_layer_norm_before", "enable_bias",
  "_remove_final_layer_norm", "tie_word_embeddings" }

-- Validates cfg/opts; errors name the model and the field (level 0: the position is the config, not Lua code).
local function check(cfg, opts)
  local who = ("opt model '%s'"):format(tostring(cfg.name or "?"))
  checks.fields(who, cfg, M.FIELDS) -- first: build() is called directly too (a model function may require it)
  checks.counts(who, cfg, { "num_hidden_layers", "hidden_size", "num_attention_heads", "ffn_dim", "vocab_size",
                         "max_position_embeddings" }, { "word_embed_proj_dim" })
  checks.booleans(who, cfg, { "do_layer_norm_before", "enable_bias", "_remove_final_layer_norm", "tie_word_embeddings" })
  -- no node's shape
  checks.table_size(who, cfg, "max_position_embeddings", cfg.max_position_embeddings + 2, cfg.hidden_size)
  checks.divisible(who, cfg, "hidden_size", cfg.hidden_size, "num_attention_heads", cfg.num_attention_heads)
  local act = cfg.activation_function or "relu"
  if not ACTIVATIONS[act] then
    checks.fail(cfg, "activation_function", ("%s: activation_function %s is not supported (\"relu\" or \"gelu\")")
      :format(who, tostring(act)))
  end
  local serve = require("neusight.nodes").serving(opts, who, cfg.max_position_embeddings, "max_position_embeddings")
  local decode = serve ~= nil and serve.phase == "decode"
  checks.batch_seq(who, decode and { batch = opts.batch, seq = 1 } or opts, cfg.max_position_embeddings,
    "max_position_embeddings")
  return serve
end

--- Builds the op graph of one forward pass (the engine derives backward/accumulate from the op rules).
---@param cfg { name?: string, num_hidden_layers: integer, hidden_size: integer, num_attention_heads: integer, ffn_dim: integer, vocab_size: integer, max_position_embeddings: integer, word_embed_proj_dim?: integer, do_layer_norm_before?: boolean, activation_function?: string, enable_bias?: boolean, tie_word_embeddings?: boolean, _remove_final_layer_norm?: boolean }
---@param opts { batch: integer, seq: integer, training?: boolean, dtype?: string, loss?: boolean, tp?: integer, parallel?: table }
---@return neusight.Node[]
function M.build(cfg, opts)
  local serve = check(cfg, opts)
  local decode = serve ~= nil and serve.phase == "decode"
  local N = require "neusight.nodes"
  local b, s, h, nh = opts.batch, serve and serve.s or opts.seq, cfg.hidden_size, cfg.num_attention_heads
  local V, P, L, ffn = cfg.vocab_size, cfg.max_position_embeddings, cfg.num_hidden_layers, cfg.ffn_dim
  local hd = h // nh
  local who = ("opt model '%s'"):format(tostring(cfg.name or "?"))
  local shard = (opts.tp or 1) > 1 and require("neusight.parallel").tensor_shard(opts, who) or nil
  local tp = shard and shard.tp or 1
  if shard then
    nh, ffn, V = shard.split(nh, "num_attention_heads"), shard.split(ffn, "ffn_dim"), shard.vocab(V)
  end
  local hl, T, bh = nh * hd, b * s, b * nh -- hl: attention width of this rank
  local wep = cfg.word_embed_proj_dim or h
  local pre_ln = cfg.do_layer_norm_before ~= false
  local act_op = ACTIVATIONS[cfg.activation_function or "relu"]
  local bias = cfg.enable_bias ~= false
  local dtype = opts.dtype or "fp32"

  local g = N.new(dtype, shard)
  g.megatron = opts.megatron == true -- one q/k/v GEMM (neusight.nodes qkv; the header)
  g.kv_dtype = serve and serve.kv_dtype or nil -- a quantised KV cache (neusight.nodes.kv_dtype)
  local nodes, add = g.nodes, g.add
  -- torch.autocast over fp32 modules (opts.autocast, neusight.workload; HF OPTForCausalLM, transformers 4.46): the fp32
  -- embeddings, residual stream and LayerNorms (autocast's fp32 list), each Linear reading an fp32 input casting it
  -- (neusight.nodes autocast_cast; its weight: g.add), eager attention's scores fp32 from the mask add on (the causal
  -- mask is in the fp32 inputs_embeds' dtype; softmax then runs in fp32), the probabilities cast for the P·V bmm
  local stream, add_as = N.autocast_setup(g, opts)
  local attn32 = g.autocast and "fp32" or dtype
  -- nn.Linear(in_f, out_f, bias = enable_bias) applied to `x`; `shared`: `x` is the input an earlier linear already
  -- saves (k_proj and v_proj read q_proj's): saved once (neusight.nodes linear). `fp32_in`: under autocast its input
  -- is fp32 (the stream or a LayerNorm's output): cast first, and its own copy saved.
  local function linear(name, x, in_f, out_f, out, shared, fp32_in)
    if fp32_in and g.autocast then
      N.autocast_cast(g, name .. ".input_cast", x)
      shared = false
    end
    N.linear(g, name, x, in_f, out_f, out, bias, shared)
  end
  -- Megatron's f (direction "backward") and g ("forward") operators: no-ops without tensor parallelism.
  local tp_all_reduce = g.all_reduce

  -- Shapes are shared between nodes: nodes are read-only for op rules and the engine.
  local x = { b, s, h }                     -- residual stream
  local x2d = { T, h }                      -- the FFN block works on flattened tokens
  local xl = tp == 1 and x or { b, s, hl }  -- q / k / v / attention output of this rank's heads
  local heads = { b, nh, s, hd }            -- per-head q / k / v after _shape(): view, transpose, contiguous
  local scores = { bh, s, s }               -- attention scores, heads folded into the batch for bmm
  local tokens = { b, s }
  local mask = decode and { b, serve.kv } or tokens -- the attention mask: every cached position in decode
  -- The q, k or v projection `which` ("q", "k", "v") in HF's order: its nn.Linear, or under Megatron's kernels the one
  -- q/k/v GEMM at q's place (k and v are views of its output: nothing at theirs). k_proj and v_proj read the normed x
  -- that q_proj saves for backward: autograd keeps that one tensor once (under autocast each casts and saves its own).
  local function project(which)
    if not g.megatron then
      linear("layers.self_attn." .. which .. "_proj", x, h, hl, xl, which ~= "q", true)
    elseif which == "q" then -- (no autocast under Megatron's kernels; N.qkv casts its input itself where there is)
      N.qkv(g, "layers.self_attn", x, h, nh, nh, hd, xl, xl, bias)
    end
  end

  -- Embeddings and masks, in the order OPTDecoder.forward runs them.
  add_as(stream, "embedding", "embed_tokens", { tokens }, { b, s, wep }, V * wep,
    { num_embeddings = V, embedding_dim = wep })
  tp_all_reduce("embed_tokens.tp_all_reduce", { b, s, wep }, "forward",
    "vocab-parallel embedding: sum of the ranks' partial lookups", nil, stream) -- (autocast: the fp32 rows)
  -- _make_causal_mask: mask_cond + 1 (masked_fill_ of the (s, s) mask is 'misc'), then mask[None, None]; HF makes
  -- none for a single query token (decode).
  if not decode then
    add("add", "causal_mask.cond", { { s } }, { s })
    add("getitem", "causal_mask.expand", { { s, s } }, { 1, 1, s, s })
  end
  -- _expand_mask: attention_mask[:, None, None, :] (then expand, rsub, masked_fill: 'misc').
  add("getitem", "padding_mask.expand", { mask }, { b, 1, 1, mask[2] })
  -- OPTLearnedPositionalEmbedding: positions = (cumsum(mask)·mask).long() − 1, [:, past:], + offset.
  add("cumsum", "embed_positions.cumsum", { mask }, mask)
  add("mul", "embed_positions.mask", { mask, mask }, mask)
  add("getitem", "embed_positions.past", { mask }, tokens)
  add("add", "embed_positions.offset", { tokens }, tokens) -- + 2, a Python int: VECaddu
  add("view", "embed_positions", { tokens }, x, (P + POSITION_OFFSET) * h)
  if wep ~= h then
    N.autocast_cast(g, "project_in.input_cast", { b, s, wep })
    add("linear", "project_in", { { b, s, wep } }, x, wep * h, { bias = false })
  end
  add_as(stream, "add", "embed_add", { x, x }, x, 0,
    { input_dtypes = wep ~= h and N.mixed(g, "dtype", "fp32") or nil }) -- (project_in's 16-bit output + positions)

  g.layer, g.count = "layers", L
  if pre_ln then add_as(stream, "layernorm", "layers.self_attn_layer_norm", { x }, x, 2 * h) end
  -- (the tp_in all-reduces carry the gradient of an fp32 LayerNorm output or stream under autocast)
  tp_all_reduce("layers.self_attn.tp_in", x, "backward", "f: input gradient of the column-parallel q/k/v projections",
    nil, stream)
  if decode then
    -- one token per sequence: q/k/v projections, the new K/V appended to the cache, one fused decode kernel (the
    -- 1/√head_dim scale is its argument; no scores tensor, no clamp: see the header)
    project("q")
    project("k")
    project("v")
    add("transpose", "layers.self_attn.heads", { { b, s, nh, hd } }, heads)
    N.kv_cache_write(g, "layers.self_attn.kv_cache_write", b, nh, s, hd, serve.kv)
    N.decode_attention(g, "layers.self_attn.decode_attention", b, nh, nh, hd, serve.kv)
  elseif opts.attention == "sdpa" then
    -- HF's OPTSdpaAttention: q/k/v projections viewed per head (transposes are views; the scale is SDPA's
    -- argument), one fused causal kernel each way (ops/sdpa.lua).
    project("q")
    project("k")
    project("v")
    add("transpose", "layers.self_attn.heads", { { b, s, nh, hd } }, heads)
    N.hf_cache(opts, nodes[#nodes], b, nh, s, hd) -- K and V kept in HF's past_key_values (inference: use_cache)
    if serve then N.kv_cache_write(g, "layers.self_attn.kv_cache_write", b, nh, s, hd, serve.kv) end
    -- output_shared: out_proj saves O itself (a view: ops/sdpa.lua)
    add("sdpa", "layers.self_attn.sdpa", { heads, heads, heads }, heads, 0, { causal = true, output_shared = true })
  else
    project("q")
    add("mul", "layers.self_attn.scaling", { xl }, xl) -- × head_dim^-0.5, a Python float: VECmulu
    project("k")
    add("transpose", "layers.self_attn.k_heads", { { b, s, nh, hd } }, heads)
    add("contiguous", "layers.self_attn.k_contiguous", { heads }, heads)
    project("v")
    add("transpose", "layers.self_attn.v_heads", { { b, s, nh, hd } }, heads)
    add("contiguous", "layers.self_attn.v_contiguous", { heads }, heads)
    N.hf_cache(opts, nodes[#nodes], b, nh, s, hd) -- K and V kept in HF's past_key_values (inference: use_cache)
    if serve then N.kv_cache_write(g, "layers.self_attn.kv_cache_write", b, nh, s, hd, serve.kv) end
    add("transpose", "layers.self_attn.q_heads", { { b, s, nh, hd } }, heads)
    add("contiguous", "layers.self_attn.q_contiguous", { heads }, heads)
    add("bmm", "layers.self_attn.qk", { { bh, s, hd }, { bh, hd, s } }, scores)
    -- scores.view(b, nh, s, s) + the (b, 1, s, s) causal ∧ padding mask
    add_as(attn32, "add", "layers.self_attn.mask", { { b, nh, s, s }, { b, 1, s, s } }, { b, nh, s, s }, 0,
      { input_dtypes = N.mixed(g, "dtype", "fp32") })
    -- torch.max(scores, torch.tensor(finfo.min)): an element-wise kernel over the scores
    add_as(attn32, "maximum", "layers.self_attn.clamp", { { b, nh, s, s }, { 1 } }, { b, nh, s, s })
    add_as(attn32, "softmax", "layers.self_attn.softmax", { scores }, scores)
    add_as(attn32, "dropout", "layers.self_attn.dropout", { scores }, scores)
    N.autocast_cast(g, "layers.self_attn.pv.p_cast", scores) -- bmm on autocast's lower-precision list
    add("bmm", "layers.self_attn.pv", { scores, { bh, s, hd } }, { bh, s, hd })
  end
  add("transpose", "layers.self_attn.merge_heads", { heads }, { b, s, nh, hd })
  add("reshape", "layers.self_attn.reshape", { { b, s, nh, hd } }, xl)
  -- Row-parallel out_proj: the bias is added once, after the all-reduce (replicated parameters).
  linear("layers.self_attn.out_proj", xl, hl, h, x)
  tp_all_reduce("layers.self_attn.tp_out", x, "forward", "g: sum of the row-parallel out_proj partial outputs")
  add("dropout", "layers.self_attn.resid_dropout", { x }, x)
  add_as(stream, "add", "layers.self_attn.residual", { x, x }, x, 0, N.residual_attrs(g)) -- residual + out_proj
  if not pre_ln then add_as(stream, "layernorm", "layers.self_attn_layer_norm", { x }, x, 2 * h) end
  add("reshape", "layers.flatten", { x }, x2d)
  if pre_ln then add_as(stream, "layernorm", "layers.final_layer_norm", { x2d }, x2d, 2 * h) end
  tp_all_reduce("layers.fc1.tp_in", x2d, "backward", "f: input gradient of the column-parallel fc1", nil, stream)
  linear("layers.fc1", x2d, h, ffn, { T, ffn }, false, true)
  add(act_op, "layers.activation_fn", { { T, ffn } }, { T, ffn })
  linear("layers.fc2", { T, ffn }, ffn, h, x2d)
  tp_all_reduce("layers.fc2.tp_out", x2d, "forward", "g: sum of the row-parallel fc2 partial outputs")
  add("dropout", "layers.fc_dropout", { x2d }, x2d)
  add_as(stream, "add", "layers.fc_residual", { x2d, x2d }, x2d, 0, N.residual_attrs(g)) -- residual + fc2
  add("view", "layers.unflatten", { x2d }, x)
  if not pre_ln then add_as(stream, "layernorm", "layers.final_layer_norm", { x }, x, 2 * h) end

  g.layer, g.count = "", 1
  -- OPTDecoder keeps a final LayerNorm only for pre-LN models (unless _remove_final_layer_norm).
  if pre_ln and not cfg._remove_final_layer_norm then
    add_as(stream, "layernorm", "final_layer_norm", { x }, x, 2 * h)
  end
  if wep ~= h then
    N.autocast_cast(g, "project_out.input_cast", x)
    add("linear", "project_out", { x }, { b, s, wep }, h * wep, { bias = false })
  end
  -- lm_head.weight is tied to embed_tokens.weight: its parameters are already counted there.
  local tied = cfg.tie_word_embeddings ~= false
  tp_all_reduce("lm_head.tp_in", { b, s, wep }, "backward", "f: input gradient of the vocab-parallel lm_head", nil,
    wep == h and stream or nil) -- the final LayerNorm's fp32 output under autocast; project_out's 16-bit one
  local head_in = N.lm_head_input(g, serve, { b, s, wep }) -- prefill: each prompt's last token
  local logits = { b, head_in[2], V }
  -- (project_out's output is already in the compute dtype)
  if wep == h then N.autocast_cast(g, "lm_head.input_cast", head_in) end
  add("linear", "lm_head", { head_in }, logits, tied and 0 or wep * V,
    { bias = false, tied = tied and "embed_tokens" or nil })
  add("contiguous", "logits.contiguous", { logits }, logits)
  N.causal_lm_loss(g, b, s, V, opts)
  return nodes
end

return M
