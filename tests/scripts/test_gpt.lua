-- tests/scripts/test_gpt.lua — GPT builder: kernel sequence vs the reference trace, closed-form FLOPs and parameter counts.
local K = require "neusight.kernels"
local gpt = require "neusight.models.gpt"
local presets = require "neusight.models.presets"

local t = require("neusight.testing").bind(load_op, make_node)
local eq, kernels, flops = t.eq, t.kernels, t.flops

local T = {}

-- opgraph/gpt2_large-train-1024-4.csv, rows with kernels, "FwOps | BwOps | AccOps", minus the getitems
-- of size() results (host-side Python ints, left out by the builder). lm_head has no bias, so its
-- bias-gradient VECadd(1,50257) that the reference still accumulates is absent.
local REFERENCE_TRAIN = {
  "MEM((4,1024),(4,1024,1280)) | MEM((50257,1280)) MEM((50257,1280)) | VECadd(1,64328960)", -- transformer_wte
  "VECadd(4096,1280) | MEM((4096,1280)) MEM((4096,1280)) | ", -- add_1
  "MEM((4,1024,1280),(4,1024,1280)) | MEM((4,1024,1280)) MEM((4,1024,1280)) | ", -- transformer_drop
  "VECln(4096,1280) | VECmul(4096,1280) | VECadd(1,1280) VECadd(1,1280)", -- transformer_h_0_ln_1
  "Linear(4096,1280,3840) | Linear(4096,3840,1280) Linear(3840,4096,1280) | VECadd(1,4915200) VECadd(1,3840)", -- addmm
  "MEM((1,),(4,1024,1280)) | MEM((1,)) MEM((1,)) | ", -- getitem_5
  "MEM((1,),(4,1024,1280)) | MEM((1,)) MEM((1,)) | ", -- getitem_6
  "MEM((1,),(4,1024,1280)) | MEM((1,)) MEM((1,)) | ", -- getitem_7
  "BMM(80,1024,64,1024) | BMM(80,1024,1024,64) BMM(80,64,1024,1024) | ", -- matmul
  "VECdiv(81920,1024) | VECdiv(81920,1024) VECdiv(81920,1024) | ", -- truediv
  "MEM((1,1,1024,1024),(1,),(1,),(1,1,1024,1024)) | MEM((1,1,1024,1024),(1,),(1,)) MEM((1,1,1024,1024),(1,),(1,)) | ", -- getitem_11
  "MEM((1,1,1024,1024),(4,20,1024,1024),(1,),(4,20,1024,1024)) | MEM((1,1,1024,1024),(4,20,1024,1024),(1,)) MEM((1,1,1024,1024),(4,20,1024,1024),(1,)) | ", -- where
  "VECsoftmax(81920,1024) | VECmul(81920,1024) VECsoftmax(81920,1024) | ", -- softmax
  "MEM((4,20,1024,1024),(4,20,1024,1024)) | MEM((4,20,1024,1024)) MEM((4,20,1024,1024)) | ", -- attn_dropout
  "BMM(80,1024,1024,64) | BMM(80,1024,64,1024) BMM(80,1024,1024,64) | ", -- matmul_1
  "MEM((4,1024,20,64),(4,1024,20,64)) | MEM((4,1024,20,64)) MEM((4,1024,20,64)) | ", -- contiguous
  "Linear(4096,1280,1280) | Linear(4096,1280,1280) Linear(1280,4096,1280) | VECadd(1,1638400) VECadd(1,1280)", -- addmm_1
  "MEM((4,1024,1280),(4,1024,1280)) | MEM((4,1024,1280)) MEM((4,1024,1280)) | ", -- resid_dropout
  "VECadd(4096,1280) | MEM((4096,1280)) MEM((4096,1280)) | ", -- add_10
  "VECln(4096,1280) | VECmul(4096,1280) | VECadd(1,1280) VECadd(1,1280)", -- transformer_h_0_ln_2
  "Linear(4096,1280,5120) | Linear(4096,5120,1280) Linear(5120,4096,1280) | VECadd(1,6553600) VECadd(1,5120)", -- addmm_2
  "VECmulu(4096,5120) | VECmulu(4096,5120) | ", -- mul
  "VECpowu(4096,5120) | VECpowu(4096,5120) VECmul(4096,5120) VECmulu(4096,5120) | ", -- pow_2
  "VECmulu(4096,5120) | VECmulu(4096,5120) | ", -- mul_1
  "VECadd(4096,5120) | MEM((4096,5120)) MEM((4096,5120)) | ", -- add_12
  "VECmulu(4096,5120) | VECmulu(4096,5120) | ", -- mul_2
  "VECtanh(4096,5120) | VECmulu(4096,5120) VECaddu(4096,5120) | ", -- tanh
  "VECaddu(4096,5120) | MEM((4096,5120)) | ", -- add_13
  "VECmul(4096,5120) | VECmul(4096,5120) VECmul(4096,5120) | ", -- mul_3
  "Linear(4096,5120,1280) | Linear(4096,1280,5120) Linear(1280,4096,5120) | VECadd(1,6553600) VECadd(1,1280)", -- addmm_3
  "MEM((4,1024,1280),(4,1024,1280)) | MEM((4,1024,1280)) MEM((4,1024,1280)) | ", -- mlp_dropout
  "VECadd(4096,1280) | MEM((4096,1280)) MEM((4096,1280)) | ", -- add_15
  "VECln(4096,1280) | VECmul(4096,1280) | VECadd(1,1280) VECadd(1,1280)", -- transformer_ln_f
  "Linear(4096,1280,50257) | Linear(4096,50257,1280) Linear(50257,4096,1280) | VECadd(1,64328960)", -- lm_head
}

