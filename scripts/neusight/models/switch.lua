-- scripts/neusight/models/switch.lua — Switch Transformer (HF SwitchTransformersForConditionalGeneration): T5 encoder-decoder with top-1 MoE FFNs.
--
-- The node sequence mirrors the reference's whole-model traces (opgraph/switchxl4-{inf,train}-512-*.csv, rows
-- with kernels). Identical blocks are emitted once with a count: the encoder's dense and sparse blocks
-- (layers "encoder.dense", "encoder.sparse") and the decoder's ("decoder.dense", "decoder.sparse"); the relative
-- position bias, computed in block 0 and reused by every block, is a count-1 prologue of each stack.
--
-- MoE FFN as traced: router Linear(d, E) + softmax, capacity mask (cumsum, mul); then for each expert a
-- dispatch (getitem of the routed tokens, setitem into a zero (b·capacity, d) buffer), the expert FFN on the
-- whole buffer (b·capacity rows), and a combine (getitem, setitem back into the hidden states); finally the
-- router-probability scaling. The routed token count n per expert is data dependent (the traces show 0…capacity);
-- the builder assumes every expert is full: n = b·capacity (512 tokens over 4 experts of capacity 64).
-- Router z-loss and load-balancing loss over the concatenated router logits close the graph (traced in both modes).
--
-- Departures from the trace:
--   * getitems on size() results (Python ints) are left out: host-side bookkeeping;
--   * attention QKᵀ is a BMM everywhere; the reference turns nodes named matmul_4, matmul_40…49 into Linear.
-- Expert parallelism (opts.ep = k > 1, opts.parallel = neusight.parallel.plan; DeepSpeed-MoE / GShard
-- style): each of k ranks holds num_experts / k experts. Routing and the per-expert dispatch into the
-- send buffer stay on every rank; an all-to-all (group "ep") moves the (num_experts · capacity, d_model)
-- buffer so each local expert receives its capacity from all k ranks (k · capacity rows), a second
-- all-to-all brings the outputs back before the combine. Both run again in backward. Expert weights
-- carry attrs.expert: their gradients are all-reduced among the dp / k replicas of each expert only.
-- Tensor parallelism (opts.tp = t > 1, opts.parallel = neusight.parallel.plan): the graph is one rank's
-- shard, Megatron-LM style (Shoeybi et al. 2019), as in gpt.lua / bert.lua: in self- and cross-attention q, k
-- and v are column-parallel (num_heads split: inner = heads/t · d_kv), o row-parallel; the relative-position
-- bias table is split by heads; the dense FFN's wi is column-parallel (d_ff split), wo row-parallel; every
-- expert's wi / wo likewise (d_ff split, the router classifier replicated); the shared word embedding and the
-- tied lm_head are vocab-parallel (ceil(V/t) rows). Megatron's f (backward all-reduce, group "tp") precedes
-- each column-parallel layer — in cross-attention both q on the decoder stream and k/v on the encoder output —,
-- the MoE layer (one f for the expert path) and lm_head; g (forward all-reduce) follows each o / wo, the
-- combined expert output and both embedding lookups (the encoder's "shared" node and the decoder's implicit
-- one). RMS norms, dropouts, residual adds, the router and the router losses are replicated; there is no
-- token cross-entropy node, hence no vocab-parallel loss all-reduce. Composes with expert parallelism: each
-- ep rank holds num_experts / ep experts, each of them split t ways.
-- Mirrored as the reference charges them:
--   * encoder_embed_tokens / decoder_embed_tokens match none of the reference's embedding patterns ('misc'):
--     zero-kernel "view" nodes (the shared table's parameters are counted once, on the encoder's);
--   * dropout, argmax, one_hot, the casts and the zero-filled buffers are 'misc' (dropout only in inference).
local ipairs, type, tostring, error = ipairs, type, tostring, error

local checks = require "neusight.models.check"

local M = {}

M.expert_parallel = true -- build() spreads the experts when opts.ep > 1 (neusight/workload.lua checks this)
M.tensor_parallel = true -- build() shards itself when opts.tp > 1 (neusight/workload.lua checks this)

