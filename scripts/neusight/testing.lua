-- scripts/neusight/testing.lua — helpers shared by the Lua-side builder tests (tests/scripts/test_*.lua).
-- The test runner's globals (load_op, make_node) are passed in once: `require("neusight.testing").bind(load_op, make_node)`.
local ipairs, pairs, type, tostring, error, pcall, max, abs = ipairs, pairs, type, tostring, error, pcall, math.max, math.abs
local K = require "neusight.kernels"

local M = {}

-- A GPU table with the fields op rules read; tests do not depend on real specs.
M.GPU = { name = "test", vendor = "nvidia", num_sm = 100, mem_bw_gbps = 1000, peak_fp32_tflops = 10, l2_mb = 40 }

--- Raises at the caller's line when got ~= want.
function M.eq(got, want, what)
  if got ~= want then error(("%s:\n  expected %s\n  got      %s"):format(what, tostring(want), tostring(got)), 2) end
end

--- Relative comparison (default 1e-12): for closed forms evaluated in a different order than the module.
function M.near(got, want, what, rel)
  rel = rel or 1e-12
  if type(got) ~= "number" or abs(got - want) > rel * max(abs(want), 1e-300) then
    error(("%s: expected %.17g, got %s"):format(what, want, tostring(got)), 2)
  end
end

--- Asserts that fn(...) raises exactly `message` (errors raised at level 0, without a position).
function M.raises(message, fn, ...)
  local ok, err = pcall(fn, ...)
  if ok then error("expected the error '" .. message .. "'", 2) end
  if tostring(err) ~= message then
    error(("expected the error '%s', got '%s'"):format(message, tostring(err)), 2)
  end
end

--- The message of the error fn(...) raises (raising itself when fn returns).
function M.error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  if ok then error("expected an error", 2) end
  return tostring(err)
end

--- Raises (naming the path) at the first difference between two plain values or tables, compared deeply.
function M.same(a, b, path)
  path = path or "value"
  if type(a) ~= type(b) then error(("%s: %s vs %s"):format(path, type(a), type(b)), 0) end
  if type(a) ~= "table" then
    if a ~= b then error(("%s: %s vs %s"):format(path, tostring(a), tostring(b)), 0) end
    return
  end
  for k, v in pairs(a) do M.same(v, b[k], path .. "." .. tostring(k)) end
  for k in pairs(b) do
    if a[k] == nil then error(("%s.%s: missing"):format(path, tostring(k)), 0) end
  end
end

-- The one NVLink-4 node the test plans run on.
local TEST_LINK = { interconnect = "nvlink4", interconnect_bw_gbps = 900, pcie_bw_gbps = 64 }

--- A tensor-parallel plan (neusight.parallel) over one NVLink-4 node, for builder tests.
function M.tp_plan(tp, batch)
  local P = require "neusight.parallel"
  return P.plan(P.normalize { tp = tp }, TEST_LINK, { batch = batch, dtype = "fp32", mode = "train" })
end

--- An expert-parallel plan over the same node: dp = ep = `ep` ranks, each tensor parallel `tp` (nil: none).
function M.ep_plan(ep, tp, batch)
  local P = require "neusight.parallel"
  return P.plan(P.normalize { dp = ep, ep = ep, tp = tp }, TEST_LINK, { batch = batch, dtype = "fp32", mode = "train" })
end

--- Raises unless builder.build(cfg, …) with tp = 1 and a plan gives exactly the graph it gives without
--- (training and inference): tensor parallelism must cost nothing when it is off.
function M.tp1_unchanged(builder, cfg, batch, seq)
  for _, training in ipairs { true, false } do
    local plain = builder.build(cfg, { batch = batch, seq = seq, training = training })
    local tp1 = builder.build(cfg, { batch = batch, seq = seq, training = training, tp = 1, parallel = M.tp_plan(1, batch) })
    M.same(tp1, plain, "nodes")
  end
end

--- A copy of the table `base` with the fields of `over` on top (config variants in builder tests).
function M.with(base, over)
  local c = {}
  for k, v in pairs(base) do c[k] = v end
  for k, v in pairs(over or {}) do c[k] = v end
  return c
end

