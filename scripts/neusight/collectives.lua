-- scripts/neusight/collectives.lua — α–β cost models of collective communication (ring, tree, hierarchical) with a registry users extend in Lua.
--
-- The reference prices an all-reduce as 4n/(0.72·NVLink/2)·(p−1) with p = 4 hard-coded
-- (method-neusight.md §1.3): no latency term, no algorithm choice, no second node. Here every
-- collective is the textbook α–β model: a message step costs α, a byte costs β (Hockney 1994);
-- the per-algorithm formulas are those of Thakur, Rabenseifner & Gropp, "Optimization of Collective
-- Communication Operations in MPICH" (IJHPCA 2005) and, for the bandwidth-optimal ring all-reduce,
-- Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations"
-- (JPDC 2009). Link contention, protocol choice (NCCL LL/LL128/Simple) and compute/communication
-- overlap are outside the model.
--
-- Sizes follow the nccl-tests convention (PERFORMANCE.md): n is the per-rank buffer of all_reduce
-- and broadcast, the full gathered buffer (p chunks) of all_gather and reduce_scatter, the total a
-- rank sends in all_to_all (its own chunk included), and the message of send_recv.
local T = require "neusight.topology"
local huge, max = math.huge, math.max
local ipairs, pairs, type, tostring, error, sort = ipairs, pairs, type, tostring, error, table.sort

local M = {}

-- ceil(log2 p) without floating-point surprises at exact powers of two (log(8, 2) may be 2.9999…).
local function ceil_log2(p)
  local steps, reach = 0, 1
  while reach < p do reach, steps = reach * 2, steps + 1 end
  return steps
end
M.ceil_log2 = ceil_log2

---------------------------------------------------------------------------------------------------
-- Algorithms: M.algorithms[op][name] = function(n_bytes, p, link) -> seconds, or nil when the
-- algorithm does not apply to this group. `link` is topology.links(): the flat `alpha`/`beta`
-- (slowest level for a group spanning nodes), `intra`/`inter` = { alpha, beta }, and the group shape
-- `size`, `spans_nodes`, `per_node`, `min_per_node`, `nodes`. p ≥ 2 and n > 0 whenever an algorithm is called.

-- Ring all-gather / reduce-scatter: p−1 steps of n/p bytes (Thakur et al. 2005 §4.1, §4.3).
-- The reduction's arithmetic (γ term) is neglected: on GPUs it is far cheaper than the link.
local function ring_gather(n, p, l)
  return (p - 1) * l.alpha + (p - 1) / p * n * l.beta
end

-- Hierarchical (two-level) reduce-scatter over k nodes of g ranks: each node's ranks reduce-scatter the n bytes
-- over the intra-node link (an n/g shard each), then the k ranks holding the same shard, one per node, reduce-scatter
-- it over the network. g such rings run at once, one per NIC, so each NIC carries only (k−1)/k·n/g bytes: the
-- node's aggregate NIC bandwidth, as NCCL's multi-node rings reach by giving each channel its own NIC. An all-gather
-- is the same two steps backwards (network first, then the node), with the same cost.
-- Nodes holding different numbers of ranks (12 ranks on 8-GPU nodes: 8 + 4): the node step is the longest, over the
-- most ranks (per_node); the network step is limited by the node with the fewest ranks, whose min_per_node NICs
-- carry its whole share, n/min_per_node each.
local function hierarchical_gather(n, _, l)
  if not l.spans_nodes or l.per_node < 2 then return nil end
  return ring_gather(n, l.per_node, l.intra) + ring_gather(n / l.min_per_node, l.nodes, l.inter)
end

