-- tests/scripts/test_memory.lua — saved tensors from the op rules against closed forms; the memory report's arithmetic.
local gpt = require "neusight.models.gpt"
local llama = require "neusight.models.llama"
local opt = require "neusight.models.opt"
local memory = require "neusight.memory"
local precision = require "neusight.precision"

local t = require("neusight.testing").bind(load_op, make_node)
local eq, near = t.eq, require("neusight.testing").near

local T = {}

-- A small GPT-2 (HF GPT2LMHeadModel) with b = 2, s = 64, h = 128, a = 4, 3 layers.
local CFG = { name = "small", n_layer = 3, n_embd = 128, n_head = 4, vocab_size = 1000, n_positions = 128 }
local B, S, H, A = 2, 64, 128, 4

-- Bytes one instance of every node of layer "h" saves, summed, and the same for the other nodes.
local function saved_per_layer(nodes)
  local layer, other = 0, 0
  for _, n in ipairs(nodes) do
    local b = memory.node_saved(n, load_op(n.op))
    if n.layer == "h" then layer = layer + b else other = other + b * n.count end
  end
  return layer, other
end

-- The GEMM weights autocast casts: a linear's I·O once, a grouped_linear's for each of its attrs.experts; a
-- grouped_linear without that count is an error (it was taken as 1 expert: E - 1 experts' weights left out).
function T.test_gemm_weight_elems_counts_every_expert_and_refuses_a_missing_count()
  local lin = make_node { op = "linear", name = "l", inputs = { { 2, 8, 16 } }, output = { 2, 8, 32 } }
  local function grouped(attrs)
    return make_node { op = "grouped_linear", name = "g", inputs = { { 6, 16 } }, output = { 6, 32 }, attrs = attrs,
                       count = 2 }
  end
  eq(memory.gemm_weight_elems { lin, grouped { experts = 4 } }, 16 * 32 + 4 * 16 * 32 * 2, "one weight, 4 experts x 2")
  for _, attrs in ipairs { {}, { experts = 0 }, { experts = 2.5 }, { experts = "4" } } do
    local ok, err = pcall(memory.gemm_weight_elems, { lin, grouped(attrs) })
    assert(not ok and tostring(err):find("node 'g': grouped_linear needs attrs.experts", 1, true),
      "experts " .. tostring(attrs.experts) .. ": " .. tostring(err))
  end
end

-- The cached weight copies of an amp recipe (audit18): each GEMM's weight at its node's dtype — under fp8 the Linear
-- GEMMs at 1 byte and the LM head, which stays bf16 (neusight.workload fp8_dtypes), at 2 (it was counted at 1); a
-- 4-byte node (an fp32 GEMM under autocast) at the compute dtype's, as before.
function T.test_weight_cache_counts_each_gemm_at_its_dtype()
  local q = make_node { op = "linear", name = "q", dtype = "fp8", inputs = { { 2, 8, 16 } }, output = { 2, 8, 32 },
                        count = 3 }
  local head = make_node { op = "linear", name = "lm_head", dtype = "bf16", inputs = { { 2, 8, 16 } },
                           output = { 2, 8, 100 } }
  eq(memory.weight_cache_bytes({ q, head }, "fp8"), 3 * 16 * 32 * 1 + 16 * 100 * 2, "fp8 GEMMs 1 B, the bf16 head 2 B")
  local f32 = make_node { op = "linear", name = "x", dtype = "fp32", inputs = { { 2, 8, 16 } }, output = { 2, 8, 32 } }
  eq(memory.weight_cache_bytes({ f32 }, "bf16"), 16 * 32 * 2, "an fp32 node under autocast: the 16-bit copy")
  local ctx = memory.context { nodes = { q, head }, training = true, mode = "train", batch = 1,
    state = precision.state(precision.recipe("amp", "fp8", "autocast", "train"), "adam", true),
    recipe = precision.recipe("amp", "fp8", "autocast", "train") }
  eq(ctx.autocast_cache, 3 * 16 * 32 + 16 * 100 * 2, "the memory context's workspace cache")
end

function T.test_gpt2_fp32_eager_saved_bytes_per_layer_closed_form()
  -- HF's eager graph in fp32 (e = 4 B), per layer, what autograd keeps (the op list of models/gpt.lua):
  --   ln_1, ln_2        input (2·sbh·e) + fp32 mean and rstd per row (2 · 2·4·sb)
  --   c_attn, c_proj, c_fc, mlp.c_proj   their inputs: sbh·e · (1 + 1 + 1 + 4)
  --   QKᵀ               Q and K (2·sbh·e); ·V: V (sbh·e) and the dropped-out probabilities (a·s²·b·e)
  --   scale (÷ a 0-dim tensor) nothing; the causal mask's where: its bool condition (1·1·s·s bytes)
  --   softmax           its output (a·s²·b·e); attention dropout: the bool mask (a·s²·b bytes)
  --   gelu_new (8 element-wise nodes): pow's input, tanh's output and both operands of the last mul = 4·(4h)·sb·e
  --   resid/mlp dropout 1-byte masks (2·sbh); residual adds nothing
  -- = sbh·(28e + 2) + a·s²·b·(2e + 1) + 16·sb + s²  =  114·sbh + 9·a·s²·b + 16·sb + s² in fp32.
  -- (Korthikanti et al. 2022's fp16 count is sbh·34 + 5·a·s²·b: the fused GeLU keeps one 4h tensor, not four, and
  -- the LN statistics and mask are left out there; the Megatron test below checks that form.)
  local nodes = gpt.build(CFG, { batch = B, seq = S, training = true, dtype = "fp32" })
  local layer = saved_per_layer(nodes)
  local sbh, as2b = S * B * H, A * S * S * B
  eq(layer, 114 * sbh + 9 * as2b + 16 * S * B + S * S, "fp32 eager GPT-2 layer")
end

function T.test_megatron_fp16_layer_is_korthikanti()
  -- Megatron-LM kernels in fp16 (fused bias-GeLU, fused scale + mask + softmax): Korthikanti et al. 2022, eq. (1),
  -- sbh·(10 + 24) + 5·a·s²·b bytes per layer, plus the layer norms' fp32 statistics (16·sb) their count leaves out.
  local nodes = gpt.build(CFG, { batch = B, seq = S, training = true, dtype = "fp16", megatron = true })
  local layer = saved_per_layer(nodes)
  eq(layer, 34 * S * B * H + 5 * A * S * S * B + 16 * S * B, "Megatron fp16 layer")
end

-- A tensor-parallel plan of `tp` ranks (sequence parallel when `sp`) on an NVLink link, for builds of `batch`.
local function tp_plan(tp, sp, batch)
  local P = require "neusight.parallel"
  return P.plan(P.normalize { tp = tp, sequence_parallel = sp or nil },
    { interconnect = "nvlink4", interconnect_bw_gbps = 900, pcie_bw_gbps = 64 },
    { batch = batch, dtype = "fp16", mode = "train" })
end

-- Bytes a layer keeps under selective recomputation: the core-attention nodes keep only the region's inputs they read
-- (neusight.memory node_kept_selective), every other node what it saves.
local function selective_per_layer(nodes)
  local layer = 0
  for _, n in ipairs(nodes) do
    if n.layer == "h" then
      layer = layer + (n.attrs.core_attention and memory.node_kept_selective(n) or memory.node_saved(n, load_op(n.op)))
    end
  end
  return layer
end

function T.test_megatron_tensor_and_sequence_parallel_layers_are_korthikanti_table_2()
  -- Korthikanti et al. 2022, Table 2, bytes per layer (fp16, Megatron's fused kernels), plus the layer norms' fp32
  -- statistics (8 B per row and norm) their count leaves out:
  --   tensor parallel                  sbh·(10 + 24/t) + 5·a·s²·b/t     (norms, dropouts and the column-parallel
  --                                                                      linears' inputs replicated: 10·sbh)
  --   tensor + sequence parallel       sbh·34/t + 5·a·s²·b/t             (Megatron's column-parallel linear keeps its
  --                                                                      input's sequence shard, gathers it again in backward)
  --   + selective recomputation        sbh·(10 + 24/t), sbh·34/t         (the 5·a·s²·b/t of the core attention re-run)
  local sbh, as2b, sb = S * B * H, A * S * S * B, S * B
  for _, t in ipairs { 2, 4 } do
    local opts = { batch = B, seq = S, training = true, dtype = "fp16", megatron = true, tp = t }
    local tp_only = gpt.build(CFG, setmetatable({ parallel = tp_plan(t, false, B) }, { __index = opts }))
    local sp = gpt.build(CFG, setmetatable({ parallel = tp_plan(t, true, B), sequence_parallel = true },
      { __index = opts }))
    eq(saved_per_layer(tp_only), sbh * 10 + sbh * 24 // t + as2b * 5 // t + 16 * sb, "tp " .. t)
    eq(saved_per_layer(sp), sbh * 34 // t + as2b * 5 // t + 16 * sb // t, "tp " .. t .. " + sequence parallel")
    eq(selective_per_layer(tp_only), sbh * 10 + sbh * 24 // t + 16 * sb, "tp " .. t .. " selective")
    eq(selective_per_layer(sp), sbh * 34 // t + 16 * sb // t, "tp " .. t .. " + sequence parallel, selective")
  end
end

function T.test_llama_megatron_sequence_parallel_saves_a_tp_th_of_one_gpu()
  -- Under sequence parallelism every tensor a Megatron Llama layer keeps is split over the tp ranks: the norms' inputs
  -- and statistics on s/t tokens, linear_qkv's and linear_fc1's inputs as their sequence shards (gathered again in
  -- backward), attention, SwiGLU and the row-parallel inputs by heads / intermediate columns. So one rank keeps 1/t of
  -- the single GPU's layer.
  local cfg = { name = "tiny", hidden_size = 64, intermediate_size = 128, num_hidden_layers = 2,
    num_attention_heads = 8, num_key_value_heads = 4, vocab_size = 256, max_position_embeddings = 256 }
  local function layer_bytes(nodes)
    local sum = 0
    for _, n in ipairs(nodes) do
      if n.layer == "layers" then sum = sum + memory.node_saved(n, load_op(n.op)) end
    end
    return sum
  end
  local base = { batch = 2, seq = 32, training = true, dtype = "bf16", megatron = true }
  local one = layer_bytes(llama.build(cfg, base))
  for _, t in ipairs { 2, 4 } do
    local sp = layer_bytes(llama.build(cfg, setmetatable({ tp = t, parallel = tp_plan(t, true, 2),
      sequence_parallel = true }, { __index = base })))
    eq(sp * t, one, "tp " .. t .. " + sequence parallel")
  end
end

function T.test_sequence_shard_must_be_a_whole_number_of_ranks()
  local rule = load_op("linear")
  local n = make_node { op = "linear", name = "fc", inputs = { { 8, 16 } }, output = { 8, 4 }, params = 64,
    attrs = { sequence_shard = 4 } }
  eq(memory.node_saved(n, rule), 8 * 16 * 4 / 4, "a quarter of the fp32 input")
  local raises = require("neusight.testing").raises
  for _, bad in ipairs { 0, -2, 2.5 } do
    n.attrs.sequence_shard = bad
    raises(("node 'fc': attrs.sequence_shard must be an integer >= 1 (got %s)"):format(tostring(bad)),
      memory.node_saved, n, rule)
  end
end

function T.test_sdpa_keeps_no_scores()
  -- FlashAttention keeps Q, K, V (3·sbh·e) and the fp32 logsumexp (4·b·a·s) instead of 2·a·s²·b·e + a·s²·b; its output
  -- O is c_proj's saved input (a view of it, ops/sdpa.lua output_shared), counted there in both graphs
  local eager = saved_per_layer(gpt.build(CFG, { batch = B, seq = S, training = true, dtype = "fp16", megatron = true }))
  local sdpa = saved_per_layer(gpt.build(CFG, { batch = B, seq = S, training = true, dtype = "fp16", megatron = true,
                                                attention = "sdpa" }))
  local sbh = S * B * H
  -- eager: QKᵀ's Q and K, ·V's V (3·sbh·2) + 5·a·s²·b; sdpa: Q, K, V (3·sbh·2) + lse
  eq(eager - sdpa, 5 * A * S * S * B - 4 * B * A * S, "eager − sdpa")
end

function T.test_loss_saves_fp32_log_probabilities_and_is_the_temporary_peak()
  local nodes = gpt.build(CFG, { batch = B, seq = S, training = true, dtype = "bf16" })
  local loss
  for _, n in ipairs(nodes) do if n.name == "loss" then loss = n end end
  local T_, V = B * (S - 1), CFG.vocab_size
  eq(memory.node_saved(loss, load_op("cross_entropy")), 4 * T_ * V + 8 * T_, "fp32 log-softmax + int64 targets")
  eq(memory.node_temporary(loss, load_op("cross_entropy")), 2 * T_ * V + 2 * 4 * T_ * V, "logits + 2 fp32 gradients")
end

function T.test_llama_megatron_sdpa_layer_closed_form_counts_the_attention_output_once()
  -- Megatron-Core Llama layer in bf16 (e = 2) with flash attention, per layer, what autograd keeps:
  --   input_layernorm, pre_mlp_layernorm   input (2·sbh) + fp32 rstd per row (4·sb)
  --   linear_qkv, linear_fc1               their inputs (2·sbh each)
  --   core attention (sdpa)                Q (2·sbh), K and V (2 · 2·sb·kvh·d), the fp32 logsumexp (4·b·a·s), and O
  --   linear_proj                          its input: O itself (a view of the kernel's output), counted once
  --   SwiGLU                               gate and up (2 · 2·sb·I); linear_fc2 its input (2·sb·I)
  -- = 12·sbh + 4·sb·kvh·d + 6·sb·I + 8·sb + 4·b·a·s. (The Korthikanti count for a GPT layer is 34·sbh +
  -- 5·a·s²·b; with SwiGLU, GQA and flash attention, Llama-3-8B's I = 3.5h, kvh·d = h/4 make it 34·sbh too.)
  -- O was counted twice (by the sdpa node and by o_proj): 14·sbh + … here, 36·sbh for Llama-3-8B.
  local b, s, h, a, kvh, I = 2, 32, 64, 8, 2, 224
  local d = h // a
  local cfg = { name = "tiny", hidden_size = h, intermediate_size = I, num_hidden_layers = 2, num_attention_heads = a,
    num_key_value_heads = kvh, vocab_size = 256, max_position_embeddings = 256 }
  local layer = 0
  for _, n in ipairs(llama.build(cfg, { batch = b, seq = s, training = true, dtype = "bf16", megatron = true,
                                        attention = "sdpa" })) do
    if n.layer == "layers" then layer = layer + memory.node_saved(n, load_op(n.op)) end
  end
  local sbh, sb = s * b * h, s * b
  eq(layer, 12 * sbh + 4 * sb * kvh * d + 6 * sb * I + 8 * sb + 4 * b * a * s, "Megatron Llama layer, sdpa")
  -- HF's eager-mode sdpa path likewise: o_proj's input is a view of the sdpa output
  local by = {}
  for _, n in ipairs(llama.build(cfg, { batch = b, seq = s, training = true, dtype = "bf16", attention = "sdpa" })) do
    by[n.name] = memory.node_saved(n, load_op(n.op))
  end
  eq(by["layers.self_attn.o_proj"], 2 * sbh, "o_proj keeps O")
  eq(by["layers.self_attn.sdpa"], 2 * sbh + 2 * 2 * sb * kvh * d + 4 * b * a * s, "sdpa keeps Q, K, V and lse, not O again")
end

function T.test_megatron_vocab_parallel_loss_works_in_place()
  -- Megatron-Core's _VocabParallelCrossEntropy upcasts the logits (.float()), then subtracts the max, exponentiates and
  -- normalises in that fp32 buffer, saves it as the softmax and writes the gradient into it in backward. Beyond the
  -- saved softmax (4·T·V, an activation) only the bf16 logits (forward) or the bf16 gradient (backward) are alive:
  -- 2·T·V, not HF's bf16 logits + two fp32 (T, V) gradients (10·T·V), and the cast's fp32 output is that saved buffer.
  local function loss_nodes(megatron)
    local by = {}
    for _, n in ipairs(gpt.build(CFG, { batch = B, seq = S, training = true, dtype = "bf16", megatron = megatron })) do
      by[n.name] = n
    end
    return by.loss, by["loss.logits_float"]
  end
  local T_, V = B * (S - 1), CFG.vocab_size
  local loss, cast = loss_nodes(true)
  eq(memory.node_saved(loss, load_op("cross_entropy")), 4 * T_ * V + 8 * T_, "the fp32 softmax + int64 targets")
  eq(memory.node_temporary(loss, load_op("cross_entropy")), 2 * T_ * V, "Megatron: the bf16 logits or gradient")
  eq(memory.node_temporary(cast, load_op("cast")), 2 * T_ * V, "Megatron: the upcast's output is the saved softmax")
  loss, cast = loss_nodes(false)
  eq(memory.node_temporary(loss, load_op("cross_entropy")), 2 * T_ * V + 2 * 4 * T_ * V, "HF: logits + 2 fp32 gradients")
  eq(memory.node_temporary(cast, load_op("cast")), 2 * T_ * V + 4 * T_ * V, "HF: the bf16 logits and their fp32 copy")
end

function T.test_llama_saves_shared_inputs_once()
  -- q/k/v_proj read the same normed x: counted once (attrs.saved_inputs = "" on k and v), as are gate/up's input
  local cfg = { name = "tiny_llama", arch = "llama", hidden_size = 64, intermediate_size = 128, num_hidden_layers = 2,
                num_attention_heads = 4, num_key_value_heads = 2, vocab_size = 500, max_position_embeddings = 256 }
  local nodes = llama.build(cfg, { batch = 2, seq = 32, training = true, dtype = "bf16", attention = "sdpa" })
  local by = {}
  for _, n in ipairs(nodes) do by[n.name] = memory.node_saved(n, load_op(n.op)) end
  local x = 2 * 32 * 64 * 2
  eq(by["layers.self_attn.q_proj"], x, "q_proj saves x")
  eq(by["layers.self_attn.k_proj"], 0, "k_proj: the same x")
  eq(by["layers.self_attn.v_proj"], 0, "v_proj: the same x")
  eq(by["layers.mlp.up_proj"], 0, "up_proj: gate_proj's input")
  eq(by["layers.self_attn.rotary.q.cos"], 0, "x · cos keeps only the shared cos table")
  -- RMSNorm (HF, fp32 upcast): pow keeps x in fp32, normalize only rsqrt's (b, s, 1) output (x: pow's), rsqrt its
  -- output, the weight multiply the bf16 normalized x (the weight is state); the casts keep nothing
  local rms = 0
  for name, b in pairs(by) do
    if name:match("^layers%.input_layernorm%.") then rms = rms + b end
  end
  eq(rms, 2 * 32 * 64 * 4 + 2 * (2 * 32 * 4) + x, "RMSNorm")
end

function T.test_opt_fp32_eager_saved_bytes_per_layer_closed_form()
  -- HF's OPTAttention (eager) in fp32 (e = 4 B), per layer, what autograd keeps (the op list of models/opt.lua):
  --   self_attn_layer_norm, final_layer_norm   input (2·sbh·e) + fp32 mean and rstd per row (2 · 2·4·sb)
  --   q_proj, k_proj, v_proj   the one normed x they all read (sbh·e, once); out_proj, fc1 their inputs (2·sbh·e);
  --                            fc2 its input (f·sb·e); the ReLU its output (f·sb·e)
  --   scaling (× a Python float) nothing; QKᵀ (bmm) Q and K (2·sbh·e); ·V: V (sbh·e) and the probabilities (a·s²·b·e)
  --   the mask add nothing; the clamp (torch.max) its scores (a·s²·b·e); softmax its output (a·s²·b·e)
  --   attention dropout its bool mask (a·s²·b bytes); residual and fc dropouts theirs (2·sbh bytes)
  -- = 8·sbh·e + 2·f·sb·e + 2·sbh + a·s²·b·(3e + 1) + 16·sb
  local b, s, h, a, f = 2, 32, 64, 4, 256
  local cfg = { name = "tiny_opt", num_hidden_layers = 2, hidden_size = h, num_attention_heads = a, ffn_dim = f,
                vocab_size = 500, max_position_embeddings = 256 }
  local nodes = opt.build(cfg, { batch = b, seq = s, training = true, dtype = "fp32", attention = "eager" })
  local by, layer = {}, 0
  for _, n in ipairs(nodes) do
    by[n.name] = memory.node_saved(n, load_op(n.op))
    if n.layer == "layers" then layer = layer + by[n.name] end
  end
  local e, sbh, sb, as2b = 4, s * b * h, s * b, a * s * s * b
  eq(by["layers.self_attn.q_proj"], sbh * e, "q_proj saves the normed x")
  eq(by["layers.self_attn.k_proj"], 0, "k_proj: q_proj's x")
  eq(by["layers.self_attn.v_proj"], 0, "v_proj: q_proj's x")
  eq(layer, 8 * sbh * e + 2 * f * sb * e + 2 * sbh + as2b * (3 * e + 1) + 16 * sb, "fp32 eager OPT layer")
end

function T.test_rule_without_saves_is_charged_its_output()
  local n = make_node { op = "fancy", name = "f", inputs = { { 4, 8 } }, output = { 4, 16 }, dtype = "fp16" }
  eq(memory.node_saved(n, { name = "fancy", doc = "", forward = function() return {} end }), 4 * 16 * 2, "output")
  eq(memory.node_saved(n, nil), 4 * 16 * 2, "no rule: output")
  eq(memory.node_saved(n, { backward = false }), 0, "no backward work: nothing")
  n.attrs = { saved_bytes = 7 }
  eq(memory.node_saved(n, load_op("linear")), 7, "attrs.saved_bytes wins")
end

function T.test_single_report_parts_sum_and_largest_batch()
  -- memory(b) = 10 GB fixed + 3 GB per sample on a 40 GB GPU
  local ctx = { params = 1e9, state = { weights = 4, gradients = 4, master = 0, optimizer_state = 2 },
                saved = { 1e9 }, temporary = { 2e9 }, count = { 3 }, names = { "x" }, training = true,
                kv_cache = 0, cublas = 0, autocast_cache = 0, gpu_mem_gb = 40, batch = 1, mode = "train" }
  local r = memory.single(ctx, function(b) return 10e9 + b * 5e9 end)
  local o = r.memory
  near(o.state_gb + o.activations_gb + o.temporary_gb + o.workspace_gb + o.kv_cache_gb, r.memory_gb, "parts sum")
  eq(o.state_gb, 10, "1e9 parameters x 10 B")
  eq(o.activations_gb, 3, "saved x count")
  eq(o.temporary_gb, 2, "the largest temporary")
  eq(o.dominant, "state", "what dominates")
  local cap = memory.capacity(40)
  eq(o.max_batch, math.floor((cap - 10e9) / 5e9), "largest batch that fits")
  eq(r.fits, true, "15 GB fits in 40")
end

-- A serving phase is held to the whole GPU (a PyTorch process), and names the budget `neusight serve` holds weights and
-- KV cache to (vLLM's gpu_memory_utilization 0.9, the one rule memory.budget_gb): 75 GB on an 80 GB GPU fits, but not
-- in serve's 72 GB, and says so (tester3 problem 8: predict said fits, serve said does not, neither said why).
function T.test_serving_phase_names_serve_budget()
  local function ctx(kv_gb, mode)
    return { params = 1e9, state = { weights = 2, gradients = 0, master = 0, optimizer_state = 0 }, saved = { 0 },
             temporary = { 0 }, count = { 1 }, names = { "x" }, training = false, kv_cache = kv_gb * 1e9, cublas = 0,
             autocast_cache = 0, gpu_mem_gb = 80, batch = 1, mode = mode }
  end
  eq(memory.budget_gb(80, memory.SERVING_UTILIZATION), 0.9 * 80, "serve's budget: 90 % of the GPU")
  eq(memory.capacity(80), memory.budget_gb(80) * 1e9, "predict's: all of it, by the same rule")
  local over = memory.single(ctx(73, "decode"))  -- 2 GB weights + 73 GB KV cache = 75 GB
  eq(over.fits, true, "75 GB fits in 80")
  eq(over.memory.serving_budget_gb, 72, "the serving budget in JSON")
  eq(over.warning, "memory 75.0 GB per GPU fits in the GPU's 80 GB, as one PyTorch process may take all of it, but "
    .. "not in the 72.0 GB (90 % of mem_gb read as 1e9 bytes: the GPU file gives no mem_reported_gib, the total the "
    .. "device reports) a serving engine gives weights and KV cache by default (vLLM's gpu_memory_utilization "
    .. "0.9, `neusight serve --gpu-memory-utilization`): check the batch with `neusight serve` (its fits and "
    .. "max_concurrency page the KV cache in that budget)", "said")
  assert(over.lines[1]:find("fits in the GPU's 80 GB (over serve's 72.0 GB, 90 %)", 1, true), over.lines[1])
  local within = memory.single(ctx(60, "prefill"))
  eq(within.warning, nil, "62 GB: within both")
  assert(within.lines[1]:find("(within serve's 72.0 GB, 90 %)", 1, true), within.lines[1])
  local train = memory.single(ctx(0, "train"))
  eq(train.memory.serving_budget_gb, nil, "training: no serving budget")
end

-- The serving budget is a share of the memory the device reports (the GPU file's mem_reported_gib: vLLM's rule, one
-- function for predict's serving phases and serve), the whole-GPU check still mem_gb read as 1e9 bytes (its ~7 % under
-- the reported total is the margin for the CUDA context and fragmentation, which the model does not count).
function T.test_serving_budget_is_a_share_of_the_reported_memory()
  local budget = 0.9 * 79.1 * 2 ^ 30 / 1e9  -- 76.44 GB on an H100 80GB
  eq(memory.budget_gb(80, memory.SERVING_UTILIZATION, 79.1), budget, "90 % of 79.1 GiB")
  eq(memory.budget_gb(80, nil, 79.1), 80, "predict's whole GPU: mem_gb, the margin kept")
  local c = { params = 1e9, state = { weights = 2, gradients = 0, master = 0, optimizer_state = 0 }, saved = { 0 },
              temporary = { 0 }, count = { 1 }, names = { "x" }, training = false, kv_cache = 73e9, cublas = 0,
              autocast_cache = 0, gpu_mem_gb = 80, gpu_reported_gib = 79.1, batch = 1, mode = "decode" }
  local r = memory.single(c)  -- 75 GB: within 76.4
  eq(r.memory.serving_budget_gb, budget, "in JSON")
  eq(r.warning, nil, "75 GB fits the serving budget too")
  assert(r.lines[1]:find("(within serve's 76.4 GB, 90 %)", 1, true), r.lines[1])
  c.kv_cache = 76e9
  local over = memory.single(c)
  assert(over.warning:find("not in the 76.4 GB (90 % of the 79.1 GiB the device reports)", 1, true), over.warning)
  c.gpu_reported_gib = nil
  assert(memory.single(c).warning:find("(90 % of mem_gb read as 1e9 bytes: the GPU file gives no mem_reported_gib",
    1, true), "without the figure: said")
end

-- predict's capacity never passes 95 % of the total the device reports (audit18): on an HBM part mem_gb is lower and
-- stays (H100 80 of 79.1 GiB = 84.9e9), but an L4 reports 22.0 GiB = 23.6e9 bytes of its datasheet's "24 GB" (ECC on
-- GDDR6), so a 23.78 GB run (Mixtral-8x7B int4 decode) was said to fit a GPU holding less than that in all.
function T.test_capacity_stays_under_the_reported_memory()
  eq(memory.capacity(80, 79.1), 80e9, "H100: mem_gb, under 95 % of 84.9e9")
  eq(memory.capacity(24, 23.65), 24e9, "RTX 4090: 25.4e9 reported, mem_gb stays")
  local l4 = 0.95 * 22.0 * 2 ^ 30
  eq(memory.capacity(24, 22.0), l4, "L4: 95 % of 23.6e9 bytes, not 24e9")
  eq(memory.capacity(24), 24e9, "no reported figure: mem_gb")
  local c = { params = 1e9, state = { weights = 2, gradients = 0, master = 0, optimizer_state = 0 }, saved = { 0 },
              temporary = { 0 }, count = { 1 }, names = { "x" }, training = false, kv_cache = 21.78e9, cublas = 0,
              autocast_cache = 0, gpu_mem_gb = 24, gpu_reported_gib = 22.0, batch = 1, mode = "decode" }
  local r = memory.single(c)  -- 23.78 GB
  eq(r.fits, false, "23.78 GB does not fit an L4")
  eq(r.memory.capacity_gb, l4 / 1e9, "JSON capacity_gb")
  assert(r.warning:find("exceeds the GPU's 22.44 GB (95 % of the 22.00 GiB it reports; its datasheet's 24 GB is more "
    .. "than that)", 1, true), r.warning)
  assert(r.lines[1]:find("exceeds the GPU's 22.44 GB", 1, true), r.lines[1])
  local p = memory.parallel({ { state = 23.78e9, activations = 0, temporary = 0, workspace = 0, kv_cache = 0 } }, 24,
    "none", false, false, "decode", 22.0)
  eq(p.fits, false, "a parallel run's stages too")
  eq(p.memory.capacity_gb, l4 / 1e9, "its capacity_gb")
end

-- A parallel run's memory (neusight.memory parallel, from the timeline): what dominates the fullest GPU and the largest
-- micro-batch that fits, dp and the microbatch count fixed, found against the same per-stage memory (the build's
-- plan.memory.at_micro_batch: the graph rebuilt at that micro-batch, its memory the timeline's own).
local H100 = { name = "H100-SXM5-80GB", interconnect = "nvlink4", interconnect_bw_gbps = 900.0, pcie_bw_gbps = 64.0,
               num_sm = 132, mem_gb = 80 }

-- The build of `spec` and its timeline's memory report (times 0: memory depends on none), not lean: as predict makes it.
local function parallel_memory(spec)
  local workload = require "neusight.workload"
  local P = require "neusight.parallel"
  local build = workload.build(spec, H100)
  assert(build.plan, "a plan")
  local times = {}
  for i = 1, #build.nodes do
    times[i] = { fw = 1e-3, fw_comm = 0, bw = 2e-3, bw_comm = 0, bw_wgrad = 0, opt = build.nodes[i].phase == "optimizer"
      and 1e-3 or 0 }
  end
  return build, P.timeline(build.plan, build.nodes, times).memory
end

-- The fullest GPU's bytes at micro-batch `mb` by the build's own function.
-- A one-GPU run's memory report (neusight.memory single, with its largest batch)
local function workload_single(spec) return require("neusight.workload").build(spec, H100).memory end

local function at(build, mb) return build.plan.memory.at_micro_batch(build.plan, mb) end

local function has_line(lines, text)
  for _, l in ipairs(lines) do
    if l:find(text, 1, true) then return l end
  end
  return nil
end

function T.test_parallel_run_names_what_dominates_and_the_largest_micro_batch_that_fits()
  local spec = { model = "llama32_1b", gpu = "h100", mode = "train", batch = 512, seq = 2048, dtype = "bf16",
                 parallel = { tp = 2, pp = 2, dp = 2, microbatches = 4 } }
  local build, mem = parallel_memory(spec)
  local o = mem.memory
  eq(build.plan.micro_batch, 64, "512 / (dp 2 x 4 microbatches)")
  -- dominant: the fullest GPU's largest part
  local most, part = -1, nil
  for _, k in ipairs { "state", "activations", "temporary", "workspace", "kv_cache" } do
    if o[k .. "_gb"] > most then most, part = o[k .. "_gb"], k end
  end
  eq(o.dominant, part, "the fullest stage's largest part")
  eq(mem.fits, false, "micro-batch 64 of 2048 tokens does not fit (the search goes down)")
  assert(math.type(o.max_batch) == "integer" and o.max_batch >= 1 and o.max_batch < 64, "max_batch " .. tostring(o.max_batch))
  eq(o.max_batch_of, "micro-batch size", "what is varied")
  eq(o.max_global_batch, o.max_batch * 2 * 4, "the global batch it makes: mb x dp x microbatches")
  -- the same function gives the run's own memory at its micro-batch, bit for bit
  eq(at(build, 64), mem.total, "at the run's micro-batch: its memory")
  near(mem.total / 1e9, mem.memory_gb, "total in bytes")
  local cap = memory.capacity(80)
  assert(at(build, o.max_batch) <= cap, "max_batch fits")
  assert(at(build, o.max_batch + 1) > cap, "max_batch + 1 does not")
  -- and predict at that global batch fits, one step more does not, with the same answer
  local fit = {}
  for k, v in pairs(spec) do fit[k] = v end
  fit.batch = o.max_global_batch
  local b2, m2 = parallel_memory(fit)
  eq(m2.fits, true, "the run at max_global_batch fits")
  eq(m2.memory.max_batch, o.max_batch, "the same answer from another batch")
  eq(m2.total, at(build, o.max_batch), "its memory is the function's")
  fit.batch = (o.max_batch + 1) * 8
  local _, m3 = parallel_memory(fit)
  eq(m3.fits, false, "one micro-batch more does not fit")
  assert(b2.plan.micro_batch == o.max_batch)
  -- the table says both
  local line = has_line(mem.lines, "fullest GPU")
  assert(line, "a fullest-GPU line")
  assert(line:find(o.dominant .. " dominate", 1, true), line)
  assert(line:find(("largest micro-batch that fits: %d (global batch %d = %d × dp 2 × 4 microbatches)"):format(
    o.max_batch, o.max_global_batch, o.max_batch), 1, true), line)
end

function T.test_one_gpu_with_recompute_has_the_largest_batch_as_without()
  -- --recompute on one GPU runs the timeline (a one-device plan): it names what dominates and the largest batch, as
  -- a one-GPU run without recomputation does
  local spec = { model = "llama32_1b", gpu = "h100", mode = "train", batch = 4, seq = 2048, dtype = "bf16",
                 parallel = { recompute = "full" } }
  local build, mem = parallel_memory(spec)
  local o = mem.memory
  eq(build.plan.world, 1, "one GPU")
  assert(o.dominant, "dominant")
  assert(math.type(o.max_batch) == "integer" and o.max_batch >= 4, "max_batch " .. tostring(o.max_batch))
  eq(o.max_batch_of, "batch", "one microbatch on one GPU: the micro-batch is the batch")
  eq(o.max_global_batch, nil, "no global batch beside it")
  local cap = memory.capacity(80)
  assert(at(build, o.max_batch) <= cap and at(build, o.max_batch + 1) > cap, "max_batch fits, one more does not")
  assert(has_line(mem.lines, ("; largest batch that fits: %d"):format(o.max_batch)), "the table says it")
  -- full recomputation keeps less than none: a larger batch fits than without it (neusight.memory single)
  local plain = workload_single { model = "llama32_1b", gpu = "h100", mode = "train", batch = 4, seq = 2048, dtype = "bf16" }
  eq(plain.memory.max_batch_of, "batch", "the one-GPU run's unit")
  assert(o.max_batch > plain.memory.max_batch, ("recompute full %d > none %d"):format(o.max_batch, plain.memory.max_batch))
end

-- HF training keeps its past_key_values too: LlamaModel.forward turns use_cache off only under gradient checkpointing,
-- and scripts/collect/hf_trace.py's `out = model(ids, labels=ids); out.loss.backward()` holds `out` (and its
-- DynamicCache) through the backward. With eager attention and grouped-query heads that is memory beyond autograd's
-- saved tensors (those are repeat_kv's copies; the cache holds the un-repeated rotated K and V): Llama-3-8B bf16,
-- batch 1 x 1024, 2 · 32 layers · 1024 · 8 kv heads · 128 · 2 B = 134 MB (before: not counted) under precision pure;
-- under amp's torch.autocast the rotated K is fp32 (RoPE's cos / sin are), V bf16: 32 · 1024 · 8 · 128 · (4 + 2)
-- = 201 MB (neusight.nodes rope, hf_cache). Nothing with sdpa (it
-- saves the un-repeated K and V it is given), with one kv head per query head (eager's matmuls save K and V), under
-- recomputation (gradient checkpointing turns use_cache off) or for a config that says use_cache false.
function T.test_training_counts_hf_cache_of_eager_gqa()
  local function build(w)
    w.gpu, w.mode, w.dtype = H100.name, "train", "bf16"
    w.batch, w.seq = w.batch or 1, w.seq or 1024
    return require("neusight.workload").build(w, H100)
  end
  local cache = 32 * 1024 * 8 * 128 * (4 + 2)
  eq(build { model = "llama3_8b", attention = "eager", precision = "pure" }.kv_cache_bytes, 2 * 32 * 1024 * 8 * 128 * 2,
    "pure bf16: K and V in bf16")
  local e = build { model = "llama3_8b", attention = "eager" }
  eq(e.kv_cache_bytes, cache, "eager GQA: the un-repeated K (fp32 under autocast) and V of every layer")
  near(e.memory.memory.kv_cache_gb, cache / 1e9, "the memory model's KV part")
  local o = e.memory.memory
  near(o.state_gb + o.activations_gb + o.temporary_gb + o.workspace_gb + o.kv_cache_gb, e.memory.memory_gb, "parts sum")
  eq(build { model = "llama3_8b", attention = "sdpa" }.kv_cache_bytes, nil, "sdpa saves them: nothing more")
  eq(build { model = "gpt2_large", attention = "eager", dtype = "bf16" }.kv_cache_bytes, nil, "MHA: saved anyway")
  eq(build { model = "llama3_8b", attention = "eager", parallel = { recompute = "full", kernels = "eager" } }
    .kv_cache_bytes, nil, "gradient checkpointing: use_cache off")
  local hf = require "neusight.models.hf"
  local tiny = hf.from_config({ model_type = "llama", hidden_size = 256, intermediate_size = 512, num_hidden_layers = 2,
                                num_attention_heads = 4, num_key_value_heads = 2, vocab_size = 1000, use_cache = false },
    "tiny/config.json")
  eq(build { model = tiny, attention = "eager", seq = 64 }.kv_cache_bytes, nil, "use_cache false")
end

-- A plain HF forward (mode inference: model(input_ids) under no_grad, scripts/collect/hf_trace.py) keeps every
-- layer's K and V of its S tokens in the past_key_values it returns (use_cache defaults to True; transformers 5 appends
-- them by torch.cat, tests/fixtures/traces/hf/mixtral-bf16-inference.json), beside the LM head's logits: the memory
-- model's kv_cache part (neusight.nodes hf_cache). GPT-2 Large fp32, batch 8 × 1024 on a 40 GB A100: the cache is
-- 2 · 36 · 8 · 1024 · 1280 · 4 B = 3.02 GB beside 3.10 GB of weights (it read 4.82 GB and a largest batch of 174).
function T.test_inference_counts_hf_past_key_values()
  local A100 = { name = "A100-SXM4-40GB", mem_gb = 40 }
  local function build(w, gpu)
    gpu = gpu or A100
    w.batch, w.seq, w.gpu = w.batch or 8, w.seq or 1024, gpu.name
    return require("neusight.workload").build(w, gpu)
  end
  local b = build { model = "gpt2_large", mode = "inference", dtype = "fp32" }
  local o, cache = b.memory.memory, 2 * 36 * 8 * 1024 * 1280 * 4
  eq(b.kv_cache_bytes, cache, "GPT-2 Large: 2 · layers · b · s · h · 4 B")
  near(o.kv_cache_gb, cache / 1e9, "the memory model's KV part")
  near(o.state_gb + o.activations_gb + o.temporary_gb + o.workspace_gb + o.kv_cache_gb, b.memory.memory_gb, "parts sum")
  -- the largest batch: the cache grows with the batch as the logits do
  local per_seq = cache / 8 + o.temporary_gb * 1e9 / 8
  local fixed = b.memory.memory_gb * 1e9 - 8 * per_seq
  eq(o.max_batch, math.floor((memory.capacity(40) - fixed) / per_seq + 1e-9), "largest batch that fits")
  -- GQA: the kv heads (Llama-3-8B, bf16); DeepSeek's HF attention caches every head's K (qk_nope + qk_rope = 192) and
  -- V (v_head_dim 128), not the latent an MLA-aware server caches
  eq(build { model = "llama3_8b", mode = "inference", dtype = "bf16", batch = 2, seq = 4096 }.kv_cache_bytes,
    2 * 32 * 2 * 4096 * 8 * 128 * 2, "Llama-3-8B: 8 kv heads of 128")
  -- torch.compile-style fusion (neusight.fusion) merges the rotary chain that makes K: the fused node keeps its cache
  for _, f in ipairs { true, "flash_attention" } do
    eq(build { model = "llama3_8b", mode = "inference", dtype = "bf16", batch = 2, seq = 4096, fusion = f }
      .kv_cache_bytes, 2 * 32 * 2 * 4096 * 8 * 128 * 2, "fused: " .. tostring(f))
  end
  eq(build { model = "deepseek_v2_lite", mode = "inference", dtype = "bf16", batch = 2, seq = 512 }.kv_cache_bytes,
    27 * 2 * 512 * 16 * (192 + 128) * 2, "DeepSeek-V2-Lite: per-head K and V")
  -- none in MHA training (autograd's saved tensors are K and V already) nor where no HF forward runs: an encoder, or
  -- Megatron-LM's kernels (a forward without inference parameters keeps no cache)
  eq(build { model = "gpt2_large", mode = "train", dtype = "fp32", batch = 1 }.kv_cache_bytes, nil,
    "training: MHA (grouped-query eager training: test_training_counts_hf_cache_of_eager_gqa)")
  eq(build { model = "bert", mode = "inference", dtype = "fp32", seq = 512 }.kv_cache_bytes, nil, "an encoder")
  eq(build({ model = "llama3_8b", mode = "inference", dtype = "bf16", batch = 2, seq = 512,
              parallel = { kernels = "megatron" } }, H100).kv_cache_bytes, nil, "Megatron-LM's kernels")
  -- a config.json's use_cache: false keeps none (neusight.models.hf use_cache); true, or the key left out, HF's default
  local hf = require "neusight.models.hf"
  local function config(use_cache)
    return hf.from_config({ model_type = "llama", hidden_size = 256, intermediate_size = 512, num_hidden_layers = 2,
                            num_attention_heads = 4, num_key_value_heads = 2, vocab_size = 1000,
                            use_cache = use_cache }, "tiny/config.json")
  end
  eq(build { model = config(false), mode = "inference", dtype = "bf16", batch = 2, seq = 64 }.kv_cache_bytes, nil,
    "use_cache false")
  for _, u in ipairs { true, nil } do
    eq(build { model = config(u), mode = "inference", dtype = "bf16", batch = 2, seq = 64 }.kv_cache_bytes,
      2 * 2 * 2 * 64 * 2 * 64 * 2, "use_cache " .. tostring(u))
  end
  eq(build { model = config(false), mode = "decode", dtype = "bf16", batch = 2, seq = 1, context = 63 }.kv_cache_bytes,
    2 * 2 * 2 * 64 * 2 * 64 * 2, "a serving phase's cache whatever use_cache says")
end

return T
