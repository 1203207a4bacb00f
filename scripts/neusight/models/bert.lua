-- scripts/neusight/models/bert.lua — BERT encoder (HF BertModel, eager attention) with the heads the reference traced, as an op graph.
--
-- The node sequence mirrors the reference's traced one-layer graphs (opgraph/bert_large-{inf,train}-512-*.csv,
-- rows with kernels), so a forecast decomposes into the same kernels. The encoder layer is emitted once
-- with count = num_hidden_layers (layer "layer"), never copied per layer.
--
-- Heads: the reference traced BertForSequenceClassification (pooler + dropout + a num_labels-way
-- classifier) for inference and BertForPreTraining (pooler + masked-LM head + next-sentence head) for
-- training, and measured those same models. By default the head follows the mode the same way;
-- cfg.head = "classification" or "pretraining" forces one.
--
-- Departures from the trace:
--   * the trace's getitems on size() results (Python ints: MEM of two 1-element shapes) are left out:
--     host-side bookkeeping, not GPU kernels;
--   * the pooler's nn.Tanh is a tanh here; the reference's name match ('_act' in
--     bert_pooler_activation) charges it as a ReLU;
--   * in training, the HF losses (cross-entropy over the b·s masked-LM logits and the b next-sentence
--     logits) are appended unless opts.loss == false; the reference neither traces nor measures a loss.
-- Mirrored as the reference charges them (to keep forecasts comparable):
--   * token_type_embeddings and position_embeddings are lookups like word_embeddings, but the reference
--     classifies them 'misc' (their names match none of its embedding patterns): zero-kernel "view"
--     nodes here that still own their parameters;
--   * the mask's 1.0 − m (an rsub) and the dtype casts are 'misc' in the reference and left out.
-- Tensor parallelism (opts.tp > 1, opts.parallel = neusight.parallel.plan): the graph is one rank's
-- shard, Megatron-LM style (Shoeybi et al. 2019), as in gpt.lua: query/key/value and
-- intermediate.dense are column-parallel (heads and intermediate_size split), attention.output.dense
-- and output.dense row-parallel (bias replicated), word_embeddings and the masked-LM decoder (with
-- its bias) vocab-parallel; g (forward all-reduce) follows each row-parallel layer and the word
-- embedding, f (backward all-reduce) precedes each column-parallel layer and the decoder, and the
-- vocab-parallel masked-LM cross-entropy all-reduces its max, sum and target logit (3·b·s values)
-- forward. Position/token-type embeddings, layer norms, the pooler, the LM-head transform, the
-- classifier and the next-sentence head are replicated on every rank.
local ipairs, type, tostring, error = ipairs, type, tostring, error

local checks = require "neusight.models.check"

local M = {}

M.tensor_parallel = true -- build() shards itself when opts.tp > 1 (neusight/workload.lua checks this)
M.attention = { eager = true, sdpa = true } -- opts.attention: "sdpa" is HF's BertSdpaSelfAttention (neusight/workload.lua)

-- hidden_act → activation op: HF's "gelu" (GELUActivation, exact erf) and "relu" are single traced nodes.
local ACTIVATIONS = { gelu = "gelu", relu = "relu" }
local HEADS = { classification = true, pretraining = true }

--- The config fields build() reads, plus name and arch: any other key is an error (a typo must not become a default).
M.FIELDS = { "name", "arch", "num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
  "vocab_size", "max_position_embeddings", "type_vocab_size", "hidden_act", "num_labels", "head", "tie_word_embeddings" }

