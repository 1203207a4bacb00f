-- tests/scripts/test_collectives.lua — cluster topology and α–β collective costs against closed forms computed by hand.
local T = require "neusight.topology"
local C = require "neusight.collectives"

local function eq(got, want, what)
  if got ~= want then error(("%s: expected %s, got %s"):format(what, tostring(want), tostring(got)), 2) end
end

local testing = require "neusight.testing"
local near, raises = testing.near, testing.raises

-- GPU tables carry the fields topology reads, with the values of gpus/*.toml.
local H100 = { name = "H100-SXM5-80GB", interconnect = "nvlink4", interconnect_bw_gbps = 900.0, pcie_bw_gbps = 64.0 }
local A100 = { name = "A100-SXM4-40GB", interconnect = "nvlink3", interconnect_bw_gbps = 600.0, pcie_bw_gbps = 32.0 }
local L4 = { name = "L4", interconnect = "none", interconnect_bw_gbps = 0.0, pcie_bw_gbps = 32.0 }
-- NCCL's fixed LL latency of one ring / tree collective (topology.base_seconds; tuning.cc baseLat 6.6 / 6.8 µs)
local RB, TB = T.base_seconds("ring"), T.base_seconds("tree")

-- Round numbers so the hand-computed α and β are obvious:
-- intra α = 2 µs, β = 1 / (100e9 · 0.5) = 2e-11 s/B; inter α = 10 µs, β = 1 / (25e9 · 1) = 4e-11 s/B.
local function test_cluster(nodes)
  return T.cluster {
    gpus_per_node = 8, nodes = nodes or 1,
    intra = { bw_gbps = 100, latency_us = 2, efficiency = 0.5 },
    inter = { bw_gbps = 25, latency_us = 10, efficiency = 1 },
  }
end
local AI, BI = 2e-6, 2e-11
local AE, BE = 1e-5, 4e-11

local PS = { 2, 3, 4, 5, 8 }
local NS = { 1, 4096, 1e6, 2.5e8, 1e10 }

local function ceil_log2(p) -- by hand, independent of the module's helper
  local t = { [2] = 1, [3] = 2, [4] = 2, [5] = 3, [8] = 3, [16] = 4 }
  return t[p]
end

local Tests = {}

function Tests.test_cluster_defaults_from_gpu()
  local c = T.cluster { gpu = H100 }
  eq(c.gpus_per_node, 8, "gpus_per_node default")
  eq(c.nodes, 1, "nodes default")
  eq(c.intra.bw_gbps, 450.0, "NVLink4 per direction = 900 / 2")
  eq(c.intra.latency_us, 0.6, "intra latency default: NCCL's NVLink LL step")
  eq(c.intra.efficiency, 0.72, "intra efficiency default (reference's 0.72)")
  eq(c.inter.bw_gbps, 50.0, "inter = 400 Gb/s InfiniBand per GPU")
  eq(c.inter.latency_us, 2.7, "inter latency default: NCCL's network LL ring step")
  -- the link kind sets the step latency (tester8 #4: PCIe was priced as NVLink)
  eq(T.cluster({ gpu = L4 }).intra.latency_us, 1.0, "PCIe-only part: NCCL's PCI LL step")
  near(T.base_seconds("ring"), 6.6e-6, "NCCL's LL ring base latency")
  near(T.base_seconds("tree"), 6.8e-6, "NCCL's LL tree base latency")
  eq(c.inter.efficiency, 0.8, "inter efficiency default")
  eq(T.cluster({ gpu = A100 }).intra.bw_gbps, 300.0, "NVLink3 per direction = 600 / 2")
  eq(T.cluster({ gpu = L4 }).intra.bw_gbps, 32.0, "PCIe-only part uses pcie_bw_gbps")
  local mi = { interconnect = "infinity_fabric", interconnect_bw_gbps = 896.0, pcie_bw_gbps = 64.0 }
  eq(T.cluster({ gpu = mi }).intra.bw_gbps, 448.0, "Infinity Fabric per direction")
  -- Explicit values win over the GPU's.
  local c2 = T.cluster { gpu = H100, gpus_per_node = 4, nodes = 2, intra = { bw_gbps = 200, efficiency = 1 },
                         inter = { bw_gbps = 25, latency_us = 3 } }
  eq(c2.gpus_per_node, 4, "gpus_per_node")
  eq(c2.nodes, 2, "nodes")
  eq(c2.intra.bw_gbps, 200, "intra bw given")
  eq(c2.intra.efficiency, 1, "intra efficiency given")
  eq(c2.intra.latency_us, 0.6, "intra latency still defaulted (NVLink: the spec names the H100)")
  eq(c2.inter.bw_gbps, 25, "inter bw given")
  eq(c2.inter.latency_us, 3, "inter latency given")
end

-- The default network reaches a GPU through its host link: 400 Gb/s per GPU, at most the GPU's pcie_bw_gbps (an L4's
-- PCIe 4.0 x16 gave 50 GB/s between nodes over 32 GB/s inside one); a cluster's own inter.bw_gbps is kept.
function Tests.test_cluster_default_inter_capped_by_host_link()
  eq(T.cluster({ gpu = L4 }).inter.bw_gbps, 32.0, "L4: min(50, PCIe 32)")
  eq(T.cluster({ gpu = A100 }).inter.bw_gbps, 32.0, "A100: min(50, PCIe 32)")
  eq(T.cluster({ gpu = H100 }).inter.bw_gbps, 50.0, "H100: min(50, PCIe 64)")
  eq(T.cluster({ gpu = { interconnect = "nvlink4", interconnect_bw_gbps = 900.0 } }).inter.bw_gbps, 50.0,
    "no host link given: the network")
  eq(T.cluster({ gpu = L4, inter = { bw_gbps = 50 } }).inter.bw_gbps, 50, "a cluster's own bandwidth is kept")
  eq(T.cluster({ gpu = L4, inter = { latency_us = 3 } }).inter.bw_gbps, 32.0, "only the latency given: capped")
  eq(T.cluster({ inter = { bw_gbps = 100 }, intra = { bw_gbps = 10 } }).inter.bw_gbps, 100, "no GPU: as given")
end

function Tests.test_link_alpha_beta()
  local c = test_cluster(2)
  local a, b = T.level(c, "intra")
  near(a, AI, "intra α"); near(b, BI, "intra β")
  a, b = T.level(c, "inter")
  near(a, AE, "inter α"); near(b, BE, "inter β")
  a, b = T.link(c, { size = 8 })
  near(a, AI, "one-node group α"); near(b, BI, "one-node group β")
  a, b = T.link(c, { size = 16 })
  near(a, AE, "two-node group α = slowest"); near(b, BE, "two-node group β = slowest")
  a, b = T.link(c, { size = 2, spans_nodes = true })
  near(a, AE, "pipeline pair across nodes α"); near(b, BE, "pipeline pair across nodes β")
  -- H100 defaults: β = 1 / (450e9 · 0.72).
  a, b = T.link(T.cluster { gpu = H100 }, { size = 8 })
  near(a, 0.6e-6, "H100 α"); near(b, 1 / (450e9 * 0.72), "H100 β")
  -- A spec instead of a built cluster is accepted.
  a, b = T.link({ gpu = A100 }, { size = 4 })
  near(b, 1 / (300e9 * 0.72), "A100 β from a spec")
end

function Tests.test_group_shape()
  local c = test_cluster(4)
  local g = T.group(c, { size = 8 })
  eq(g.spans_nodes, false, "8 ranks fit one node"); eq(g.per_node, 8, "per_node"); eq(g.nodes, 1, "nodes")
  g = T.group(c, { size = 32 })
  eq(g.spans_nodes, true, "32 ranks span"); eq(g.per_node, 8, "per_node"); eq(g.nodes, 4, "nodes")
  g = T.group(c, { size = 4, spans_nodes = true })
  eq(g.per_node, 1, "a small spanning group has one rank per node"); eq(g.nodes, 4, "nodes")
  g = T.group(c, { size = 8, spans_nodes = true, per_node = 4 })
  eq(g.per_node, 4, "explicit per_node"); eq(g.nodes, 2, "nodes")
end

function Tests.test_all_reduce_ring_and_tree_closed_forms()
  local c = test_cluster()
  for _, p in ipairs(PS) do
    for _, n in ipairs(NS) do
      local what = ("p=%d n=%g"):format(p, n)
      local t, algo = C.time("all_reduce", n, { size = p }, c, "ring")
      near(t, RB + 2 * (p - 1) * AI + 2 * (p - 1) / p * n * BI, "ring all_reduce " .. what)
      eq(algo, "ring", "algorithm name")
      t = C.time("all_reduce", n, { size = p }, c, "tree")
      near(t, TB + 2 * ceil_log2(p) * (AI + n * BI), "tree all_reduce " .. what)
    end
  end
end

function Tests.test_all_gather_reduce_scatter_closed_forms()
  local c = test_cluster()
  for _, p in ipairs(PS) do
    for _, n in ipairs(NS) do
      local what = ("p=%d n=%g"):format(p, n)
      local want = RB + (p - 1) * AI + (p - 1) / p * n * BI
      local t, algo = C.time("all_gather", n, { size = p }, c)
      near(t, want, "all_gather " .. what); eq(algo, "ring", "all_gather algorithm")
      t, algo = C.time("reduce_scatter", n, { size = p }, c)
      near(t, want, "reduce_scatter " .. what); eq(algo, "ring", "reduce_scatter algorithm")
    end
  end
end

function Tests.test_broadcast_send_recv_all_to_all_closed_forms()
  local c = test_cluster()
  for _, p in ipairs(PS) do
    for _, n in ipairs(NS) do
      local what = ("p=%d n=%g"):format(p, n)
      near(C.time("broadcast", n, { size = p }, c, "ring"), RB + (p - 1) * AI + n * BI, "ring broadcast " .. what)
      near(C.time("broadcast", n, { size = p }, c, "tree"), TB + ceil_log2(p) * (AI + n * BI), "tree broadcast " .. what)
      -- one grouped kernel: the ring's fixed latency, one step (the p − 1 sends posted at once), the bytes a rank sends
      near(C.time("all_to_all", n, { size = p }, c), RB + AI + (p - 1) / p * n * BI, "all_to_all " .. what)
    end
    near(C.time("send_recv", 1e6, { size = 2 }, c), AI + 1e6 * BI, "send_recv")
  end
  -- Across nodes a flat algorithm runs at the slowest link; the all-to-all sends its off-node chunks on the NIC and
  -- its on-node ones over the node's link at once (tester3: ep 16 over 2 nodes cost 8.7x ep 8, all on the NIC):
  -- 8 of 16 chunks leave the node, 7 stay; the NIC part is the slower.
  local c2 = test_cluster(2)
  local t_nic, t_node = RB + AE + 8 / 16 * 1e8 * BE, RB + AI + 7 / 16 * 1e8 * BI
  near(C.time("all_to_all", 1e8, { size = 16 }, c2), math.max(t_nic, t_node), "all_to_all over 2 nodes")
  near(C.time("all_to_all", 1e8, { size = 16 }, c2), t_nic, "the NIC part is the slower")
  -- 8 + 4 ranks: a rank of the smaller node sends 8 of its 12 chunks off the node
  near(C.time("all_to_all", 1.2e8, { size = 12 }, c2), RB + AE + 8 / 12 * 1.2e8 * BE, "all_to_all over 8 + 4 ranks")
  -- one rank per node: every chunk leaves the node
  near(C.time("all_to_all", 1e8, { size = 2, spans_nodes = true }, c2), RB + AE + 1 / 2 * 1e8 * BE, "all_to_all one per node")
  near(C.time("send_recv", 1e8, { size = 2, spans_nodes = true }, c2), AE + 1e8 * BE, "send_recv across nodes")
end

function Tests.test_ring_tree_crossover()
  -- p = 8: ring = RB + 14α + 1.75nβ, tree = TB + 6α + 6nβ; tree is cheaper below n* = (8α + RB − TB) / (4.25β).
  local c = test_cluster()
  local n_star = (8 * AI + RB - TB) / (4.25 * BI)
  local t, algo = C.time("all_reduce", n_star / 2, { size = 8 }, c)
  eq(algo, "tree", "small message picks tree")
  near(t, TB + 6 * AI + 6 * (n_star / 2) * BI, "tree time")
  t, algo = C.time("all_reduce", n_star * 2, { size = 8 }, c)
  eq(algo, "ring", "large message picks ring")
  near(t, RB + 14 * AI + 1.75 * (n_star * 2) * BI, "ring time")
  eq(select(2, C.time("all_reduce", 64, { size = 8 }, c)), "tree", "64 B picks tree")
  eq(select(2, C.time("all_reduce", 1e9, { size = 8 }, c)), "ring", "1 GB picks ring")
  -- Broadcast, p = 8: ring = RB + 7α + nβ, tree = TB + 3α + 3nβ; crossover at n = (4α + RB − TB) / 2β.
  local b_star = (4 * AI + RB - TB) / (2 * BI)
  eq(select(2, C.time("broadcast", b_star / 2, { size = 8 }, c)), "tree", "small broadcast picks tree")
  eq(select(2, C.time("broadcast", b_star * 2, { size = 8 }, c)), "ring", "large broadcast picks ring")
end

function Tests.test_hierarchical_vs_flat_on_two_nodes()
  local c = test_cluster(2)
  local n = 1e9
  -- Flat ring over 16 ranks, every step at the network link.
  local flat = RB + 2 * 15 * AE + 2 * 15 / 16 * n * BE
  near(C.time("all_reduce", n, { size = 16 }, c, "ring"), flat, "flat ring over 2 nodes")
  -- Hierarchical: intra RS over 8 + inter ring all-reduce of n/8 over 2 nodes + intra AG over 8.
  local hier = RB + (7 * AI + 7 / 8 * n * BI) + (2 * 1 * AE + 2 * 1 / 2 * (n / 8) * BE) + (7 * AI + 7 / 8 * n * BI)
  near(C.time("all_reduce", n, { size = 16 }, c, "hierarchical"), hier, "hierarchical")
  local t, algo = C.time("all_reduce", n, { size = 16 }, c)
  eq(algo, "hierarchical", "1 GB over 2 nodes picks hierarchical")
  near(t, hier, "picked time")
  if not (hier < 0.6 * flat) then error("hierarchical should save > 40% over the flat ring at 1 GB") end
  -- Tiny messages too: hierarchical pays 2 network steps (plus 14 cheap NVLink ones), the flat tree
  -- 2·4 network steps and the flat ring 30.
  t, algo = C.time("all_reduce", 8, { size = 16 }, c)
  eq(algo, "hierarchical", "8 B over 2 nodes picks hierarchical")
  near(t, RB + 2 * (7 * AI + 7 / 8 * 8 * BI) + 2 * AE + 2 / 2 * 1 * BE, "8 B hierarchical time")
  near(C.time("all_reduce", 8, { size = 16 }, c, "tree"), TB + 8 * (AE + 8 * BE), "8 B flat tree time")
  -- 4 ranks per node over 4 nodes.
  local c4 = test_cluster(4)
  local h4 = RB + (3 * AI + 3 / 4 * n * BI) + (2 * 3 * AE + 2 * 3 / 4 * (n / 4) * BE) + (3 * AI + 3 / 4 * n * BI)
  near(C.time("all_reduce", n, { size = 16, spans_nodes = true, per_node = 4 }, c4, "hierarchical"), h4,
       "hierarchical 4 x 4")
end

function Tests.test_reduce_scatter_all_gather_use_the_two_levels_of_all_reduce()
  -- Across nodes a reduce-scatter or an all-gather runs on the node's NICs as the all-reduce does (tester3 problem 2:
  -- ZeRO-1's reduce-scatter + all-gather over 2 DGX nodes was priced 4x the all-reduce it replaces, flat on one NIC).
  local c = test_cluster(2)
  local n = 1e9
  -- intra reduce-scatter over 8 + inter reduce-scatter of the n/8 shard over 2 nodes
  local half = RB + (7 * AI + 7 / 8 * n * BI) + (1 * AE + 1 / 2 * (n / 8) * BE)
  for _, op in ipairs { "reduce_scatter", "all_gather" } do
    local t, algo = C.time(op, n, { size = 16 }, c)
    eq(algo, "hierarchical", op .. " over 2 nodes picks hierarchical")
    near(t, half, op .. " hierarchical time")
    near(C.time(op, n, { size = 16 }, c, "ring"), RB + 15 * AE + 15 / 16 * n * BE, op .. " flat ring over 2 nodes")
  end
  -- one rule: an all-reduce is its reduce-scatter plus its all-gather, per algorithm and for the picked one, in one
  -- NCCL call (one base latency where the pair makes two calls)
  for _, algo in ipairs { "ring", "hierarchical" } do
    near(C.time("all_reduce", n, { size = 16 }, c, algo) + RB,
         C.time("reduce_scatter", n, { size = 16 }, c, algo) + C.time("all_gather", n, { size = 16 }, c, algo),
         "all_reduce = reduce_scatter + all_gather (" .. algo .. ")")
  end
  near(C.time("reduce_scatter", n, { size = 16 }, c) + C.time("all_gather", n, { size = 16 }, c),
       C.time("all_reduce", n, { size = 16 }, c) + RB, "ZeRO pair costs the all-reduce over 2 nodes")
  -- inside one node there is one level: the ring
  eq(select(2, C.time("all_gather", n, { size = 8 }, c)), "ring", "all_gather in a node")
end

function Tests.test_hierarchical_on_partly_filled_nodes()
  -- 12 ranks on 8-GPU nodes are 8 + 4 (tester3: dp 12 fell back to the flat ring on one NIC and cost as much as
  -- dp 8). The node step runs over the 8, the network step on the 4 NICs of the smaller node.
  local c = test_cluster(2)
  local n = 1e9
  local g = T.group(c, { size = 12 })
  eq(g.per_node, 8, "per_node of 12 ranks"); eq(g.min_per_node, 4, "min_per_node of 12 ranks"); eq(g.nodes, 2, "nodes")
  local half = RB + (7 * AI + 7 / 8 * n * BI) + (1 * AE + 1 / 2 * (n / 4) * BE)
  for _, op in ipairs { "reduce_scatter", "all_gather" } do
    local t, algo = C.time(op, n, { size = 12 }, c)
    eq(algo, "hierarchical", op .. " over 8 + 4 ranks")
    near(t, half, op .. " over 8 + 4 ranks")
  end
  local t, algo = C.time("all_reduce", n, { size = 12 }, c)
  eq(algo, "hierarchical", "all_reduce over 8 + 4 ranks"); near(t, 2 * half - RB, "all_reduce over 8 + 4 ranks")
  -- between 8 ranks in one node and 16 on two full nodes
  local t8, t16 = C.time("all_reduce", n, { size = 8 }, c), C.time("all_reduce", n, { size = 16 }, c)
  if not (t8 < t and t < 2 * t16) then error(("dp 12 all_reduce %g s out of line with dp 8 %g s, dp 16 %g s"):format(t, t8, t16)) end
  -- an uneven layout states its fewest ranks per node (3 + 3 + 2 ranks): the network step runs on 2 NICs
  local c3 = test_cluster(3)
  near(C.time("reduce_scatter", n, { size = 8, spans_nodes = true, per_node = 3, min_per_node = 2 }, c3),
       RB + (2 * AI + 2 / 3 * n * BI) + (2 * AE + 2 / 3 * (n / 2) * BE), "3 + 3 + 2 ranks")
  raises("group.min_per_node: 4 exceeds per_node = 3", T.group, c3, { size = 8, per_node = 3, min_per_node = 4 })
end

function Tests.test_trivial_groups_cost_zero()
  local c = test_cluster()
  for op in pairs(C.algorithms) do
    local t, algo = C.time(op, 1e6, { size = 1 }, c)
    eq(t, 0, op .. " with p = 1"); eq(algo, "none", op .. " algorithm with p = 1")
    eq(C.time(op, 0, { size = 8 }, c), 0, op .. " with n = 0")
  end
end

function Tests.test_validation_errors()
  raises("cluster: unknown key 'gpus_per_nod' (did you mean 'gpus_per_node'?)", T.cluster, { gpus_per_nod = 8, gpu = H100 })
  raises("cluster: unknown key 'links'", T.cluster, { links = 2, gpu = H100 })
  raises("cluster.intra: unknown key 'bw_gpbs' (did you mean 'bw_gbps'?)", T.cluster, { intra = { bw_gpbs = 100 } })
  raises("cluster.inter: unknown key 'latency_ms' (did you mean 'latency_us'?)", T.cluster, { gpu = H100, inter = { latency_ms = 5 } })
  raises("cluster.gpus_per_node: positive integer expected, got 0", T.cluster, { gpu = H100, gpus_per_node = 0 })
  raises("cluster.nodes: positive integer expected, got 1.5", T.cluster, { gpu = H100, nodes = 1.5 })
  raises("cluster.intra.efficiency: number in (0, 1] expected, got 1.5", T.cluster, { gpu = H100, intra = { efficiency = 1.5 } })
  raises("cluster.inter.bw_gbps: positive number expected, got -1", T.cluster, { gpu = H100, inter = { bw_gbps = -1 } })
  raises("cluster.intra.latency_us: non-negative number expected, got \"1\"", T.cluster, { gpu = H100, intra = { latency_us = "1" } })
  raises("cluster.intra.bw_gbps: no default without a GPU (give cluster.gpu or cluster.intra.bw_gbps)", T.cluster, {})
  raises("cluster.gpu.interconnect_bw_gbps: positive number expected, got nil", T.cluster, { gpu = { interconnect = "nvlink4" } })
  local c = test_cluster(2)
  raises("group: unknown key 'sise' (did you mean 'size'?)", T.link, c, { sise = 8 })
  raises("group.size: positive integer expected, got 0", T.link, c, { size = 0 })
  raises("group.size: 32 ranks do not fit in 2 node(s) of 8 GPUs", T.link, c, { size = 32 })
  raises("group.size: 16 ranks do not fit in one node of 8 GPUs (set spans_nodes = true)", T.link, c, { size = 16, spans_nodes = false })
  raises("group.spans_nodes: the cluster has a single node", T.link, test_cluster(1), { size = 2, spans_nodes = true })
  raises("group: 16 ranks at 4 per node need 4 nodes, the cluster has 2", T.link, c, { size = 16, per_node = 4 })
  raises("collectives: unknown op \"allreduce\" (did you mean 'all_reduce'?)", C.time, "allreduce", 1e6, { size = 8 }, c)
  raises("collectives: unknown algorithm \"rnig\" for all_reduce (did you mean 'ring'?)", C.time, "all_reduce", 1e6, { size = 8 }, c, "rnig")
  raises("collectives: n_bytes must be a non-negative number, got -1", C.time, "all_reduce", -1, { size = 8 }, c)
  raises("collectives: algorithm 'hierarchical' does not apply to all_reduce over 8 ranks (8 per node, one node)",
         C.time, "all_reduce", 1e6, { size = 8 }, c, "hierarchical")
end

-- An inline cluster's maxima are a cluster file's: engine/core/cluster_spec.h's, read through ns.cluster_limits() (the
-- standalone runner reads the header). Each limit itself passes and the next number above it fails, so the two readers
-- cannot drift apart again (topology.lua kept its own 1e6 and 2^20 beside the C++ reader's).
function Tests.test_cluster_limits_are_a_cluster_files()
  local ns = require "neusight"
  local L = ns.cluster_limits()
  eq(math.type(L.count), "integer", "count")
  local c = T.cluster { gpu = H100, gpus_per_node = L.count, nodes = L.count,
                        intra = { bw_gbps = L.bw_gbps, latency_us = L.latency_us },
                        inter = { bw_gbps = L.bw_gbps, latency_us = L.latency_us } }
  eq(c.gpus_per_node, L.count, "gpus_per_node at the limit")
  eq(c.nodes, L.count, "nodes at the limit")
  eq(c.intra.bw_gbps, L.bw_gbps, "bw_gbps at the limit")
  eq(c.inter.latency_us, L.latency_us, "latency_us at the limit")
  local function above(x) return x + x * 2 ^ -52 end -- the next double up
  raises(("cluster.intra.bw_gbps: at most %s (GB/s per direction) expected, got %s"):format(ns.limit_text(L.bw_gbps),
         above(L.bw_gbps)), T.cluster, { gpu = H100, intra = { bw_gbps = above(L.bw_gbps) } })
  raises(("cluster.inter.latency_us: at most %s (microseconds per message) expected, got %s"):format(
         ns.limit_text(L.latency_us), above(L.latency_us)), T.cluster,
         { gpu = H100, inter = { latency_us = above(L.latency_us) } })
  raises(("cluster.gpus_per_node: at most %d expected, got %d"):format(L.count, L.count + 1), T.cluster,
         { gpu = H100, gpus_per_node = L.count + 1 })
  raises(("cluster.nodes: at most %d expected, got %d"):format(L.count, L.count + 1), T.cluster,
         { gpu = H100, nodes = L.count + 1 })
  L.count = 1 -- a fresh copy each call: a script cannot change the engine's limits
  eq(ns.cluster_limits().count > 1, true, "a fresh copy")
end

-- A limit reads as the code writes it, "1e6" (%g alone: "1e+06"), as the C++ cluster file reader and the time limits
-- print theirs (engine/core/text.h text_limit). test_engine_: the standalone runner has only a copy of it, so it skips
-- this test; ctest runs it against the engine's.
function Tests.test_engine_limit_text_writes_limits_as_the_code_does()
  local ns = require "neusight"
  eq(ns.limit_text(1e6), "1e6", "a million")
  eq(ns.limit_text(1e-9), "1e-9", "a negative exponent")
  eq(ns.limit_text(2.5e-7), "2.5e-7", "a mantissa")
  eq(ns.limit_text(1e100), "1e100", "three exponent digits")
  eq(ns.limit_text(25), "25", "no exponent")
end

function Tests.test_user_algorithm_is_picked_when_cheaper()
  local c = test_cluster()
  local registry = C.algorithms.all_reduce
  -- The module is shared by every test file: always remove the user algorithm again.
  local ok, err = pcall(function()
    -- An ideal in-network reduction (NVLS-like): one step, each byte crosses the link once.
    registry.switch_reduce = function(n, p, link) return link.alpha + n * link.beta end
    local t, algo = C.time("all_reduce", 1e9, { size = 8 }, c)
    eq(algo, "switch_reduce", "cheaper user algorithm picked")
    near(t, RB + AI + 1e9 * BI, "user algorithm time")
    -- A dearer one is ignored; a not-applicable one (nil) is skipped.
    registry.switch_reduce = function(n, p, link) return 1e3 end
    eq(select(2, C.time("all_reduce", 1e9, { size = 8 }, c)), "ring", "dearer user algorithm ignored")
    registry.switch_reduce = function() return nil end
    eq(select(2, C.time("all_reduce", 1e9, { size = 8 }, c)), "ring", "inapplicable user algorithm skipped")
    registry.switch_reduce = function() return "fast" end
    -- the message leads with the function's file and line (an override's own, under --scripts: tester9 #10)
    local bad_ok, bad = pcall(C.time, "all_reduce", 1e9, { size = 8 }, c)
    assert(not bad_ok, "a string time is refused")
    assert(tostring(bad):find("test_collectives%.lua:%d+: collectives: algorithm 'switch_reduce' of all_reduce returned "
      .. "\"fast\", expected a non%-negative number or nil$"), "where the algorithm is defined: " .. tostring(bad))
    -- A whole new op registers the same way.
    C.algorithms.barrier = { dissemination = function(_, p, link) return C.ceil_log2(p) * link.alpha end }
    near(C.time("barrier", 1, { size = 8 }, c), 3 * AI, "user op")
  end)
  registry.switch_reduce = nil
  C.algorithms.barrier = nil
  if not ok then error(err, 0) end
end

return Tests
