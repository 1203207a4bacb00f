-- tests/scripts/test_bert.lua — BERT builder: kernel sequence vs the reference trace, closed-form FLOPs and parameter counts.
local K = require "neusight.kernels"
local bert = require "neusight.models.bert"
local presets = require "neusight.models.presets"

local t = require("neusight.testing").bind(load_op, make_node)
local eq, kernels, flops, kernel_rows = t.eq, t.kernels, t.flops, t.kernel_rows
local total_params = t.params


local T = {}

-- opgraph/bert_large-train-512-2.csv (BertForPreTraining), rows with kernels, minus the getitems of
-- size() results (host-side Python ints, left out by the builder). The pooler's activation is nn.Tanh:
-- the reference's name match charges it as VECrelu(2,1024) | VECrelu(2,1024).
local REFERENCE_TRAIN = {
  "MEM((1,512),(1,),(1,512)) | MEM((1,512),(1,)) MEM((1,512),(1,)) | ", -- getitem_2
  "MEM((2,512),(2,1,1,512)) | MEM((2,512)) MEM((2,512)) | ", -- getitem_3
  "VECmulu(2,512) | VECmulu(2,512) | ", -- mul
  "MEM((1,512),(1,),(1,512)) | MEM((1,512),(1,)) MEM((1,512),(1,)) | ", -- getitem_5
  "MEM((2,512),(2,512,1024)) | MEM((30522,1024)) MEM((30522,1024)) | VECadd(1,31254528)", -- bert_embeddings_word_embeddings
  "VECadd(1024,1024) | MEM((1024,1024)) MEM((1024,1024)) | ", -- add_2
  "VECadd(1024,1024) | MEM((1024,1024)) MEM((1024,1024)) | ", -- add_3
  "VECln(1024,1024) | VECmul(1024,1024) | VECadd(1,1024) VECadd(1,1024)", -- bert_embeddings_layer_norm
  "MEM((2,512,1024),(2,512,1024)) | MEM((2,512,1024)) MEM((2,512,1024)) | ", -- bert_embeddings_dropout
  "Linear(1024,1024,1024) | Linear(1024,1024,1024) Linear(1024,1024,1024) | VECadd(1,1048576) VECadd(1,1024)", -- query
  "Linear(1024,1024,1024) | Linear(1024,1024,1024) Linear(1024,1024,1024) | VECadd(1,1048576) VECadd(1,1024)", -- key
  "Linear(1024,1024,1024) | Linear(1024,1024,1024) Linear(1024,1024,1024) | VECadd(1,1048576) VECadd(1,1024)", -- value
  "BMM(32,512,64,512) | BMM(32,512,512,64) BMM(32,64,512,512) | ", -- matmul
  "VECdivu(16384,512) | VECdivu(16384,512) | ", -- truediv
  "VECadd(16384,512) | MEM((16384,512)) MEM((16384,512)) | ", -- add_7
  "VECsoftmax(16384,512) | VECmul(16384,512) VECsoftmax(16384,512) | ", -- softmax
  "MEM((2,16,512,512),(2,16,512,512)) | MEM((2,16,512,512)) MEM((2,16,512,512)) | ", -- attention_self_dropout
  "BMM(32,512,512,64) | BMM(32,512,64,512) BMM(32,512,512,64) | ", -- matmul_1
  "MEM((2,512,16,64),(2,512,16,64)) | MEM((2,512,16,64)) MEM((2,512,16,64)) | ", -- contiguous
  "Linear(1024,1024,1024) | Linear(1024,1024,1024) Linear(1024,1024,1024) | VECadd(1,1048576) VECadd(1,1024)", -- attention_output_dense
  "MEM((2,512,1024),(2,512,1024)) | MEM((2,512,1024)) MEM((2,512,1024)) | ", -- attention_output_dropout
  "VECadd(1024,1024) | MEM((1024,1024)) MEM((1024,1024)) | ", -- add_9
  "VECln(1024,1024) | VECmul(1024,1024) | VECadd(1,1024) VECadd(1,1024)", -- attention_output_layer_norm
  "Linear(1024,1024,4096) | Linear(1024,4096,1024) Linear(4096,1024,1024) | VECadd(1,4194304) VECadd(1,4096)", -- intermediate_dense
  "VECgelu(1024,4096) | VECgelu(1024,4096) | ", -- gelu
  "Linear(1024,4096,1024) | Linear(1024,1024,4096) Linear(1024,1024,4096) | VECadd(1,4194304) VECadd(1,1024)", -- output_dense
  "MEM((2,512,1024),(2,512,1024)) | MEM((2,512,1024)) MEM((2,512,1024)) | ", -- output_dropout
  "VECadd(1024,1024) | MEM((1024,1024)) MEM((1024,1024)) | ", -- add_10
  "VECln(1024,1024) | VECmul(1024,1024) | VECadd(1,1024) VECadd(1,1024)", -- output_layer_norm
  "MEM((2,512,1024),(2,1024)) | MEM((2,512,1024)) MEM((2,512,1024)) | ", -- getitem_10
  "Linear(2,1024,1024) | Linear(2,1024,1024) Linear(1024,2,1024) | VECadd(1,1048576) VECadd(1,1024)", -- bert_pooler_dense
  "VECtanh(2,1024) | VECmulu(2,1024) VECaddu(2,1024) | ", -- bert_pooler_activation (reference: VECrelu)
  "Linear(1024,1024,1024) | Linear(1024,1024,1024) Linear(1024,1024,1024) | VECadd(1,1048576) VECadd(1,1024)", -- transform_dense
  "VECgelu(1024,1024) | VECgelu(1024,1024) | ", -- gelu_1
  "VECln(1024,1024) | VECmul(1024,1024) | VECadd(1,1024) VECadd(1,1024)", -- transform_layer_norm
  "Linear(1024,1024,30522) | Linear(1024,30522,1024) Linear(30522,1024,1024) | VECadd(1,31254528) VECadd(1,30522)", -- decoder
  "Linear(2,1024,2) | Linear(2,2,1024) Linear(2,2,1024) | VECadd(1,2048) VECadd(1,2)", -- cls_seq_relationship
}

