-- tests/scripts/test_opt.lua — OPT builder: kernel sequence vs the reference trace, closed-form FLOPs and parameter counts.
local K = require "neusight.kernels"
local opt = require "neusight.models.opt"
local presets = require "neusight.models.presets"

local t = require("neusight.testing").bind(load_op, make_node)
local eq, kernels, flops = t.eq, t.kernels, t.flops
local total_params = t.params

local T = {}

-- opgraph/opt_13-train-2048-1.csv, rows with kernels, minus the getitems of size() results (host-side
-- Python ints, left out by the builder), plus the scores' clamp max_1 that the reference leaves without kernels.
-- lm_head has no bias, so its bias-gradient VECadd(1,50272) that
-- the reference still accumulates is absent.
local REFERENCE_TRAIN = {
  "MEM((1,2048),(1,2048,2048)) | MEM((50272,2048)) MEM((50272,2048)) | VECadd(1,102957056)", -- model_decoder_embed_tokens
  "VECaddu(1,2048) | MEM((1,2048)) | ", -- add_2
  "MEM((2048,2048),(1,1,2048,2048)) | MEM((2048,2048)) MEM((2048,2048)) | ", -- getitem_6
  "MEM((1,2048),(1,1,1,2048)) | MEM((1,2048)) MEM((1,2048)) | ", -- getitem_9
  "MEM((1,2048),(1,2048)) | MEM((1,2048)) MEM((1,2048)) | ", -- cumsum
  "VECmul(1,2048) | VECmul(1,2048) VECmul(1,2048) | ", -- mul
  "MEM((1,2048),(1,2048)) | MEM((1,2048)) MEM((1,2048)) | ", -- getitem_10
  "VECaddu(1,2048) | MEM((1,2048)) | ", -- add_4
  "VECadd(2048,2048) | MEM((2048,2048)) MEM((2048,2048)) | ", -- add_5
  "VECln(2048,2048) | VECmul(2048,2048) | VECadd(1,2048) VECadd(1,2048)", -- self_attn_layer_norm
  "Linear(2048,2048,2048) | Linear(2048,2048,2048) Linear(2048,2048,2048) | VECadd(1,4194304) VECadd(1,2048)", -- q_proj
  "VECmulu(2048,2048) | VECmulu(2048,2048) | ", -- mul_1
  "Linear(2048,2048,2048) | Linear(2048,2048,2048) Linear(2048,2048,2048) | VECadd(1,4194304) VECadd(1,2048)", -- k_proj
  "MEM((1,32,2048,64),(1,32,2048,64)) | MEM((1,32,2048,64)) MEM((1,32,2048,64)) | ", -- contiguous
  "Linear(2048,2048,2048) | Linear(2048,2048,2048) Linear(2048,2048,2048) | VECadd(1,4194304) VECadd(1,2048)", -- v_proj
  "MEM((1,32,2048,64),(1,32,2048,64)) | MEM((1,32,2048,64)) MEM((1,32,2048,64)) | ", -- contiguous_1
  "MEM((1,32,2048,64),(1,32,2048,64)) | MEM((1,32,2048,64)) MEM((1,32,2048,64)) | ", -- contiguous_2
  "BMM(32,2048,64,2048) | BMM(32,2048,2048,64) BMM(32,64,2048,2048) | ", -- bmm
  "VECadd(65536,2048) | MEM((65536,2048)) MEM((65536,2048)) | ", -- add_6
  -- max_1 (the scores' clamp): 'misc' in the reference, an element-wise kernel (ops/maximum.lua, and the importer)
  "VECmaxu(65536,2048) | VECeq(65536,2048) VECdivu(65536,2048) VECwhere(65536,2048) VEClt(65536,2048) VECmasked_fill(65536,2048) | ",
  "VECsoftmax(65536,2048) | VECmul(65536,2048) VECsoftmax(65536,2048) | ", -- softmax
  "MEM((32,2048,2048),(32,2048,2048)) | MEM((32,2048,2048)) MEM((32,2048,2048)) | ", -- dropout
  "BMM(32,2048,2048,64) | BMM(32,2048,64,2048) BMM(32,2048,2048,64) | ", -- bmm_1
  "Linear(2048,2048,2048) | Linear(2048,2048,2048) Linear(2048,2048,2048) | VECadd(1,4194304) VECadd(1,2048)", -- out_proj
  "MEM((1,2048,2048),(1,2048,2048)) | MEM((1,2048,2048)) MEM((1,2048,2048)) | ", -- dropout_1
  "VECadd(2048,2048) | MEM((2048,2048)) MEM((2048,2048)) | ", -- add_7
  "VECln(2048,2048) | VECmul(2048,2048) | VECadd(1,2048) VECadd(1,2048)", -- final_layer_norm (layer)
  "Linear(2048,2048,8192) | Linear(2048,8192,2048) Linear(8192,2048,2048) | VECadd(1,16777216) VECadd(1,8192)", -- fc1
  "VECrelu(2048,8192) | VECrelu(2048,8192) | ", -- activation_fn
  "Linear(2048,8192,2048) | Linear(2048,2048,8192) Linear(2048,2048,8192) | VECadd(1,16777216) VECadd(1,2048)", -- fc2
  "MEM((2048,2048),(2048,2048)) | MEM((2048,2048)) MEM((2048,2048)) | ", -- dropout_2
  "VECadd(2048,2048) | MEM((2048,2048)) MEM((2048,2048)) | ", -- add_8
  "VECln(2048,2048) | VECmul(2048,2048) | VECadd(1,2048) VECadd(1,2048)", -- model_decoder_final_layer_norm
  "Linear(2048,2048,50272) | Linear(2048,50272,2048) Linear(50272,2048,2048) | VECadd(1,102957056)", -- lm_head
  "MEM((1,2048,50272),(1,2048,50272)) | MEM((1,2048,50272)) MEM((1,2048,50272)) | ", -- contiguous_3
}

function T.test_opt_13_train_matches_reference_trace()
  local nodes = opt.build(presets.opt_13, { batch = 1, seq = 2048, training = true, loss = false })
  t.rows_match(t.kernel_rows(nodes, true), REFERENCE_TRAIN)
end

function T.test_layer_nodes_are_replicated_by_count()
  local cfg = presets.opt_13
  local nodes = opt.build(cfg, { batch = 2, seq = 2048, training = false })
  local seen, layer_nodes = {}, 0
  for _, n in ipairs(nodes) do
    assert(not seen[n.name], "duplicate node name " .. n.name)
    seen[n.name] = true
    if n.layer == "layers" then
      layer_nodes = layer_nodes + 1
      eq(n.count, cfg.num_hidden_layers, n.name .. " count")
      assert(n.name:sub(1, 7) == "layers.", "layer node names start with 'layers.': " .. n.name)
    else
      eq(n.count, 1, n.name .. " count")
    end
  end
  eq(layer_nodes, 30, "nodes per layer")
  assert(not seen["loss"], "no loss node in inference")
end

-- Tiny config: closed-form forward FLOPs (T = b·s tokens, F = ffn_dim).
local TINY = {
  name = "tiny", arch = "opt", num_hidden_layers = 2, hidden_size = 64, num_attention_heads = 4, ffn_dim = 256,
  vocab_size = 100, max_position_embeddings = 16,
}

function T.test_tiny_forward_flops_closed_form()
  local b, s, h, nh, F, V, L = 2, 16, 64, 4, 256, 100, 2
  local T_ = b * s
  local gemm_layer = 2 * T_ * (4 * h * h + 2 * h * F)  -- q, k, v, out_proj; fc1, fc2
  local bmm_layer = 2 * 2 * b * s * s * h               -- QKᵀ and PV over all heads
  local vec_layer = 2 * 6 * T_ * h                      -- two layer norms
    + T_ * h                                            -- q scaling
    + b * nh * s * s + b * nh * s * s + 5 * b * nh * s * s -- mask add, score clamp, softmax
    + 2 * T_ * h                                        -- two residual adds
    + T_ * F                                            -- relu
  local prologue = s + 2 * b * s + T_ * h               -- mask_cond + 1; positions mask·cumsum and + 2; embed add
  local epilogue = 6 * T_ * h + 2 * T_ * h * V          -- final LayerNorm, lm_head
  local nodes = opt.build(TINY, { batch = b, seq = s, training = false })

  eq(flops(nodes, false, "fw", "gemm"), L * gemm_layer + 2 * T_ * h * V, "GEMM forward flops")
  eq(flops(nodes, false, "fw", "bmm"), L * bmm_layer, "BMM forward flops")
  eq(flops(nodes, false, "fw"), L * (gemm_layer + bmm_layer + vec_layer) + prologue + epilogue, "total forward flops")

  -- word_embed_proj_dim ≠ hidden_size adds project_in and project_out (bias-free), and lm_head reads the wider x.
  local wide = setmetatable({ word_embed_proj_dim = 96 }, { __index = TINY })
  local wide_nodes = opt.build(wide, { batch = b, seq = s, training = false })
  eq(flops(wide_nodes, false, "fw", "gemm"), L * gemm_layer + 2 * (2 * T_ * 96 * h) + 2 * T_ * 96 * V,
    "GEMM forward flops with project_in/out")

  -- Training: + the loss's log-softmax over b·(s−1) rows; backward GEMM/BMM work is twice the forward.
  local train = opt.build(TINY, { batch = b, seq = s, training = true })
  eq(flops(train, true, "fw"), flops(nodes, false, "fw") + 5 * b * (s - 1) * V, "training forward flops")
  eq(flops(train, true, "bw", "gemm"), 2 * flops(nodes, false, "fw", "gemm"), "GEMM backward flops")
  eq(flops(train, true, "bw", "bmm"), 2 * flops(nodes, false, "fw", "bmm"), "BMM backward flops")
end

function T.test_parameter_count_matches_hf()
  local cfg = presets.opt_13
  local h, L, V, P, F = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size, cfg.max_position_embeddings, cfg.ffn_dim
  local nodes = opt.build(cfg, { batch = 1, seq = 2048, training = true })
  -- embed_tokens, embed_positions (P + 2 rows), per layer 4(h² + h) + 2·2h + (h·F + F) + (F·h + h),
  -- final LayerNorm; lm_head tied to embed_tokens.
  eq(total_params(nodes), V * h + (P + 2) * h + L * (4 * h * h + 4 * h + 4 * h + 2 * h * F + F + h) + 2 * h, "parameters")
  eq(total_params(nodes), 1315758080, "facebook/opt-1.3b parameters")
  -- The reference's tiny "opt": 512 wide with 2048-wide token embeddings, bridged by project_in/out.
  local tiny = presets.opt
  local th, tw, tF = tiny.hidden_size, tiny.word_embed_proj_dim, tiny.ffn_dim
  eq(total_params(opt.build(tiny, { batch = 1, seq = 8 })),
    V * tw + (P + 2) * th + 2 * tw * th + (4 * th * th + 8 * th + 2 * th * tF + tF + th) + 2 * th, "tiny opt parameters")
end

function T.test_post_layer_norm_variant()
  -- do_layer_norm_before = false (OPT-350m): LayerNorms after the residual adds, no final LayerNorm.
  local post = setmetatable({ do_layer_norm_before = false }, { __index = TINY })
  local nodes = opt.build(post, { batch = 1, seq = 8 })
  local names = {}
  for i, n in ipairs(nodes) do names[n.name] = i end
  assert(names["layers.self_attn_layer_norm"] > names["layers.self_attn.residual"], "attention LayerNorm after residual")
  assert(names["layers.final_layer_norm"] > names["layers.fc_residual"], "FFN LayerNorm after residual")
  eq(names["final_layer_norm"], nil, "no decoder-level final LayerNorm")
end

function T.test_training_appends_loss()
  local nodes = opt.build(TINY, { batch = 2, seq = 16, training = true })
  eq(nodes[#nodes].op, "cross_entropy", "last node")
  eq(nodes[#nodes].inputs[1][1], 2 * 15, "loss rows: b·(s−1)")
  eq(nodes[#nodes - 1].name, "loss.shift_logits", "shift copy before the loss")
  nodes = opt.build(TINY, { batch = 2, seq = 16, training = true, loss = false })
  eq(nodes[#nodes].name, "logits.contiguous", "loss = false")
end

function T.test_config_errors()
  local bad = setmetatable({ num_attention_heads = 5 }, { __index = TINY })
  local ok, err = pcall(opt.build, bad, { batch = 1, seq = 8 })
  eq(not ok and err, "opt model 'tiny': hidden_size (64) must be divisible by num_attention_heads (5)", "divisibility")
  ok, err = pcall(opt.build, TINY, { batch = 1, seq = 17 })
  eq(not ok and err, "opt model 'tiny': seq 17 exceeds max_position_embeddings 16, the rows of its learned position table: give a seq of at most 16", "sequence too long")
  ok, err = pcall(opt.build, setmetatable({ activation_function = "silu" }, { __index = TINY }), { batch = 1, seq = 8 })
  eq(not ok and err, "opt model 'tiny': activation_function silu is not supported (\"relu\" or \"gelu\")", "activation")
  ok, err = pcall(opt.build, setmetatable({ ffn_dim = 1.5 }, { __index = TINY }), { batch = 1, seq = 8 })
  eq(not ok and err, "opt model 'tiny': field 'ffn_dim' must be a positive integer (got 1.5)", "ffn_dim")
end

---------------------------------------------------------------------------------------------------
-- Tensor parallelism (Megatron-LM sharding, as in the GPT builder)

local tp_plan, same, matmul_flops = t.tp_plan, t.same, t.matmul_flops

-- project_in / project_out (word_embed_proj_dim ≠ hidden_size) stay whole on every rank.
local REPLICATED_GEMMS = { project_in = true, project_out = true }

function T.test_opt_tp1_graph_is_unchanged()
  for _, cfg in ipairs { presets.opt_13, presets.opt } do t.tp1_unchanged(opt, cfg, 4, 2048) end
end

function T.test_opt_tp_collectives_per_layer_and_heads()
  local b, s, tp = 2, 16, 4
  for _, post in ipairs { false, true } do
    local cfg = setmetatable({ do_layer_norm_before = not post }, { __index = TINY })
    local nodes = opt.build(cfg, { batch = b, seq = s, training = true, tp = tp, parallel = tp_plan(tp, b) })
    local per_layer, outside, names = { forward = 0, backward = 0 }, {}, {}
    for i, n in ipairs(nodes) do
      names[n.name] = i
      if n.attrs.group == "tp" then
        eq(n.op, "all_reduce", n.name .. " op")
        eq(n.attrs.ranks, tp, n.name .. " ranks")
        eq(n.params, 0, n.name .. " params")
        if n.layer == "layers" then
          per_layer[n.attrs.direction] = per_layer[n.attrs.direction] + 1
          eq(n.count, TINY.num_hidden_layers, n.name .. " count")
          eq(n.output[1] * n.output[2] * (n.output[3] or 1), b * s * 64, n.name .. " activation-sized")
        else
          outside[n.name] = n
        end
      end
    end
    eq(per_layer.forward, 2, "forward all-reduces (g) per layer")
    eq(per_layer.backward, 2, "backward all-reduces (f) per layer")
    eq(names["layers.self_attn.tp_in"] + 1, names["layers.self_attn.q_proj"], "f before q_proj")
    eq(names["layers.self_attn.tp_out"] - 1, names["layers.self_attn.out_proj"], "g after out_proj")
    eq(names["layers.fc1.tp_in"] + 1, names["layers.fc1"], "f before fc1")
    eq(names["layers.fc2.tp_out"] - 1, names["layers.fc2"], "g after fc2")
    eq(outside["embed_tokens.tp_all_reduce"].attrs.direction, "forward", "embedding g")
    eq(names["embed_tokens.tp_all_reduce"] - 1, names["embed_tokens"], "g after the lookup")
    eq(outside["lm_head.tp_in"].attrs.direction, "backward", "lm_head f")
    eq(names["lm_head.tp_in"] + 1, names["lm_head"], "f before lm_head")
    local ce = outside["loss.tp_all_reduce"]
    eq(ce.attrs.direction, "forward", "cross-entropy all-reduce")
    eq(table.concat(ce.output, ","), "3," .. b * (s - 1), "max, sum, target logit per token")
    local count = 0
    for _ in pairs(outside) do count = count + 1 end
    eq(count, 3, "collectives outside the layers")
    -- Per-rank shapes: one of the 4 heads, a quarter of ffn_dim and of the vocabulary.
    eq(table.concat(nodes[names["layers.self_attn.q_proj"]].output, ","), "2,16,16", "q_proj: this rank's heads")
    eq(table.concat(nodes[names["layers.self_attn.k_heads"]].inputs[1], ","), "2,16,1,16", "heads view")
    eq(table.concat(nodes[names["layers.self_attn.qk"]].inputs[1], ","), "2,16,16", "bmm batch b·nh/tp")
    eq(table.concat(nodes[names["layers.self_attn.mask"]].inputs[1], ","), "2,1,16,16", "scores view")
    eq(table.concat(nodes[names["layers.self_attn.out_proj"]].inputs[1], ","), "2,16,16", "row-parallel input")
    eq(table.concat(nodes[names["layers.fc1"]].output, ","), "32,64", "fc1 columns")
    eq(nodes[names["embed_tokens"]].attrs.num_embeddings, 25, "vocab rows per rank")
    eq(table.concat(nodes[names["loss"]].inputs[1], ","), "30,25", "vocab-parallel logits")
  end
end

function T.test_opt_tp_matmul_flops_split_by_tp()
  local b, s, tp = 2, 16, 4
  local function split(n) return not REPLICATED_GEMMS[n.name] end
  local function replicated(n) return REPLICATED_GEMMS[n.name] end
  for _, wep in ipairs { 64, 96 } do
    local cfg = setmetatable({ word_embed_proj_dim = wep }, { __index = TINY })
    local one = opt.build(cfg, { batch = b, seq = s, training = true })
    local sharded = opt.build(cfg, { batch = b, seq = s, training = true, tp = tp, parallel = tp_plan(tp, b) })
    assert(matmul_flops(one, split) > 0, "some split GEMM work")
    -- vocab_size = 100 divides by 4: no padding, the split work is exactly a quarter.
    eq(tp * matmul_flops(sharded, split), matmul_flops(one, split), "split GEMM/BMM FLOPs × tp")
    eq(matmul_flops(sharded, replicated), matmul_flops(one, replicated), "replicated GEMM FLOPs")
    eq(tp * matmul_flops(sharded), matmul_flops(one) + (tp - 1) * matmul_flops(one, replicated), "all GEMM/BMM FLOPs")
  end
  -- A vocabulary that does not divide pads to a multiple of tp (Megatron): 102 words → 4 · 26 rows.
  local padded = opt.build(setmetatable({ vocab_size = 102 }, { __index = TINY }),
    { batch = b, seq = s, training = true, tp = tp, parallel = tp_plan(tp, b) })
  for _, n in ipairs(padded) do
    if n.name == "lm_head" then eq(n.output[3], 26, "padded vocab rows per rank") end
    if n.name == "embed_tokens" then eq(n.params, 26 * 64, "vocab-parallel table") end
  end
end

function T.test_opt_tp_parameters_per_rank()
  local h, L, F, V, Pos, tp = TINY.hidden_size, TINY.num_hidden_layers, TINY.ffn_dim, TINY.vocab_size,
    TINY.max_position_embeddings, 4
  for _, wep in ipairs { 64, 96 } do
    local cfg = setmetatable({ word_embed_proj_dim = wep }, { __index = TINY })
    local one = opt.build(cfg, { batch = 2, seq = 16, training = true })
    local sharded = opt.build(cfg, { batch = 2, seq = 16, training = true, tp = tp, parallel = tp_plan(tp, 2) })
    -- per layer: out_proj and fc2 biases, two LayerNorms; the position table, the final LayerNorm and
    -- project_in/out when present.
    local proj = wep ~= h and 2 * wep * h or 0
    local replicated = L * (h + h + 2 * h + 2 * h) + (Pos + 2) * h + 2 * h + proj
    eq(total_params(sharded), (total_params(one) - replicated) // tp + replicated, "parameters per rank")
    local per_layer = 3 * (h * h / tp + h / tp) + (h / tp * h + h) + (h * F / tp + F / tp) + (F / tp * h + h) + 4 * h
    eq(total_params(sharded), L * per_layer + V / tp * wep + (Pos + 2) * h + 2 * h + proj, "closed form")
  end
end

function T.test_opt_tp_errors()
  local ok, err = pcall(opt.build, TINY, { batch = 3, seq = 8, training = true, tp = 3, parallel = tp_plan(3, 3) })
  eq(not ok and err, "opt model 'tiny': num_attention_heads = 4 is not divisible by tp = 3: give a tp that divides 4 (1, 2, 4)", "heads")
  local odd = setmetatable({ ffn_dim = 258 }, { __index = TINY })
  ok, err = pcall(opt.build, odd, { batch = 4, seq = 8, training = true, tp = 4, parallel = tp_plan(4, 4) })
  eq(not ok and err, "opt model 'tiny': ffn_dim = 258 is not divisible by tp = 4: give a tp that divides 258 (1, 2, 3, 6, 43)", "ffn_dim")
  ok, err = pcall(opt.build, TINY, { batch = 2, seq = 8, training = true, tp = 2 })
  eq(not ok and err, "opt model 'tiny': opts.tp > 1 needs opts.parallel (a neusight.parallel plan)", "no plan")
end

return T