-- An all-reduce is a reduce-scatter followed by an all-gather of the same buffer (Patarasuk & Yuan 2009; Thakur et
-- al. 2005 §4.4, Rabenseifner's algorithm): the ring and hierarchical all-reduces are priced as their two halves, so
-- a ZeRO-style reduce-scatter + all-gather can never cost more than the all-reduce it replaces. nil when a half
-- does not apply.
local function reduce_scatter_then_all_gather(reduce_scatter, all_gather)
  return function(n, p, l)
    local rs = reduce_scatter(n, p, l)
    if rs == nil then return nil end
    local ag = all_gather(n, p, l)
    if ag == nil then return nil end
    return rs + ag
  end
end

-- Ring all-reduce: 2(p−1) steps of n/p bytes. Bandwidth-optimal.
local ring_all_reduce = reduce_scatter_then_all_gather(ring_gather, ring_gather)
-- Hierarchical all-reduce: intra-node reduce-scatter, an inter-node all-reduce of each rank's n/g shard among the k
-- ranks holding it (one ring per NIC), intra-node all-gather. Only the n/g shard crosses the network, where a flat
-- ring pushes 2(p−1)/p·n bytes through its slowest (network) hop.
local hierarchical_all_reduce = reduce_scatter_then_all_gather(hierarchical_gather, hierarchical_gather)

-- Binomial-tree all-reduce = tree reduce + tree broadcast, ceil(log2 p) steps each, every step
-- moving the whole buffer (Thakur et al. 2005 §4.4, the short-message algorithm). Fewer steps than
-- the ring, p/(p−1)·log2 p times the bytes: it wins for small messages.
local function tree_all_reduce(n, p, l)
  return 2 * ceil_log2(p) * (l.alpha + n * l.beta)
end

-- Binomial-tree broadcast: ceil(log2 p) steps of the whole buffer (Thakur et al. 2005 §4.2).
local function tree_broadcast(n, p, l)
  return ceil_log2(p) * (l.alpha + n * l.beta)
end

-- Pipelined ring (chain) broadcast, as NCCL runs it: the buffer streams through p−1 hops in chunks,
-- so the latency term is p−1 steps and each rank receives the n bytes once. Pipeline fill
-- (one chunk per hop) is neglected, as in NCCL's own tuning model.
local function ring_broadcast(n, p, l)
  return (p - 1) * l.alpha + n * l.beta
end

-- Point-to-point: one message.
local function direct_send_recv(n, _, l)
  return l.alpha + n * l.beta
end

-- All-to-all: each rank sends one n/p chunk to each of its p − 1 peers (Thakur et al. 2005 §4.6). NCCL posts every
-- send and receive of an all-to-all at once (one grouped send/recv kernel), so the chunks do not wait for one another:
-- one step latency, then the (p − 1)/p·n bytes a rank sends over its link (nccl-tests on six GPUs: 512-byte
-- all-to-alls take 6–10 µs at 2 GPUs and 0.3–0.7 µs more per GPU added, not the p − 1 steps of a pairwise exchange;
-- weights/COLLECTIVES_RULE.md C). Across nodes each chunk takes its own path: the p − g chunks for ranks off the node
-- leave through the rank's NIC, the g − 1 for its node's ranks over the node's link, both at once, so the slower part
-- sets the time (the ring-style collectives above run their levels one after the other). The rank on the node with the
-- fewest ranks (min_per_node) sends the most off its node, a rank on the largest (per_node) the most on it.
local function pairwise_all_to_all(n, p, l)
  if not l.spans_nodes then return l.alpha + (p - 1) / p * n * l.beta end
  local off, on = p - l.min_per_node, l.per_node - 1
  return max(l.inter.alpha + off / p * n * l.inter.beta, l.intra.alpha + on / p * n * l.intra.beta)
end

M.algorithms = {
  all_reduce = { ring = ring_all_reduce, tree = tree_all_reduce, hierarchical = hierarchical_all_reduce },
  all_gather = { ring = ring_gather, hierarchical = hierarchical_gather },
  reduce_scatter = { ring = ring_gather, hierarchical = hierarchical_gather },
  broadcast = { ring = ring_broadcast, tree = tree_broadcast },
  send_recv = { direct = direct_send_recv },
  all_to_all = { pairwise = pairwise_all_to_all },
}
-- all_gather/reduce_scatter have no tree: recursive doubling/halving would never lose to the ring in
-- the α–β model, yet NCCL runs only the ring for them, so registering it would mispredict.

---------------------------------------------------------------------------------------------------
-- Pricing

local show = T.show

-- The collectives that pay a fixed latency once per call (topology.base_seconds, the one source of the latency rule) on
-- top of the α–β time: those NCCL's tuning model prices (src/graph/tuning.cc), its algorithm's LL base, and the
-- all-to-all, one grouped send/recv kernel whose fixed cost nccl-tests measures as large as the ring's (6–10 µs at
-- 2 GPUs; weights/COLLECTIVES_RULE.md C); it pays the ring's. A point-to-point send pays only its step (nccl.csv
-- measures no send/recv).
M.BASE_LATENCY_OPS = { all_reduce = true, all_gather = true, reduce_scatter = true, broadcast = true, all_to_all = true }