--- The config fields build() reads, plus name and arch: any other key is an error (a typo must not become a default).
M.FIELDS = { "name", "arch", "num_layers", "num_decoder_layers", "d_model", "d_ff", "d_kv", "num_heads", "num_experts",
  "expert_capacity", "encoder_sparse_step", "decoder_sparse_step", "vocab_size", "relative_attention_num_buckets" }

local function check(cfg, opts)
  local who = ("switch model '%s'"):format(tostring(cfg.name or "?"))
  checks.fields(who, cfg, M.FIELDS) -- first: build() is called directly too (a model function may require it)
  checks.counts(who, cfg, { "num_layers", "num_decoder_layers", "d_model", "d_ff", "d_kv", "num_heads", "num_experts",
                         "expert_capacity", "encoder_sparse_step", "decoder_sparse_step", "vocab_size" },
                 { "relative_attention_num_buckets" }) -- 0 ended in ops/embedding.lua's argument error
  checks.table_size(who, cfg, "relative_attention_num_buckets", cfg.relative_attention_num_buckets or 32, cfg.num_heads)
  for _, side in ipairs { { "num_layers", "encoder_sparse_step" }, { "num_decoder_layers", "decoder_sparse_step" } } do
    if cfg[side[1]] % cfg[side[2]] ~= 0 then
      checks.fail(cfg, { side[2], side[1] }, ("%s: layer counts must be multiples of the sparse steps (%s %d, %s %d)")
        :format(who, side[1], cfg[side[1]], side[2], cfg[side[2]]))
    end
  end
  checks.batch_seq(who, opts)
end

