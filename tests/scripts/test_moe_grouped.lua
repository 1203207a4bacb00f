-- tests/scripts/test_moe_grouped.lua — grouped-GEMM experts (opts.experts = "grouped", neusight/models/moe.lua
-- M.grouped_experts, ops/grouped_linear.lua) for moe.lua and deepseek.lua: the op rule's kernels, the block's nodes
-- (a kernel count independent of E), parameters, active parameters and FLOPs equal to the loop's, training, tensor /
-- sequence / expert parallelism, and the errors of a bad value.
local K = require "neusight.kernels"
local moe = require "neusight.models.moe"
local deepseek = require "neusight.models.deepseek"
local presets = require "neusight.models.presets"
local workload = require "neusight.workload"

local t = require("neusight.testing").bind(load_op, make_node)
local eq, total_params, tp_plan, matmul_flops = t.eq, t.params, t.tp_plan, t.matmul_flops
local with, raises = require("neusight.testing").with, require("neusight.testing").raises

local T = {}

local tiny = require("neusight.testing").tiny
local TINY_QWEN3, TINY_QWEN2, TINY_MIXTRAL, TINY_DS = tiny("qwen3_moe"), tiny("qwen2_moe"), tiny("mixtral"),
  tiny("deepseek_v3")

local function builder(cfg) return cfg.arch == "deepseek" and deepseek or moe end
local function build(cfg, opts) return builder(cfg).build(cfg, opts) end
local function experts(n) return n.attrs.expert == true end
local function named(nodes, suffix)
  local out = {}
  for _, n in ipairs(nodes) do
    if n.name:sub(-#suffix) == suffix then out[#out + 1] = n end
  end
  return out
end

---------------------------------------------------------------------------------------------------
-- ops/grouped_linear.lua

function T.test_grouped_linear_rule()
  local rule = load_op("grouped_linear")
  local function node(R, I, O, E, extra)
    return make_node(with({ op = "grouped_linear", name = "g", inputs = { { R, I } }, output = { R, O }, dtype = "bf16",
      params = E * I * O, attrs = with({ expert = true, experts = E }, extra) }, nil))
  end
  -- DeepSeek-V2-Lite decode, batch 8: 48 routed rows over 64 experts → 48 experts of one row each
  local n = node(48, 2048, 2816, 64)
  local fw = rule.forward(n, t.GPU)
  eq(K.describe_all(fw), "BMM(48,1,2048,2816)", "b = min(E, R) experts, ⌈R/b⌉ rows")
  eq(fw[1].bytes, 2 * 48 * (2048 + 2816) + 2 * 48 * 2048 * 2816, "rows once, the active experts' whole weights")
  eq(fw[1].flops, 2 * 48 * 2048 * 2816, "FLOPs of the rows")
  -- the experts the routing reaches (the builder's attrs.experts_reached): only theirs are read, ⌈R/b⌉ rows each
  local routed = node(48, 2048, 2816, 64, { experts_reached = 35 })
  fw = rule.forward(routed, t.GPU)
  eq(K.describe_all(fw), "BMM(35,2,2048,2816)", "35 experts reached, ⌈48/35⌉ rows")
  eq(fw[1].bytes, 2 * 48 * (2048 + 2816) + 2 * 35 * 2048 * 2816, "only the reached experts' weights")
  eq(fw[1].flops, 2 * 48 * 2048 * 2816, "FLOPs of the rows, not of the padding")
  for _, bad in ipairs { 0, 65, 2.5, "35" } do
    assert(rule.check(node(48, 2048, 2816, 64, { experts_reached = bad })):find("experts_reached", 1, true),
      "experts_reached " .. tostring(bad))
  end
  -- moe.experts_reached: 8 tokens picking 6 of 64, 64·(1 − (58/64)^8) = 34.9 → 35; one token: its k; expert parallel
  -- (16 local experts of 64, 4 ranks of 8 tokens): 16·(1 − (58/64)^32) = 15.3 → 15; a prefill batch: all of them
  eq(moe.experts_reached(64, 6, 64, 8), 35, "decode batch 8")
  eq(moe.experts_reached(64, 6, 64, 1), 6, "one token reaches its k experts")
  eq(moe.experts_reached(16, 6, 64, 32), 15, "local experts under expert parallelism")
  eq(moe.experts_reached(8, 2, 8, 4096), 8, "prefill reaches every expert")
  -- more rows than experts: every expert active, ⌈R/E⌉ rows (the padding does no FLOPs)
  n = node(100, 64, 32, 8)
  fw = rule.forward(n, t.GPU)
  eq(K.describe_all(fw), "BMM(8,13,64,32)", "8 experts of ⌈100/8⌉ rows")
  eq(fw[1].flops, 2 * 100 * 64 * 32, "the real rows' FLOPs")
  eq(fw[1].bytes, 2 * 100 * (64 + 32) + 2 * 8 * 64 * 32, "bytes")
  local bw = rule.backward(n, t.GPU)
  eq(K.describe_all(bw), "BMM(8,13,32,64) BMM(8,64,13,32)", "data and weight gradient grouped GEMMs")
  eq(K.describe_all(rule.accumulate(n, t.GPU)), "VECadd(1,16384)", "the (E, I, O) gradient accumulated")
  eq(rule.saves(n), 2 * 100 * 64, "x saved for dW")
  -- weight-only quantisation: the expert weights at 0.5 B each
  n = node(48, 2048, 2816, 64, { weight_bytes = 0.5 })
  fw = rule.forward(n, t.GPU)
  eq(fw[1].bytes, 2 * 48 * (2048 + 2816) + 0.5 * 48 * 2048 * 2816, "int4 weights")
  eq(fw[1].weight_bytes, 0.5, "the tile model sees the quantised weight")
  -- check
  eq(rule.check(node(48, 2048, 2816, 64)), nil, "a good node")
  eq(rule.check(make_node { op = "grouped_linear", inputs = { { 4, 8 } }, output = { 4, 8 }, attrs = {} }),
    "needs attrs.experts, the experts of the (E, I, O) weight (got nil)", "no experts")
  eq(rule.check(make_node { op = "grouped_linear", inputs = { { 4, 8 } }, output = { 4, 8 }, params = 7,
    attrs = { experts = 2 } }), "params 7 is not experts · in · out = 2 · 8 · 8", "params")
end

---------------------------------------------------------------------------------------------------
-- The block

-- The grouped block's nodes do not depend on E; its grouped GEMMs run the b experts the n tokens reach (uniform
-- routing: E·(1 − (1 − k/E)^n)) with ⌈n·k/b⌉ rows each.
function T.test_grouped_kernel_count_independent_of_experts()
  for _, base in ipairs { TINY_QWEN3, TINY_DS } do
    local counts = {}
    for _, E in ipairs { 8, 16, 64 } do
      local cfg = base.arch == "deepseek" and with(base, { n_routed_experts = E }) or with(base, { num_experts = E })
      local loop = build(cfg, { batch = 2, seq = 8 })
      local nodes = build(cfg, { batch = 2, seq = 8, experts = "grouped" })
      local n_experts = 0
      for _, n in ipairs(nodes) do
        if n.name:find(".experts.", 1, true) then n_experts = n_experts + 1 end
        assert(not n.attrs.per_layer, n.name .. ": nothing replicated per expert")
        assert(n.op ~= "nonzero" or n.name:find("sorted_indices", 1, true), n.name .. ": no per-expert torch.where")
      end
      counts[#counts + 1] = n_experts
      local gu = named(nodes, ".experts.gate_up_proj")
      eq(#gu, 1, "one gate_up grouped GEMM per MoE layer group")
      local R = 2 * 8 * 2
      local fw = t.kernels(gu[1], false)
      -- the experts 16 tokens reach, each picking 2 of E uniformly: E·(1 − (1 − 2/E)^16), rounded
      local b = math.min(E, R, math.floor(E * (1 - (1 - 2 / E) ^ 16) + 0.5))
      local I = base.arch == "deepseek" and 16 or 32
      eq(K.describe_all(fw), ("BMM(%d,%d,64,%d)"):format(b, (R + b - 1) // b, 2 * I), "gate_up BMM at E = " .. E)
      eq(fw[1].bytes, 4 * R * (64 + 2 * I) + 4 * b * 64 * 2 * I, "bytes at E = " .. E)
      eq(gu[1].params, E * 64 * 2 * I, "the (E, h, 2I) weight")
      local down = named(nodes, ".experts.down_proj")[1]
      eq(K.describe_all((t.kernels(down, false))), ("BMM(%d,%d,%d,64)"):format(b, (R + b - 1) // b, I), "down")
      -- the loop launches a gather, three GEMMs and more per expert: its kernel count grows with E
      local loop_kernels = 0
      for _, n in ipairs(loop) do loop_kernels = loop_kernels + #(t.kernels(n, false)) * n.count end
      local grouped_kernels = 0
      for _, n in ipairs(nodes) do grouped_kernels = grouped_kernels + #(t.kernels(n, false)) * n.count end
      assert(grouped_kernels < loop_kernels, ("E = %d: grouped %d kernels, loop %d"):format(E, grouped_kernels, loop_kernels))
    end
    eq(counts[1], counts[3], base.model_type .. ": the grouped block's nodes at E = 8 and 64")
    eq(counts[2], counts[3], base.model_type .. ": at E = 16 and 64")
  end
end

-- The grouped block's nodes in order (Qwen3-MoE, one GPU): router as the loop's, permute, grouped MLP, unpermute.
function T.test_grouped_block_nodes()
  local nodes = moe.build(TINY_QWEN3, { batch = 1, seq = 4, experts = "grouped" })
  local names = {}
  for _, n in ipairs(nodes) do
    if n.name:find("^layers%.mlp%.") then names[#names + 1] = n.name:gsub("^layers%.mlp%.", "") .. ":" .. n.op end
  end
  eq(table.concat(names, " "), "gate:linear routing_softmax:softmax topk:topk topk_sum:sum topk_norm:div "
    .. "experts.routing_map:one_hot experts.tokens_per_expert:sum experts.sorted_indices:nonzero "
    .. "experts.permute:index experts.permuted_probs:index experts.gate_up_proj:grouped_linear experts.act_fn:silu "
    .. "experts.mul:mul experts.down_proj:grouped_linear experts.weighted:mul final_hidden_states:zeros "
    .. "experts.unpermute:index_add", "grouped block")
  -- the default stays HF's loop, node for node
  t.same(moe.build(TINY_QWEN3, { batch = 1, seq = 4 }), moe.build(TINY_QWEN3, { batch = 1, seq = 4, experts = "loop" }),
    "loop is the default")
  t.same(deepseek.build(TINY_DS, { batch = 1, seq = 4 }), deepseek.build(TINY_DS, { batch = 1, seq = 4, experts = "loop" }),
    "deepseek: loop is the default")
end

-- Parameters, active parameters and the experts' GEMM FLOPs (forward and backward) equal the loop's.
function T.test_grouped_params_active_and_flops_equal_the_loop()
  for _, name in ipairs { "mixtral_8x7b", "qwen3_30b_a3b", "qwen15_moe_a27b", "deepseek_v2_lite", "deepseek_v3" } do
    local cfg = presets[name]
    local B = builder(cfg)
    local loop = B.build(cfg, { batch = 1, seq = 1 })
    local grouped = B.build(cfg, { batch = 1, seq = 1, experts = "grouped" })
    eq(total_params(grouped), total_params(loop), name .. " parameters")
    local k, E = B.top_k(cfg), B.num_experts(cfg)
    eq(moe.active_of(grouped, k, E), moe.active_of(loop, k, E), name .. " active parameters")
    eq(workload.active_params(grouped, { k = k, E = E }), B.active_parameters(cfg), name .. " workload active_params")
  end
  for _, cfg in ipairs { TINY_QWEN3, TINY_QWEN2, TINY_MIXTRAL, TINY_DS } do
    local opts = { batch = 2, seq = 8, training = true, attention = "sdpa" }
    local loop = build(cfg, opts)
    local grouped = build(cfg, with(opts, { experts = "grouped" }))
    eq(matmul_flops(grouped, experts), matmul_flops(loop, experts), cfg.model_type .. ": expert GEMM FLOPs")
    eq(matmul_flops(grouped), matmul_flops(loop), cfg.model_type .. ": all GEMM FLOPs")
  end
end

-- Training: the grouped GEMMs' backward (dX, dW) and the gradient accumulation of their (E, ·, ·) weights.
function T.test_grouped_training_has_backward()
  for _, cfg in ipairs { TINY_QWEN3, TINY_DS } do
    local nodes = build(cfg, { batch = 2, seq = 8, training = true, experts = "grouped" })
    local gu = named(nodes, ".experts.gate_up_proj")[1]
    local _, bw, acc = t.kernels(gu, true)
    eq(#bw, 2, "dX and dW grouped GEMMs")
    eq(bw[1].kind .. bw[2].kind, "bmmbmm", "both batched")
    eq(K.describe_all(acc), ("VECadd(1,%d)"):format(gu.params), "weight gradient accumulated")
    local permute = named(nodes, ".experts.permute")[1]
    local _, pbw = t.kernels(permute, true)
    assert(#pbw > 0, "the permute's gather scatters its gradient back")
  end
end

---------------------------------------------------------------------------------------------------
-- Parallelism

function T.test_grouped_tensor_and_sequence_parallel()
  for _, cfg in ipairs { TINY_QWEN3, TINY_MIXTRAL, TINY_DS } do
    local b, s = 2, 16
    local opts = { batch = b, seq = s, training = true, attention = "sdpa", experts = "grouped" }
    local one = build(cfg, opts)
    local two = build(cfg, with(opts, { tp = 2, parallel = tp_plan(2, b) }))
    eq(2 * matmul_flops(two, experts), matmul_flops(one, experts), cfg.model_type .. ": experts split tp ways")
    eq(2 * total_params(named(two, "gate_up_proj")), total_params(named(one, "gate_up_proj")), "I split")
    local fg = 0
    for _, n in ipairs(two) do
      if n.attrs.group == "tp" and (n.name:find("mlp.tp_", 1, true) or n.name:find("block_sparse_moe.tp_", 1, true)) then
        fg = fg + 1
      end
    end
    assert(fg >= 2, cfg.model_type .. ": f and g around the grouped MoE block")
    -- sequence parallel: Megatron's token dispatcher routes this rank's b · s / tp tokens (n/tp · k rows) and
    -- gathers the routed rows over tp around the experts (test_megatron_token_dispatcher_under_sequence_parallelism)
    local sp = build(cfg, with(opts, { tp = 2, parallel = tp_plan(2, b), sequence_parallel = true }))
    eq(named(sp, ".experts.permute")[1].output[1], b * s // 2 * 2, cfg.model_type .. ": n/tp · k rows of this rank")
    -- the routed path keeps its own tokens (no gathered sequence: no sequence shard); a shared expert is a
    -- sequence-parallel MLP (DeepSeek's shared_experts: it gathers the sequence and keeps its shard), as is the
    -- attention's column-parallel projection
    -- (DeepSeek's first layers, "dense_layers", have a dense MLP: column-parallel gate/up, a shard kept)
    local function routed_path(name)
      return name:find("dense_layers", 1, true) ~= 1 and not name:find("shared_expert", 1, true)
        and (name:find("mlp", 1, true) ~= nil or name:find("block_sparse_moe", 1, true) ~= nil)
    end
    local shards = 0
    for _, n in ipairs(sp) do
      assert(not (n.attrs.sequence_shard and routed_path(n.name)),
        cfg.model_type .. ": " .. n.name .. " of the routed experts keeps a sequence shard")
      if n.attrs.sequence_shard then shards = shards + 1 end
    end
    assert(shards >= 1, cfg.model_type .. ": the attention's column-parallel projection keeps its input's shard")
  end
end

-- Megatron-Core's MoELayer with the all-to-all token dispatcher (v0.6–0.9) under tensor, sequence and expert
-- parallelism (tp 2 × ep 2, training): the router and permute on this rank's n/tp tokens, the ep all-to-alls of its
-- (n/tp)·k rows, the tp all-gather of the received rows before the experts and the reduce-scatter after (their
-- gradients' reverse in backward), no sequence all-gather / reduce-scatter around the block; the experts' GEMMs,
-- FLOPs and saved activations per rank those of the block without sequence parallelism (the tp group's n·k rows
-- through I/tp). Loop and grouped forms, Mixtral, Qwen3-MoE and DeepSeek-V3 (its shared experts: a sequence-parallel
-- MLP of their own). Before, every tp rank gathered the sequence, routed all n tokens and sent all n·k rows.
function T.test_megatron_token_dispatcher_under_sequence_parallelism()
  local node_saved = require("neusight.memory").node_saved
  local ep_plan = require("neusight.testing").ep_plan
  for _, cfg in ipairs { TINY_MIXTRAL, TINY_QWEN3, TINY_DS } do
    for _, impl in ipairs { "loop", "grouped" } do
      local b, s, tp, ep = 2, 16, 2, 2
      local h, k = 64, 2
      local n = b * s
      local what = cfg.model_type .. " " .. impl
      local function graph(sp)
        return build(cfg, { batch = b, seq = s, training = true, dtype = "bf16", attention = "sdpa", experts = impl,
          tp = tp, ep = ep, parallel = ep_plan(ep, tp, b * ep), sequence_parallel = sp, router_skew = "balanced" })
      end
      local sp, whole = graph(true), graph(false)
      local function sparse(nd) return nd.layer == "layers" end
      local a2a, rows, seq = 0, 0, 0
      for _, nd in ipairs(sp) do
        if sparse(nd) and nd.op == "all_to_all" then
          a2a = a2a + 1
          -- per rank (n/tp)·k rows of h: the bytes of (n/tp)·k·h·2
          eq(require("neusight.parallel.shard").numel(nd.output) * K.dtype_bytes(nd.dtype), n // tp * k * h * 2, what .. ": " .. nd.name .. " bytes")
        end
        local moe_block = nd.name:find("mlp", 1, true) or nd.name:find("block_sparse_moe", 1, true)
        if sparse(nd) and nd.attrs.group == "tp" and moe_block and not nd.name:find("shared_expert", 1, true) then
          -- the tp collectives of the routed path act on the tp group's n·k rows, not on the (b, s, h) sequence
          eq(table.concat(nd.output, ","), (n * k) .. "," .. h, what .. ": " .. nd.name .. " on the routed rows")
          rows = rows + 1
        end
        if sparse(nd) and moe_block and nd.attrs.group == "tp" and #nd.output == 3 then seq = seq + 1 end
        if sparse(nd) and nd.name:match("%.gate$") then eq(nd.inputs[1][1], n // tp, what .. ": router on n/tp tokens") end
      end
      eq(a2a, 2, what .. ": dispatch and combine all-to-alls")
      eq(rows, 4, what .. ": all-gather / reduce-scatter before the experts, reduce-scatter / all-gather after")
      eq(seq, cfg.model_type == "deepseek_v3" and 4 or 0, what .. ": sequence collectives only around shared experts")
      -- the experts' work per rank unchanged: the same GEMMs, FLOPs and saved activations as without the dispatcher
      local function expert_nodes(nodes)
        local out = {}
        for _, nd in ipairs(nodes) do if nd.attrs.expert and nd.params > 0 then out[#out + 1] = nd end end
        return out
      end
      local a, w = expert_nodes(sp), expert_nodes(whole)
      eq(#a, #w, what .. ": expert nodes")
      for i = 1, #a do
        eq(table.concat(a[i].inputs[1], ",") .. " " .. table.concat(a[i].output, ",") .. " " .. a[i].params .. " " .. a[i].count,
          table.concat(w[i].inputs[1], ",") .. " " .. table.concat(w[i].output, ",") .. " " .. w[i].params .. " " .. w[i].count,
          what .. ": " .. a[i].name .. " GEMM")
        eq(node_saved(make_node(a[i]), load_op(a[i].op)), node_saved(make_node(w[i]), load_op(w[i].op)),
          what .. ": " .. a[i].name .. " saved")
      end
      eq(matmul_flops(sp, experts), matmul_flops(whole, experts), what .. ": expert FLOPs per rank")
    end
  end
end

function T.test_grouped_expert_parallel()
  local ep_plan = require("neusight.testing").ep_plan
  for _, cfg in ipairs { TINY_QWEN3, TINY_DS } do
    local b, s = 2, 16 -- 8 experts, top 2: 64 routed rows
    local one = build(cfg, { batch = b, seq = s, training = true, experts = "grouped" })
    local I = cfg.arch == "deepseek" and 16 or 32
    for _, ep in ipairs { 2, 4, 8 } do
      local nodes = build(cfg, { batch = b, seq = s, training = true, ep = ep, parallel = ep_plan(ep, 1, b * ep),
        experts = "grouped", router_skew = "balanced" }) -- the mean n·k rows per rank (test_moe_imbalance.lua: uniform)
      local a2a = 0
      for _, n in ipairs(nodes) do
        if n.op == "all_to_all" then
          a2a = a2a + 1
          eq(n.attrs.group, "ep", "ep group")
          eq(table.concat(n.output, ","), "64,64", "n·k rows of h")
        end
      end
      eq(a2a, 2, "dispatch and combine")
      eq(#named(nodes, ".experts.sort_chunks") + #named(nodes, ".experts.unsort_chunks"), 2, "Megatron's chunk sorts")
      local gu = named(nodes, ".experts.gate_up_proj")[1]
      eq(gu.attrs.experts, 8 // ep, "local experts")
      eq(K.describe_all((t.kernels(gu, false))), ("BMM(%d,%d,64,%d)"):format(8 // ep, 64 * ep // 8, 2 * I),
        "every local expert gets its share of the n·k rows from all ranks")
      eq(matmul_flops(nodes, experts), matmul_flops(one, experts), "expert GEMM FLOPs per rank unchanged")
      eq(total_params(nodes), total_params(one) - (8 - 8 // ep) * (cfg.arch == "deepseek" and 2 or 2) * 3 * 64 * I,
        "E / ep experts' parameters")
    end
  end
end

---------------------------------------------------------------------------------------------------
-- Selection and errors

-- Training under autocast (amp on one GPU) caches a 16-bit copy of every GEMM weight it casts: the grouped experts'
-- (E, h, 2I) and (E, I, h) tensors as much as the loop's per-expert linears. The grouped form left them out of the
-- workspace (Qwen3-30B-A3B: 2.49 GB against the loop's 60.48 GB, so 58 GB less memory and a larger batch "fitting").
-- Both are every GEMM weight: all parameters but embed_tokens and the RMSNorms (a layer's two and q_norm / k_norm, the
-- final one), at 2 bytes; the loop at a length where every expert is reached, the grouped form at any length.
function T.test_grouped_autocast_caches_the_expert_weights()
  local c = presets.qwen3_30b_a3b
  local norms = c.num_hidden_layers * (2 * c.hidden_size + 2 * c.head_dim) + c.hidden_size
  local gemm = 30532122624 - c.vocab_size * c.hidden_size - norms
  for _, case in ipairs { { "grouped", 64 }, { "loop", 2048 } } do
    local b = workload.build(workload.normalize { model = "qwen3_30b_a3b", gpu = "h200", mode = "train", batch = 1,
      seq = case[2], dtype = "bf16", precision = "amp", optimizer = "adamw", experts = case[1] })
    eq(b.memory.memory.workspace.autocast_weight_cache_gb * 1e9, 2 * gemm, case[1] .. ": the 16-bit GEMM weights")
  end
end

function T.test_grouped_workload_field_and_errors()
  local w = workload.normalize { model = "qwen3_30b_a3b", gpu = "h100", mode = "decode", batch = 1, context = 64,
    experts = "grouped" }
  eq(w.experts, "grouped", "field kept")
  local ok, err = pcall(workload.normalize, { model = "qwen3_30b_a3b", gpu = "h100", mode = "decode", batch = 1,
    context = 64, experts = "groupd" }, nil, "w.lua")
  assert(not ok)
  eq(err, "w.lua: field 'experts' must be \"loop\" or \"grouped\" (got \"groupd\") (did you mean 'grouped'?)", "bad value")
  local nodes = workload.build { model = "qwen3_30b_a3b", gpu = "h100", mode = "decode", batch = 1, context = 64,
    dtype = "bf16", experts = "grouped" }.nodes
  eq(#named(nodes, ".experts.gate_up_proj"), 1, "the workload builds the grouped block")
  -- weight-only quantisation reaches the grouped GEMMs
  nodes = workload.build { model = "qwen3_30b_a3b", gpu = "h100", mode = "decode", batch = 1, context = 64,
    dtype = "bf16", experts = "grouped", weight_dtype = "int4" }.nodes
  eq(named(nodes, ".experts.down_proj")[1].attrs.weight_bytes, 0.5, "int4 expert weights")
  -- a builder with experts but no grouped form, and a dense model (the field is moot there)
  raises("field 'experts': the switch model builder (scripts/neusight/models/switch.lua) has no \"grouped\" experts; use experts = \"loop\"",
    workload.build, { model = "switchxl4", gpu = "h100", mode = "inference", batch = 1, seq = 16, experts = "grouped" })
  workload.build { model = "switchxl4", gpu = "h100", mode = "inference", batch = 1, seq = 16, experts = "loop" }
  local dense = workload.build { model = "llama3_8b", gpu = "h100", mode = "decode", batch = 1, context = 64,
    experts = "grouped" }.nodes
  local plain = workload.build { model = "llama3_8b", gpu = "h100", mode = "decode", batch = 1, context = 64 }.nodes
  eq(#dense, #plain, "dense models ignore the field")
  -- the builders themselves
  raises("moe model 'tiny': opts.experts must be \"loop\" or \"grouped\" (got \"grouped_gemm\") (did you mean 'grouped'?)",
    moe.build, TINY_QWEN3, { batch = 1, seq = 4, experts = "grouped_gemm" })
  raises("deepseek model 'tiny': opts.experts must be \"loop\" or \"grouped\" (got true)",
    deepseek.build, TINY_DS, { batch = 1, seq = 4, experts = true })
end

-- serve's bound classes: a grouped GEMM that is not compute bound streams the experts' weights
function T.test_grouped_gemm_bound_class_is_weights()
  local serve = require "neusight.serve"
  eq(serve.bound_class { kind = "bmm", op = "grouped_linear", compute_ms = 0.1, memory_ms = 1 }, "weights", "grouped")
  eq(serve.bound_class { kind = "bmm", op = "bmm", compute_ms = 0.1, memory_ms = 1 }, "activations", "attention bmm")
  eq(serve.bound_class { kind = "bmm", op = "grouped_linear", compute_ms = 2, memory_ms = 1 }, "compute", "prefill")
end

return T
