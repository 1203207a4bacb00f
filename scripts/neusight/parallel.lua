-- scripts/neusight/parallel.lua — data, tensor and pipeline parallelism: workload validation, the rank layout, collective nodes, and the per-device timeline.
--
-- A workload's `parallel` table (or predict's --dp/--tp/--pp/--microbatches/--schedule):
--   parallel = { dp = 4, tp = 2, pp = 2, microbatches = 8, schedule = "1f1b", ep = 1,
--                virtual_stages = 2, bucket_mb = 25, overlap_grad_reduce = true, kernels = "megatron",
--                cluster = { gpus_per_node = 8, nodes = 2, inter = { bw_gbps = 50 } } }
-- `batch` stays the global batch: each pipeline runs microbatches of batch / (dp · microbatches).
--
-- The pieces, in the order the engine uses them:
--   1. M.normalize validates the table (unknown keys → did-you-mean) and fills defaults.
--   2. M.plan lays out the ranks Megatron-style (tp fastest, then dp, then pp), builds the cluster
--      (neusight/topology.lua) and each communicator group's shape.
--   3. Model builders shard themselves when opts.tp > 1 (Megatron column/row-parallel layers) and
--      insert collectives with M.comm_node, priced once by neusight/collectives.lua (α–β model).
--   4. After the kernels are predicted, M.timeline partitions the layers into pipeline stages,
--      simulates the schedule (GPipe, 1F1B, interleaved 1F1B) from the per-stage forward/backward
--      times, overlaps the data-parallel gradient all-reduce buckets with the last backward pass,
--      and returns per device: compute, exposed communication and bubble.
-- Every step is plain Lua: a new schedule is a function in M.schedules, a new collective algorithm a
-- function in neusight.collectives.algorithms; nothing needs recompiling.
local T = require "neusight.topology"
local C = require "neusight.collectives"
local precision = require "neusight.precision"
local K = require "neusight.kernels"
local memory = require "neusight.memory"
local floor, huge, max, min = math.floor, math.huge, math.max, math.min
local ipairs, pairs, type, tostring, error, pcall, sort = ipairs, pairs, type, tostring, error, pcall, table.sort

local M = {}


-- PyTorch DDP's default bucket (bucket_cap_mb = 25). Megatron sizes its buckets differently
-- (max(40 M parameters, 1 M · dp)); set bucket_mb to model it.
local DEFAULT_BUCKET_MB = 25

local KEYS = {
  dp = true, tp = true, pp = true, microbatches = true, schedule = true, virtual_stages = true,
  bucket_mb = true, overlap_grad_reduce = true, cluster = true, kernels = true, ep = true, recompute = true,
  sequence_parallel = true, distributed_optimizer = true,
}

---------------------------------------------------------------------------------------------------
-- Validation