--- Builds the op graph of one forward pass (the engine derives backward/accumulate from the op rules).
---@param cfg table HF SwitchTransformersConfig fields (num_layers, num_decoder_layers, d_model, d_ff, d_kv, num_heads, num_experts, expert_capacity, encoder_sparse_step, decoder_sparse_step, vocab_size, relative_attention_num_buckets?)
---@param opts { batch: integer, seq: integer, training?: boolean, dtype?: string, ep?: integer, tp?: integer, parallel?: table }
---@return neusight.Node[]
function M.build(cfg, opts)
  check(cfg, opts)
  local b, s, d, F = opts.batch, opts.seq, cfg.d_model, cfg.d_ff
  local nh, dkv, E, V = cfg.num_heads, cfg.d_kv, cfg.num_experts, cfg.vocab_size
  local cap = opts.batch * cfg.expert_capacity
  local buckets = cfg.relative_attention_num_buckets or 32
  local training, dtype = opts.training, opts.dtype or "fp32"
  local ep = opts.ep or 1
  local who = ("switch model '%s'"):format(tostring(cfg.name or "?"))
  local shard = (opts.tp or 1) > 1 and require("neusight.parallel").tensor_shard(opts, who) or nil
  if shard then nh, F, V = shard.split(nh, "num_heads"), shard.split(F, "d_ff"), shard.vocab(V) end
  local inner = nh * dkv -- attention width of this rank
  local experts = require("neusight.parallel").expert_shard(opts, who, E)
  local local_experts = experts.local_experts

  local g = require("neusight.nodes").new(dtype, shard)
  local nodes, add = g.nodes, g.add
  -- Megatron's f (direction "backward") and g ("forward") operators: no-ops without tensor parallelism.
  local tp_all_reduce = g.all_reduce

  -- Shared shapes (nodes are read-only for op rules and the engine).
  local x = { b, s, d }
  local qkv = { b, s, inner }
  local heads, heads_t = { b, nh, s, dkv }, { b, nh, dkv, s }
  local scores = { b, nh, s, s }
  local ss = { s, s }
  local col = { b, s, 1 }
  local probs = { b, s, E }
  local routed = { cap, d }             -- tokens an expert receives (all experts assumed full)
  local no_bias = { bias = false }

  -- T5LayerNorm (RMS): x·rsqrt(mean(x²) + eps)·w.
  local function rms_norm(p)
    add("pow", p .. ".pow", { x }, x)
    add("mean", p .. ".mean", { x }, col)
    add("add", p .. ".eps", { col }, col)
    add("rsqrt", p .. ".rsqrt", { col }, col)
    add("mul", p .. ".normalize", { x, col }, x)
    add("weight", p .. ".weight", {}, { d }, d)
    add("mul", p .. ".scale", { { d }, x }, x)
  end

  -- cross: enc-dec attention, whose k / v read the encoder output (a second f, on that stream).
  local function attention(p, bias_input, cross)
    tp_all_reduce(p .. ".tp_in", x, "backward", cross and "f: input gradient of the column-parallel q (decoder stream)"
      or "f: input gradient of the column-parallel q / k / v")
    add("linear", p .. ".q", { x }, qkv, d * inner, no_bias)
    if cross then
      tp_all_reduce(p .. ".tp_in_kv", x, "backward", "f: input gradient of the column-parallel k / v (encoder output)")
    end
    add("linear", p .. ".k", { x }, qkv, d * inner, no_bias)
    add("linear", p .. ".v", { x }, qkv, d * inner, no_bias)
    add("matmul", p .. ".qk", { heads, heads_t }, scores)
    add("add", p .. ".position_bias", { scores, bias_input }, scores)
    add("softmax", p .. ".softmax", { scores }, scores)
    add("dropout", p .. ".dropout", { scores }, scores)
    add("matmul", p .. ".pv", { scores, heads }, heads)
    add("contiguous", p .. ".contiguous", { { b, s, nh, dkv } }, { b, s, nh, dkv })
    add("linear", p .. ".o", { qkv }, x, inner * d, no_bias)
    tp_all_reduce(p .. ".tp_out", x, "forward", "g: sum of the row-parallel o partial outputs")
  end

  local function residual(p)
    add("dropout", p .. ".dropout", { x }, x)
    add("add", p .. ".residual", { x, x }, x, 0, { fused_external = 1 })
  end

  local function self_attention_layer(p)
    rms_norm(p .. ".layer_norm")
    attention(p .. ".attention", scores)
    residual(p)
  end

  local function dense_ffn_layer(p)
    rms_norm(p .. ".layer_norm")
    tp_all_reduce(p .. ".mlp.tp_in", x, "backward", "f: input gradient of the column-parallel wi")
    add("linear", p .. ".mlp.wi", { x }, { b, s, F }, d * F, no_bias)
    add("relu", p .. ".mlp.act", { { b, s, F } }, { b, s, F })
    add("dropout", p .. ".mlp.dropout", { { b, s, F } }, { b, s, F })
    add("linear", p .. ".mlp.wo", { { b, s, F } }, x, F * d, no_bias)
    tp_all_reduce(p .. ".mlp.tp_out", x, "forward", "g: sum of the row-parallel wo partial outputs")
    residual(p)
  end

  local function sparse_ffn_layer(p)
    rms_norm(p .. ".layer_norm")
    -- One f for the whole expert path (every expert's wi is column-parallel): the gradient of the dispatched
    -- expert inputs is a partial sum per rank. The router classifier is replicated (its gradient is whole).
    tp_all_reduce(p .. ".mlp.tp_in", x, "backward", "f: input gradient of the column-parallel expert wi (expert path)")
    local r = p .. ".mlp.router"
    if training then add("mul", r .. ".jitter", { x, x }, x) end -- multiplicative jitter noise
    add("linear", r .. ".classifier", { x }, probs, d * E, no_bias)
    add("softmax", r .. ".softmax", { probs }, probs)
    add("cumsum", r .. ".priority", { probs }, probs)
    add("mul", r .. ".capacity_mask", { probs, probs }, probs)
    local function expert_ffn(ex, rows)
      add("linear", ex .. ".wi", { { rows, d } }, { rows, F }, d * F, { bias = false, expert = true })
      add("relu", ex .. ".act", { { rows, F } }, { rows, F })
      add("dropout", ex .. ".dropout", { { rows, F } }, { rows, F })
      add("linear", ex .. ".wo", { { rows, F } }, { rows, d }, F * d, { bias = false, expert = true })
    end
    if ep == 1 then
      for e = 0, E - 1 do
        local ex = ("%s.mlp.experts.expert_%d"):format(p, e)
        add("getitem", ex .. ".mask", { probs }, { b, s })
        add("count_nonzero", ex .. ".count", { { b, s } }, { 1 })
        add("getitem", ex .. ".dispatch", { x, { b, s } }, routed)
        add("setitem", ex .. ".dispatch_pad", { { cap, d }, { 1 }, routed }, { 1 })
        expert_ffn(ex, cap)
        add("getitem", ex .. ".combine", { { cap, d }, { 1 } }, routed)
        add("setitem", ex .. ".combine_scatter", { x, { b, s }, routed }, { 1 })
      end
    else
      for e = 0, E - 1 do -- fill the send buffer: every expert's tokens, wherever the expert lives
        local ex = ("%s.mlp.experts.expert_%d"):format(p, e)
        add("getitem", ex .. ".mask", { probs }, { b, s })
        add("count_nonzero", ex .. ".count", { { b, s } }, { 1 })
        add("getitem", ex .. ".dispatch", { x, { b, s } }, routed)
        add("setitem", ex .. ".dispatch_pad", { { cap, d }, { 1 }, routed }, { 1 })
      end
      local function all_to_all(name)
        experts.all_to_all(nodes, g, p .. ".mlp." .. name, { E * cap, d }, "expert parallel: token exchange")
      end
      all_to_all("dispatch_all_to_all")
      for e = 0, local_experts - 1 do -- this rank's experts, each with its capacity from all ep ranks
        expert_ffn(("%s.mlp.experts.local_%d"):format(p, e), cap * ep)
      end
      all_to_all("combine_all_to_all")
      for e = 0, E - 1 do
        local ex = ("%s.mlp.experts.expert_%d"):format(p, e)
        add("getitem", ex .. ".combine", { { cap, d }, { 1 } }, routed)
        add("setitem", ex .. ".combine_scatter", { x, { b, s }, routed }, { 1 })
      end
    end
    -- g after the combine, before the router-probability scaling (a per-token scale: it commutes with the sum).
    tp_all_reduce(p .. ".mlp.tp_out", x, "forward", "g: sum of the row-parallel expert wo partial outputs")
    add("mul", p .. ".mlp.router_probs", { col, x }, x)
    residual(p)
  end

  -- Relative position bias (computed once per stack, in block 0): bucket arithmetic on (s, s), lookup, mask add.
  local function position_bias(p, bidirectional, mask)
    add("getitem", p .. ".context_position", { { s } }, { s, 1 })
    add("getitem", p .. ".memory_position", { { s } }, { 1, s })
    if bidirectional then
      add("mul", p .. ".bucket_sign", { ss }, ss)
      add("add", p .. ".bucket_offset", { ss }, ss)
    end
    add("div", p .. ".log_ratio", { ss }, ss)
    add("div", p .. ".log_scale", { ss }, ss)
    add("mul", p .. ".log_buckets", { ss }, ss)
    add("add", p .. ".large_offset", { ss }, ss)
    add("where", p .. ".bucket_select", { ss, ss, ss }, ss)
    if bidirectional then add("add", p .. ".buckets", { ss, ss }, ss) else add("add", p .. ".buckets", { ss }, ss) end
    add("embedding", p .. ".relative_attention_bias", { ss }, { s, s, nh }, buckets * nh,
      { num_embeddings = buckets, embedding_dim = nh })
    add("add", p .. ".mask", { { 1, nh, s, s }, mask }, scores)
  end

  -- Encoder.
  local ext_mask = { b, 1, 1, s }
  add("view", "shared", { { b, s } }, x, V * d) -- encoder_embed_tokens: 'misc' in the reference (see above)
  tp_all_reduce("shared.tp_all_reduce", x, "forward", "vocab-parallel embedding: sum of the ranks' partial lookups")
  add("getitem", "encoder.extended_attention_mask", { { b, s } }, ext_mask)
  add("mul", "encoder.extended_attention_mask.scale", { ext_mask }, ext_mask)
  add("dropout", "encoder.dropout", { x }, x)
  position_bias("encoder.position_bias", true, ext_mask)
  local Le, Ld = cfg.num_layers, cfg.num_decoder_layers
  local ne, nd = Le // cfg.encoder_sparse_step, Ld // cfg.decoder_sparse_step
  g.layer, g.count = "encoder.dense", Le - ne
  self_attention_layer("encoder.dense.layer_0")
  dense_ffn_layer("encoder.dense.layer_1")
  g.layer, g.count = "encoder.sparse", ne
  self_attention_layer("encoder.sparse.layer_0")
  sparse_ffn_layer("encoder.sparse.layer_1")
  g.layer, g.count = "", 1
  rms_norm("encoder.final_layer_norm")
  add("dropout", "encoder.final_dropout", { x }, x)

  -- Decoder: causal mask ⊗ padding mask, the encoder-attention mask, then the blocks.
  local causal = { b, 1, s, s }
  add("getitem", "decoder.causal.seq_ids_row", { { s } }, { 1, 1, s })
  add("getitem", "decoder.causal.seq_ids_col", { { s } }, { 1, s, 1 })
  add("getitem", "decoder.causal.mask", { { b, s, s } }, causal)
  add("getitem", "decoder.extended_attention_mask", { { b, s } }, ext_mask)
  add("mul", "decoder.extended_attention_mask.padding", { causal, ext_mask }, causal)
  add("mul", "decoder.extended_attention_mask.scale", { causal }, causal)
  add("getitem", "decoder.encoder_extended_attention_mask", { { b, s } }, ext_mask)
  add("mul", "decoder.encoder_extended_attention_mask.scale", { ext_mask }, ext_mask)
  -- decoder_embed_tokens (the shared table) is not emitted (zero-kernel, see above); its g is.
  tp_all_reduce("decoder.embed_tokens.tp_all_reduce", x, "forward",
    "vocab-parallel embedding: sum of the ranks' partial lookups (decoder)")
  add("dropout", "decoder.dropout", { x }, x)
  position_bias("decoder.position_bias", false, causal)
  -- Cross-attention has no relative bias: zeros(1, nh, s, s) + the encoder mask, once.
  add("add", "decoder.encoder_position_bias", { { 1, nh, s, s }, ext_mask }, scores)

  local function decoder_block(p, sparse)
    self_attention_layer(p .. ".layer_0")
    rms_norm(p .. ".layer_1.layer_norm")
    attention(p .. ".layer_1.enc_dec_attention", scores, true)
    residual(p .. ".layer_1")
    if sparse then sparse_ffn_layer(p .. ".layer_2") else dense_ffn_layer(p .. ".layer_2") end
  end
  g.layer, g.count = "decoder.dense", Ld - nd
  decoder_block("decoder.dense", false)
  g.layer, g.count = "decoder.sparse", nd
  decoder_block("decoder.sparse", true)
  g.layer, g.count = "", 1
  rms_norm("decoder.final_layer_norm")
  add("dropout", "decoder.final_dropout", { x }, x)
  -- Tied lm_head: the hidden states are scaled by d_model^-0.5, the weight is the shared table.
  add("mul", "lm_head.scale", { x }, x)
  tp_all_reduce("lm_head.tp_in", x, "backward", "f: input gradient of the vocab-parallel lm_head")
  add("linear", "lm_head", { x }, { b, s, V }, 0, no_bias)

  -- Router losses over each stack's concatenated router logits (b, sparse layers · s, E).
  for _, st in ipairs { { "encoder", ne }, { "decoder", nd } } do
    local p, tokens = "router_loss." .. st[1], st[2] * s
    local logits = { b, tokens, E }
    add("pow", p .. ".z_loss", { { b, tokens } }, { b, tokens }) -- logsumexp(logits)²
    add("softmax", p .. ".probs", { logits }, logits)
    add("mean", p .. ".tokens_per_expert", { logits }, { b, E })
    add("mean", p .. ".router_prob_per_expert", { logits }, { b, E })
    add("mul", p .. ".balance", { { b, E }, { b, E } }, { b, E })
    add("mean", p .. ".aux_loss", { { b, E } }, { 1 })
  end
  return nodes
end

--- The experts per sparse layer (num_experts): `neusight search` tries every ep that divides it.
function M.num_experts(cfg) return cfg.num_experts end

--- The routed experts a token is sent to per sparse layer: Switch routes top-1.
function M.top_k(_) return 1 end

--- Parameters a token uses: top-1 routing, one of num_experts experts per sparse layer (everything else in full).
function M.active_parameters(cfg)
  return require("neusight.models.moe").active_of(M.build(cfg, { batch = 1, seq = 1 }), 1, cfg.num_experts)
end

return M