function T.test_gpt2_large_train_matches_reference_trace()
  local nodes = gpt.build(presets.gpt2_large, { batch = 4, seq = 1024, training = true, loss = false })
  t.rows_match(t.kernel_rows(nodes, true), REFERENCE_TRAIN)
end

function T.test_layer_nodes_are_replicated_by_count()
  local cfg = presets.gpt2_large
  local nodes = gpt.build(cfg, { batch = 4, seq = 1024, training = false })
  local seen, layer_nodes = {}, 0
  for _, n in ipairs(nodes) do
    assert(not seen[n.name], "duplicate node name " .. n.name)
    seen[n.name] = true
    if n.layer == "h" then
      layer_nodes = layer_nodes + 1
      eq(n.count, cfg.n_layer, n.name .. " count")
      assert(n.name:sub(1, 2) == "h.", "layer node names start with 'h.': " .. n.name)
    else
      eq(n.count, 1, n.name .. " count")
    end
  end
  eq(layer_nodes, 32, "nodes per layer")
  assert(not seen["loss"], "no loss node in inference")
end

-- Tiny config: closed-form forward FLOPs (T = b·s tokens, I = n_inner).
local TINY = { name = "tiny", arch = "gpt", n_layer = 2, n_embd = 64, n_head = 4, vocab_size = 100, n_positions = 16 }

function T.test_tiny_forward_flops_closed_form()
  local b, s, h, nh, V, L = 2, 16, 64, 4, 100, 2
  local I, T_ = 4 * h, b * s
  local nodes = gpt.build(TINY, { batch = b, seq = s, training = false })

  local gemm_layer = 2 * T_ * (h * 3 * h + h * h + 2 * h * I) -- c_attn, c_proj, c_fc, mlp c_proj
  local bmm_layer = 2 * 2 * b * s * s * h                      -- QKᵀ and PV over all heads
  local vec_layer = 2 * 6 * T_ * h                             -- ln_1, ln_2
    + b * nh * s * s + 5 * b * nh * s * s                      -- scale, softmax
    + 2 * T_ * h                                               -- two residual adds
    + 8 * T_ * I                                               -- gelu_new: 8 elementwise ops
  local prologue, epilogue = T_ * h, 6 * T_ * h + 2 * T_ * h * V -- wte+wpe add; ln_f, lm_head

  eq(flops(nodes, false, "fw", "gemm"), L * gemm_layer + 2 * T_ * h * V, "GEMM forward flops")
  eq(flops(nodes, false, "fw", "bmm"), L * bmm_layer, "BMM forward flops")
  eq(flops(nodes, false, "fw"), L * (gemm_layer + bmm_layer + vec_layer) + prologue + epilogue, "total forward flops")

  -- Training: + the loss's log-softmax over b·(s−1) rows; backward GEMM/BMM work is twice the forward.
  local train = gpt.build(TINY, { batch = b, seq = s, training = true })
  eq(flops(train, true, "fw"), flops(nodes, false, "fw") + 5 * b * (s - 1) * V, "training forward flops")
  eq(flops(train, true, "bw", "gemm"), 2 * flops(nodes, false, "fw", "gemm"), "GEMM backward flops")
  eq(flops(train, true, "bw", "bmm"), 2 * flops(nodes, false, "fw", "bmm"), "BMM backward flops")
