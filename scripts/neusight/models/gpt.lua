-- scripts/neusight/models/gpt.lua — GPT-2-style decoder (HF GPT2LMHeadModel, eager attention, gelu_new) as an op graph.
--
-- The node sequence mirrors the reference's traced one-layer graph (opgraph/gpt2_large-train-1024-4.csv,
-- the rows with kernels), so a forecast decomposes into the same kernels. The transformer layer is
-- emitted once with count = n_layer (layer "h"), never copied per layer. Departures from the trace:
--   * the trace's getitems on size() results (Python ints, e.g. getitem_4, _8…_10, _12…_15: MEM of
--     two 1-element shapes) are left out: they are host-side bookkeeping, not GPU kernels;
--   * view/permute/split nodes are kept only where they explain a shape change (they cost nothing);
--   * lm_head is bias-free: we accumulate no bias gradient (the reference adds VECadd(1, V) anyway);
--   * in training, the HF loss (shift + cross-entropy) is appended unless opts.loss == false; the
--     reference neither traces nor measures a loss.
-- Tensor parallelism (opts.tp > 1, opts.parallel = neusight.parallel.plan): the graph is one rank's
-- shard, Megatron-LM style (Shoeybi et al. 2019): c_attn and c_fc are column-parallel (heads and
-- n_inner split), the two c_proj row-parallel, wte and lm_head vocab-parallel; the all-reduces sit
-- where Megatron's f/g operators put them: g (forward all-reduce) after each row-parallel layer and
-- the embedding, f (backward all-reduce) before each column-parallel layer and lm_head, and the
-- vocab-parallel cross-entropy all-reduces its max, sum and target logit (3·b·s values) forward.
-- Layer norms, dropouts and residual adds are replicated on every rank — unless opts.sequence_parallel
-- (Korthikanti et al. 2022): then they run on s/tp of the sequence, and each all-reduce becomes an
-- all-gather in front of the column-parallel layer (reduce-scatter of its gradient in backward) and a
-- reduce-scatter behind the row-parallel one (all-gather in backward): the same bytes on the wire.
-- opts.megatron (parallel runs with kernels = "megatron", the default): Megatron-LM's GPT runs the
-- MLP activation as one fused bias-GeLU kernel each way (bias_gelu_fusion, on by default in every
-- Megatron-LM release) where HF's eager gelu_new launches 8 element-wise kernels forward; in fp16/bf16
-- the attention scale, causal mask and softmax are one fused kernel too (fp32 takes the unfused path).
-- opts.attention = "sdpa" (workload field `attention`; the default for 16-bit and fp8 dtypes): HF's SDPA
-- attention, i.e. one fused FlashAttention kernel forward and one backward (ops/sdpa.lua) instead of the eager
-- matmul → scale → mask → softmax → dropout → matmul chain, which stays for "eager" (the fp32 default, as the
-- NeuSight reference traced it).
-- Serving phases (opts.phase, workload mode "prefill" / "decode"; pieces shared with llama.lua in neusight.nodes):
-- prefill adds each layer's KV-cache write (h.attn.kv_cache_write) and runs lm_head on each prompt's last token;
-- decode runs every layer on one token per sequence (b rows), appends its K/V to the cache and replaces the
-- attention chain (eager or sdpa) with one decode_attention node over C + 1 cached tokens (n_head kv heads: GPT-2
-- is multi-head). The cache, C + 1 positions, must fit n_positions.
local ipairs, type, tostring, error = ipairs, type, tostring, error

local checks = require "neusight.models.check"

local M = {}

M.tensor_parallel = true -- build() shards itself when opts.tp > 1 (neusight/workload.lua checks this)
M.sequence_parallel = true -- and honours opts.sequence_parallel
M.attention = { eager = true, sdpa = true } -- opts.attention (neusight/workload.lua)
M.serving = { prefill = true, decode = true } -- opts.phase (neusight/workload.lua; neusight.nodes.serving)

--- The config fields build() reads, plus name and arch: any other key is an error (a typo must not become a default).
M.FIELDS = { "name", "arch", "n_layer", "n_embd", "n_head", "vocab_size", "n_positions", "n_inner", "tie_word_embeddings" }

-- Validates cfg/opts; errors name the model and the field (level 0: the position is the config, not Lua code).
local function check(cfg, opts)
  local who = ("gpt model '%s'"):format(tostring(cfg.name or "?"))
  checks.fields(who, cfg, M.FIELDS) -- first: build() is called directly too (a model function may require it)
  checks.counts(who, cfg, { "n_layer", "n_embd", "n_head", "vocab_size", "n_positions" }, { "n_inner" })
  checks.booleans(who, cfg, { "tie_word_embeddings" })
  checks.table_size(who, cfg, "n_positions", cfg.n_positions, cfg.n_embd) -- wpe: its parameters, no node's shape
  checks.divisible(who, cfg, "n_embd", cfg.n_embd, "n_head", cfg.n_head)
  local serve = require("neusight.nodes").serving(opts, who, cfg.n_positions, "n_positions")
  local decode = serve ~= nil and serve.phase == "decode"
  checks.batch_seq(who, decode and { batch = opts.batch, seq = 1 } or opts, cfg.n_positions, "n_positions")
  return serve