function T.test_bert_large_train_matches_reference_trace()
  local nodes = bert.build(presets.bert_large, { batch = 2, seq = 512, training = true, loss = false })
  t.rows_match(kernel_rows(nodes, true), REFERENCE_TRAIN)
end

-- opgraph/bert_large-inf-512-8.csv (BertForSequenceClassification): the same encoder, then
-- pooler, dropout (free in inference) and a 2-way classifier.
function T.test_bert_large_inference_head_is_the_classifier()
  local nodes = bert.build(presets.bert_large, { batch = 8, seq = 512, training = false })
  local lines = kernel_rows(nodes, false)
  eq(lines[#lines - 2], "Linear(8,1024,1024) |  | ", "pooler dense")
  eq(lines[#lines - 1], "VECtanh(8,1024) |  | ", "pooler activation")
  eq(lines[#lines], "Linear(8,1024,2) |  | ", "classifier")
  eq(nodes[#nodes].name, "classifier", "last node")
  -- A forced head overrides the mode's default.
  local forced = bert.build(setmetatable({ head = "pretraining" }, { __index = presets.bert_large }),
    { batch = 8, seq = 512, training = false })
  eq(forced[#forced].name, "cls.seq_relationship", "forced pre-training head")
end

function T.test_layer_nodes_are_replicated_by_count()
  local cfg = presets.bert_large
  local nodes = bert.build(cfg, { batch = 8, seq = 512, training = true })
  local seen, layer_nodes = {}, 0
  for _, n in ipairs(nodes) do
    assert(not seen[n.name], "duplicate node name " .. n.name)
    seen[n.name] = true
    if n.layer == "layer" then
      layer_nodes = layer_nodes + 1
      eq(n.count, cfg.num_hidden_layers, n.name .. " count")
      assert(n.name:sub(1, 6) == "layer.", "layer node names start with 'layer.': " .. n.name)
    else
      eq(n.count, 1, n.name .. " count")
    end
  end
  eq(layer_nodes, 24, "nodes per layer")
end

-- Tiny config: closed-form forward FLOPs (T = b·s tokens, I = intermediate_size).
local TINY = {
  name = "tiny", arch = "bert", num_hidden_layers = 2, hidden_size = 64, num_attention_heads = 4,
  intermediate_size = 256, vocab_size = 100, max_position_embeddings = 16, type_vocab_size = 2,
}

function T.test_tiny_forward_flops_closed_form()
  local b, s, h, nh, I, V, L = 2, 16, 64, 4, 256, 100, 2
  local T_ = b * s
  local gemm_layer = 2 * T_ * (4 * h * h + 2 * h * I)    -- q, k, v, attention output; intermediate, output
  local bmm_layer = 2 * 2 * b * s * s * h                 -- QKᵀ and PV over all heads
  local vec_layer = 2 * b * nh * s * s                    -- scale, mask add
    + 5 * b * nh * s * s                                  -- softmax
    + 2 * T_ * h + 2 * 6 * T_ * h                         -- two residual adds, two layer norms
    + T_ * I                                              -- gelu
  local prologue = b * s + 2 * T_ * h + 6 * T_ * h        -- mask scale; token-type and position adds; LayerNorm
  local pooler = 2 * b * h * h + b * h                    -- dense, tanh

  -- Inference: sequence-classification head (2 labels).
  local inf = bert.build(TINY, { batch = b, seq = s, training = false })
  local classifier = 2 * b * h * 2
  eq(flops(inf, false, "fw", "gemm"), L * gemm_layer + 2 * b * h * h + classifier, "GEMM forward flops")
  eq(flops(inf, false, "fw", "bmm"), L * bmm_layer, "BMM forward flops")
  eq(flops(inf, false, "fw"), L * (gemm_layer + bmm_layer + vec_layer) + prologue + pooler + classifier,
    "total forward flops (classification)")

  -- Training: pre-training heads (transform dense + gelu + LayerNorm, decoder, next-sentence) and both losses.
  local train = bert.build(TINY, { batch = b, seq = s, training = true })
  local heads = 2 * T_ * h * h + T_ * h + 6 * T_ * h + 2 * T_ * h * V + 2 * b * h * 2
  local losses = 5 * T_ * V + 5 * b * 2                   -- log-softmax over the MLM and NSP logits
  eq(flops(train, true, "fw"), L * (gemm_layer + bmm_layer + vec_layer) + prologue + pooler + heads + losses,
    "total forward flops (pre-training)")
  local no_loss = bert.build(TINY, { batch = b, seq = s, training = true, loss = false })
  eq(flops(train, true, "bw", "gemm"), 2 * flops(no_loss, true, "fw", "gemm"), "GEMM backward flops")
  eq(flops(train, true, "bw", "bmm"), 2 * flops(no_loss, true, "fw", "bmm"), "BMM backward flops")
end

function T.test_parameter_count_matches_hf()
  local cfg = presets.bert_large
  local h, L, V, P, I = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size, cfg.max_position_embeddings,
    cfg.intermediate_size
  -- BertModel: embeddings (+ LayerNorm), per layer 4(h² + h) + 2·h·I + I + h + 2·2h, pooler h² + h.
  local encoder = (V + P + cfg.type_vocab_size) * h + 2 * h + L * (4 * h * h + 4 * h + 2 * h * I + I + h + 4 * h)
    + h * h + h
  eq(encoder, 335141888, "bert-large-uncased BertModel parameters")
  local inf = bert.build(cfg, { batch = 1, seq = 512, training = false })
  eq(total_params(inf), encoder + 2 * h + 2, "BertForSequenceClassification (2 labels)")
  -- BertForPreTraining: transform dense + LayerNorm, decoder bias (weight tied), next-sentence head.
  local train = bert.build(cfg, { batch = 1, seq = 512, training = true })
  eq(total_params(train), 336226108, "BertForPreTraining parameters")
  eq(total_params(train), encoder + h * h + h + 2 * h + V + 2 * h + 2, "pre-training heads")
end

function T.test_training_appends_losses()
  local nodes = bert.build(TINY, { batch = 2, seq = 16, training = true })
  eq(nodes[#nodes - 1].op, "cross_entropy", "masked-LM loss")
  eq(nodes[#nodes - 1].inputs[1][1], 2 * 16, "MLM loss rows: b·s")
  eq(nodes[#nodes].name, "loss.nsp", "next-sentence loss")
  nodes = bert.build(TINY, { batch = 2, seq = 16, training = true, loss = false })
  eq(nodes[#nodes].name, "cls.seq_relationship", "loss = false")
end

function T.test_config_errors()
  local bad = setmetatable({ num_attention_heads = 5 }, { __index = TINY })
  local ok, err = pcall(bert.build, bad, { batch = 1, seq = 8 })
  eq(not ok and err, "bert model 'tiny': hidden_size (64) must be divisible by num_attention_heads (5)", "divisibility")
  ok, err = pcall(bert.build, TINY, { batch = 1, seq = 17 })
  eq(not ok and err, "bert model 'tiny': seq 17 exceeds max_position_embeddings 16, the rows of its learned position table: give a seq of at most 16", "sequence too long")
  ok, err = pcall(bert.build, setmetatable({ hidden_act = "gelu_new" }, { __index = TINY }), { batch = 1, seq = 8 })
  eq(not ok and err, "bert model 'tiny': hidden_act gelu_new is not supported (\"gelu\" or \"relu\")", "activation")
  ok, err = pcall(bert.build, setmetatable({ intermediate_size = 0 }, { __index = TINY }), { batch = 1, seq = 8 })
  eq(not ok and err, "bert model 'tiny': field 'intermediate_size' must be a positive integer (got 0)", "size")
end

---------------------------------------------------------------------------------------------------
-- Tensor parallelism (Megatron-LM sharding, as in the GPT builder)

local tp_plan, same, matmul_flops = t.tp_plan, t.same, t.matmul_flops

-- Linear layers Megatron's BERT keeps whole on every rank: the pooler, the LM-head transform, the NSP head.
local REPLICATED_GEMMS = { ["pooler.dense"] = true, ["cls.predictions.transform.dense"] = true,
                           ["cls.seq_relationship"] = true, classifier = true }

function T.test_bert_tp1_graph_is_unchanged()
  t.tp1_unchanged(bert, presets.bert_large, 4, 512)
end

function T.test_bert_tp_collectives_per_layer_and_heads()
  local b, s, tp = 2, 16, 4
  local nodes = bert.build(TINY, { batch = b, seq = s, training = true, tp = tp, parallel = tp_plan(tp, b) })
  local per_layer, outside, names = { forward = 0, backward = 0 }, {}, {}
  for i, n in ipairs(nodes) do
    names[n.name] = i
    if n.attrs.group == "tp" then
      eq(n.op, "all_reduce", n.name .. " op")
      eq(n.attrs.ranks, tp, n.name .. " ranks")
      eq(n.params, 0, n.name .. " params")
      if n.layer == "layer" then
        per_layer[n.attrs.direction] = per_layer[n.attrs.direction] + 1
        eq(n.count, TINY.num_hidden_layers, n.name .. " count")
        eq(table.concat(n.output, ","), "2,16,64", n.name .. " activation-sized")
      else
        outside[n.name] = n
      end
    end
  end
  eq(per_layer.forward, 2, "forward all-reduces (g) per layer")
  eq(per_layer.backward, 2, "backward all-reduces (f) per layer")
  -- f before the column-parallel layers, g after the row-parallel ones.
  eq(names["layer.attention.self.tp_in"] + 1, names["layer.attention.self.query"], "f before query")
  eq(names["layer.attention.output.tp_out"] - 1, names["layer.attention.output.dense"], "g after attention output")
  eq(names["layer.intermediate.tp_in"] + 1, names["layer.intermediate.dense"], "f before intermediate")
  eq(names["layer.output.tp_out"] - 1, names["layer.output.dense"], "g after output.dense")
  eq(outside["embeddings.word_embeddings.tp_all_reduce"].attrs.direction, "forward", "embedding g")
  eq(names["embeddings.word_embeddings.tp_all_reduce"] - 1, names["embeddings.word_embeddings"], "g after the lookup")
  eq(outside["cls.predictions.decoder.tp_in"].attrs.direction, "backward", "decoder f")
  eq(names["cls.predictions.decoder.tp_in"] + 1, names["cls.predictions.decoder"], "f before the decoder")
  local ce = outside["loss.mlm.tp_all_reduce"]
  eq(ce.attrs.direction, "forward", "cross-entropy all-reduce")
  eq(table.concat(ce.output, ","), "3," .. b * s, "max, sum, target logit per token")
  local count = 0
  for _ in pairs(outside) do count = count + 1 end
  eq(count, 3, "collectives outside the layers")
  -- Per-rank shapes: one of the 4 heads, a quarter of the intermediate and of the vocabulary.
  local q = nodes[names["layer.attention.self.query"]]
  eq(table.concat(q.output, ","), "2,16,16", "query output: this rank's heads")
  eq(table.concat(nodes[names["layer.attention.self.key_heads"]].inputs[1], ","), "2,16,1,16", "heads view")
  eq(table.concat(nodes[names["layer.attention.self.qk"]].output, ","), "2,1,16,16", "scores")
  eq(table.concat(nodes[names["layer.attention.output.dense"]].inputs[1], ","), "2,16,16", "row-parallel input")
  eq(table.concat(nodes[names["layer.intermediate.dense"]].output, ","), "2,16,64", "intermediate")
  eq(nodes[names["embeddings.word_embeddings"]].attrs.num_embeddings, 25, "vocab rows per rank")
  eq(table.concat(nodes[names["loss.mlm"]].inputs[1], ","), "32,25", "vocab-parallel logits")
  -- Inference (classification head): no vocabulary head, so only the embedding's g outside the layers.
  local inf = bert.build(TINY, { batch = b, seq = s, training = false, tp = tp, parallel = tp_plan(tp, b) })
  local n_comm = 0
  for _, n in ipairs(inf) do if n.attrs.group == "tp" then n_comm = n_comm + 1 end end
  eq(n_comm, 4 + 1, "collectives in inference")
end

function T.test_bert_tp_matmul_flops_split_by_tp()
  local b, s, tp = 2, 16, 4
  local one = bert.build(TINY, { batch = b, seq = s, training = true })
  local sharded = bert.build(TINY, { batch = b, seq = s, training = true, tp = tp, parallel = tp_plan(tp, b) })
  local function split(n) return not REPLICATED_GEMMS[n.name] end
  local function replicated(n) return REPLICATED_GEMMS[n.name] end
  assert(matmul_flops(one, split) > 0, "some split GEMM work")
  -- vocab_size = 100 divides by 4: no padding, the split work is exactly a quarter.
  eq(tp * matmul_flops(sharded, split), matmul_flops(one, split), "split GEMM/BMM FLOPs × tp")
  eq(matmul_flops(sharded, replicated), matmul_flops(one, replicated), "replicated GEMM FLOPs")
  eq(tp * matmul_flops(sharded), matmul_flops(one) + (tp - 1) * matmul_flops(one, replicated), "all GEMM/BMM FLOPs")
  -- bert-large's 30522 words pad to 4 · 7631 rows.
  local big = bert.build(presets.bert_large,
    { batch = 8, seq = 512, training = true, tp = tp, parallel = tp_plan(tp, 8) })
  for _, n in ipairs(big) do
    if n.name == "cls.predictions.decoder" then eq(n.output[3], 7631, "padded vocab rows per rank") end
    if n.name == "embeddings.word_embeddings" then eq(n.params, 7631 * 1024, "vocab-parallel table") end
  end
end

function T.test_bert_tp_parameters_per_rank()
  local h, L, I, V = TINY.hidden_size, TINY.num_hidden_layers, TINY.intermediate_size, TINY.vocab_size
  local Pos, types, tp = TINY.max_position_embeddings, TINY.type_vocab_size, 4
  local one = bert.build(TINY, { batch = 2, seq = 16, training = true })
  local sharded = bert.build(TINY, { batch = 2, seq = 16, training = true, tp = tp, parallel = tp_plan(tp, 2) })
  -- per layer: the two row-parallel biases and two LayerNorms; embeddings: token-type and position
  -- tables and LayerNorm; pooler; LM-head transform dense + LayerNorm; next-sentence head.
  local replicated = L * (h + h + 2 * h + 2 * h) + (types + Pos) * h + 2 * h + (h * h + h) + (h * h + h) + 2 * h
    + (2 * h + 2)
  eq(total_params(sharded), (total_params(one) - replicated) // tp + replicated, "parameters per rank")
  -- the same, closed form: q/k/v and intermediate column shards, row-parallel weights, the vocabulary
  -- (word table and decoder bias) split.
  local per_layer = 3 * (h * h / tp + h / tp) + (h / tp * h + h) + (h * I / tp + I / tp) + (I / tp * h + h) + 4 * h
  eq(total_params(sharded), L * per_layer + V / tp * h + V / tp + (types + Pos) * h + 2 * h
    + 2 * (h * h + h) + 2 * h + 2 * h + 2, "closed form")
end

function T.test_bert_tp_errors()
  local ok, err = pcall(bert.build, TINY, { batch = 3, seq = 8, training = true, tp = 3, parallel = tp_plan(3, 3) })
  eq(not ok and err, "bert model 'tiny': num_attention_heads = 4 is not divisible by tp = 3: give a tp that divides 4 (1, 2, 4)", "heads")
  local odd = setmetatable({ intermediate_size = 258 }, { __index = TINY })
  ok, err = pcall(bert.build, odd, { batch = 4, seq = 8, training = true, tp = 4, parallel = tp_plan(4, 4) })
  eq(not ok and err, "bert model 'tiny': intermediate_size = 258 is not divisible by tp = 4: give a tp that divides 258 (1, 2, 3, 6, 43)", "intermediate")
  ok, err = pcall(bert.build, TINY, { batch = 2, seq = 8, training = true, tp = 2 })
  eq(not ok and err, "bert model 'tiny': opts.tp > 1 needs opts.parallel (a neusight.parallel plan)", "no plan")
end

function T.test_sdpa_output_reaches_the_output_dense_without_a_copy()
  -- As in GPT-2 (test_gpt.lua): after sdpa the merge of the heads is a view; eager's ·V product is copied.
  local function names(attention)
    local out = {}
    for _, n in ipairs(bert.build(TINY, { batch = 2, seq = 16, training = true, dtype = "bf16", attention = attention })) do
      out[n.name] = n.op
    end
    return out
  end
  eq(names("eager")["layer.attention.self.contiguous"], "contiguous", "eager: the copy")
  eq(names("sdpa")["layer.attention.self.contiguous"], nil, "sdpa: no copy")
end

return T