end

local total_params = t.params

function T.test_parameter_count_gpt3_175b()
  local cfg = presets.gpt3_175b
  local h, L, V, P = cfg.n_embd, cfg.n_layer, cfg.vocab_size, cfg.n_positions
  local nodes = gpt.build(cfg, { batch = 1, seq = 2048, training = true })
  -- per layer 12h² + 13h; wte and wpe; ln_f; lm_head tied to wte.
  eq(total_params(nodes), L * (12 * h * h + 13 * h) + V * h + P * h + 2 * h, "parameters")
  eq(total_params(nodes), 174604259328, "GPT-3 175B parameters")
  local untied = setmetatable({ tie_word_embeddings = false }, { __index = cfg })
  eq(total_params(gpt.build(untied, { batch = 1, seq = 2048 })), 174604259328 + V * h, "untied lm_head")
end

function T.test_training_appends_loss()
  local nodes = gpt.build(TINY, { batch = 2, seq = 16, training = true })
  eq(nodes[#nodes].op, "cross_entropy", "last node")
  eq(nodes[#nodes].inputs[1][1], 2 * 15, "loss rows: b·(s−1)")
  eq(nodes[#nodes - 1].name, "loss.shift_logits", "shift copy before the loss")
  nodes = gpt.build(TINY, { batch = 2, seq = 16, training = true, loss = false })
  eq(nodes[#nodes].name, "lm_head", "loss = false")
end

function T.test_config_errors()
  local bad = setmetatable({ n_head = 5 }, { __index = TINY })
  local ok, err = pcall(gpt.build, bad, { batch = 1, seq = 8 })
  eq(not ok and err, "gpt model 'tiny': n_embd (64) must be divisible by n_head (5)", "divisibility")
  ok, err = pcall(gpt.build, TINY, { batch = 1, seq = 17 })
  eq(not ok and err, "gpt model 'tiny': seq 17 exceeds n_positions 16, the rows of its learned position table: give a seq of at most 16", "sequence too long")
  ok, err = pcall(gpt.build, setmetatable({ n_layer = 0 }, { __index = TINY }), { batch = 1, seq = 8 })
  eq(not ok and err, "gpt model 'tiny': field 'n_layer' must be a positive integer (got 0)", "n_layer")
end

function T.test_sdpa_output_reaches_c_proj_without_a_copy()
  -- PyTorch's attention kernels write O in (b, s, heads, head_dim) order, so HF's merge of the heads after sdpa is a
  -- view (the GPT-2 trace in tests/fixtures/traces/hf: sdpa → transpose → view → addmm, no copy); the eager ·V
  -- product is (b, heads, s, head_dim) and .contiguous() copies it. Megatron's flash path likewise copies nothing.
  for _, megatron in ipairs { false, true } do
    local function names(attention)
      local out = {}
      for _, n in ipairs(gpt.build(TINY, { batch = 2, seq = 16, training = true, dtype = "bf16", attention = attention,
                                           megatron = megatron })) do
        out[n.name] = n.op
      end
      return out
    end
    eq(names("eager")["h.attn.contiguous"], "contiguous", "eager: the copy")
    eq(names("sdpa")["h.attn.contiguous"], nil, "sdpa: no copy")
  end
end

return T