end

--- Builds the op graph of one forward pass (the engine derives backward/accumulate from the op rules).
---@param cfg { name?: string, n_layer: integer, n_embd: integer, n_head: integer, vocab_size: integer, n_positions: integer, n_inner?: integer, tie_word_embeddings?: boolean }
---@param opts { batch: integer, seq: integer, training?: boolean, dtype?: string, loss?: boolean }
---@return neusight.Node[]
function M.build(cfg, opts)
  local serve = check(cfg, opts)
  local decode = serve ~= nil and serve.phase == "decode"
  local N = require "neusight.nodes"
  local b, s, h, nh = opts.batch, serve and serve.s or opts.seq, cfg.n_embd, cfg.n_head
  local V, P, L = cfg.vocab_size, cfg.n_positions, cfg.n_layer
  local hd, ni, T = h // nh, cfg.n_inner or 4 * h, b * s
  local dtype = opts.dtype or "fp32"
  local who = ("gpt model '%s'"):format(tostring(cfg.name or "?"))
  local shard = (opts.tp or 1) > 1 and require("neusight.parallel").tensor_shard(opts, who) or nil
  local tp = shard and shard.tp or 1
  if shard then nh, ni, V = shard.split(nh, "n_head"), shard.split(ni, "n_inner"), shard.vocab(V) end
  local hl = nh * hd -- attention width of this rank
  local sp = tp > 1 and opts.sequence_parallel == true
  local sl = sp and shard.split(s, "the sequence length") or s -- tokens of the residual stream per rank

  local g = N.new(dtype, shard, sp)
  g.kv_dtype = serve and serve.kv_dtype or nil -- a quantised KV cache (neusight.nodes.kv_dtype)
  local nodes, add = g.nodes, g.add
  -- torch.autocast over fp32 modules (opts.autocast, neusight.workload; HF GPT2LMHeadModel, transformers 4.46): the
  -- fp32 embeddings, residual stream and LayerNorms (layer_norm: autocast's fp32 list), each Conv1D's addmm casting
  -- its fp32 input (neusight.nodes autocast_cast; its weight: g.add), eager softmax writing fp32 (autocast's
  -- fp32-with-dtype list: softmax(x, dtype=fp32) reads the 16-bit scores) then .type(value.dtype) back
  local stream, add_as = N.autocast_setup(g, opts)
  -- Megatron's f (g.tp_in: into a column-parallel layer) and g (g.tp_out: out of a row-parallel one), as
  -- all-reduces or, with sequence parallelism, all-gather / reduce-scatter pairs: no-ops without tensor parallelism.
  local tp_all_reduce, tp_in, tp_out = g.all_reduce, g.tp_in, g.tp_out

  -- Shapes are shared between nodes: nodes are read-only for op rules and the engine.
  local x = { b, s, h }                     -- a full activation
  local xs = sp and { b, sl, h } or x       -- residual stream (this rank's sequence shard when sequence parallel)
  local heads = { b, nh, s, hd }            -- per-head q / v / attention output (this rank's heads)
  local scores = { b, nh, s, s }            -- attention scores
  local act = { b, s, ni }                  -- MLP hidden activation

  -- Embeddings. wpe is the same lookup as wte, but the reference classifies `transformer_wpe` as
  -- 'misc' (its name matches none of its embedding patterns), so it costs nothing there. To keep
  -- forecasts comparable it is a zero-kernel "view" node here; its parameters still count for the optimizer.
  add_as(stream, "embedding", "wte", { { b, s } }, x, V * h, { num_embeddings = V, embedding_dim = h })
  if not sp then
    tp_all_reduce("wte.tp_all_reduce", x, "forward", "vocab-parallel embedding: sum of the ranks' partial lookups",
      nil, stream) -- fp32 rows under autocast
  end
  add("view", "wpe", { { 1, s } }, { 1, s, h }, P * h)
  add_as(stream, "add", "embd_add", { x, { 1, s, h } }, x)
  if sp then tp_out("wte.tp", x, "vocab-parallel embedding: sum of the ranks' partial lookups", stream) end
  add_as(stream, "dropout", "drop", { xs }, xs)

  g.layer, g.count = "h", L
  add_as(stream, "layernorm", "h.ln_1", { xs }, xs, 2 * h)
  -- (the input the column-parallel layer reads: under sequence parallelism it saves the shard, neusight.nodes tp_in)
  local attn_in = tp_in("h.attn.tp_in", x, "f: input gradient of the column-parallel c_attn", { T, h }, "h.attn.c_attn")
  -- Conv1D c_attn, traced as addmm(bias, x2d, W).
  N.autocast_cast(g, "h.attn.c_attn.input_cast", attn_in)
  add("addmm", "h.attn.c_attn", { { 3 * hl }, attn_in, { h, 3 * hl } }, { T, 3 * hl }, h * 3 * hl + 3 * hl)
  local xl = tp == 1 and x or { b, s, hl }
  add("split", "h.attn.split", { { b, s, 3 * hl } }, xl)
  -- The trace records the tuple unpacking of split() as three getitems with a stale (1,) input and
  -- charges each a MEM of its output; split() returns views, but we mirror the reference here.
  for _, which in ipairs { "q", "k", "v" } do
    add("getitem", "h.attn.split." .. which, { { 1 } }, xl)
  end
  add("permute", "h.attn.split_heads", { { b, s, nh, hd } }, heads)
  N.hf_cache(opts, nodes[#nodes], b, nh, s, hd) -- K and V kept in HF's past_key_values (inference: use_cache)
  -- attrs.core_attention: the nodes Megatron's selective recomputation re-runs (parallel.recompute = "selective")
  local core = { core_attention = true }
  if serve then N.kv_cache_write(g, "h.attn.kv_cache_write", b, nh, s, hd, serve.kv) end
  if decode then
    N.decode_attention(g, "h.attn.decode_attention", b, nh, nh, hd, serve.kv)
  elseif opts.attention == "sdpa" then
    -- HF's sdpa attention (GPT2SdpaAttention) and Megatron-Core with flash attention: one fused kernel each way
    -- (ops/sdpa.lua), causal, dropout inside the kernel; no scores tensor is materialised.
    add("sdpa", "h.attn.sdpa", { heads, heads, heads }, heads, 0,
      { core_attention = true, causal = true, core_inputs = "1,2,3", output_shared = true }) -- c_proj saves O (ops/sdpa.lua)
  else
    -- core_inputs: what the region keeps when selective recomputation re-runs it (Q and K here, V at ·V)
    add("matmul", "h.attn.qk", { heads, { b, nh, hd, s } }, scores, 0, { core_attention = true, core_inputs = "1,2" })
    if opts.megatron and (dtype == "fp16" or dtype == "bf16") then
      -- Megatron-LM's FusedScaleMaskSoftmax (masked_softmax_fusion, on by default; its CUDA kernels take
      -- fp16/bf16 only): scale, causal mask and softmax are one kernel each way.
      add("softmax", "h.attn.softmax", { scores }, scores, 0,
        { core_attention = true, note = "Megatron fused scale + causal mask + softmax" })
    else
      -- attn / torch.full([], √hd): the divisor is a 0-dim tensor, which the reference counts as a
      -- second operand (VECdiv, two backward kernels), hence tensor_inputs = 2.
      add("div", "h.attn.scale", { scores, { 1 } }, scores, 0, { tensor_inputs = 2, core_attention = true })
      -- bias[:, :, s-s:s, :s] slices the (1, 1, n_positions, n_positions) causal-mask buffer.
      add("getitem", "h.attn.causal_mask", { { 1, 1, P, P }, { 1 }, { 1 } }, { 1, 1, s, s })
      add("where", "h.attn.mask", { { 1, 1, s, s }, scores, { 1 } }, scores, 0, core)
      add_as(g.autocast and "fp32" or dtype, "softmax", "h.attn.softmax", { scores }, scores, 0, core)
      -- autocast: attn_weights.type(value.dtype), the fp32 probabilities back to the compute dtype
      if g.autocast then add("cast", "h.attn.softmax.to_dtype", { scores }, scores, 0, { from = "fp32" }) end
    end
    add("dropout", "h.attn.attn_dropout", { scores }, scores, 0, core)
    add("matmul", "h.attn.pv", { scores, heads }, heads, 0, { core_attention = true, core_inputs = "2" })
  end
  add("permute", "h.attn.merge_heads", { heads }, { b, s, nh, hd })
  -- .contiguous() copies the eager ·V product; the sdpa kernels' output is already in (b, s, heads, head_dim) order
  -- (ops/sdpa.lua), so there it is a no-op: the tests/fixtures/traces/hf GPT-2 trace runs sdpa → transpose → view → addmm
  if decode or opts.attention ~= "sdpa" then
    add("contiguous", "h.attn.contiguous", { { b, s, nh, hd } }, { b, s, nh, hd })
  end
  -- Row-parallel c_proj: the bias is added once, after the all-reduce (replicated parameters).
  add("addmm", "h.attn.c_proj", { { h }, { T, hl }, { hl, h } }, { T, h }, hl * h + h)
  tp_out("h.attn.tp_out", x, "g: sum of the row-parallel c_proj partial outputs")
  add("dropout", "h.attn.resid_dropout", { xs }, xs)
  add_as(stream, "add", "h.attn.residual", { xs, xs }, xs, 0,
    { fused_external = 1, input_dtypes = N.mixed(g, "dtype", "fp32") }) -- attn_output + residual -- x + residual stream (fusion.lua)
  add_as(stream, "layernorm", "h.ln_2", { xs }, xs, 2 * h)
  local fc_in = tp_in("h.mlp.tp_in", x, "f: input gradient of the column-parallel c_fc", { T, h }, "h.mlp.c_fc")
  N.autocast_cast(g, "h.mlp.c_fc.input_cast", fc_in)
  add("addmm", "h.mlp.c_fc", { { ni }, fc_in, { h, ni } }, { T, ni }, h * ni + ni)
  -- gelu_new(a) = 0.5·a·(1 + tanh(√(2/π)·(a + 0.044715·a³))), traced as 8 elementwise nodes. Python-float
  -- operands are not graph inputs, so single-input nodes are the reference's 'u' variants.
  if opts.megatron then
    add("gelu", "h.mlp.act", { act }, act, 0, { note = "Megatron-LM fused bias-GeLU (bias_gelu_impl)" })
  else
    -- Under torch.autocast torch.pow is on its fp32 list: it casts the 16-bit a to fp32 first (a copy it saves) and
    -- writes a fp32 a³, and everything computed from it is fp32 too (type promotion): 0.044715·a³, a + …, tanh,
    -- 1 + tanh and the product with the 16-bit 0.5·a; c_proj's addmm then casts that fp32 activation (`fp32`: the
    -- nodes' dtype, the graph's otherwise)
    local fp32 = g.autocast and "fp32" or dtype
    local a16 = g.autocast and dtype or nil                       -- the 16-bit operand's dtype where it is mixed
    add("mul", "h.mlp.act.half", { act }, act)          -- 0.5 · a              VECmulu
    if g.autocast then
      add_as("fp32", "cast", "h.mlp.act.cube.input_cast", { act }, act, 0,
        { from = dtype, note = "torch.autocast: pow's fp32 input cast" })
    end
    add_as(fp32, "pow", "h.mlp.act.cube", { act }, act)          -- a ** 3               VECpowu
    add_as(fp32, "mul", "h.mlp.act.coef", { act }, act)          -- 0.044715 · a³        VECmulu
    add_as(fp32, "add", "h.mlp.act.inner", { act, act }, act, 0,   -- a + 0.044715·a³      VECadd
      { input_dtypes = a16 and (a16 .. ",fp32") })
    add_as(fp32, "mul", "h.mlp.act.scale", { act }, act)         -- √(2/π) · (…)         VECmulu
    add_as(fp32, "tanh", "h.mlp.act.tanh", { act }, act)         -- tanh(…)              VECtanh
    add_as(fp32, "add", "h.mlp.act.one_plus", { act }, act)      -- 1.0 + tanh(…)        VECaddu
    add_as(fp32, "mul", "h.mlp.act.out", { act, act }, act, 0,    -- 0.5·a · (1 + …)      VECmul
      { input_dtypes = a16 and (a16 .. ",fp32") })
    N.autocast_cast(g, "h.mlp.c_proj.input_cast", { T, ni })
  end
  add("addmm", "h.mlp.c_proj", { { h }, { T, ni }, { ni, h } }, { T, h }, ni * h + h)
  tp_out("h.mlp.tp_out", x, "g: sum of the row-parallel c_proj partial outputs")
  add("dropout", "h.mlp.dropout", { xs }, xs)
  add_as(stream, "add", "h.mlp.residual", { xs, xs }, xs, 0,
    { fused_external = 1, input_dtypes = N.mixed(g, "dtype", "fp32") }) -- feed_forward_hidden_states + residual -- x + residual stream (fusion.lua)

  g.layer, g.count = "", 1
  add_as(stream, "layernorm", "ln_f", { xs }, xs, 2 * h)
  -- HF ties lm_head.weight to wte.weight: its parameters are already counted on wte.
  local tied = cfg.tie_word_embeddings ~= false
  local head_in = N.lm_head_input(g, serve, tp_in("lm_head.tp_in", x, "f: input gradient of the vocab-parallel lm_head",
    nil, "lm_head"))
  N.autocast_cast(g, "lm_head.input_cast", head_in)
  add("linear", "lm_head", { head_in }, { b, head_in[2], V }, tied and 0 or h * V,
    { bias = false, tied = tied and "wte" or nil })
  N.causal_lm_loss(g, b, s, V, opts)
  return nodes
end

return M