-- Validates cfg/opts; errors name the model and the field (level 0: the position is the config, not Lua code).
local function check(cfg, opts)
  local who = ("bert model '%s'"):format(tostring(cfg.name or "?"))
  checks.fields(who, cfg, M.FIELDS) -- first: build() is called directly too (a model function may require it)
  checks.counts(who, cfg, { "num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
                         "vocab_size", "max_position_embeddings", "type_vocab_size" }, { "num_labels" })
  checks.booleans(who, cfg, { "tie_word_embeddings" })
  for _, k in ipairs { "max_position_embeddings", "type_vocab_size" } do -- embedding tables: no node's shape
    checks.table_size(who, cfg, k, cfg[k], cfg.hidden_size)
  end
  checks.divisible(who, cfg, "hidden_size", cfg.hidden_size, "num_attention_heads", cfg.num_attention_heads)
  local act = cfg.hidden_act or "gelu"
  if not ACTIVATIONS[act] then
    checks.fail(cfg, "hidden_act", ("%s: hidden_act %s is not supported (\"gelu\" or \"relu\")"):format(who, tostring(act)))
  end
  if cfg.head ~= nil and not HEADS[cfg.head] then
    checks.fail(cfg, "head", ("%s: head %s is not supported (\"classification\" or \"pretraining\")"):format(who,
      tostring(cfg.head)))
  end
  checks.batch_seq(who, opts, cfg.max_position_embeddings, "max_position_embeddings")
end

