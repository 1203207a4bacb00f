-- scripts/neusight/parallel/shard.lua — collective nodes and the sharding helpers model builders use (comm_node, rule, tensor_shard, expert_shard, split).
--
-- Owns how a parallel layout shows up inside a graph: a collective is a node priced once with the α–β model of
-- neusight/collectives.lua (comm_node; ops/all_reduce.lua … turn it into a "collective" kernel through rule), the
-- Megatron-LM tensor-parallel and the expert-parallel side of a builder (dimensions split over the ranks, the
-- collectives between them), and the pricing of a reference graph's collective kernels (price_reference).
local C = require "neusight.collectives"
local K = require "neusight.kernels"
local T = require "neusight.topology"
local ipairs, pairs, type, error = ipairs, pairs, type, error
local show = T.show

local M = {}

local DIRECTIONS = { forward = true, backward = true, both = true }

local function numel(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end
--- Elements of a shape (the collective bytes of comm_node and rule; the timeline's stage-boundary bytes).
M.numel = numel

--- A graph node for one collective of a tensor-parallel (or other) group, priced now with the α–β
--- model of neusight.collectives: the op rules (ops/all_reduce.lua, …) turn it into a "collective"
--- kernel with these fixed seconds in the forward and/or backward pass.
---@param plan table neusight.parallel.plan()
---@param t { op: string, name: string, shape: integer[], group: string, direction: "forward"|"backward"|"both", layer?: string, count?: integer, dtype?: string, note?: string }
---@return table node
function M.comm_node(plan, t)
  local group = plan.groups[t.group]
  if not group then error(("comm_node: unknown group %s (known: tp, dp, ep, edp)"):format(show(t.group)), 2) end
  if not DIRECTIONS[t.direction] then
    error(("comm_node: direction must be \"forward\", \"backward\" or \"both\" (got %s)"):format(show(t.direction)), 2)
  end
  local dtype = t.dtype or plan.dtype
  local bytes = numel(t.shape) * K.dtype_bytes(dtype)
  local seconds, algorithm = C.time(t.op, bytes, group, plan.cluster)
  return {
    op = t.op, name = t.name, layer = t.layer or "", count = t.count or 1, dtype = dtype,
    inputs = { t.shape }, output = t.shape, params = 0,
    attrs = {
      group = t.group, ranks = group.size, direction = t.direction, seconds = seconds,
      algorithm = algorithm, note = t.note,
    },
  }
end

--- A collective node of M.comm_node moved to another element type by a workload pass that changes what a graph's
--- activations are (neusight.workload fp8_dtypes): its dtype, and comm_node's price of the new bytes.
---@param plan table neusight.parallel.plan()
---@param node table a node M.comm_node made
---@param dtype string
function M.retype(plan, node, dtype)
  local a = node.attrs
  a.seconds, a.algorithm = C.time(node.op, numel(node.output) * K.dtype_bytes(dtype), plan.groups[a.group], plan.cluster)
  node.dtype = dtype
end

--- The op rule of a collective node kind (ops/all_reduce.lua, …): one "collective" kernel of the
--- node's output bytes in the pass(es) attrs.direction names, taking attrs.seconds (set by
--- M.comm_node). A node without attrs.seconds is an error that says how to build one.
---@param op string
---@param doc string
function M.rule(op, doc)
  local function kernels(node, pass)
    local a = node.attrs
    if type(a.seconds) ~= "number" then
      error(("node '%s': a %s node needs attrs.seconds; build it with require('neusight.parallel').comm_node")
        :format(node.name, op), 0)
    end
    local dir = a.direction or "forward"
    if dir ~= "both" and dir ~= pass then return {} end
    return { K.collective(op, numel(node.output) * node.dtype_bytes, a.seconds, node.dtype) }
  end
  return {
    name = op,
    doc = doc,
    attrs = { -- M.comm_node's
      group = "string: the process group, tp, dp, ep or edp",
      ranks = "integer: the group's size",
      direction = "string: the pass it runs in, forward, backward or both (default forward)",
      seconds = "number: the time neusight.collectives priced it at (required)",
      algorithm = "string: the collective's algorithm (for the reader)",
      hidden_by = "string: a backward collective's column-parallel linear (the name of a node after it), under whose "
        .. "weight-gradient GEMM it runs (Megatron's async input-gradient all-reduce / reduce-scatter, neusight.nodes "
        .. "tp_in): the timeline charges max(0, its time − that GEMM's) (neusight.parallel.timeline)",
    },
    saves = function() return 0 end, -- a collective keeps nothing for backward
    forward = function(node) return kernels(node, "forward") end,
    backward = function(node) return kernels(node, "backward") end,
  }
end

--- The tensor-parallel side of a model builder (Megatron-LM sharding): `shard.tp` ranks,
--- `shard.split(n, what, also)` (n / tp, an error naming `what` unless it divides; n when tp = 1; `also`: the other
--- sizes the builder splits over the same ranks, M.split's),
--- `shard.vocab(V)` (vocabulary rows per rank, padded up as Megatron does) and
--- `shard.comm(nodes, place, op, name, shape, direction, note)`, which appends a tp-group collective
--- node to `nodes` at `place` = { layer, count, dtype } (nothing when tp = 1).
---@param opts { tp?: integer, parallel?: table }
---@param who string the model, for messages ("gpt model 'gpt2_large'")
function M.tensor_shard(opts, who)
  local tp, plan = opts.tp or 1, opts.parallel
  if tp > 1 and not plan then error(who .. ": opts.tp > 1 needs opts.parallel (a neusight.parallel plan)", 0) end
  local shard = { tp = tp, plan = plan }
  function shard.split(n, what, also) return tp > 1 and M.split(n, tp, what, who, nil, also) or n end
  function shard.vocab(V) return -((-V) // tp) end
  function shard.comm(nodes, place, op, name, shape, direction, note)
    if tp == 1 then return end
    nodes[#nodes + 1] = M.comm_node(plan, {
      op = op, name = name, shape = shape, group = "tp", direction = direction,
      layer = place.layer, count = place.count, dtype = place.dtype, note = note,
    })
  end
  return shard
end

--- The expert-parallel side of a MoE builder (switch, moe): `shard.ep` ranks, `shard.local_experts` = E / ep (an
--- error naming num_experts unless ep divides it) and `shard.all_to_all(nodes, place, name, shape, note)`, which
--- appends an all-to-all of `shape` over the "ep" group, forward and backward, at `place` = { layer, count, dtype }.
---@param opts { ep?: integer, parallel?: table }
---@param who string the model, for messages
---@param E integer num_experts
function M.expert_shard(opts, who, E)
  local ep, plan = opts.ep or 1, opts.parallel
  local shard = { ep = ep, plan = plan, local_experts = E }
  if ep > 1 then
    if not plan then error(who .. ": opts.ep > 1 needs opts.parallel (a neusight.parallel plan)", 0) end
    shard.local_experts = M.split(E, ep, "num_experts", who, "ep")
  end
  function shard.all_to_all(nodes, place, name, shape, note)
    nodes[#nodes + 1] = M.comm_node(plan, {
      op = "all_to_all", name = name, shape = shape, group = "ep", direction = "both",
      layer = place.layer, count = place.count, dtype = place.dtype, note = note,
    })
  end
  return shard
end

-- Whether two shape lists (a node's inputs) are equal, dimension by dimension.
local function same_shapes(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    local x, y = a[i], b[i]
    if #x ~= #y then return false end
    for j = 1, #x do
      if x[j] ~= y[j] then return false end
    end
  end
  return true
end

-- The number of elements of a shape (a node's output or one of its inputs); nil for a shape that is not one.
local function numel(shape)
  if type(shape) ~= "table" then return nil end
  local n = 1
  for _, d in ipairs(shape) do
    if type(d) ~= "number" then return nil end
    n = n * d
  end
  return n
end

-- Whether node `n` of a rank's graph has the op, shapes, parameters and count of `w`, a node of another graph.
local function same_node(w, n)
  return w.op == n.op and (w.params or 0) == (n.params or 0) and (w.count or 1) == (n.count or 1)
    and same_shapes({ w.output }, { n.output }) and same_shapes(w.inputs or {}, n.inputs or {})
end

-- Each node of `nodes` (the rank's graph) with its same-named node of `graph` (its n-th of that name), in order.
local function pairs_by_name(nodes, graph)
  local by_name = {}
  for _, n in ipairs(graph) do
    local list = by_name[n.name]
    if not list then list = {}; by_name[n.name] = list end
    list[#list + 1] = n
  end
  local seen, out = {}, {}
  for i, n in ipairs(nodes) do
    local k = (seen[n.name] or 0) + 1
    seen[n.name] = k
    out[i] = by_name[n.name] and by_name[n.name][k] or false
  end
  return out
end

--- The tensor-parallel rule of the model FLOPs (neusight.figures: a tp run's are its rank's graph × tp): marks each
--- node of `nodes`, one tensor-parallel rank's graph of a builder at tp = `tp`, that several ranks run alike, with
--- attrs.model_flops_copies = how many (engine/core/forecast.h phase_model_flops), so × tp counts its work once:
--- - run whole by every rank: the node of the same name (its n-th of that name) in `whole`, the same builder's graph
---   at tp = 1 without sequence parallelism, has the same op, input and output shapes and parameters (norms and
---   residual adds on the full sequence, routers, the routing and the experts' gathers and combines, MLA's down
---   projections): tp copies;
--- - run alike by tp / d ranks (key/value heads when tp is a multiple of num_key_value_heads = d: each rank keeps one,
---   which tp / d ranks share): the node is as in the builder's graph at tp = d (`build_at(d)`, d a divisor of tp,
---   the smallest that matches), but not as at tp = 1. Those graphs are built only when a node not run whole keeps
---   more than 1 / tp of every one of its tensors (output, inputs and parameters: a split node keeps 1 / tp of one
---   at least; a node that matches at tp = d keeps the parameters it has there, 1 / d or more of the whole's).
--- - its rows split, its weights whole on every rank (a router or a gate on the rank's n/tp tokens under sequence
---   parallelism: Megatron's token dispatcher, moe.lua and deepseek.lua): the same op, count and parameters as the
---   whole graph's node on other shapes. Its forward and backward are the rank's own tokens' (× tp counts them once)
---   but every rank accumulates the same weights' gradient: attrs.model_flops_weight_copies = tp (before, Mixtral-8x7B
---   and DeepSeek-V2-Lite at tp 8 with sequence parallelism counted their routers' accumulation 8 times, ~1e-7 more
---   model FLOPs than one GPU).
--- Split nodes (heads, intermediate size, vocabulary rows, sequence-parallel shards: other shapes) and the collectives
--- (none in `whole`) count × tp. Each marked node gets its own attrs table (builders share theirs between nodes).
--- A node split in some parts and replicated in others matches no graph here: its builder sets the fractional copies
--- itself (Megatron's linear_qkv beside a shared key/value head: neusight.nodes qkv), which this leaves as they are.
---@param nodes table[] the rank's graph
---@param whole table[] the graph at tp = 1
---@param tp integer
---@param build_at? fun(d: integer): table[]? the builder's graph at tp = d without sequence parallelism (nil: none)
function M.mark_replicated(nodes, whole, tp, build_at)
  if tp <= 1 then return end
  local function mark(n, copies, key)
    key = key or "model_flops_copies"
    local attrs = { [key] = copies }
    for k, v in pairs(n.attrs or {}) do
      if k ~= key then attrs[k] = v end
    end
    n.attrs = attrs
  end
  local candidates = {}
  for i, w in ipairs(pairs_by_name(nodes, whole)) do
    local n = nodes[i]
    if w and same_node(w, n) then
      mark(n, tp)
    elseif w and w.op == n.op and (w.params or 0) > 0 and w.params == n.params and (w.count or 1) == (n.count or 1) then
      mark(n, tp, "model_flops_weight_copies")
    elseif w and w.op == n.op then
      -- the smallest share it keeps of a tensor of the whole graph's node: 1 / tp or less where the node is split
      local share, tensors = math.huge, { { w.output, n.output } }
      for j = 1, math.max(#(w.inputs or {}), #(n.inputs or {})) do
        tensors[#tensors + 1] = { (w.inputs or {})[j], (n.inputs or {})[j] }
      end
      for _, t in ipairs(tensors) do
        local a, b = numel(t[1]), numel(t[2])
        if a and b and a > 0 then share = math.min(share, b / a) end
      end
      -- its weights are a tensor too: a vocabulary-parallel embedding (the whole graph's output and input shapes,
      -- 1 / tp of its rows) is split, and asked no builder's graph at the divisors of tp (each one a model build)
      local wp, np = w.params or 0, n.params or 0
      if math.type(wp) and math.type(np) and wp > 0 then share = math.min(share, np / wp) end
      if share ~= math.huge and share * tp >= 1.5 then candidates[#candidates + 1] = i end
    end
  end
  if #candidates == 0 or not build_at then return end
  local left = candidates
  for d = 2, tp - 1 do
    if #left == 0 then break end
    if tp % d == 0 then
      local graph = build_at(d)
      if graph then
        local match, still = pairs_by_name(nodes, graph), {}
        for _, i in ipairs(left) do
          if match[i] and same_node(match[i], nodes[i]) then mark(nodes[i], tp // d) else still[#still + 1] = i end
        end
        left = still
      end
    end
  end
end

--- Prices a collective kernel of an imported reference graph (predict --graph of opgraph/*-dp4/-tp4/-pp4_M.csv,
--- method-neusight.md §1.8) with this plan: ALLREDUCE (tensor-parallel rows, forward and backward) is an
--- all-reduce over the tp group; ALLREDUCE_ASYNC (the reference's per-parameter gradient rows) and SENDRECV
--- return nil — the timeline models them itself (bucketed gradient all-reduce, stage-boundary send/recv).
---@param plan table
---@param name string kernel name in the graph
---@param bytes number
---@return number? seconds
function M.price_reference(plan, name, bytes)
  if name == "ALLREDUCE" then return (C.time("all_reduce", bytes, plan.groups.tp, plan.cluster)) end
  if name == "ALLREDUCE_ASYNC" or name == "SENDRECV" then return nil end
  error(("price_reference: unknown collective kernel %s"):format(show(name)), 0)
end

--- Size of a dimension split over k ranks: an error unless it divides evenly (what to split is
--- named in the message: "n_head", "n_inner", …; `degree` names k: "tp" by default, "ep"). The error is the
--- setting's, not the model's (neusight.infeasible: a sweep makes a row of it), and says which degrees do divide
--- (up to 64: "give a tp that divides 25 (1, 5, 25)"). `also` (optional): the other sizes the builder splits over the
--- same ranks, { { n = 64, what = "num_attention_heads" }, … }: the degrees listed divide them too, and the message
--- names them. Before, Llama-3-70B at tp 3 was told "give a tp that divides 28672 (1, 2, 4, 7, 8, 14, …)", and tp 7
--- then failed on its 64 heads.
function M.split(n, k, what, who, degree, also)
  if n % k ~= 0 then
    local fits, names = {}, {}
    for _, a in ipairs(also or {}) do names[#names + 1] = ("%s = %d"):format(a.what, a.n) end
    for d = 1, math.min(n, 64) do
      local all = n % d == 0
      for _, a in ipairs(also or {}) do all = all and a.n % d == 0 end
      if all then fits[#fits + 1] = tostring(d) end
    end
    degree = degree or "tp"
    require("neusight").infeasible(("%s: %s = %d is not divisible by %s = %d: give %s %s that divides %d%s (%s)")
      :format(who, what, n, degree, k, degree:match("^[aeiou]") and "an" or "a", degree, n,
        #names > 0 and " and " .. table.concat(names, ", ") or "", table.concat(fits, ", ")))
  end
  return n // k
end

return M
