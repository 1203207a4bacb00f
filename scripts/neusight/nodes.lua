-- scripts/neusight/nodes.lua — the node list a model builder appends to: placement (layer, count), tp collectives, the HF causal-LM loss.
local M = {}

--- A node list under construction. `g.add(op, name, inputs, output, params?, attrs?)` appends a node at the
--- current place: `g.layer` and `g.count` (the builder sets them around replicated layers; "" and 1 outside)
--- and the graph's dtype. `g.comm(op, name, shape, direction, note)` appends a tensor-parallel collective
--- through `shard` (neusight.parallel.tensor_shard) and `g.all_reduce(name, shape, direction, note)` an
--- all-reduce — both nothing without a shard (tp = 1). `g.tp_in(name, shape, note)` and `g.tp_out(…)` are
--- Megatron's f and g operators around column- and row-parallel layers (below); `shape` is the full activation.
---@param dtype string
---@param shard? table neusight.parallel.tensor_shard(...)
---@param sequence_parallel? boolean Megatron sequence parallelism (needs a shard with tp > 1)
function M.new(dtype, shard, sequence_parallel)
  local g = { nodes = {}, layer = "", count = 1, dtype = dtype }
  local sp = shard ~= nil and shard.tp > 1 and sequence_parallel == true
  local nodes = g.nodes
  function g.add(op, name, inputs, output, params, attrs)
    nodes[#nodes + 1] = {
      op = op, name = name, layer = g.layer, count = g.count, dtype = dtype,
      inputs = inputs, output = output, params = params or 0, attrs = attrs or {},
    }
  end
  function g.comm(op, name, shape, direction, note)
    if shard then shard.comm(nodes, g, op, name, shape, direction, note) end
  end
  function g.all_reduce(name, shape, direction, note) g.comm("all_reduce", name, shape, direction, note) end
  -- f, into a column-parallel layer: all-reduce of the input gradient in backward, or with sequence parallelism
  -- an all-gather of the sharded input (reduce-scatter of its gradient). Nothing without a shard.
  function g.tp_in(name, shape, note)
    if not shard or shard.tp == 1 then return end
    if not sp then return g.comm("all_reduce", name, shape, "backward", note) end
    g.comm("all_gather", name .. ".all_gather", shape, "forward", note .. " (sequence parallel: gather the shards)")
    g.comm("reduce_scatter", name .. ".reduce_scatter", shape, "backward", note .. " (sequence parallel)")
  end
  -- g, out of a row-parallel layer: all-reduce of the partial sums in forward, or with sequence parallelism a
  -- reduce-scatter into sequence shards (all-gather of the gradient in backward): the same bytes on the wire.
  function g.tp_out(name, shape, note)
    if not shard or shard.tp == 1 then return end
    if not sp then return g.comm("all_reduce", name, shape, "forward", note) end
    g.comm("reduce_scatter", name .. ".reduce_scatter", shape, "forward", note .. " (sequence parallel: scatter the sums)")
    g.comm("all_gather", name .. ".all_gather", shape, "backward", note .. " (sequence parallel)")
  end
  return g
end

--- HF's causal-LM loss in training (unless opts.loss == false, or s = 1): logits[..., :-1, :].contiguous()
--- (a copy), then cross-entropy over b·(s−1) tokens; the labels' shift copies b·(s−1) integers and is left
--- out. With a vocab-parallel head the cross-entropy all-reduces max, sum of exp and target logit (3 values
--- per token) forward.
---@param g table M.new()
---@param V integer vocabulary rows of this rank
function M.causal_lm_loss(g, b, s, V, opts)
  if not (opts.training and opts.loss ~= false and s > 1) then return end
  local n = b * (s - 1)
  g.add("contiguous", "loss.shift_logits", { { b, s - 1, V } }, { b, s - 1, V })
  g.add("cross_entropy", "loss", { { n, V }, { n } }, { 1 })
  g.all_reduce("loss.tp_all_reduce", { 3, n }, "forward", "vocab-parallel cross-entropy: max, sum of exp, target logit")
end

return M