--- Builds the op graph of one forward pass (the engine derives backward/accumulate from the op rules).
---@param cfg { name?: string, num_hidden_layers: integer, hidden_size: integer, num_attention_heads: integer, intermediate_size: integer, vocab_size: integer, max_position_embeddings: integer, type_vocab_size: integer, hidden_act?: string, num_labels?: integer, head?: "classification"|"pretraining", tie_word_embeddings?: boolean }
---@param opts { batch: integer, seq: integer, training?: boolean, dtype?: string, loss?: boolean, tp?: integer, parallel?: table }
---@return neusight.Node[]
function M.build(cfg, opts)
  check(cfg, opts)
  local b, s, h, nh = opts.batch, opts.seq, cfg.hidden_size, cfg.num_attention_heads
  local V, P, L, ni = cfg.vocab_size, cfg.max_position_embeddings, cfg.num_hidden_layers, cfg.intermediate_size
  local hd, labels = h // nh, cfg.num_labels or 2
  local act_op = ACTIVATIONS[cfg.hidden_act or "gelu"]
  local head = cfg.head or (opts.training and "pretraining" or "classification")
  local dtype = opts.dtype or "fp32"
  local who = ("bert model '%s'"):format(tostring(cfg.name or "?"))
  local shard = (opts.tp or 1) > 1 and require("neusight.parallel").tensor_shard(opts, who) or nil
  local tp = shard and shard.tp or 1
  if shard then
    nh, ni, V = shard.split(nh, "num_attention_heads"), shard.split(ni, "intermediate_size"), shard.vocab(V)
  end
  local hl = nh * hd -- attention width of this rank

  local N = require "neusight.nodes"
  local g = N.new(dtype, shard)
  local nodes, add = g.nodes, g.add
  -- torch.autocast over fp32 modules (opts.autocast, neusight.workload; HF BertForPreTraining, transformers 4.46): the
  -- fp32 embeddings, extended mask (in the fp32 model's dtype), residual adds and LayerNorms (autocast's fp32 list);
  -- each Linear reading an fp32 input casts it (neusight.nodes autocast_cast; its weight: g.add); eager attention's
  -- scores fp32 from the mask add on, softmax in fp32, the probabilities cast for the P·V matmul
  local stream, add_as = N.autocast_setup(g, opts)
  -- autocast's cast of an fp32 input before the linear `name`
  local function cast_in(name, shape) N.autocast_cast(g, name .. ".input_cast", shape) end
  -- Megatron's f (direction "backward") and g ("forward") operators: no-ops without tensor parallelism.
  local tp_all_reduce = g.all_reduce

  -- Shapes are shared between nodes: nodes are read-only for op rules and the engine.
  local x = { b, s, h }                     -- residual stream
  local xl = tp == 1 and x or { b, s, hl }  -- q / k / v / context of this rank's heads
  local heads = { b, nh, s, hd }            -- per-head q / k / v / context
  local scores = { b, nh, s, s }            -- attention scores
  local mask = { b, 1, 1, s }               -- extended attention mask, broadcast over heads and queries
  local pooled = { b, h }                   -- the [CLS] token

  -- Embeddings. The buffered token_type_ids and position_ids rows are sliced to seq (the slice bound
  -- is traced as a (1,) operand).
  add("getitem", "embeddings.token_type_ids", { { 1, P }, { 1 } }, { 1, s })
  -- get_extended_attention_mask: attention_mask[:, None, None, :], then (1.0 − m) · finfo.min.
  add("getitem", "extended_attention_mask", { { b, s } }, mask)
  add_as(stream, "mul", "extended_attention_mask.scale", { mask }, mask) -- × Python float: VECmulu
  add("getitem", "embeddings.position_ids", { { 1, P }, { 1 } }, { 1, s })
  add_as(stream, "embedding", "embeddings.word_embeddings", { { b, s } }, x, V * h, { num_embeddings = V, embedding_dim = h })
  tp_all_reduce("embeddings.word_embeddings.tp_all_reduce", x, "forward",
    "vocab-parallel embedding: sum of the ranks' partial lookups", nil, stream) -- (autocast: the fp32 rows)
  add("view", "embeddings.token_type_embeddings", { { b, s } }, x, cfg.type_vocab_size * h)
  add_as(stream, "add", "embeddings.add_token_type", { x, x }, x)
  add("view", "embeddings.position_embeddings", { { 1, s } }, { 1, s, h }, P * h)
  add_as(stream, "add", "embeddings.add_position", { x, { 1, s, h } }, x)
  add_as(stream, "layernorm", "embeddings.LayerNorm", { x }, x, 2 * h)
  add_as(stream, "dropout", "embeddings.dropout", { x }, x)

  g.layer, g.count = "layer", L
  -- (the tp_in all-reduces carry the gradient of an fp32 LayerNorm output under autocast)
  tp_all_reduce("layer.attention.self.tp_in", x, "backward", "f: input gradient of the column-parallel query/key/value",
    nil, stream)
  cast_in("layer.attention.self.query", x)
  add("linear", "layer.attention.self.query", { x }, xl, h * hl + hl)
  cast_in("layer.attention.self.key", x)
  add("linear", "layer.attention.self.key", { x }, xl, h * hl + hl)
  add("permute", "layer.attention.self.key_heads", { { b, s, nh, hd } }, heads)
  cast_in("layer.attention.self.value", x)
  add("linear", "layer.attention.self.value", { x }, xl, h * hl + hl)
  add("permute", "layer.attention.self.value_heads", { { b, s, nh, hd } }, heads)
  add("permute", "layer.attention.self.query_heads", { { b, s, nh, hd } }, heads)
  if opts.attention == "sdpa" then
    -- HF's BertSdpaSelfAttention: one fused, non-causal kernel each way (the padding mask is an SDPA argument).
    -- output_shared: attention.output.dense saves O itself (a view: ops/sdpa.lua)
    add("sdpa", "layer.attention.self.sdpa", { heads, heads, heads }, heads, 0, { causal = false, output_shared = true })
  else
    add("matmul", "layer.attention.self.qk", { heads, { b, nh, hd, s } }, scores)
    add("div", "layer.attention.self.scale", { scores }, scores) -- / math.sqrt(hd), a Python float: VECdivu
    add_as(stream, "add", "layer.attention.self.mask", { scores, mask }, scores, 0,
      { input_dtypes = N.mixed(g, "dtype", "fp32") })
    add_as(stream, "softmax", "layer.attention.self.softmax", { scores }, scores)
    add_as(stream, "dropout", "layer.attention.self.dropout", { scores }, scores)
    N.autocast_cast(g, "layer.attention.self.pv.p_cast", scores)
    add("matmul", "layer.attention.self.pv", { scores, heads }, heads)
  end
  add("permute", "layer.attention.self.merge_heads", { heads }, { b, s, nh, hd })
  -- .contiguous() copies the eager ·V product; the sdpa kernel's output is already in (b, s, heads, head_dim) order
  -- (ops/sdpa.lua): a no-op there, as in GPT-2 (models/gpt.lua)
  if opts.attention ~= "sdpa" then
    add("contiguous", "layer.attention.self.contiguous", { { b, s, nh, hd } }, { b, s, nh, hd })
  end
  -- Row-parallel attention.output.dense: the bias is added once, after the all-reduce (replicated parameters).
  add("linear", "layer.attention.output.dense", { xl }, x, hl * h + h)
  tp_all_reduce("layer.attention.output.tp_out", x, "forward", "g: sum of the row-parallel attention.output.dense partial outputs")
  add("dropout", "layer.attention.output.dropout", { x }, x)
  add_as(stream, "add", "layer.attention.output.residual", { x, x }, x, 0,
    { fused_external = 1, input_dtypes = N.mixed(g, "dtype", "fp32") }) -- LayerNorm(hidden_states + input_tensor)
  add_as(stream, "layernorm", "layer.attention.output.LayerNorm", { x }, x, 2 * h)
  tp_all_reduce("layer.intermediate.tp_in", x, "backward", "f: input gradient of the column-parallel intermediate.dense",
    nil, stream)
  cast_in("layer.intermediate.dense", x)
  add("linear", "layer.intermediate.dense", { x }, { b, s, ni }, h * ni + ni)
  add(act_op, "layer.intermediate.act", { { b, s, ni } }, { b, s, ni })
  add("linear", "layer.output.dense", { { b, s, ni } }, x, ni * h + h)
  tp_all_reduce("layer.output.tp_out", x, "forward", "g: sum of the row-parallel output.dense partial outputs")
  add("dropout", "layer.output.dropout", { x }, x)
  add_as(stream, "add", "layer.output.residual", { x, x }, x, 0,
    { fused_external = 1, input_dtypes = N.mixed(g, "dtype", "fp32") })
  add_as(stream, "layernorm", "layer.output.LayerNorm", { x }, x, 2 * h)

  g.layer, g.count = "", 1
  -- BertPooler: hidden_states[:, 0] (the reference charges reading the whole input), dense, tanh.
  add_as(stream, "getitem", "pooler.first_token", { x }, pooled)
  cast_in("pooler.dense", pooled)
  add("linear", "pooler.dense", { pooled }, pooled, h * h + h)
  add("tanh", "pooler.activation", { pooled }, pooled)

  local training_loss = opts.training and opts.loss ~= false
  if head == "classification" then
    add("dropout", "dropout", { pooled }, pooled)
    add("linear", "classifier", { pooled }, { b, labels }, h * labels + labels)
    if training_loss then
      add("cross_entropy", "loss", { { b, labels }, { b } }, { 1 })
    end
  else
    -- BertPreTrainingHeads. The decoder's weight is tied to word_embeddings (counted there); its bias is its own.
    cast_in("cls.predictions.transform.dense", x)
    add("linear", "cls.predictions.transform.dense", { x }, x, h * h + h)
    add(act_op, "cls.predictions.transform.act", { x }, x)
    add_as(stream, "layernorm", "cls.predictions.transform.LayerNorm", { x }, x, 2 * h)
    local tied = cfg.tie_word_embeddings ~= false
    tp_all_reduce("cls.predictions.decoder.tp_in", x, "backward", "f: input gradient of the vocab-parallel decoder",
      nil, stream)
    cast_in("cls.predictions.decoder", x)
    add("linear", "cls.predictions.decoder", { x }, { b, s, V }, (tied and 0 or h * V) + V)
    add("linear", "cls.seq_relationship", { pooled }, { b, 2 }, 2 * h + 2)
    if training_loss then
      -- masked-LM loss over prediction_scores.view(-1, V) (a view, no copy) plus the next-sentence loss;
      -- their sum is scalar arithmetic.
      add("cross_entropy", "loss.mlm", { { b * s, V }, { b * s } }, { 1 })
      tp_all_reduce("loss.mlm.tp_all_reduce", { 3, b * s }, "forward",
        "vocab-parallel cross-entropy: max, sum of exp, target logit")
      add("cross_entropy", "loss.nsp", { { b, 2 }, { b } }, { 1 })
    end
  end
  return nodes
end

return M
