-- scripts/neusight/nodes.lua — the node list a model builder appends to: placement (layer, count), tp collectives, the HF causal-LM loss.
local M = {}

--- A node list under construction. `g.add(op, name, inputs, output, params?, attrs?)` appends a node at the
--- current place: `g.layer` and `g.count` (the builder sets them around replicated layers; "" and 1 outside)
--- and the graph's dtype. `g.comm(op, name, shape, direction, note)` appends a tensor-parallel collective
--- through `shard` (neusight.parallel.tensor_shard) and `g.all_reduce(name, shape, direction, note)` an
--- all-reduce — both nothing without a shard (tp = 1).
---@param dtype string
---@param shard? table neusight.parallel.tensor_shard(...)
function M.new(dtype, shard)
  local g = { nodes = {}, layer = "", count = 1, dtype = dtype }
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
