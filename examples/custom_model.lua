-- examples/custom_model.lua — a workload that builds its own model: an MLP block (Linear → GELU → Linear) as op-graph nodes.
--
-- `model` may be a function(opts) returning nodes (and the model's name). The engine passes
--   opts = { batch, seq, training, dtype, loss, attention ("sdpa" | "eager"), experts, router_skew } and
--   in a serving mode phase ("prefill" | "decode"), context (decode: the cached tokens), kv_dtype;
--   in a parallel run batch (one microbatch's), tp, ep, parallel (the plan: par.comm_node(opts.parallel, …)),
--   megatron (Megatron kernels), sequence_parallel.
-- The graph must follow them: the engine re-calls the function with one changed and warns when the graph does not
-- (README "Workloads": tensor parallelism via require "neusight.parallel" comm_node, decode steps, the KV cache).
-- Each node names an op rule (ops/<op>.lua) and gives its shapes; the engine fills dtype_bytes and
-- training and asks the rule for the kernels. `params` feeds the optimizer node.
-- For --pp, the nodes of a repeated block carry layer = "NAME" (a string naming the block, not a layer number)
-- and count = its repetitions; unlayered nodes before the block run on the first stage, those after on the last.
local hidden, inner = 4096, 16384

local function mlp(opts)
  local x = { opts.batch, opts.seq, hidden }
  local a = { opts.batch, opts.seq, inner }
  return {
    { op = "linear", name = "fc1", inputs = { x }, output = a, params = hidden * inner + inner },
    { op = "gelu", name = "act", inputs = { a }, output = a },
    { op = "linear", name = "fc2", inputs = { a }, output = x, params = inner * hidden + hidden },
  }, "mlp_4096"
end

return {
  description = "A 4096 → 16384 → 4096 GELU MLP, training with SGD",
  model = mlp,
  gpu = "H100-SXM5-80GB",
  mode = "train",
  batch = 8,
  seq = 2048,
  optimizer = "sgd",
}