local function run(op, name, fn, n, p, l)
  local t = fn(n, p, l)
  if t ~= nil and (type(t) ~= "number" or not (t >= 0) or t == huge) then
    -- the function's file and line (an override's under --scripts): the message is about that file
    local where = require("neusight").function_where(fn)
    error(("%scollectives: algorithm '%s' of %s returned %s, expected a non-negative number or nil")
      :format(where and where .. ": " or "", name, op, show(t)), 0)
  end
  if t ~= nil and M.BASE_LATENCY_OPS[op] then t = t + T.base_seconds(name) end
  return t
end

--- Seconds a collective takes, and the algorithm priced. With `algorithm` given that one is used
--- (an error if it does not apply); otherwise every registered algorithm is tried and the cheapest
--- wins (ties: alphabetical). A group of one rank, or an empty message, costs 0 ("none"): NCCL
--- returns at once for a zero count.
---@param op string  all_reduce | all_gather | reduce_scatter | broadcast | send_recv | all_to_all | a user op
---@param n_bytes number
---@param group table { size, spans_nodes?, per_node?, min_per_node? } (see topology.group)
---@param cluster table topology.cluster() or its spec
---@param algorithm string?
---@return number seconds, string algorithm
function M.time(op, n_bytes, group, cluster, algorithm)
  local algos = M.algorithms[op]
  if type(algos) ~= "table" then
    error(("collectives: unknown op %s%s"):format(show(op), T.did_you_mean(op, M.algorithms)), 0)
  end
  if type(n_bytes) ~= "number" or not (n_bytes >= 0) or n_bytes == huge then
    error(("collectives: n_bytes must be a non-negative number, got %s"):format(show(n_bytes)), 0)
  end
  if algorithm ~= nil and type(algos[algorithm]) ~= "function" then
    error(("collectives: unknown algorithm %s for %s%s"):format(show(algorithm), op, T.did_you_mean(algorithm, algos)), 0)
  end
  cluster = T.as_cluster(cluster)
  local l = T.links(cluster, group)
  local p = l.size
  if p == 1 or n_bytes == 0 then return 0, "none" end

  if algorithm ~= nil then
    local t = run(op, algorithm, algos[algorithm], n_bytes, p, l)
    if t == nil then
      error(("collectives: algorithm '%s' does not apply to %s over %d ranks (%d per node, %s)")
        :format(algorithm, op, p, l.per_node, l.spans_nodes and "spanning nodes" or "one node"), 0)
    end
    return t, algorithm
  end

  local names = {}
  for name in pairs(algos) do names[#names + 1] = name end
  sort(names) -- deterministic tie-break
  local best_t, best_name
  for _, name in ipairs(names) do
    local t = run(op, name, algos[name], n_bytes, p, l)
    if t ~= nil and (best_t == nil or t < best_t) then best_t, best_name = t, name end
  end
  if best_t == nil then
    error(("collectives: no registered algorithm applies to %s over %d ranks"):format(op, p), 0)
  end
  return best_t, best_name
end

return M