local function show(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if type(v) == "table" or type(v) == "function" then return type(v) end
  return tostring(v)
end

local function is_count(v) return type(v) == "number" and v >= 1 and v == floor(v) and v < huge end

--- Pipeline schedules by name: function(P, M, v, training) → per-device arrays of ops
--- { fw = bool, chunk = c (0-based), mb = m (0-based) }, in the order the device runs them.
M.schedules = {}

--- Validated copy of a `parallel` table with defaults: dp = tp = pp = microbatches = 1,
--- schedule "1f1b", virtual_stages 1 (2 for "interleaved"), bucket_mb 25, overlap_grad_reduce true.
--- Errors are "parallel.<field>: …" (level 0), so workload.lua can prefix the script name.
---@param p table
---@return table
function M.normalize(p)
  if type(p) ~= "table" then error(("parallel: table expected, got %s"):format(show(p)), 0) end
  local unknown = {}
  for k in pairs(p) do
    if not KEYS[k] then unknown[#unknown + 1] = tostring(k) end
  end
  if #unknown > 0 then
    sort(unknown)
    error(("parallel: unknown field '%s'%s"):format(unknown[1], T.did_you_mean(unknown[1], KEYS)), 0)
  end
  local out = {}
  for _, k in ipairs { "dp", "tp", "pp", "microbatches", "ep" } do
    local v = p[k]
    if v == nil then v = 1 end
    if not is_count(v) then error(("parallel.%s: positive integer expected, got %s"):format(k, show(v)), 0) end
    out[k] = floor(v)
  end
  local schedule = p.schedule == nil and "1f1b" or p.schedule
  if type(schedule) ~= "string" or not M.schedules[schedule] then
    local names = {}
    for name in pairs(M.schedules) do names[#names + 1] = ('"' .. name .. '"') end
    sort(names)
    error(("parallel.schedule: one of %s expected, got %s%s"):format(table.concat(names, ", "), show(schedule),
      type(schedule) == "string" and T.did_you_mean(schedule, M.schedules) or ""), 0)
  end
  out.schedule = schedule
  -- Expert parallelism (MoE): the experts are spread over `ep` of the data-parallel ranks (DeepSpeed-MoE,
  -- Megatron-LM's expert_model_parallel_size), so ep must divide dp.
  if out.dp % out.ep ~= 0 then
    error(("parallel.ep: expert parallelism spreads the experts over data-parallel ranks: ep = %d must divide dp = %d")
      :format(out.ep, out.dp), 0)
  end
  local v = p.virtual_stages
  if v == nil then v = schedule == "interleaved" and 2 or 1 end
  if not is_count(v) then error(("parallel.virtual_stages: positive integer expected, got %s"):format(show(v)), 0) end
  out.virtual_stages = floor(v)
  if schedule == "interleaved" then
    if out.virtual_stages < 2 then
      error("parallel.virtual_stages: the interleaved schedule needs at least 2 model chunks per device", 0)
    end
    if out.pp < 2 then error("parallel.schedule: the interleaved schedule needs pp >= 2", 0) end
    if out.microbatches % out.pp ~= 0 then
      error(("parallel.microbatches: the interleaved schedule needs a multiple of pp = %d (got %d), as Megatron-LM does")
        :format(out.pp, out.microbatches), 0)
    end
  elseif out.virtual_stages ~= 1 then
    error(("parallel.virtual_stages: only the \"interleaved\" schedule runs several model chunks per device (schedule is %q)")
      :format(schedule), 0)
  end
  local bucket = p.bucket_mb == nil and DEFAULT_BUCKET_MB or p.bucket_mb
  if type(bucket) ~= "number" or not (bucket > 0) or bucket == huge then
    error(("parallel.bucket_mb: positive number expected, got %s"):format(show(bucket)), 0)
  end
  -- a bucket under 1 MB (PyTorch's smallest useful bucket_cap_mb) is a unit slip, and millions of buckets would
  -- take minutes to lay out
  if bucket < 1 then error(("parallel.bucket_mb: at least 1 (MB) expected, got %s"):format(show(bucket)), 0) end
  out.bucket_mb = bucket
  local overlap = p.overlap_grad_reduce
  if overlap == nil then overlap = true end
  if type(overlap) ~= "boolean" then
    error(("parallel.overlap_grad_reduce: boolean expected, got %s"):format(show(overlap)), 0)
  end
  out.overlap_grad_reduce = overlap
  -- kernels: whose kernels the model runs. "megatron" (Megatron-LM's model code, the framework these
  -- parallel layouts come from: fused bias-GeLU, see models/gpt.lua) or "eager" (the HF eager graph).
  local kernels = p.kernels == nil and "megatron" or p.kernels
  if kernels ~= "megatron" and kernels ~= "eager" then
    error(("parallel.kernels: \"megatron\" or \"eager\" expected, got %s"):format(show(kernels)), 0)
  end
  out.kernels = kernels
  -- recompute: "none"; "full" activation recomputation (Megatron-LM --recompute-granularity full, uniform):
  -- each layer keeps only its input and re-runs its forward during backward; "selective" (Korthikanti et al.
  -- 2022, Megatron's --recompute-activations): only the core-attention nodes (attrs.core_attention: QKᵀ,
  -- scale, mask, softmax, dropout, ·V) drop their outputs and re-run in backward.
  local recompute = p.recompute == nil and "none" or p.recompute
  if recompute ~= "none" and recompute ~= "full" and recompute ~= "selective" then
    error(("parallel.recompute: \"none\", \"selective\" or \"full\" expected, got %s"):format(show(recompute)), 0)
  end
  out.recompute = recompute
  -- sequence_parallel (Megatron-LM --sequence-parallel): layer norms, dropouts and residual adds on s/tp tokens.
  local sp = p.sequence_parallel
  if sp == nil then sp = false end
  if type(sp) ~= "boolean" then error(("parallel.sequence_parallel: boolean expected, got %s"):format(show(sp)), 0) end
  if sp and out.tp < 2 then error("parallel.sequence_parallel: needs tensor parallelism (tp >= 2)", 0) end
  out.sequence_parallel = sp
  -- distributed_optimizer (Megatron-LM --use-distributed-optimizer, ZeRO stage 1): optimizer state and step
  -- sharded over dp; gradients reduce-scattered, updated parameters all-gathered after the step.
  local dist = p.distributed_optimizer
  if dist == nil then dist = false end
  if type(dist) ~= "boolean" then
    error(("parallel.distributed_optimizer: boolean expected, got %s"):format(show(dist)), 0)
  end
  out.distributed_optimizer = dist
  if p.cluster ~= nil and type(p.cluster) ~= "table" and (type(p.cluster) ~= "string" or p.cluster == "") then
    error(("parallel.cluster: a table or the name of a gpus/clusters/*.toml file expected, got %s"):format(show(p.cluster)), 0)
  end
  out.cluster = p.cluster
  return out
end

--- True when the table asks for more than one GPU or more than one microbatch.
--- (ep needs dp ≥ ep, so it never makes a one-GPU run parallel by itself.)
function M.active(p)
  return p ~= nil and (p.dp * p.tp * p.pp > 1 or p.microbatches > 1)
end

---------------------------------------------------------------------------------------------------
-- Rank layout and groups

-- Shape of a group of `size` ranks `stride` apart, starting at rank `first`, when ranks fill nodes
-- of g GPUs in order: { size, spans_nodes, per_node } for topology.group.
local function group_shape(size, stride, first, g)
  local on = {}
  local nodes, per_node = 0, 0
  for k = 0, size - 1 do
    local node = (first + k * stride) // g
    if not on[node] then on[node], nodes = 0, nodes + 1 end
    on[node] = on[node] + 1
    per_node = max(per_node, on[node])
  end
  return { size = size, spans_nodes = nodes > 1, per_node = per_node }
end
M.group_shape = group_shape

--- The plan of a parallel run: degrees, world size, microbatch size, the cluster (topology.cluster)
--- and the communicator groups { tp, dp, ep, edp } plus one pair group per pipeline device
--- (pp_links[k]: device k−1 → device k mod pp; the last one wraps to the first device, which interleaved
--- chunks and the tied-embedding sync use). Ranks are laid out as Megatron-LM does by default: tp varies fastest, then dp,
--- then pp, so tensor-parallel groups stay inside a node whenever tp ≤ gpus_per_node.
---@param p table normalized parallel table
---@param gpu table GPU view (gpus/*.toml fields)
--- plan.precision is the run's precision recipe (neusight.precision.recipe of w.precision, default by dtype and
--- mode; its "amp" convention is Megatron-LM's with kernels = "megatron", autocast's with "eager"): the timeline
--- reduces gradients and all-gathers parameters in its element sizes.
---@param w { batch: integer, dtype: string, mode: string, precision?: string }
---@return table
function M.plan(p, gpu, w)
  local world = p.dp * p.tp * p.pp
  local per_pipeline = p.dp * p.microbatches
  if w.batch % per_pipeline ~= 0 then
    error(("parallel: the global batch %d is not divisible by dp × microbatches = %d × %d")
      :format(w.batch, p.dp, p.microbatches), 0)
  end
  local spec, cluster_name = {}, nil
  local given = p.cluster
  if type(given) == "string" then -- a TOML description: gpus/clusters/<name>.toml or a path
    local ns = require "neusight"
    if type(ns) ~= "table" or not ns.cluster_file then
      error("parallel.cluster: cluster files need the engine (neusight.cluster_file)", 0)
    end
    local file = ns.cluster_file(given)
    cluster_name = file.source
    given = { gpus_per_node = file.gpus_per_node, nodes = file.nodes, intra = file.intra, inter = file.inter }
  end
  for k, v in pairs(given or {}) do spec[k] = v end
  if spec.gpu == nil then spec.gpu = gpu end
  if spec.gpus_per_node == nil then spec.gpus_per_node = min(world, 8) end
  if spec.nodes == nil and is_count(spec.gpus_per_node) then spec.nodes = -((-world) // spec.gpus_per_node) end
  local ok, cluster = pcall(T.cluster, spec)
  if not ok then error("parallel." .. tostring(cluster), 0) end
  local capacity = cluster.gpus_per_node * cluster.nodes
  if world > capacity then
    error(("parallel: dp × tp × pp = %d GPUs do not fit the cluster (%d node(s) × %d GPUs)")
      :format(world, cluster.nodes, cluster.gpus_per_node), 0)
  end
  local g = cluster.gpus_per_node
  local plan = {
    dp = p.dp, tp = p.tp, pp = p.pp, microbatches = p.microbatches, schedule = p.schedule,
    virtual_stages = p.virtual_stages, bucket_mb = p.bucket_mb, overlap_grad_reduce = p.overlap_grad_reduce,
    kernels = p.kernels, ep = p.ep, recompute = p.recompute, sequence_parallel = p.sequence_parallel,
    distributed_optimizer = p.distributed_optimizer,
    world = world, micro_batch = w.batch // per_pipeline, training = w.mode == "train",
    dtype = w.dtype, cluster = cluster, cluster_name = cluster_name or "",
    precision = precision.recipe(w.precision, w.dtype, precision.convention(p.kernels == "megatron"), w.mode),
    groups = {
      tp = group_shape(p.tp, 1, 0, g),
      dp = group_shape(p.dp, p.tp, 0, g),
      -- experts over ep consecutive dp ranks; each expert's replicas (dp / ep of them) sync its gradients
      ep = group_shape(p.ep, p.tp, 0, g),
      edp = group_shape(p.dp // p.ep, p.tp * p.ep, 0, g),
    },
    pp_links = {},
  }
  for s = 0, p.pp > 1 and p.pp - 1 or -1 do -- first rank of stage s and of the next stage (wrapping)
    local a, b = s * p.tp * p.dp, ((s + 1) % p.pp) * p.tp * p.dp
    plan.pp_links[s + 1] = { size = 2, spans_nodes = a // g ~= b // g }
  end
  return plan
end

---------------------------------------------------------------------------------------------------
-- Collective nodes

local DIRECTIONS = { forward = true, backward = true, both = true }

local function numel(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

--- A graph node for one collective of a tensor-parallel (or other) group, priced now with the α–β
--- model of neusight.collectives: the op rules (ops/all_reduce.lua, …) turn it into a "collective"
--- kernel with these fixed seconds in the forward and/or backward pass.
---@param plan table M.plan()
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
    saves = function() return 0 end, -- a collective keeps nothing for backward
    forward = function(node) return kernels(node, "forward") end,
    backward = function(node) return kernels(node, "backward") end,
  }
end

--- The tensor-parallel side of a model builder (Megatron-LM sharding): `shard.tp` ranks,
--- `shard.split(n, what)` (n / tp, an error naming `what` unless it divides; n when tp = 1),
--- `shard.vocab(V)` (vocabulary rows per rank, padded up as Megatron does) and
--- `shard.comm(nodes, place, op, name, shape, direction, note)`, which appends a tp-group collective
--- node to `nodes` at `place` = { layer, count, dtype } (nothing when tp = 1).
---@param opts { tp?: integer, parallel?: table }
---@param who string the model, for messages ("gpt model 'gpt2_large'")
function M.tensor_shard(opts, who)
  local tp, plan = opts.tp or 1, opts.parallel
  if tp > 1 and not plan then error(who .. ": opts.tp > 1 needs opts.parallel (a neusight.parallel plan)", 0) end
  local shard = { tp = tp, plan = plan }
  function shard.split(n, what) return tp > 1 and M.split(n, tp, what, who) or n end
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
--- named in the message: "n_head", "n_inner", …; `degree` names k: "tp" by default, "ep").
function M.split(n, k, what, who, degree)
  if n % k ~= 0 then
    error(("%s: %s = %d is not divisible by %s = %d"):format(who, what, n, degree or "tp", k), 0)
  end
  return n // k
end

---------------------------------------------------------------------------------------------------
-- Pipeline schedules

-- GPipe (Huang et al. 2019): every forward microbatch, then every backward one.
M.schedules.gpipe = function(P, Mb, _, training)
  local orders = {}
  for d = 1, P do
    local o = {}
    for m = 0, Mb - 1 do o[#o + 1] = { fw = true, chunk = 0, mb = m } end
    if training then
      for m = 0, Mb - 1 do o[#o + 1] = { fw = false, chunk = 0, mb = m } end
    end
    orders[d] = o
  end
  return orders
end

-- 1F1B (PipeDream-Flush; Narayanan et al. 2021): device d runs P−d−1 warm-up forwards, then
-- alternates one forward and one backward, then drains the remaining backwards.
M.schedules["1f1b"] = function(P, Mb, _, training)
  if not training then return M.schedules.gpipe(P, Mb, 1, false) end
  local orders = {}
  for d = 0, P - 1 do
    local o = {}
    local warm = min(P - d - 1, Mb)
    for m = 0, warm - 1 do o[#o + 1] = { fw = true, chunk = 0, mb = m } end
    for i = 0, Mb - warm - 1 do
      o[#o + 1] = { fw = true, chunk = 0, mb = warm + i }
      o[#o + 1] = { fw = false, chunk = 0, mb = i }
    end
    for m = Mb - warm, Mb - 1 do o[#o + 1] = { fw = false, chunk = 0, mb = m } end
    orders[d + 1] = o
  end
  return orders
end

-- Interleaved 1F1B (Narayanan et al. 2021 §2.2; Megatron-LM's
-- forward_backward_pipelining_with_interleaving): each device holds v model chunks (virtual stage
-- c·P + d for chunk c); the k-th forward runs chunk (k // P) mod v on microbatch
-- (k // (P·v))·P + k mod P, backwards walk the chunks in reverse; warm-up (P−d−1)·2 + (v−1)·P.
M.schedules.interleaved = function(P, Mb, v, training)
  local total = Mb * v
  local function mb_of(k) return (k // (P * v)) * P + k % P end
  local function fw(k) return { fw = true, chunk = (k // P) % v, mb = mb_of(k) } end
  local function bw(k) return { fw = false, chunk = v - 1 - (k // P) % v, mb = mb_of(k) } end
  local orders = {}
  for d = 0, P - 1 do
    local o = {}
    if not training then
      for k = 0, total - 1 do o[#o + 1] = fw(k) end
    else
      local warm = min((P - d - 1) * 2 + (v - 1) * P, total)
      for k = 0, warm - 1 do o[#o + 1] = fw(k) end
      for i = 0, total - warm - 1 do
        o[#o + 1] = fw(warm + i)
        o[#o + 1] = bw(i)
      end
      for k = total - warm, total - 1 do o[#o + 1] = bw(k) end
    end
    orders[d + 1] = o
  end
  return orders
end

-- The schedules' op lists by schedule function and (P, Mb, v, training): a search asks for the same few shapes
-- many times (every recomputation mode of a layout, every tp of a pipeline depth). Read-only once made; a few
-- recent shapes are kept (a 64-stage, 512-microbatch schedule is 65 536 op tables).
local orders_memo, orders_memo_size, ORDERS_MEMO_MAX = {}, 0, 8
local function schedule_orders(make, P, Mb, v, training)
  local key = ("%s|%d|%d|%d|%s"):format(tostring(make), P, Mb, v, tostring(training))
  local orders = orders_memo[key]
  if orders == nil then
    orders = make(P, Mb, v, training)
    if orders_memo_size >= ORDERS_MEMO_MAX then orders_memo, orders_memo_size = {}, 0 end
    orders_memo[key], orders_memo_size = orders, orders_memo_size + 1
  end
  return orders
end

-- The simulation of M.simulate without its per-op records: starts[d][i], finishes[d][i] of the i-th op of
-- orders[d], each device's finish and the makespan. Argument errors are raised at `level` (2: the caller's line).
local function simulate_times(stages, P, Mb, v, schedule, training, level)
  local make = M.schedules[schedule]
  if not make then error(("simulate: unknown schedule %s"):format(show(schedule)), level + 1) end
  local V = P * v
  if #stages ~= V then error(("simulate: %d stages given, %d expected (P·v)"):format(#stages, V), level + 1) end
  local orders = schedule_orders(make, P, Mb, v, training)
  local done_fw, done_bw = {}, {} -- [vs][mb] = finish time
  for vs = 0, V - 1 do done_fw[vs], done_bw[vs] = {}, {} end
  local starts, finishes, finish, ptr, left = {}, {}, {}, {}, 0
  for d = 1, P do
    if type(orders[d]) ~= "table" then error(("schedule %s: no op list for device %d"):format(schedule, d - 1), 0) end
    starts[d], finishes[d], finish[d], ptr[d] = {}, {}, 0, 1
    left = left + #orders[d]
  end
  local progress = true
  while left > 0 and progress do
    progress = false
    for d = 1, P do
      local o, st_d, fi_d = orders[d], starts[d], finishes[d]
      local i, n = ptr[d], #o
      while i <= n do
        local op = o[i]
        local vs = op.chunk * P + (d - 1)
        local ready
        if op.fw then
          ready = vs == 0 and 0 or done_fw[vs - 1][op.mb]
        else
          ready = vs == V - 1 and done_fw[vs][op.mb] or done_bw[vs + 1][op.mb]
          if ready and not done_fw[vs][op.mb] then ready = nil end
        end
        if ready == nil then break end
        local start = max(finish[d], ready)
        local fin = start + (op.fw and stages[vs + 1].fw or stages[vs + 1].bw)
        st_d[i], fi_d[i] = start, fin
        if op.fw then done_fw[vs][op.mb] = fin else done_bw[vs][op.mb] = fin end
        finish[d] = fin
        i, left, progress = i + 1, left - 1, true
      end
      ptr[d] = i
    end
  end
  if left > 0 then
    error(("schedule %s deadlocks with %d device(s), %d microbatch(es), %d chunk(s)"):format(schedule, P, Mb, v), 0)
  end
  local makespan = 0
  for d = 1, P do makespan = max(makespan, finish[d]) end
  return orders, starts, finishes, finish, makespan
end

--- Simulates a schedule: each device runs its ops in order; a forward of virtual stage vs waits for
--- the forward of vs−1 (same microbatch), a backward for the backward of vs+1 (the last stage's for
--- its own forward). stages[vs+1] = { fw = seconds, bw = seconds } per microbatch, sends included.
--- Returns per device { ops = { {fw, chunk, mb, vs, start, finish}… }, finish } and the makespan.
---@param stages { fw: number, bw: number }[] one entry per virtual stage (P·v of them)
---@param P integer devices
---@param Mb integer microbatches
---@param v integer chunks per device
---@param schedule string a key of M.schedules
---@param training boolean
function M.simulate(stages, P, Mb, v, schedule, training)
  local orders, starts, finishes, finish, makespan = simulate_times(stages, P, Mb, v, schedule, training, 2)
  local devices = {}
  for d = 1, P do
    local ops = {}
    for i, op in ipairs(orders[d]) do
      ops[i] = { fw = op.fw, chunk = op.chunk, mb = op.mb, vs = op.chunk * P + (d - 1), start = starts[d][i],
                 finish = finishes[d][i] }
    end
    devices[d] = { ops = ops, finish = finish[d] }
  end
  return devices, makespan
end

---------------------------------------------------------------------------------------------------
-- Stage partition

-- Splits the graph into prologue (unlayered nodes before the first layer), layer groups (one per
-- layer name, in order, c = the group's replication: count / attrs.per_layer) and epilogue (the other unlayered nodes).
-- Optimizer nodes are set aside. `times` (the predicted times) may be nil: nodes straight from a builder.
local function regions(nodes, times)
  local prologue, epilogue, groups, by_name, optimizer = {}, {}, {}, {}, {}
  local seen_layer = false
  for i, n in ipairs(nodes) do
    if (times and times[i].opt > 0) or n.phase == "optimizer" then
      optimizer[#optimizer + 1] = i
    elseif n.layer ~= nil and n.layer ~= "" then
      seen_layer = true
      local g = by_name[n.layer]
      if not g then
        g = { name = n.layer, count = 0, nodes = {} }
        by_name[n.layer] = g
        groups[#groups + 1] = g
      end
      -- a node that runs several times per layer (attrs.per_layer: a MoE layer's experts) counts the layer once
      g.count = max(g.count, (n.count or 1) // ((n.attrs or {}).per_layer or 1))
      g.nodes[#g.nodes + 1] = i
    elseif seen_layer then
      epilogue[#epilogue + 1] = i
    else
      prologue[#prologue + 1] = i
    end
  end
  return prologue, groups, epilogue, optimizer
end

-- Virtual stage contents: stages[k].segments, in graph order, each { nodes = {i…}, reps = r,
-- per = {instances of node i per rep} }: the prologue (one rep; goes to the first stage), runs of
-- consecutive layers of one group (reps = layers; a node of a group with c layers and count n runs
-- n/c instances per layer), the epilogue (to the last stage). Layers are spread as evenly as
-- possible, earlier stages taking the remainder. stages[k].items flattens them: { node, share }.
local function layers_of(groups)
  local total = 0
  for _, g in ipairs(groups) do total = total + g.count end
  return total
end

--- Layers the stage partition counts: Σ over layer groups of count / attrs.per_layer (neusight.search asks it which
--- interleaved layouts divide the model).
function M.layer_count(nodes)
  local _, groups = regions(nodes, nil)
  return layers_of(groups)
end

local function partition(nodes, prologue, groups, epilogue, V)
  local total = layers_of(groups)
  if total < V and V > 1 then
    error(("parallel: %d pipeline stage(s) (pp × virtual_stages) but the model has only %d layer(s)"):format(V, total), 0)
  end
  local function single(list)
    local per = {}
    for j, i in ipairs(list) do per[j] = nodes[i].count end
    return { nodes = list, reps = 1, per = per, layered = false }
  end
  local stages = {}
  for k = 1, V do stages[k] = { segments = {}, items = {}, layers = 0 } end
  if #prologue > 0 then stages[1].segments[1] = single(prologue) end
  local base, extra = total // V, total % V
  local g_idx, g_used = 1, 0 -- current group and layers of it already placed
  for k = 1, V do
    local want = base + (k <= extra and 1 or 0)
    stages[k].layers = want
    while want > 0 do
      local g = groups[g_idx]
      local take = min(want, g.count - g_used)
      local per = {}
      for j, i in ipairs(g.nodes) do per[j] = nodes[i].count / g.count end
      stages[k].segments[#stages[k].segments + 1] = { nodes = g.nodes, reps = take, per = per, layered = true }
      want, g_used = want - take, g_used + take
      if g_used == g.count then g_idx, g_used = g_idx + 1, 0 end
    end
  end
  if #epilogue > 0 then stages[V].segments[#stages[V].segments + 1] = single(epilogue) end
  for _, st in ipairs(stages) do
    for _, seg in ipairs(st.segments) do
      for j, i in ipairs(seg.nodes) do st.items[#st.items + 1] = { node = i, share = seg.reps * seg.per[j] } end
    end
  end
  return stages
end

-- Output shape of the last node of the last layer group: the activation pipeline stages exchange.
local function boundary_shape(nodes, groups)
  local g = groups[#groups]
  if not g then return nil end
  return nodes[g.nodes[#g.nodes]].output
end

---------------------------------------------------------------------------------------------------
-- Activation memory

-- Bytes one microbatch leaves alive for backward in a virtual stage: the tensors each node saves (neusight.memory:
-- its op rule's `saves`, per instance in mem.saved). With full recomputation a layer keeps only its input
-- (`boundary` bytes) and `transient` is one layer's saved tensors, rebuilt in backward. With selective recomputation
-- the core-attention nodes keep only the region's inputs they read (mem.kept: Q, K, V) and one layer's core
-- attention is rebuilt at a time.
local function activation_bytes(mem, st, recompute, boundary, selective)
  local bytes, transient = 0, 0
  for _, seg in ipairs(st.segments) do
    local one, core = 0, 0 -- one rep
    for j, i in ipairs(seg.nodes) do
      local b = mem.saved[i] * seg.per[j]
      if selective and seg.layered and (mem.core[i]) then
        core, one = core + b, one + mem.kept[i] * seg.per[j]
      else
        one = one + b
      end
    end
    transient = max(transient, core)
    if recompute and seg.layered then
      bytes, transient = bytes + boundary * seg.reps, max(transient, one)
    else
      bytes = bytes + one * seg.reps
    end
  end
  return bytes, transient
end

-- Peak activation bytes of device d (1-based) over its op order: + a stage's bytes at each forward, − at its backward.
local function activation_peak(ops, stages, P, d)
  local live, peak = 0, 0
  for _, op in ipairs(ops) do
    local b = stages[op.chunk * P + d].activations
    if op.fw then live = live + b else live = live - b end
    if live > peak then peak = live end
  end
  return peak
end

---------------------------------------------------------------------------------------------------
-- Timeline

-- C.time prices with the group's size, spans_nodes and per_node and the cluster alone: one timeline asks each
-- distinct question once (a 175B model fills tens of thousands of equal gradient buckets; the pipeline links of
-- M.plan differ only in spans_nodes). A group that is not a table goes to C.time for its error.
local function pricer(cluster)
  local memo = {}
  return function(op, bytes, group)
    if type(group) ~= "table" then return C.time(op, bytes, group, cluster) end
    local fields = 0
    for _ in pairs(group) do fields = fields + 1 end
    local key = ("%s|%s|%s|%s|%d"):format(op, tostring(group.size), tostring(group.spans_nodes),
      tostring(group.per_node), fields)
    local by_bytes = memo[key]
    if not by_bytes then by_bytes = {}; memo[key] = by_bytes end
    local t = by_bytes[bytes]
    if t == nil then
      t = C.time(op, bytes, group, cluster)
      by_bytes[bytes] = t
    end
    return t
  end
end

--- Per-device timeline of one training iteration (or inference pass) from per-node times.
--- `times[i]` (one instance of node i, seconds) = { fw, fw_comm, bw, bw_comm, opt } where bw
--- includes gradient accumulation and *_comm is the part spent in collective kernels.
--- In-graph collectives count as tp_comm, or ep_comm for nodes of group "ep" (expert all-to-all); p2p is
--- the stage-boundary send/recv plus, for tied embeddings split over stages, the first/last-stage
--- gradient all-reduce.
--- Returns { iteration, devices = { per pipeline stage: compute, tp_comm, ep_comm, p2p, dp_comm,
--- dp_exposed, optimizer, bubble, finish, layers, … }, … } — all dp × tp ranks of a stage behave
--- alike, so one row stands for each of them.
---@param plan table M.plan()
---@param nodes table[] the graph's nodes (as built)
---@param times table[]
function M.timeline(plan, nodes, times)
  local P, v, Mb = plan.pp, plan.virtual_stages, plan.microbatches
  local V = P * v
  local e = K.dtype_bytes(plan.dtype or "fp32") -- activations (compute dtype)
  -- gradients (reduced over dp, tied-embedding sync) and parameters (all-gathered after a sharded step): the
  -- precision recipe's element sizes (fp32 gradients in amp except Megatron fp16; 16-bit parameters in Megatron amp)
  local recipe = plan.precision or precision.recipe(nil, plan.dtype, "autocast", plan.training and "train" or "inference")
  local eg, ep = recipe.bytes.grad, recipe.bytes.param
  local prologue, groups, epilogue, optimizer = regions(nodes, times)
  local stages = partition(nodes, prologue, groups, epilogue, V)
  -- Saved tensors per node (neusight.memory): from the workload's build (plan.memory), else from the op rules now
  -- (an imported reference graph: ops without a rule are charged their output).
  local mem = plan.memory or memory.context { nodes = nodes, rule_of = memory.engine_rules(), training = plan.training,
    state = precision.state(recipe, "none", plan.training), recipe = recipe, mode = plan.training and "train" or "inference" }
  mem.core = {}
  for i, n in ipairs(nodes) do mem.core[i] = (n.attrs or {}).core_attention == true end
  -- Recomputation: whether node i of segment seg re-runs its forward before its backward (training only).
  local full, selective = plan.recompute == "full", plan.recompute == "selective"
  local function reruns(seg, i)
    return plan.training and seg.layered and (full or (selective and (nodes[i].attrs or {}).core_attention == true))
  end
  local comm_time = pricer(plan.cluster)

  -- Point-to-point transfers between consecutive virtual stages (on device boundaries).
  local shape = boundary_shape(nodes, groups)
  local p2p_bytes = shape and numel(shape) * e or 0
  local p2p = {} -- p2p[vs] = seconds of the transfer vs → vs+1 (0-based vs)
  for vs = 0, V - 2 do -- device vs mod P sends to the next one (the last device to the first: interleaving)
    p2p[vs] = P == 1 and 0 or comm_time("send_recv", p2p_bytes, plan.pp_links[vs % P + 1])
  end

  -- Per virtual stage: compute and tensor-parallel communication per microbatch; parameters.
  local params_total = 0
  for k, st in ipairs(stages) do
    local fw, fwc, bw, bwc, params, ep_fw, ep_bw = 0, 0, 0, 0, 0, 0, 0
    for _, it in ipairs(st.items) do
      local t, n = times[it.node], nodes[it.node]
      fw, fwc = fw + (t.fw - t.fw_comm) * it.share, fwc + t.fw_comm * it.share
      bw, bwc = bw + (t.bw - t.bw_comm) * it.share, bwc + t.bw_comm * it.share
      if (n.attrs or {}).group == "ep" then
        ep_fw, ep_bw = ep_fw + t.fw_comm * it.share, ep_bw + t.bw_comm * it.share
      end
      params = params + n.params * it.share
    end
    st.activations, st.transient, st.temporary = 0, 0, 0
    if plan.training then
      st.activations, st.transient = activation_bytes(mem, st, full, p2p_bytes, selective)
    end
    for _, it in ipairs(st.items) do st.temporary = max(st.temporary, mem.temporary[it.node]) end
    -- recomputed forwards (kernels and tp collectives) run again before their backward
    for _, seg in ipairs(st.segments) do
      for j, i in ipairs(seg.nodes) do
        if reruns(seg, i) then
          local t, x = times[i], seg.per[j] * seg.reps
          bw, bwc = bw + (t.fw - t.fw_comm) * x, bwc + t.fw_comm * x
          if (nodes[i].attrs or {}).group == "ep" then ep_bw = ep_bw + t.fw_comm * x end
        end
      end
    end
    st.fw_ep, st.bw_ep = ep_fw, ep_bw
    local vs = k - 1
    st.send_fw = vs < V - 1 and p2p[vs] or 0
    st.send_bw = (plan.training and vs > 0) and p2p[vs - 1] or 0
    st.fw_compute, st.fw_comm, st.bw_compute, st.bw_comm, st.params = fw, fwc, bw, bwc, params
    st.fw = fw + fwc + st.send_fw
    st.bw = plan.training and (bw + bwc + st.send_bw) or 0
    params_total = params_total + params
  end

  -- Tied input/output embeddings (a node with attrs.tied = <name of the embedding node>) split over
  -- pipeline stages: as in Megatron-LM the last stage keeps its own copy of the table (memory, optimizer,
  -- data-parallel gradients) and, after the flush, the first and last stages all-reduce its gradient.
  local tied_extra, tied_bytes = {}, 0
  if P > 1 then
    local by_name = {}
    for i, n in ipairs(nodes) do by_name[n.name] = i end
    for _, it in ipairs(stages[V].items) do
      local n = nodes[it.node]
      local j = type(n.attrs) == "table" and type(n.attrs.tied) == "string" and by_name[n.attrs.tied]
      if j and nodes[j].params > 0 then
        local copy = nodes[j].params * nodes[j].count
        tied_extra[it.node] = copy / it.share -- per instance, as the bucket walk counts
        stages[V].params = stages[V].params + copy
        tied_bytes = tied_bytes + copy * eg
      end
    end
  end
  local tied_sync = 0
  if plan.training and tied_bytes > 0 then
    tied_sync = comm_time("all_reduce", tied_bytes, plan.pp_links[P]) -- last device ↔ first
  end

  local orders, starts, _, finish, makespan = simulate_times(stages, P, Mb, v, plan.schedule, plan.training, 1)

  -- Optimizer step time, shared out by the parameters each device holds.
  local opt_total = 0
  for _, i in ipairs(optimizer) do opt_total = opt_total + times[i].opt * nodes[i].count end

  -- Data-parallel gradient all-reduce: buckets of bucket_mb filled in backward order during each
  -- virtual stage's last backward; a bucket starts when its last gradient is ready (or after all
  -- compute without overlap) and waits for the link while the previous bucket is in flight.
  local bucket_bytes = plan.bucket_mb * 1e6
  local devices, iteration = {}, 0
  for d = 1, P do
    local ops, op_start = orders[d], starts[d]
    local dev = {
      stage = d - 1, compute = 0, tp_comm = 0, ep_comm = 0, p2p = 0, dp_comm = 0, dp_exposed = 0, optimizer = 0,
      layers = 0, params = 0, buckets = 0, microbatch_fw = 0, microbatch_bw = 0,
      activation_bytes = activation_peak(ops, stages, P, d), -- peak kept for backward (training)
    }
    local transient, temporary = 0, 0
    for c = 0, v - 1 do
      transient, temporary = max(transient, stages[c * P + d].transient), max(temporary, stages[c * P + d].temporary)
    end
    dev.activation_bytes = dev.activation_bytes + transient
    dev.temporary_bytes = temporary
    local last_bw = {} -- vs → start of its last backward op
    local compute, tp_comm, ep_comm, p2p_s = 0, 0, 0, 0 -- summed in op order (locals: 10⁵ ops in a deep pipeline)
    for i = 1, #ops do
      local op = ops[i]
      local vs = op.chunk * P + (d - 1)
      local st = stages[vs + 1]
      if op.fw then
        compute = compute + st.fw_compute
        tp_comm = tp_comm + st.fw_comm - st.fw_ep
        ep_comm = ep_comm + st.fw_ep
        p2p_s = p2p_s + st.send_fw
      else
        compute = compute + st.bw_compute
        tp_comm = tp_comm + st.bw_comm - st.bw_ep
        ep_comm = ep_comm + st.bw_ep
        p2p_s = p2p_s + st.send_bw
        local s = op_start[i]
        if not last_bw[vs] or s > last_bw[vs] then last_bw[vs] = s end
      end
    end
    dev.compute, dev.tp_comm, dev.ep_comm, dev.p2p = compute, tp_comm, ep_comm, p2p_s
    for c = 0, v - 1 do
      local st = stages[c * P + d]
      dev.layers, dev.params = dev.layers + st.layers, dev.params + st.params
      dev.microbatch_fw, dev.microbatch_bw = dev.microbatch_fw + st.fw, dev.microbatch_bw + st.bw
    end
    local compute_end = finish[d]
    local dp_end = compute_end
    if plan.training and plan.dp > 1 then
      local ready = {} -- runs of buckets: { at, bytes, group, n } = n buckets of `bytes` ready at `at`
      local function ready_add(at, bytes, gk, n)
        local last = ready[#ready]
        if last and last.at == at and last.bytes == bytes and last.group == gk then
          last.n = last.n + n
        else
          ready[#ready + 1] = { at = at, bytes = bytes, group = gk, n = n }
        end
      end
      for c = 0, v - 1 do
        local vs = c * P + (d - 1)
        local st = stages[vs + 1]
        -- Walk the stage backward: gradients of node i are ready when its backward kernels finish.
        local t, fill = last_bw[vs], { dp = 0, edp = 0 }
        for si = #st.segments, 1, -1 do -- backward order: last segment, last layer, last node first
          local seg = st.segments[si]
          for _ = 1, seg.reps do
            for j = #seg.nodes, 1, -1 do
              local i = seg.nodes[j]
              t = t + (times[i].bw + (reruns(seg, i) and times[i].fw or 0)) * seg.per[j]
              local grads = (nodes[i].params + (tied_extra[i] or 0)) * eg * seg.per[j]
              if grads > 0 then -- expert weights sync over their own replicas (edp), the rest over dp
                local gk = (nodes[i].attrs or {}).expert and "edp" or "dp"
                local f, full = fill[gk] + grads, 0
                while f >= bucket_bytes do f, full = f - bucket_bytes, full + 1 end
                fill[gk] = f
                if full > 0 then ready_add(t, bucket_bytes, gk, full) end
              end
            end
          end
        end
        for _, gk in ipairs { "dp", "edp" } do
          if fill[gk] > 0 then ready_add(t, fill[gk], gk, 1) end
        end
      end
      -- Buckets in order of readiness. Runs strictly increasing in `at` are already in the one order any sort
      -- gives (equal buckets are interchangeable). So are they when only the final leftover bucket ties with the
      -- run before it: Lua's table.sort never moves a last element that nothing exceeds (its partitions leave a[up]
      -- in place; tests/scripts/test_parallel.lua checks it). Otherwise sort the buckets one by one, as before.
      local in_order = true
      for k = 2, #ready do
        local a, b = ready[k - 1], ready[k]
        if not (a.at < b.at or (k == #ready and b.n == 1 and a.at == b.at)) then in_order = false break end
      end
      if not in_order then
        local each = {}
        for _, r in ipairs(ready) do
          for _ = 1, r.n do each[#each + 1] = { at = r.at, bytes = r.bytes, group = r.group, n = 1 } end
        end
        sort(each, function(a, b) return a.at < b.at end)
        ready = each
      end
      local link_free = 0
      -- with the distributed optimizer each rank only needs its shard of the summed gradient
      local reduce = plan.distributed_optimizer and "reduce_scatter" or "all_reduce"
      local buckets = 0
      for _, b in ipairs(ready) do
        local at = plan.overlap_grad_reduce and min(b.at, compute_end) or compute_end
        local dt = comm_time(reduce, b.bytes, plan.groups[b.group])
        for _ = 1, b.n do
          local start = max(at, link_free)
          link_free = start + dt
          dev.dp_comm = dev.dp_comm + dt
        end
        buckets = buckets + b.n
      end
      dev.buckets = buckets
      dp_end = max(compute_end, link_free)
      dev.dp_exposed = dp_end - compute_end
    end
    if tied_sync > 0 and (d == 1 or d == P) then -- the embedding group: first and last stage
      dp_end, dev.p2p = dp_end + tied_sync, dev.p2p + tied_sync
    end
    dev.optimizer = params_total > 0 and opt_total * dev.params / params_total or 0
    local gather = 0
    if plan.distributed_optimizer and plan.training and plan.dp > 1 then
      -- the step runs on this rank's 1/dp shard; then every rank all-gathers the updated parameters
      dev.optimizer = dev.optimizer / plan.dp
      if opt_total > 0 then
        gather = comm_time("all_gather", dev.params * ep, plan.groups.dp)
        dev.dp_comm, dev.dp_exposed = dev.dp_comm + gather, dev.dp_exposed + gather
      end
    end
    dev.finish = dp_end + dev.optimizer + gather
    iteration = max(iteration, dev.finish)
    devices[d] = dev
  end
  for _, dev in ipairs(devices) do
    dev.exposed_comm = dev.tp_comm + dev.ep_comm + dev.p2p + dev.dp_exposed
    dev.bubble = max(0, iteration - dev.compute - dev.optimizer - dev.exposed_comm)
  end
  -- Memory per GPU of each stage (neusight.memory): its state share (master copies and moments over dp under the
  -- distributed optimizer), the peak saved activations, its largest temporary, workspace (autocast's weight cache by
  -- parameter share), and its layers' share of a serving KV cache.
  local shard = (plan.distributed_optimizer and plan.training and plan.dp > 1) and plan.dp or 1
  local layers_total = 0
  for _, dev in ipairs(devices) do layers_total = layers_total + dev.layers end
  local parts = {}
  for d, dev in ipairs(devices) do
    local sp = memory.state_parts(dev.params, mem.state, shard)
    local share = params_total > 0 and dev.params / params_total or 1 / P
    parts[d] = {
      state = sp.weights + sp.gradients + sp.master + sp.optimizer, activations = dev.activation_bytes,
      temporary = dev.temporary_bytes, workspace = mem.cublas + mem.autocast_cache * share,
      kv_cache = (mem.kv_cache or 0) * (layers_total > 0 and dev.layers / layers_total or 1 / P),
    }
  end
  local gpu = plan.cluster and plan.cluster.gpu
  local gpu_mem = mem.gpu_mem_gb or (type(gpu) == "table" and gpu.mem_gb) or nil
  return {
    iteration = iteration, pipeline = makespan, devices = devices, p2p_bytes = p2p_bytes,
    grad_bytes_per_rank = params_total * eg, embedding_sync = tied_sync,
    memory = memory.parallel(parts, gpu_mem, plan.recompute or "none"),
  }
end

return M