-- Tiny mixture-of-experts configs the MoE builder tests share (4 query heads over 2 kv heads; top 2 of 4 or 8 experts;
-- DeepSeek-V3's routing and MLA, scaled down).
local TINY = {
  mixtral = { name = "tiny", arch = "moe", model_type = "mixtral", vocab_size = 100, hidden_size = 64,
    intermediate_size = 96, num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2,
    num_local_experts = 4, num_experts_per_tok = 2 },
  qwen2_moe = { name = "tiny", arch = "moe", model_type = "qwen2_moe", vocab_size = 100, hidden_size = 64,
    intermediate_size = 128, num_hidden_layers = 4, num_attention_heads = 4, num_key_value_heads = 2, num_experts = 4,
    num_experts_per_tok = 2, moe_intermediate_size = 32, shared_expert_intermediate_size = 96 },
  qwen3_moe = { name = "tiny", arch = "moe", model_type = "qwen3_moe", vocab_size = 100, hidden_size = 64,
    intermediate_size = 128, num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2, head_dim = 32,
    num_experts = 8, num_experts_per_tok = 2, moe_intermediate_size = 32, norm_topk_prob = true },
  deepseek_v3 = { name = "tiny", arch = "deepseek", model_type = "deepseek_v3", vocab_size = 100, hidden_size = 64,
    intermediate_size = 96, moe_intermediate_size = 16, num_hidden_layers = 3, num_attention_heads = 4,
    num_key_value_heads = 4, q_lora_rank = 32, kv_lora_rank = 16, qk_nope_head_dim = 8, qk_rope_head_dim = 4,
    v_head_dim = 8, n_routed_experts = 8, n_shared_experts = 2, num_experts_per_tok = 2, n_group = 4, topk_group = 2,
    first_k_dense_replace = 1 },
}

--- A fresh copy of the tiny config of `model_type` (a test may change its copy).
function M.tiny(model_type)
  local cfg = TINY[model_type]
  if not cfg then error(("no tiny config for model_type %s"):format(tostring(model_type)), 2) end
  return M.with(cfg)
end

--- Σ params · count over a node list.
function M.params(nodes)
  local p = 0
  for _, n in ipairs(nodes) do p = p + n.params * n.count end
  return p
end

--- Helpers bound to the runner's op loader: kernels(n, training) -> fw, bw, acc (as the engine requests them);
--- flops(nodes, training, phase, kind) -> Σ count · flops over phase "fw" | "bw" | "acc", optionally one kind.
function M.bind(load_op, make_node)
  local t = { eq = M.eq, params = M.params, GPU = M.GPU, same = M.same, tp_plan = M.tp_plan,
              tp1_unchanged = M.tp1_unchanged }
  function t.kernels(n, training)
    local rule = load_op(n.op)
    local node = make_node(n)
    node.training = training
    local fw = rule.forward(node, M.GPU)
    local bw = training and rule.backward and rule.backward(node, M.GPU) or {}
    local acc = training and rule.accumulate and rule.accumulate(node, M.GPU) or {}
    return fw, bw, acc
  end
  function t.flops(nodes, training, phase, kind)
    local sum = 0
    for _, n in ipairs(nodes) do
      local fw, bw, acc = t.kernels(n, training)
      for _, k in ipairs(({ fw = fw, bw = bw, acc = acc })[phase]) do
        if not kind or k.kind == kind then sum = sum + n.count * k.flops end
      end
    end
    return sum
  end
  --- Σ count · FLOPs of the GEMM and BMM kernels, forward and backward (training), of the nodes `pick` accepts.
  function t.matmul_flops(nodes, pick)
    local sum = 0
    for _, n in ipairs(nodes) do
      if not pick or pick(n) then
        local fw, bw = t.kernels(n, true)
        for _, list in ipairs { fw, bw } do
          for _, k in ipairs(list) do
            if k.kind == "gemm" or k.kind == "bmm" then sum = sum + n.count * k.flops end
          end
        end
      end
    end
    return sum
  end
  --- The GEMM kernels of the nodes of layer `layer` whose name matches `pattern`: how many forward, how many backward
  --- (training), and the nodes' names joined by spaces.
  function t.gemm_counts(nodes, layer, pattern, training)
    local fw, bw, names = 0, 0, {}
    for _, n in ipairs(nodes) do
      if n.layer == layer and n.name:match(pattern) then
        local f, b = t.kernels(n, training)
        for _, k in ipairs(f) do if k.kind == "gemm" then fw = fw + 1 end end
        for _, k in ipairs(b) do if k.kind == "gemm" then bw = bw + 1 end end
        names[#names + 1] = n.name
      end
    end
    return fw, bw, table.concat(names, " ")
  end
  --- "FwOps | BwOps | AccOps" of every node with kernels, in order (the reference opgraph's notation).
  function t.kernel_rows(nodes, training)
    local lines = {}
    for _, n in ipairs(nodes) do
      local fw, bw, acc = t.kernels(n, training)
      if #fw + #bw + #acc > 0 then
        lines[#lines + 1] = K.describe_all(fw) .. " | " .. K.describe_all(bw) .. " | " .. K.describe_all(acc)
      end
    end
    return lines
  end
  --- Raises at the first row that differs from `reference` (a list of kernel_rows strings).
  function t.rows_match(lines, reference)
    for i = 1, max(#lines, #reference) do
      if lines[i] ~= reference[i] then
        error(("kernel row %d:\n  expected %s\n  got      %s"):format(i, tostring(reference[i]), tostring(lines[i])), 2)
      end
    end
  end
  return t
end

return M
