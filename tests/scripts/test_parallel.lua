-- tests/scripts/test_parallel.lua — neusight/parallel.lua (the facade over neusight/parallel/*.lua): validation, rank layout, collective ops, schedules against textbook bubbles, DP buckets, TP sharding.
local P = require "neusight.parallel"
local C = require "neusight.collectives"
local Topo = require "neusight.topology"
local gpt = require "neusight.models.gpt"

local function eq(got, want, what)
  if got ~= want then error(("%s: expected %s, got %s"):format(what, tostring(want), tostring(got)), 2) end
end

local testing = require "neusight.testing"
local near, raises = testing.near, testing.raises

local H100 = { name = "H100-SXM5-80GB", interconnect = "nvlink4", interconnect_bw_gbps = 900.0, pcie_bw_gbps = 64.0 }

local function plan_of(p, batch, mode)
  return P.plan(P.normalize(p), H100, { batch = batch or 8, dtype = "fp32", mode = mode or "train" })
end

local T = {}

---------------------------------------------------------------------------------------------------
-- Validation and layout

function T.test_normalize_defaults()
  local p = P.normalize {}
  eq(p.dp, 1, "dp") eq(p.tp, 1, "tp") eq(p.pp, 1, "pp") eq(p.microbatches, 1, "microbatches")
  eq(p.schedule, "1f1b", "schedule") eq(p.virtual_stages, 1, "virtual_stages")
  eq(p.bucket_mb, 25, "bucket_mb (PyTorch DDP default)") eq(p.overlap_grad_reduce, true, "overlap")
  eq(P.active(p), false, "one GPU, one microbatch is not parallel")
  eq(P.active(P.normalize { microbatches = 2 }), true, "gradient accumulation is")
  eq(P.normalize({ schedule = "interleaved", pp = 2, microbatches = 4 }).virtual_stages, 2, "interleaved default chunks")
  -- kernels: Megatron's across GPUs; on one GPU the plain run's eager graph, so a one-GPU layout with microbatches or
  -- recomputation differs from the plain run by those alone (search --gpus 1 compares like with like)
  eq(P.normalize({ tp = 2 }).kernels, "megatron", "more than one GPU: Megatron kernels by default")
  eq(P.normalize({ dp = 2 }).kernels, "megatron", "data parallel: Megatron kernels by default")
  eq(P.normalize({ microbatches = 2 }).kernels, "eager", "one GPU with microbatches: the eager graph by default")
  eq(P.normalize({ recompute = "full" }).kernels, "eager", "one GPU with recomputation: the eager graph by default")
  eq(P.normalize({ microbatches = 2, kernels = "megatron" }).kernels, "megatron", "given kernels are kept")
end

function T.test_normalize_errors()
  raises("parallel: unknown field 'microbatch' (did you mean 'microbatches'?)", P.normalize, { microbatch = 2 })
  raises("parallel.dp: positive integer expected, got 0", P.normalize, { dp = 0 })
  raises("parallel.pp: positive integer expected, got 1.5", P.normalize, { pp = 1.5 })
  raises('parallel.schedule: one of "1f1b", "gpipe", "interleaved" expected, got "1F1B" (did you mean \'1f1b\'?)', P.normalize, { schedule = "1F1B" })
  raises('parallel.schedule: one of "1f1b", "gpipe", "interleaved" expected, got "gpip" (did you mean \'gpipe\'?)',
    P.normalize, { schedule = "gpip" })
  raises("parallel.schedule: the interleaved schedule needs pp >= 2", P.normalize, { schedule = "interleaved" })
  raises("parallel.microbatches: the interleaved schedule needs a multiple of pp = 4 (got 6), as Megatron-LM does",
    P.normalize, { schedule = "interleaved", pp = 4, microbatches = 6 })
  raises('parallel.virtual_stages: only the "interleaved" schedule runs several model chunks per device (schedule is "1f1b")',
    P.normalize, { pp = 2, virtual_stages = 2 })
  raises("parallel.overlap_grad_reduce: boolean expected, got 1", P.normalize, { overlap_grad_reduce = 1 })
  raises("parallel.bucket_mb: positive number expected, got -1", P.normalize, { bucket_mb = -1 })
  raises("parallel.ep: expert parallelism spreads the experts over data-parallel ranks: ep = 4 must divide dp = 2",
    P.normalize, { dp = 2, ep = 4 })
  raises('parallel.kernels: "megatron" or "eager" expected, got "fused"', P.normalize, { kernels = "fused" })
  -- a near miss of a choice says which it was near, as the schedule's does
  raises('parallel.recompute: "none", "selective" or "full" expected, got "selektive" (did you mean \'selective\'?)',
    P.normalize, { recompute = "selektive" })
  raises('parallel.kernels: "megatron" or "eager" expected, got "megatorn" (did you mean \'megatron\'?)',
    P.normalize, { kernels = "megatorn" })
end

function T.test_plan_batch_and_cluster_errors()
  raises("parallel: the global batch 6 is not divisible by dp × microbatches = 4 × 1", plan_of, { dp = 4 }, 6)
  raises("parallel: dp × tp × pp = 16 GPUs do not fit the cluster (1 node(s) × 8 GPUs)", plan_of,
    { dp = 16, cluster = { nodes = 1 } }, 16)
  raises("parallel.cluster: unknown key 'gpu_per_node' (did you mean 'gpus_per_node'?)", plan_of,
    { dp = 2, cluster = { gpu_per_node = 4 } }, 2)
  raises('parallel.cluster.gpus_per_node: positive integer expected, got "8"', plan_of,
    { dp = 2, cluster = { gpus_per_node = "8" } }, 2)
end

function T.test_bridge_smaller_than_the_node_prices_beyond_it_over_pcie()
  -- gpus/a100_pcie_80gb.toml: a 2-GPU NVLink bridge (nvlink_domain_gpus = 2), PCIe 4.0 beyond it (tester3 problem 3:
  -- tp 8 was priced at the bridge's 300 GB/s for all 8 GPUs, without a word).
  local A100P = { name = "A100-PCIe-80GB", source = "gpus/a100_pcie_80gb.toml", interconnect = "nvlink3",
                  interconnect_bw_gbps = 600.0, nvlink_domain_gpus = 2, pcie_bw_gbps = 32.0 }
  local function plan_on(p) return P.plan(P.normalize(p), A100P, { batch = 8, dtype = "bf16", mode = "train" }) end
  local plan = plan_on { tp = 8 }
  eq(plan.cluster.domain.gpus, 2, "the bridge's GPUs") eq(plan.cluster.domain.intra.bw_gbps, 32, "PCIe beyond it")
  eq(plan.groups.tp.spans_domains, true, "tp 8 reaches beyond the pair")
  eq(plan.warnings[1], "tp 8 on a100_pcie_80gb: its NVLink bridge joins 2 GPUs; collectives beyond a pair are priced "
    .. "over PCIe (32 GB/s per direction); give --cluster for your system", "the warning")
  -- the all-reduce of tp 8 runs at PCIe: 7/8 · 2 · n over 32 GB/s × 0.72, plus 14 steps of NCCL's PCI 1 µs and its
  -- 6.6 µs ring base
  near(C.time("all_reduce", 1e9, plan.groups.tp, plan.cluster, "ring"), 6.6e-6 + 14e-6 + 2 * 7 / 8 * 1e9 / (32e9 * 0.72),
    "tp 8 ring over PCIe")
  -- tp 2 stays on its bridge; dp 4 over ranks 0 2 4 6 crosses bridges
  plan = plan_on { tp = 2, dp = 4 }
  eq(plan.groups.tp.spans_domains, false, "tp 2 is one pair")
  eq(plan.groups.dp.spans_domains, true, "dp ranks 0 2 4 6 sit behind four bridges")
  near(C.time("all_reduce", 1e9, plan.groups.tp, plan.cluster, "ring"), 6.6e-6 + 2 * 0.6e-6 + 1e9 / (300e9 * 0.72),
    "tp 2 on NVLink: NCCL's NVLink LL step and ring base")
  eq(plan.warnings[1]:match("^dp 4 on a100_pcie_80gb: its NVLink bridge joins 2 GPUs"), "dp 4 on a100_pcie_80gb: its NVLink bridge joins 2 GPUs", "dp warning")
  -- a pair alone, or a cluster that names the node's link, is priced as given and warns of nothing
  eq(plan_on({ pp = 4, microbatches = 4 }).warnings[1], "pp 4 on a100_pcie_80gb: its NVLink bridge joins 2 GPUs; "
    .. "pipeline sends beyond a pair are priced over PCIe (32 GB/s per direction); give --cluster for your system",
    "stages 1 and 2 sit behind different bridges")
  -- every group beyond the bridge is named, not only the first (tp 4's collectives and dp 2's: ranks 0 and 4)
  local both = plan_on({ tp = 4, dp = 2 }).warnings
  eq(#both, 1, "one warning of the layout")
  eq(both[1], "tp 4 and dp 2 on a100_pcie_80gb: its NVLink bridge joins 2 GPUs; collectives beyond a pair are priced "
    .. "over PCIe (32 GB/s per direction); give --cluster for your system", "tp and dp named")
  -- many layouts' (search, serve --sweep): one line naming every group, where the first was; others kept in place
  local L = require "neusight.parallel.layout"
  local merged = L.bridge_warnings_merge { "other", plan_on({ tp = 8 }).warnings[1], both[1], "another",
    plan_on({ pp = 4, microbatches = 4 }).warnings[1] }
  eq(#merged, 3, "other, the bridge line, another")
  eq(merged[1], "other", "kept") eq(merged[3], "another", "kept")
  eq(merged[2], "the tp 4/8, dp 2 and pp 4 groups of some layouts on a100_pcie_80gb: its NVLink bridge joins 2 GPUs; "
    .. "collectives and pipeline sends beyond a pair are priced over PCIe (32 GB/s per direction); give --cluster for "
    .. "your system", "merged")
  eq(L.bridge_warnings_merge({ both[1], "x" })[1], both[1], "a single bridge warning stays as it is")
  eq(L.bridge_warnings_merge({ "tp 8 on a100_pcie_80gb: not made here" })[1], "tp 8 on a100_pcie_80gb: not made here",
    "a text this module did not make is kept")
  eq(#plan_on({ tp = 2 }).warnings, 0, "tp 2: no warning")
  eq(plan_on({ tp = 2 }).cluster.domain, nil, "2 GPUs: the bridge is the node")
  plan = plan_on { tp = 8, cluster = { intra = { bw_gbps = 25 } } }
  eq(plan.cluster.domain, nil, "a cluster's own intra level") eq(#plan.warnings, 0, "no warning with a cluster")
end

function T.test_plan_layout_is_megatron_order()
  -- 2 nodes × 8: tp = 4 fastest (inside a node), dp = 2 next (ranks 0, 4: same node), pp = 2 (ranks 0, 8: across nodes).
  local plan = plan_of({ tp = 4, dp = 2, pp = 2, microbatches = 2 }, 8)
  eq(plan.world, 16, "world") eq(plan.micro_batch, 2, "micro batch = 8 / (2 · 2)")
  eq(plan.cluster.gpus_per_node, 8, "8 per node (default)") eq(plan.cluster.nodes, 2, "nodes from the world size")
  eq(plan.groups.tp.spans_nodes, false, "tp inside a node") eq(plan.groups.tp.per_node, 4, "tp per node")
  eq(plan.groups.dp.spans_nodes, false, "dp inside a node") eq(plan.groups.dp.per_node, 2, "dp per node")
  eq(plan.pp_links[1].spans_nodes, true, "stage 0 → 1 crosses nodes")
  -- dp = 4 with tp = 4 on nodes of 8: ranks 0, 4, 8, 12 → two per node, spanning.
  local g = P.group_shape(4, 4, 0, 8)
  eq(g.spans_nodes, true, "dp spans") eq(g.per_node, 2, "two dp ranks per node")
  eq(g.min_per_node, 2, "two dp ranks on each node")
  g = P.group_shape(12, 1, 0, 8) -- 8 + 4
  eq(g.per_node, 8, "dp 12: 8 on the first node") eq(g.min_per_node, 4, "dp 12: 4 on the second")
  g = P.group_shape(8, 3, 0, 8) -- ranks 0 3 6 | 9 12 15 | 18 21
  eq(g.per_node, 3, "stride 3: 3 per node") eq(g.min_per_node, 2, "stride 3: 2 on the last node")
  -- a small default cluster is one node of exactly the world size
  local small = plan_of({ dp = 2, tp = 2 }, 4)
  eq(small.cluster.gpus_per_node, 4, "4 GPUs in one node") eq(small.cluster.nodes, 1, "one node")
end

-- A tp group across nodes (tp 16 on nodes of 8) was priced over the inter-node network without a word; Megatron-LM
-- keeps tp within a node, so the plan warns, naming tp, the node size and both links' bandwidths. Many layouts'
-- warnings (search, serve --sweep) merge into one line (bridge_warnings_merge).
function T.test_plan_warns_of_tp_across_nodes()
  local L = require "neusight.parallel.layout"
  local function tp_warnings(plan)
    local out = {}
    for _, w in ipairs(plan.warnings) do if w:find("spans? nodes") then out[#out + 1] = w end end
    return out
  end
  local plan = plan_of({ tp = 16, dp = 2, pp = 2 }, 64)
  local w = tp_warnings(plan)
  eq(#w, 1, "tp 16 on nodes of 8 warns")
  local intra, inter = plan.cluster.intra.bw_gbps, plan.cluster.inter.bw_gbps
  eq(w[1], ("parallel: tp 16 spans nodes of 8 GPUs: its tensor-parallel collectives (every layer's) are priced over "
    .. "the inter-node network (%.4g GB/s per direction), not the intra-node links (%.4g GB/s); Megatron-LM keeps tp "
    .. "within a node: keep tp a divisor of 8, its GPUs per node (--tp; search's --max-tp), or give a --cluster of larger "
    .. "nodes"):format(inter, intra), "the warning")
  eq(#tp_warnings(plan_of({ tp = 8, dp = 4, pp = 2 }, 64)), 0, "tp 8 within a node: no warning")
  local w32 = tp_warnings(plan_of({ tp = 32, dp = 2 }, 64))[1]
  local merged = L.bridge_warnings_merge { w[1], "other", w32, w[1] }
  eq(#merged, 2, "one tp line and the other") eq(merged[2], "other", "kept")
  eq(merged[1]:match("^parallel: the tp 16/32 groups of some layouts span nodes of 8 GPUs: their "),
    "parallel: the tp 16/32 groups of some layouts span nodes of 8 GPUs: their ", "merged")
  eq(L.bridge_warnings_merge({ w[1] })[1], w[1], "one layout's stays as it is")
end

-- Nodes of a size the tp groups do not divide (6 GPUs, as Summit's): tp 4 keeps ranks 0-3 on node 0 but puts ranks
-- 4-7 across nodes 0 and 1. The plan took the first group's shape alone: every tp collective priced over the
-- intra-node links, no warning. The step waits for the slowest group: it is priced, and the warning says so.
function T.test_plan_prices_the_slowest_group()
  local function plan6(p)
    p.cluster = { gpus_per_node = 6 }
    return P.plan(P.normalize(p), H100, { batch = 12, dtype = "fp32", mode = "train" })
  end
  local plan = plan6 { tp = 4, dp = 3 }
  eq(plan.cluster.gpus_per_node, 6, "nodes of 6") eq(plan.cluster.nodes, 2, "two nodes")
  eq(plan.groups.tp.spans_nodes, true, "tp group 4-7 spans nodes 0 and 1")
  eq(plan.groups.tp.per_node, 2, "2 of its ranks on each node") eq(plan.groups.tp.min_per_node, 2, "and at least 2")
  local said = false
  for _, w in ipairs(plan.warnings) do
    if w:find("^parallel: tp 4 spans nodes of 6 GPUs: ") and w:find("keep tp a divisor of 6", 1, true) then said = true end
  end
  eq(said, true, "the tp warning names the node size")
  -- a tp that divides the node: every group within one, no warning
  plan = plan6 { tp = 3, dp = 4 }
  eq(plan.groups.tp.spans_nodes, false, "tp 3 on nodes of 6: within") eq(#plan.warnings, 0, "no warning")
  -- dp groups of a later stage: tp 2 × dp 2 × pp 3 on nodes of 6: stage 1's dp group (ranks 4, 6) spans nodes 0 and 1
  plan = plan6 { tp = 2, dp = 2, pp = 3, microbatches = 3 }
  eq(plan.groups.dp.spans_nodes, true, "stage 1's dp group spans nodes")
end

---------------------------------------------------------------------------------------------------
-- Collective nodes and op rules

function T.test_comm_node_is_alpha_beta_ring()
  local plan = plan_of({ tp = 4 }, 4)
  local n = P.comm_node(plan, { op = "all_reduce", name = "x", shape = { 4, 1024, 1280 }, group = "tp", direction = "both" })
  -- H100: α = 0.6 µs (NCCL's NVLink LL step), β = 1 / (450 GB/s · 0.72), NCCL's 6.6 µs ring base; 4 ranks, 20 MiB:
  -- the ring beats the tree at this size.
  local bytes, p, a, b = 4 * 1024 * 1280 * 4, 4, 0.6e-6, 1 / (450e9 * 0.72)
  near(n.attrs.seconds, 6.6e-6 + 2 * (p - 1) * a + 2 * (p - 1) / p * bytes * b, "ring all-reduce closed form")
  eq(n.attrs.algorithm, "ring", "algorithm") eq(n.attrs.ranks, 4, "ranks") eq(n.params, 0, "no parameters")
  raises("comm_node: unknown group \"pp\" (known: tp, dp, ep, edp)", P.comm_node, plan,
    { op = "all_reduce", name = "x", shape = { 1 }, group = "pp", direction = "both" })
end

function T.test_collective_op_rules_follow_direction()
  local rules = {
    all_reduce = load_op("all_reduce"), all_gather = load_op("all_gather"), reduce_scatter = load_op("reduce_scatter"),
    send_recv = load_op("send_recv"), all_to_all = load_op("all_to_all"),
  }
  for _, op in ipairs { "all_reduce", "all_gather", "reduce_scatter", "send_recv", "all_to_all" } do
    local rule = rules[op]
    eq(rule.name, op, "rule name")
    local fw = make_node { op = op, name = "c", output = { 2, 3 }, attrs = { seconds = 1.5e-3, direction = "forward" } }
    local k = rule.forward(fw, H100)
    eq(#k, 1, op .. " forward kernel") eq(k[1].kind, "collective", "kind") eq(k[1].seconds, 1.5e-3, "fixed seconds")
    eq(k[1].bytes, 24, "bytes = numel · 4") eq(k[1].flops, 0, "no FLOPs")
    eq(#rule.backward(fw, H100), 0, op .. ": forward-only node has no backward kernel")
    local bw = make_node { op = op, name = "c", output = { 2, 3 }, attrs = { seconds = 2e-3, direction = "backward" } }
    eq(#rule.forward(bw, H100), 0, op .. ": backward-only node has no forward kernel")
    eq(rule.backward(bw, H100)[1].seconds, 2e-3, op .. " backward seconds")
    local both = make_node { op = op, name = "c", output = { 2 }, attrs = { seconds = 1e-3, direction = "both" } }
    eq(#rule.forward(both, H100) + #rule.backward(both, H100), 2, op .. ": both passes")
  end
  eq(load_op("all_reduce").forward(make_node { op = "all_reduce", name = "c", output = { 1 },
    attrs = { seconds = 1, direction = "both" } }, H100)[1].name, "ALLREDUCE", "reference kernel name")
  raises("node 'c': a all_reduce node needs attrs.seconds; build it with require('neusight.parallel').comm_node",
    load_op("all_reduce").forward, make_node { op = "all_reduce", name = "c", output = { 1 } }, H100)
end

---------------------------------------------------------------------------------------------------
-- Schedules

local function balanced(V, F, B)
  local s = {}
  for k = 1, V do s[k] = { fw = F, bw = B } end
  return s
end

-- Textbook (Huang et al. 2019; Narayanan et al. 2021): with P balanced stages of forward F and
-- backward B per microbatch and free transfers, GPipe and 1F1B take (M + P − 1)(F + B), i.e. each
-- device idles (P − 1)(F + B); interleaving v chunks cuts the bubble to (P − 1)(F + B)/v.
function T.test_balanced_bubbles_match_textbook()
  for _, sched in ipairs { "gpipe", "1f1b" } do
    for _, c in ipairs { { 4, 1 }, { 4, 8 }, { 2, 3 }, { 8, 16 }, { 1, 4 } } do
      local Pn, Mb = c[1], c[2]
      local F, B = 1.25, 2.5
      local devices, makespan = P.simulate(balanced(Pn, F, B), Pn, Mb, 1, sched, true)
      near(makespan, (Mb + Pn - 1) * (F + B), ("%s P=%d M=%d makespan"):format(sched, Pn, Mb))
      for d = 1, Pn do
        local busy = 0
        for _, op in ipairs(devices[d].ops) do busy = busy + op.finish - op.start end
        near(makespan - busy, (Pn - 1) * (F + B), ("%s P=%d M=%d device %d bubble"):format(sched, Pn, Mb, d - 1))
      end
    end
  end
  for _, c in ipairs { { 4, 8, 2 }, { 4, 4, 4 }, { 2, 6, 3 }, { 8, 16, 2 } } do
    local Pn, Mb, v = c[1], c[2], c[3]
    local F, B = 1.0, 2.0 -- per device and microbatch, all v chunks together
    local _, makespan = P.simulate(balanced(Pn * v, F / v, B / v), Pn, Mb, v, "interleaved", true)
    near(makespan, Mb * (F + B) + (Pn - 1) * (F + B) / v, ("interleaved P=%d M=%d v=%d"):format(Pn, Mb, v), 1e-9)
  end
end

function T.test_one_f_one_b_order()
  local orders = P.schedules["1f1b"](4, 6, 1, true)
  local function text(o)
    local parts = {}
    for i, op in ipairs(o) do parts[i] = (op.fw and "F" or "B") .. op.mb end
    return table.concat(parts, " ")
  end
  eq(text(orders[1]), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5", "first stage: 3 warm-up forwards")
  eq(text(orders[4]), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5", "last stage: strict alternation")
  eq(text(P.schedules.gpipe(2, 3, 1, true)[2]), "F0 F1 F2 B0 B1 B2", "gpipe")
  eq(text(P.schedules["1f1b"](3, 2, 1, false)[1]), "F0 F1", "inference runs forwards only")
end

-- Imbalanced stages worked by hand: stage 0 F = B = 1, stage 1 F = B = 2, three microbatches.
-- GPipe: stage 1 forwards 1–7, backwards 7–13; stage 0's last backward waits for 13 → 14.
-- 1F1B ends at 14 too (the slow stage is the bottleneck in both).
function T.test_imbalanced_stages_by_hand()
  local stages = { { fw = 1, bw = 1 }, { fw = 2, bw = 2 } }
  for _, sched in ipairs { "gpipe", "1f1b" } do
    local devices, makespan = P.simulate(stages, 2, 3, 1, sched, true)
    eq(makespan, 14, sched .. " makespan")
    eq(devices[2].ops[1].start, 1, sched .. ": stage 1 starts when stage 0's first forward is done")
  end
  -- a single microbatch is the serial sum: 1 + 2 + 2 + 1
  local _, one = P.simulate(stages, 2, 1, 1, "1f1b", true)
  eq(one, 6, "M = 1 is serial")
end

-- The schedules and the simulation as they were before the simulation was compiled per shape (issue 14), verbatim:
-- the reference the compiled program must match bit for bit.
local reference = {}
reference.gpipe = function(P_, Mb, _, training)
  local orders = {}
  for d = 1, P_ do
    local o = {}
    for m = 0, Mb - 1 do o[#o + 1] = { fw = true, chunk = 0, mb = m } end
    if training then
      for m = 0, Mb - 1 do o[#o + 1] = { fw = false, chunk = 0, mb = m } end
    end
    orders[d] = o
  end
  return orders
end
reference["1f1b"] = function(P_, Mb, _, training)
  if not training then return reference.gpipe(P_, Mb, 1, false) end
  local orders = {}
  for d = 0, P_ - 1 do
    local o = {}
    local warm = math.min(P_ - d - 1, Mb)
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
reference.interleaved = function(P_, Mb, v, training)
  local total = Mb * v
  local function mb_of(k) return (k // (P_ * v)) * P_ + k % P_ end
  local function fw(k) return { fw = true, chunk = (k // P_) % v, mb = mb_of(k) } end
  local function bw(k) return { fw = false, chunk = v - 1 - (k // P_) % v, mb = mb_of(k) } end
  local orders = {}
  for d = 0, P_ - 1 do
    local o = {}
    if not training then
      for k = 0, total - 1 do o[#o + 1] = fw(k) end
    else
      local warm = math.min((P_ - d - 1) * 2 + (v - 1) * P_, total)
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
local function reference_simulate(stages, P_, Mb, v, orders)
  local max = math.max
  local V = P_ * v
  local done_fw, done_bw = {}, {}
  for vs = 0, V - 1 do done_fw[vs], done_bw[vs] = {}, {} end
  local starts, finishes, finish, ptr, left = {}, {}, {}, {}, 0
  for d = 1, P_ do
    starts[d], finishes[d], finish[d], ptr[d] = {}, {}, 0, 1
    left = left + #orders[d]
  end
  local progress = true
  while left > 0 and progress do
    progress = false
    for d = 1, P_ do
      local o, st_d, fi_d = orders[d], starts[d], finishes[d]
      local i, n = ptr[d], #o
      while i <= n do
        local op = o[i]
        local vs = op.chunk * P_ + (d - 1)
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
  assert(left == 0, "reference deadlock")
  local makespan = 0
  for d = 1, P_ do makespan = max(makespan, finish[d]) end
  return starts, finishes, finish, makespan
end

-- The same number and the same Lua subtype (an integer 0 stays one): string.format("%q") tells them apart.
local function same(a, b) return ("%q"):format(a) == ("%q"):format(b) end

-- The built-in schedules give the op lists they gave before; the compiled simulation (the timeline's
-- simulate_times and M.simulate) gives every start and finish, each device's finish, the makespan and each stage's
-- last backward start of the turn-by-turn simulation, bit for bit, over many shapes and random stage times (ties,
-- zeros and integer times included).
function T.test_compiled_simulation_matches_the_turn_by_turn_one()
  local S = require "neusight.parallel.schedule"
  local seed = 12345
  local function rand() -- a fixed LCG: the same cases on every run
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed / 2147483648
  end
  local function duration()
    local r = rand()
    if r < 0.1 then return 0 end          -- an integer 0 (an empty stage)
    if r < 0.15 then return 0.0 end       -- a float one: max(0, 0.0) keeps its first argument's subtype
    if r < 0.3 then return 1.5 end        -- ties between stages
    if r < 0.4 then return 2 end          -- an integer
    return rand() * 3 + 1e-3 * rand()
  end
  local cases = 0
  for _, sched in ipairs { "gpipe", "1f1b", "interleaved" } do
    for Pn = 1, 6 do
      for _, Mb in ipairs { 1, 2, 3, 4, 5, 8, 12 } do
        for _, v in ipairs(sched == "interleaved" and { 1, 2, 3, 4 } or { 1 }) do
          for _, training in ipairs { true, false } do
            local ok_shape = sched ~= "interleaved" or Mb % Pn == 0 or Pn == 1
            if ok_shape then
              local orders = P.schedules[sched](Pn, Mb, v, training)
              local want = reference[sched](Pn, Mb, v, training)
              for d = 1, Pn do
                eq(#orders[d], #want[d], ("%s P=%d M=%d v=%d ops of device %d"):format(sched, Pn, Mb, v, d))
                for i, op in ipairs(want[d]) do
                  local got = orders[d][i]
                  eq(got.fw == op.fw and got.chunk == op.chunk and got.mb == op.mb, true,
                    ("%s P=%d M=%d v=%d device %d op %d"):format(sched, Pn, Mb, v, d, i))
                end
              end
              for rep = 1, 4 do
                -- every other set of stages all floats (the simulation's plain walk), the others mixed
                local function seconds()
                  local x = duration()
                  return rep % 2 == 0 and x + 0.0 or x
                end
                local stages = {}
                for k = 1, Pn * v do stages[k] = { fw = seconds(), bw = training and seconds() or 0 } end
                local what = ("%s P=%d M=%d v=%d training=%s"):format(sched, Pn, Mb, v, tostring(training))
                local okr, starts, finishes, finish, makespan = pcall(reference_simulate, stages, Pn, Mb, v, want)
                if okr then
                  cases = cases + 1
                  local devices, got_makespan = P.simulate(stages, Pn, Mb, v, sched, training)
                  local shape, got_finish, got_makespan2, last_bw = S.simulate_times(stages, Pn, Mb, v, sched,
                    training, 1)
                  eq(same(got_makespan, makespan) and same(got_makespan2, makespan), true, what .. " makespan")
                  local want_last = {}
                  for d = 1, Pn do
                    -- device d's codes, from the program along its prev links (the shape keeps them packed only)
                    local codes, k = {}, shape.last[d]
                    for i = shape.n[d], 1, -1 do codes[i], k = (shape.program[k] & 0xFFFF) - 0x8000, shape.program[k] >> 40 end
                    eq(same(devices[d].finish, finish[d]) and same(got_finish[d], finish[d]), true,
                      what .. " finish of device " .. d)
                    eq(shape.n[d], #want[d], what .. " ops of device " .. d)
                    for i, op in ipairs(want[d]) do
                      local g = devices[d].ops[i]
                      eq(same(g.start, starts[d][i]) and same(g.finish, finishes[d][i]), true,
                        ("%s device %d op %d times"):format(what, d, i))
                      eq(g.vs, op.chunk * Pn + (d - 1), what .. " vs")
                      local vs = op.chunk * Pn + (d - 1)
                      eq(codes[i], op.fw and vs + 1 or -(vs + 1), what .. " code")
                      if not op.fw then
                        local l = want_last[vs + 1]
                        if not l or starts[d][i] > l then want_last[vs + 1] = starts[d][i] end
                      end
                    end
                  end
                  for k = 1, Pn * v do
                    eq(want_last[k] == nil and last_bw[k] == nil or same(last_bw[k], want_last[k]), true,
                      what .. " last backward start of stage " .. k)
                  end
                end
              end
            end
          end
        end
      end
    end
  end
  eq(cases > 1000, true, "cases simulated (" .. cases .. ")")
  -- a registered schedule goes through its op tables; a deadlock is still one
  P.schedules.test_stuck = function() -- device 0 wants its backward before its forward
    return { { { fw = false, chunk = 0, mb = 0 }, { fw = true, chunk = 0, mb = 0 } },
             { { fw = true, chunk = 0, mb = 0 }, { fw = false, chunk = 0, mb = 0 } } }
  end
  local ok, err = pcall(P.simulate, { { fw = 1, bw = 1 }, { fw = 1, bw = 1 } }, 2, 1, 1, "test_stuck", true)
  P.schedules.test_stuck = nil -- the registry is shared by every test file
  eq(ok, false, "a stuck schedule fails")
  eq(tostring(err):find("schedule test_stuck deadlocks with 2 device(s), 1 microbatch(es), 1 chunk(s)", 1, true) ~= nil,
    true, "deadlock message: " .. tostring(err))
  -- a registered schedule's microbatches are labels the turns only compare: numbered from 1 (or named), it runs as
  -- GPipe numbered from 0 does; a chunk outside 0 to v - 1 is refused naming the schedule, device and op (it was an
  -- index error inside the turns, or for a device's last stage none at all)
  local st = { { fw = 1.5, bw = 2.5 }, { fw = 1.25, bw = 3.5 } }
  for _, label in ipairs { function(m) return m + 1 end, function(m) return "mb" .. m end } do
    P.schedules.test_labels = function(p, mb, v, training)
      local orders = P.schedules.gpipe(p, mb, v, training)
      for _, ops in ipairs(orders) do
        for _, op in ipairs(ops) do op.mb = label(op.mb) end
      end
      return orders
    end
    local got, got_makespan = P.simulate(st, 2, 3, 1, "test_labels", true)
    local want, want_makespan = P.simulate(st, 2, 3, 1, "gpipe", true)
    P.schedules.test_labels = nil
    eq(got_makespan, want_makespan, "microbatch labels: makespan")
    for d = 1, 2 do
      eq(got[d].finish, want[d].finish, "microbatch labels: device " .. d)
      for i, op in ipairs(want[d].ops) do
        eq(got[d].ops[i].mb, label(op.mb), "microbatch labels: the schedule's own label")
        eq(got[d].ops[i].finish, op.finish, "microbatch labels: op finish")
      end
    end
  end
  P.schedules.test_chunk = function()
    return { { { fw = true, chunk = 0, mb = 0 }, { fw = false, chunk = 0, mb = 0 } },
             { { fw = true, chunk = 1, mb = 0 }, { fw = false, chunk = 1, mb = 0 } } }
  end
  ok, err = pcall(P.simulate, st, 2, 1, 1, "test_chunk", true)
  P.schedules.test_chunk = nil
  eq(ok, false, "a chunk beyond v fails")
  eq(tostring(err):find("schedule test_chunk: device 1, op 1: chunk 1 is not one of 0 to 0 (v = 1)", 1, true) ~= nil,
    true, "chunk message: " .. tostring(err))
end

---------------------------------------------------------------------------------------------------
-- Timeline: partition, data-parallel buckets

-- A synthetic model: one prologue node, L layer nodes of one group, one epilogue node, with the
-- given per-instance forward/backward times and parameter counts.
local function synthetic(L, opts)
  opts = opts or {}
  local nodes = {
    { op = "x", name = "pro", layer = "", count = 1, params = opts.pro_params or 0, output = { 0 } },
    { op = "x", name = "h.a", layer = "h", count = L, params = opts.layer_params or 0, output = { 0 } },
    { op = "x", name = "epi", layer = "", count = 1, params = 0, output = { 0 } },
  }
  local times = {
    { fw = opts.pro_fw or 0, fw_comm = 0, bw = opts.pro_bw or 0, bw_comm = 0, opt = 0 },
    { fw = opts.fw or 1, fw_comm = 0, bw = opts.bw or 2, bw_comm = 0, opt = 0 },
    { fw = opts.epi_fw or 0, fw_comm = 0, bw = opts.epi_bw or 0, bw_comm = 0, opt = 0 },
  }
  return nodes, times
end

function T.test_timeline_balanced_pipeline_bubble()
  -- 8 layers of F = 1, B = 2 over 4 stages: 2 layers each; 8 microbatches; transfers are empty (0 bytes).
  local plan = plan_of({ pp = 4, microbatches = 8 }, 8)
  local nodes, times = synthetic(8)
  local tl = P.timeline(plan, nodes, times)
  local F, B, Mb, Pn = 2, 4, 8, 4
  near(tl.iteration, (Mb + Pn - 1) * (F + B), "iteration")
  for d, dev in ipairs(tl.devices) do
    eq(dev.layers, 2, "layers of stage " .. (d - 1))
    near(dev.compute, Mb * (F + B), "compute of stage " .. (d - 1))
    near(dev.bubble, (Pn - 1) * (F + B), "bubble of stage " .. (d - 1))
    eq(dev.exposed_comm, 0, "no communication")
  end
end

function T.test_timeline_partition_uneven_layers_and_ends()
  -- 10 layers over 4 stages: 3, 3, 2, 2; the prologue joins stage 0, the epilogue stage 3.
  local plan = plan_of({ pp = 4 }, 4)
  local nodes, times = synthetic(10, { pro_fw = 5, epi_fw = 7 })
  local tl = P.timeline(plan, nodes, times)
  local want = { 3, 3, 2, 2 }
  for d, dev in ipairs(tl.devices) do eq(dev.layers, want[d], "layers of stage " .. (d - 1)) end
  near(tl.devices[1].microbatch_fw, 5 + 3, "stage 0 forward = prologue + 3 layers")
  near(tl.devices[4].microbatch_fw, 2 + 7, "stage 3 forward = 2 layers + epilogue")
  raises("parallel: 4 pipeline stage(s) (pp × virtual_stages) but the model has only 3 layer(s)",
    P.timeline, plan, synthetic(3))
end

function T.test_timeline_data_parallel_buckets()
  -- One stage, dp = 2. Each layer holds exactly one 25 MB bucket of fp32 gradients and takes 1 s of
  -- backward: buckets are ready at 1, 2, 3, 4 s and each all-reduce is far shorter than 1 s, so only
  -- the last (ready when compute ends) is exposed. Without overlap all four are.
  local params = 25e6 / 4
  local nodes, times = synthetic(4, { layer_params = params, fw = 0.5, bw = 1 })
  local plan = plan_of({ dp = 2 }, 2)
  local one = C.time("all_reduce", 25e6, plan.groups.dp, plan.cluster)
  local tl = P.timeline(plan, nodes, times)
  local dev = tl.devices[1]
  eq(dev.buckets, 4, "four buckets")
  near(dev.dp_comm, 4 * one, "all buckets reduced")
  near(dev.dp_exposed, one, "only the last bucket is exposed", 1e-9)
  near(tl.iteration, 4 * 0.5 + 4 * 1 + one, "iteration")
  local serial = P.timeline(plan_of({ dp = 2, overlap_grad_reduce = false }, 2), nodes, times)
  near(serial.devices[1].dp_exposed, 4 * one, "no overlap: all exposed", 1e-9)
  -- a bucket that is still in flight delays the next one (they share the link)
  local slow = plan_of({ dp = 2, cluster = { intra = { bw_gbps = 0.01 } } }, 2)
  local t_slow = C.time("all_reduce", 25e6, slow.groups.dp, slow.cluster)
  local tl_slow = P.timeline(slow, nodes, times)
  near(tl_slow.devices[1].dp_exposed, 1 + 4 * t_slow - 4, "serialized on the link: ready at 1 s, then back to back", 1e-9)
end

-- The report of a timeline (neusight.parallel.report): the JSON object in its fixed key order, the critical device's
-- parts, each device's memory parts from neusight.memory, the state per GPU with the optimizer's part over dp, the table.
function T.test_report_of_a_timeline()
  local plan = plan_of({ pp = 4, dp = 2, microbatches = 8, distributed_optimizer = true }, 16)
  local nodes, times = synthetic(8, { layer_params = 1000, pro_params = 500, epi_fw = 3 })
  -- the state per parameter the memory report counts (its per-stage state_gb, whose largest is the report's state_gb)
  plan.memory = require("neusight.memory").context { nodes = nodes, training = true, mode = "train",
    state = { weights = 2, gradients = 4, master = 4, optimizer_state = 8, convention = "pure" } }
  local tl = P.timeline(plan, nodes, times)
  local r = P.report(plan, tl)
  eq(r.iteration, tl.iteration, "iteration")
  local j = r.json
  local order = getmetatable(j).__order
  eq(order[1], "dp", "first key") eq(order[#order], "devices", "last key")
  eq(math.type(j.dp), "integer", "dp is an integer") eq(math.type(j.bucket_mb), "float", "bucket_mb is a number")
  eq(j.dp, 2, "dp") eq(j.pp, 4, "pp") eq(j.distributed_optimizer, true, "distributed optimizer")
  near(j.iteration_ms, tl.iteration * 1e3, "iteration_ms")
  -- the critical device: the busiest (compute + exposed comm + optimizer step; ties: the first), not the last to
  -- finish (stage 0 in 1F1B; tester7 P2)
  local function busy(dev) return dev.compute + dev.exposed_comm + dev.optimizer end
  local crit, least = 1, math.huge
  for d, dev in ipairs(tl.devices) do
    if busy(dev) > busy(tl.devices[crit]) then crit = d end
    least = math.min(least, busy(dev))
  end
  eq(j.critical_stage, crit - 1, "critical stage")
  eq(j.compute_ms, tl.devices[crit].compute * 1e3, "the critical device's compute")
  eq(j.bubble_ms, tl.devices[crit].bubble * 1e3, "the critical device's bubble")
  near(j.compute_ms + j.exposed_comm_ms + j.optimizer_ms + j.bubble_ms, j.iteration_ms, "its parts sum to the iteration")
  near(j.imbalance_ms, (busy(tl.devices[crit]) - least) * 1e3, "imbalance: its busy time less the least busy's")
  eq(j.memory_gb, tl.memory.memory_gb, "memory of the fullest GPU") eq(j.fits, tl.memory.fits, "fits")
  eq(#j.devices, 4, "one row per stage")
  local most = 0
  for d, dev in ipairs(tl.devices) do
    local row = j.devices[d]
    eq(row.stage, d - 1, "stage") eq(row.finish_ms, dev.finish * 1e3, "finish of stage " .. (d - 1))
    eq(row.memory_gb, tl.memory.stages[d].memory_gb, "memory of stage " .. (d - 1))
    eq(row.workspace_gb, tl.memory.stages[d].workspace_gb, "workspace of stage " .. (d - 1))
    most = math.max(most, dev.params * (2 + 4) + dev.params * (4 + 8) / 2) -- master + moments over dp = 2
  end
  near(r.state_gb, most / 1e9, "state per GPU: master copies and moments sharded over dp", 1e-12)
  eq(r.figures.dp, 2, "figures: dp") eq(r.figures.microbatches, 8, "figures: microbatches")
  eq(r.figures.distributed_optimizer, true, "figures: distributed optimizer")
  local lines = {}
  for line in r.table:gmatch("[^\n]+") do lines[#lines + 1] = line end
  eq(lines[1]:sub(1, 36), "parallel  dp 2 x tp 1 x pp 4 = 8 GPU", "layout line")
  eq(#lines, 2 + 1 + 4 + #tl.memory.lines + 5,
    "layout, links, header, 4 stages, memory, state per parameter and per GPU, gradients, busiest device, iteration")
  local busiest = ("busiest   stage %d: compute "):format(crit - 1)
  eq(lines[#lines - 1]:sub(1, #busiest), busiest, "the busiest device's line")
  local per_gpu
  for _, line in ipairs(lines) do per_gpu = per_gpu or line:match("^state     per GPU: .*") end
  local want = ("state     per GPU: at most %.3f GB (stage"):format(r.state_gb)
  eq(per_gpu and per_gpu:sub(1, #want), want,
    "the largest state of a GPU, the report's state_gb")
  eq(lines[#lines], ("iteration        %12.3f ms   (slowest device; every dp x tp rank of a stage alike)"):format(
    tl.iteration * 1e3), "iteration line")
  tl.memory = nil
  raises("parallel report: the timeline has no memory report (result.memory)", P.report, plan, tl)
end

-- Every op's start and end (neusight.parallel.timeline ops, the JSON's parallel.timeline): per device 2 × microbatches
-- × chunks ops in training (forwards alone in inference), in the order it runs them, each as long as its stage's op
-- takes, the device's exposed tail after its last op; the last end of all is the iteration, each device's last its
-- finish, and the gaps the device's bubble. A lean (search's) timeline keeps none.
function T.test_timeline_ops_every_op_and_the_tail()
  local TLm = require "neusight.parallel.timeline"
  local nodes, times = synthetic(8, { layer_params = 4e6, pro_params = 1e6, fw = 1, bw = 2 })
  nodes[#nodes + 1] = { op = "adam", name = "optimizer.adam", layer = "", count = 1, params = 0, output = { 0 },
    attrs = {}, phase = "optimizer" }
  times[#times + 1] = { fw = 0, fw_comm = 0, bw = 0, bw_comm = 0, opt = 3 }
  for _, c in ipairs {
    { p = { pp = 4, dp = 2, microbatches = 8, distributed_optimizer = true, overlap_grad_reduce = false }, v = 1 },
    { p = { pp = 2, dp = 2, microbatches = 4, schedule = "interleaved", virtual_stages = 2 }, v = 2 },
    { p = { pp = 4, microbatches = 4, schedule = "gpipe" }, v = 1 },
    { p = { pp = 4, microbatches = 4 }, v = 1, mode = "inference" },
  } do
    local plan = plan_of(c.p, 16, c.mode)
    local what = ("pp %d %s%s"):format(c.p.pp, plan.schedule, c.mode and " inference" or "")
    local training = c.mode == nil
    -- (inference runs no optimizer step: its graph has none)
    local tl = training and P.timeline(plan, nodes, times)
      or P.timeline(plan, { table.unpack(nodes, 1, 3) }, { table.unpack(times, 1, 3) })
    local ops = TLm.ops(tl)
    -- each virtual stage's op seconds as the timeline simulated them (one chunk: its device's microbatch_fw / _bw)
    local per, st = tl.ops_of.per, {}
    for k = 1, #per // 6 do st[k] = { fw = per[6 * k - 5], bw = per[6 * k - 4] } end
    eq(#st, plan.pp * c.v, what .. ": one entry per virtual stage")
    for d, dev in ipairs(c.v == 1 and tl.devices or {}) do
      eq(st[d].fw, dev.microbatch_fw, what .. ": forward seconds of stage " .. d)
      eq(st[d].bw, dev.microbatch_bw, what .. ": backward seconds of stage " .. d)
    end
    local sim = P.simulate(st, plan.pp, plan.microbatches, c.v, plan.schedule, training)
    local last_end, by = 0, {}
    for _, op in ipairs(ops) do
      local d = op.device + 1
      by[d] = by[d] or { ops = 0, fw = 0, busy = 0, last = 0, tail = {}, chunks = {} }
      local b = by[d]
      eq(op.start >= b.last - 1e-12, true, what .. ": a device's ops in time order")
      eq(op.finish >= op.start, true, what .. ": an op ends after it starts")
      if op.kind == "forward" or op.kind == "backward" then
        eq(#b.tail, 0, what .. ": the tail after the ops")
        b.ops = b.ops + 1
        if op.kind == "forward" then b.fw = b.fw + 1 end
        b.chunks[op.chunk] = true
        local s = sim[d].ops[b.ops]
        eq(op.start, s.start, what .. ": start as simulated") eq(op.finish, s.finish, what .. ": finish as simulated")
        eq(op.mb, s.mb, what .. ": microbatch") eq(op.chunk, s.chunk, what .. ": chunk")
        eq(op.kind == "forward", s.fw, what .. ": forward or backward")
        local k = s.vs + 1
        near(op.finish - op.start, s.fw and st[k].fw or st[k].bw, what .. ": as long as its stage's op", 1e-9)
      else
        b.tail[#b.tail + 1] = op.kind
      end
      b.busy = b.busy + (op.finish - op.start)
      b.last = op.finish
      last_end = math.max(last_end, op.finish)
    end
    eq(last_end, tl.iteration, what .. ": the last end is the iteration")
    for d, dev in ipairs(tl.devices) do
      local b = by[d]
      eq(b.ops, (training and 2 or 1) * plan.microbatches * c.v, what .. ": ops of stage " .. (d - 1))
      eq(b.fw, plan.microbatches * c.v, what .. ": forwards of stage " .. (d - 1))
      for ch = 0, c.v - 1 do eq(b.chunks[ch], true, what .. ": chunk " .. ch) end
      eq(b.last, dev.finish, what .. ": the device's last end is its finish")
      near(tl.iteration - b.busy, dev.bubble, what .. ": the gaps are its bubble", 1e-9)
    end
    if c.p.distributed_optimizer then
      -- no overlap: every bucket after the last op, then the step, then the parameters' all-gather
      eq(table.concat(by[2].tail, ","), "dp_reduce,optimizer,param_gather", what .. ": the tail of stage 1")
      local r = P.report(plan, tl)
      local j = r.timeline()
      eq(#j, #ops, what .. ": one JSON entry per op")
      eq(j[1].start_ms, ops[1].start * 1e3, what .. ": start_ms") eq(j[1].end_ms, ops[1].finish * 1e3, what .. ": end_ms")
      eq(j[1].microbatch, 0, what .. ": microbatch") eq(j[1].kind, "forward", what .. ": kind")
      eq(getmetatable(j[1]).__order[1], "device", what .. ": keys in order")
      eq(j[#j].microbatch, nil, what .. ": a tail entry has no microbatch")
    elseif not training then
      eq(#by[1].tail, 0, what .. ": nothing after the forwards")
    end
  end
  -- a search's lean timeline keeps no op times, and its report no timeline
  local plan = plan_of({ pp = 2, microbatches = 2 }, 4)
  plan.memory = require("neusight.memory").context { nodes = nodes, training = true, mode = "train",
    state = { weights = 2, gradients = 4, master = 4, optimizer_state = 8, convention = "pure" } }
  local lean = P.timeline(plan, nodes, times, true)
  eq(lean.ops_of, nil, "lean: no op times")
  eq(P.report(plan, lean, true).timeline, nil, "lean: no timeline in the report")
  raises("timeline ops: the timeline was made lean (a search's): it keeps no op times", TLm.ops, lean)
end

---------------------------------------------------------------------------------------------------
-- Tensor parallelism of the GPT builder

local CFG = { name = "tiny", n_layer = 2, n_embd = 64, n_head = 8, vocab_size = 256, n_positions = 128 }

-- Per node: Σ FLOPs of its forward + backward kernels through the op rules (training).
local function node_flops(n)
  local node = make_node(n)
  local rule = load_op(n.op)
  local f = 0
  for _, k in ipairs(rule.forward(node, H100)) do f = f + k.flops end
  if rule.backward then
    for _, k in ipairs(rule.backward(node, H100)) do f = f + k.flops end
  end
  return f * n.count
end

-- Nodes whose work Megatron splits over tp ranks: attention and MLP projections, per-head
-- attention, the MLP activation, the vocabulary-sized embedding/head/loss.
local function split_by_tp(n)
  if n.name == "h.attn.residual" or n.name == "h.attn.resid_dropout" then return false end -- full activation
  return n.name:match("^h%.attn%.") or n.name:match("^h%.mlp%.c_") or n.name:match("^h%.mlp%.act")
    or n.name == "wte" or n.name == "lm_head" or n.name:match("^loss")
end

function T.test_tp_graph_flops_are_the_unsplit_over_tp_plus_collectives()
  local tp = 4
  local opts1 = { batch = 2, seq = 32, training = true, dtype = "fp32" }
  local plan = plan_of({ tp = tp }, 2)
  local optsN = { batch = 2, seq = 32, training = true, dtype = "fp32", tp = tp, parallel = plan }
  local one, sharded = gpt.build(CFG, opts1), gpt.build(CFG, optsN)
  local split1, rep1, splitN, repN, comm = 0, 0, 0, 0, {}
  for _, n in ipairs(one) do
    if split_by_tp(n) then split1 = split1 + node_flops(n) else rep1 = rep1 + node_flops(n) end
  end
  for _, n in ipairs(sharded) do
    if n.attrs.group == "tp" then
      comm[#comm + 1] = n
      eq(node_flops(n), 0, "collectives have no FLOPs")
    elseif split_by_tp(n) then
      splitN = splitN + node_flops(n)
    else
      repN = repN + node_flops(n)
    end
  end
  near(splitN * tp, split1, "split work = unsplit / tp")
  near(repN, rep1, "replicated work (layer norms, residuals, dropouts) unchanged")
  -- Megatron's collectives: per layer g after both row-parallel layers (forward) and f before both
  -- column-parallel ones (backward); the embedding's g, lm_head's f and the loss's all-reduce.
  eq(#comm, 4 + 3, "collective nodes")
  local per_layer = { forward = 0, backward = 0 }
  for _, n in ipairs(comm) do
    if n.layer == "h" then
      per_layer[n.attrs.direction] = per_layer[n.attrs.direction] + 1
      eq(n.count, CFG.n_layer, "replicated with the layer")
      eq(n.output[1] * n.output[2] * n.output[3], 2 * 32 * 64, "activation-sized")
    end
  end
  eq(per_layer.forward, 2, "two forward all-reduces per layer") eq(per_layer.backward, 2, "two backward")
  -- one fewer parameter set per rank: the sharded weights, plus the replicated biases and norms
  local p1, pN = testing.params(one), testing.params(sharded)
  local h, L, Pos = 64, 2, 128
  -- ln_1, ln_2 and the row-parallel c_proj biases per layer; position embeddings and ln_f
  local replicated = L * (2 * h + 2 * h + h + h) + Pos * h + 2 * h
  near(pN, (p1 - replicated) / tp + replicated, "parameters per rank")
end

function T.test_tp_errors()
  local plan = plan_of({ tp = 3 }, 3)
  raises("gpt model 'tiny': n_head = 8 is not divisible by tp = 3: give a tp that divides 8 (1, 2, 4, 8)", gpt.build, CFG,
    { batch = 1, seq = 8, training = true, tp = 3, parallel = plan })
end

---------------------------------------------------------------------------------------------------
-- Expert parallelism of the Switch builder

local switch = require "neusight.models.switch"
local SW = { name = "sw", num_layers = 2, num_decoder_layers = 2, d_model = 32, d_ff = 64, d_kv = 8, num_heads = 4,
             num_experts = 4, expert_capacity = 8, encoder_sparse_step = 2, decoder_sparse_step = 2, vocab_size = 100 }

function T.test_ep_moves_experts_not_work()
  local ep = 2
  local plan = plan_of({ dp = 4, ep = ep }, 8)
  local base = { batch = 2, seq = 16, training = true, dtype = "fp32" }
  local one = switch.build(SW, base)
  local spread = switch.build(SW, { batch = 2, seq = 16, training = true, dtype = "fp32", ep = ep, parallel = plan })
  local function totals(nodes)
    local expert_flops, expert_params, other_flops, a2a = 0, 0, 0, {}
    for _, n in ipairs(nodes) do
      if n.op == "all_to_all" then
        a2a[#a2a + 1] = n
      elseif n.attrs.expert then
        expert_flops, expert_params = expert_flops + node_flops(n), expert_params + n.params * n.count
      else
        other_flops = other_flops + node_flops(n)
      end
    end
    return expert_flops, expert_params, other_flops, a2a
  end
  local f1, p1, o1, a1 = totals(one)
  local fN, pN, oN, aN = totals(spread)
  eq(#a1, 0, "no all-to-all without ep")
  near(fN, f1, "every token still meets its expert: the same expert FLOPs per rank")
  near(pN * ep, p1, "each rank holds num_experts / ep experts")
  local relu1, reluN = 0, 0 -- the other expert kernels (activation) move with the experts too
  for _, n in ipairs(one) do if n.name:match("experts%.expert_%d+%.act$") then relu1 = relu1 + node_flops(n) end end
  for _, n in ipairs(spread) do if n.name:match("experts%.local_%d+%.act$") then reluN = reluN + node_flops(n) end end
  near(reluN, relu1, "expert activations")
  near(oN - reluN, o1 - relu1, "routing, dispatch, combine and the dense layers are unchanged")
  -- two all-to-alls per sparse layer (dispatch, combine), both directions, of the (E·cap, d) buffer
  local sparse_layers = 0
  for _, n in ipairs(one) do
    if n.name:match("%.mlp%.router%.classifier$") then sparse_layers = sparse_layers + n.count end
  end
  local count = 0
  for _, n in ipairs(aN) do
    count = count + n.count
    eq(n.attrs.direction, "both", "forward and backward")
    eq(n.output[1] * n.output[2], 4 * 2 * 8 * 32, "E · (batch · capacity) · d_model")
    near(n.attrs.seconds, C.time("all_to_all", 4 * 2 * 8 * 32 * 4, plan.groups.ep, plan.cluster), "alpha-beta")
  end
  eq(count, 2 * sparse_layers, "two all-to-alls per sparse layer")
  raises("switch model 'sw': num_experts = 4 is not divisible by ep = 3: give an ep that divides 4 (1, 2, 4)", switch.build, SW,
    { batch = 2, seq = 16, training = true, ep = 3, parallel = plan_of({ dp = 3, ep = 3 }, 3) })
end

function T.test_expert_gradients_sync_over_their_replicas()
  -- dp = 4, ep = 2: dense gradients all-reduce over 4 ranks, expert gradients over the 2 replicas of each expert.
  local nodes = {
    { op = "x", name = "dense", layer = "h", count = 1, params = 25e6 / 4, output = { 0 }, attrs = {} },
    { op = "x", name = "experts", layer = "h", count = 1, params = 25e6 / 4, output = { 0 }, attrs = { expert = true } },
  }
  local times = {
    { fw = 1, fw_comm = 0, bw = 1, bw_comm = 0, opt = 0 }, { fw = 1, fw_comm = 0, bw = 1, bw_comm = 0, opt = 0 },
  }
  local plan = plan_of({ dp = 4, ep = 2, overlap_grad_reduce = false }, 4)
  local tl = P.timeline(plan, nodes, times)
  local want = C.time("all_reduce", 25e6, plan.groups.dp, plan.cluster)
    + C.time("all_reduce", 25e6, plan.groups.edp, plan.cluster)
  eq(plan.groups.edp.size, 2, "two replicas of each expert")
  near(tl.devices[1].dp_comm, want, "one bucket over dp, one over the expert replicas", 1e-9)
end

-- The distributed optimizer shards each parameter's master copy, moments and step over the GPUs that hold a replica of
-- it: dp for dense weights, an expert's dp / ep (edp) replicas for its weights (Megatron-LM's expert data-parallel
-- group). dp 8: ep 4 leaves each expert 2 replicas, ep 8 one (nothing to shard).
function T.test_distributed_optimizer_shards_experts_over_their_replicas()
  local dense, expert = 3e6, 5e6
  local nodes = {
    { op = "x", name = "h.dense", layer = "h", count = 1, params = dense, output = { 0 }, attrs = {} },
    { op = "x", name = "h.experts", layer = "h", count = 1, params = expert, output = { 0 }, attrs = { expert = true } },
    { op = "adam", name = "optimizer.adam", layer = "", count = 1, params = 0, output = { 0 }, attrs = {},
      phase = "optimizer" },
  }
  local times = {
    { fw = 1, fw_comm = 0, bw = 1, bw_comm = 0, opt = 0 }, { fw = 1, fw_comm = 0, bw = 1, bw_comm = 0, opt = 0 },
    { fw = 0, fw_comm = 0, bw = 0, bw_comm = 0, opt = 8 },
  }
  local layout = require "neusight.parallel.layout"
  eq(layout.replica_group(nodes[1]), "dp", "dense weights: replicas over dp")
  eq(layout.replica_group(nodes[2]), "edp", "expert weights: replicas over edp")
  for _, c in ipairs { { 4, 2 }, { 8, 1 } } do
    local ep, replicas = c[1], c[2]
    local what = ("dp 8, ep %d"):format(ep)
    local plan = plan_of({ dp = 8, ep = ep, overlap_grad_reduce = false, distributed_optimizer = true }, 8)
    eq(plan.groups.edp.size, replicas, what .. ": replicas of each expert")
    local tl = P.timeline(plan, nodes, times)
    local d, s = tl.devices[1], tl.state
    eq(d.expert_params, expert, what .. ": the stage's expert parameters")
    local function per_param(shards) return s.weights + s.gradients + (s.master + s.optimizer_state) / shards end
    near(tl.memory.stages[1].state_gb, (dense * per_param(8) + expert * per_param(replicas)) / 1e9,
      what .. ": state, experts' master copies and moments over their replicas", 1e-12)
    near(d.optimizer, 8 * (dense / 8 + expert / replicas) / (dense + expert), what .. ": the step of each shard", 1e-12)
    -- the buckets reduce-scatter over each group (the bucket walk's rule), then the parameters all-gather over it
    local e = plan.precision.bytes
    local g = function(op, bytes, group) return C.time(op, bytes, plan.groups[group], plan.cluster) end
    near(d.dp_comm, g("reduce_scatter", dense * e.grad, "dp") + g("reduce_scatter", expert * e.grad, "edp")
      + g("all_gather", dense * e.param, "dp") + g("all_gather", expert * e.param, "edp"), what .. ": dp traffic", 1e-9)
    local r = P.report(plan, tl)
    eq(r.optimizer_shards, 8, what .. ": optimizer_shards")
    eq(r.expert_optimizer_shards, replicas, what .. ": expert_optimizer_shards")
    -- the graph's step is one expert-parallel rank's: the dense part runs once over dp, the experts' once per ep rank
    near(r.figures.step_copies, (dense + expert * ep) / (dense + expert), what .. ": copies of the graph's step", 1e-12)
  end
  -- a dense model (no expert weights) shards everything over dp, as before
  local plan = plan_of({ dp = 8, overlap_grad_reduce = false, distributed_optimizer = true }, 8)
  local tl = P.timeline(plan, { nodes[1], nodes[3] }, { times[1], times[3] })
  local s = tl.state
  eq(tl.memory.stages[1].state_gb, dense * (s.weights + s.gradients + (s.master + s.optimizer_state) / 8) / 1e9,
    "dense: over dp")
  eq(tl.devices[1].optimizer, 8 / 8, "dense: an eighth of the step")
  local r = P.report(plan, tl)
  eq(r.expert_optimizer_shards, nil, "no expert parallelism: no expert_optimizer_shards")
  eq(r.figures.step_copies, 1.0, "dense: the step once over dp")
end

-- The floor of a device (what scripts/neusight/figures.lua holds a parallel forecast to): its own kernels' roofline
-- floors over its ops (every microbatch through its stage, recomputed forwards included) and its share of the optimizer
-- step's, once per iteration (not per microbatch: the graph's floor × microbatches / pp counted it so); the run's is
-- the largest.
function T.test_timeline_floor_is_the_busiest_devices_kernels()
  local nodes = {
    { op = "x", name = "h.a", layer = "h", count = 8, params = 10, output = { 1000 } },
    { op = "adam", name = "optimizer.adam", layer = "", phase = "optimizer", count = 1, params = 0, output = { 80 } },
  }
  local times = {
    { fw = 1, fw_comm = 0, bw = 2, bw_comm = 0, opt = 0, fw_floor = 0.5, bw_floor = 1.5 },
    { fw = 0, fw_comm = 0, bw = 0, bw_comm = 0, opt = 40, opt_floor = 16 },
  }
  local tl = P.timeline(plan_of({ pp = 4, microbatches = 8 }, 8), nodes, times)
  for d = 1, 4 do  -- 2 layers a stage, 8 microbatches; a quarter of the parameters: 16 / 4
    near(tl.devices[d].floor, 8 * 2 * (0.5 + 1.5) + 16 / 4, "floor of device " .. (d - 1))
  end
  near(tl.floor, 8 * 2 * 2 + 4, "the run's")
  local re = P.timeline(plan_of({ pp = 4, microbatches = 8, recompute = "full" }, 8), nodes, times)
  near(re.floor, 8 * 2 * (0.5 + 1.5 + 0.5) + 4, "recomputed forwards")
  local sharded = P.timeline(plan_of({ dp = 2, pp = 4, microbatches = 4, distributed_optimizer = true }, 8), nodes, times)
  near(sharded.floor, 4 * 2 * 2 + 16 / 4 / 2, "the distributed optimizer's step on 1/dp of a stage's parameters")
  near(P.timeline(plan_of({ pp = 4, microbatches = 8 }, 8, "inference"), { nodes[1] }, { times[1] }).floor, 8 * 2 * 0.5,
    "inference: forwards only")
  -- each below the forecast its kernels' own times make (floors are at most the times here)
  if not (tl.floor <= tl.iteration) then error("floor above the iteration", 0) end
  eq(P.timeline(plan_of({ pp = 4, microbatches = 8 }, 8), { nodes[1] }, { { fw = 1, fw_comm = 0, bw = 2, bw_comm = 0,
    opt = 0 } }).floor, 0, "times without floors: none")
end

function T.test_activation_memory_follows_the_schedule()
  -- 8 layers of two nodes with 1000-element fp32 outputs (8000 B per layer and microbatch) on 4 stages,
  -- 8 microbatches: GPipe keeps all 8 microbatches alive, 1F1B keeps P − d on device d.
  local nodes = {
    { op = "x", name = "h.a", layer = "h", count = 8, params = 0, output = { 1000 } },
    { op = "x", name = "h.b", layer = "h", count = 8, params = 0, output = { 1000 } },
  }
  local times = {
    { fw = 1, fw_comm = 0, bw = 2, bw_comm = 0, opt = 0 }, { fw = 1, fw_comm = 0, bw = 2, bw_comm = 0, opt = 0 },
  }
  local per_stage = 2 * 8000
  local gpipe = P.timeline(plan_of({ pp = 4, microbatches = 8, schedule = "gpipe" }, 8), nodes, times)
  local ofob = P.timeline(plan_of({ pp = 4, microbatches = 8 }, 8), nodes, times)
  for d = 1, 4 do
    eq(gpipe.devices[d].activation_bytes, 8 * per_stage, "gpipe device " .. (d - 1))
    eq(ofob.devices[d].activation_bytes, (4 - d + 1) * per_stage, "1f1b device " .. (d - 1))
  end
  -- Full recomputation: a layer keeps its input (the 4000 B boundary), one layer's 8000 B are rebuilt at a
  -- time, and every layer's forward (2 s per stage and microbatch) runs again in backward.
  local re = P.timeline(plan_of({ pp = 4, microbatches = 8, recompute = "full" }, 8), nodes, times)
  for d = 1, 4 do
    eq(re.devices[d].activation_bytes, (4 - d + 1) * 2 * 4000 + 8000, "recompute device " .. (d - 1))
    local base = ofob.devices[d]
    near(re.devices[d].compute - base.compute, 8 * 2 * 2, "recomputed forwards of device " .. (d - 1))
  end
  eq(P.timeline(plan_of({ pp = 4, microbatches = 8 }, 8, "inference"), nodes, times).devices[1].activation_bytes, 0,
    "inference keeps nothing for backward")
  raises('parallel.recompute: "none", "selective" or "full" expected, got "partial"', P.normalize, { recompute = "partial" })
end

function T.test_sequence_parallel_shards_norms_and_keeps_the_bytes()
  local tp = 4
  local plan = plan_of({ tp = tp }, 2)
  local spp = plan_of({ tp = tp, sequence_parallel = true }, 2)
  -- 1 MB activations: the ring is the cheapest all-reduce (the tree wins below ~0.26 MB on this link)
  local cfg = { name = "tiny", n_layer = 2, n_embd = 64, n_head = 8, vocab_size = 256, n_positions = 512 }
  local base = gpt.build(cfg, { batch = 8, seq = 512, training = true, dtype = "fp32", tp = tp, parallel = plan })
  local seq = gpt.build(cfg, { batch = 8, seq = 512, training = true, dtype = "fp32", tp = tp, parallel = spp,
                               sequence_parallel = true })
  local function sums(nodes)
    local comm, ops, rep, other = 0, {}, 0, 0
    for _, n in ipairs(nodes) do
      if n.attrs.group == "tp" then
        -- less NCCL's fixed cost of each call (topology.base_seconds): a gather and a scatter are two calls
        comm = comm + (n.attrs.seconds - Topo.base_seconds(n.attrs.algorithm)) * n.count
          * ((n.attrs.direction == "both") and 2 or 1)
        ops[n.op] = (ops[n.op] or 0) + n.count
      elseif n.op == "layernorm" or n.name:match("dropout$") or n.name:match("residual$") or n.name == "drop" then
        rep = rep + node_flops(n)
      else
        other = other + node_flops(n)
      end
    end
    return comm, ops, rep, other
  end
  local c1, o1, r1, x1 = sums(base)
  local c2, o2, r2, x2 = sums(seq)
  -- ring all-gather + reduce-scatter = ring all-reduce, step for step (Thakur et al. 2005), but for NCCL's fixed
  -- cost of the second call
  near(c2, c1, "the same communication time")
  eq(o1.all_reduce, 4 * CFG.n_layer + 3, "all-reduces without sequence parallelism")
  -- (Megatron's column-parallel linear keeps its input's sequence shard and re-gathers it in backward for the weight
  -- gradient, under the dgrad GEMM: not priced, so the communication is the same)
  eq(o2.all_gather, o2.reduce_scatter, "each all-reduce became a gather and a scatter")
  eq(o2.all_reduce, 1, "only the loss's all-reduce is left")
  near(r2 * tp, r1, "norms, dropouts and residual adds run on s / tp tokens")
  near(x2, x1, "everything else unchanged")
  -- at tp 1 it is off (the workload warns "has no effect": test_workload's tester10 #10 test)
  eq(P.normalize({ sequence_parallel = true }).sequence_parallel, false, "no tensor parallelism, no sequence shards")
  raises("gpt model 'tiny': the sequence length = 30 is not divisible by tp = 4: give a tp that divides 30 (1, 2, 3, 5, 6, 10, 15, 30)", gpt.build, CFG,
    { batch = 2, seq = 30, training = true, tp = tp, parallel = spp, sequence_parallel = true })
end

function T.test_tied_embeddings_across_stages()
  -- The head (last stage) shares the embedding's 1000 parameters (first stage): with pp = 2 the last stage
  -- holds a copy, and the two stages all-reduce its fp32 gradient (4000 B over 2 ranks) after the flush.
  local nodes = {
    { op = "x", name = "emb", layer = "", count = 1, params = 1000, output = { 0 }, attrs = {} },
    { op = "x", name = "h.a", layer = "h", count = 4, params = 10, output = { 0 }, attrs = {} },
    { op = "x", name = "head", layer = "", count = 1, params = 0, output = { 0 }, attrs = { tied = "emb" } },
  }
  local times = {}
  for i = 1, 3 do times[i] = { fw = 1, fw_comm = 0, bw = 1, bw_comm = 0, opt = 0 } end
  local plan = plan_of({ pp = 2 }, 2)
  local tl = P.timeline(plan, nodes, times)
  local sync = C.time("all_reduce", 4000, { size = 2 }, plan.cluster)
  eq(tl.devices[1].params, 1000 + 2 * 10, "first stage: the table and two layers")
  eq(tl.devices[2].params, 2 * 10 + 1000, "last stage: two layers and the copy")
  local plain = P.timeline(plan, { nodes[1], nodes[2], { op = "x", name = "head", layer = "", count = 1, params = 0,
    output = { 0 }, attrs = {} } }, times)
  near(tl.devices[1].p2p - plain.devices[1].p2p, sync, "first stage waits for the embedding all-reduce", 1e-6)
  near(tl.devices[2].p2p - plain.devices[2].p2p, sync, "and so does the last", 1e-6)
  near(tl.iteration - plain.iteration, sync, "after the flush", 1e-6)
  local one = P.timeline(plan_of({ dp = 2 }, 2), nodes, times)
  eq(one.devices[1].params, 1040, "one stage: no copy")
end

-- The timelines of a kept node and a core-attention node (forward 1 s and 0.5 s) on pp 4 with 8 microbatches, without
-- and with selective recomputation: the two selective-recomputation tests' set-up.
local function selective_pair(nodes)
  local times = {
    { fw = 1, fw_comm = 0, bw = 2, bw_comm = 0, opt = 0 }, { fw = 0.5, fw_comm = 0, bw = 1, bw_comm = 0, opt = 0 },
  }
  return P.timeline(plan_of({ pp = 4, microbatches = 8 }, 8), nodes, times),
    P.timeline(plan_of({ pp = 4, microbatches = 8, recompute = "selective" }, 8), nodes, times)
end

function T.test_selective_recomputation_drops_core_attention()
  -- Per layer: a kept node (1000 fp32 elements) and a core-attention node (3000 elements, forward 0.5 s).
  local nodes = {
    { op = "x", name = "h.keep", layer = "h", count = 8, params = 0, output = { 1000 }, attrs = {} },
    { op = "x", name = "h.core", layer = "h", count = 8, params = 0, output = { 3000 }, attrs = { core_attention = true } },
  }
  local none, sel = selective_pair(nodes)
  for d = 1, 4 do
    local inflight = 4 - d + 1 -- 1F1B
    eq(none.devices[d].activation_bytes, inflight * 2 * (4000 + 12000), "everything kept, device " .. (d - 1))
    -- kept outputs of the in-flight microbatches, plus one layer's core attention rebuilt at a time
    eq(sel.devices[d].activation_bytes, inflight * 2 * 4000 + 12000, "core attention dropped, device " .. (d - 1))
    near(sel.devices[d].compute - none.devices[d].compute, 8 * 2 * 0.5, "core attention forwards re-run")
  end
end

function T.test_selective_recomputation_rebuilds_only_what_it_does_not_keep()
  -- A core-attention node reading a 2000-element input it keeps (attrs.core_inputs, Q/K/V of sdpa) and saving its
  -- 3000-element output: the re-run in backward rebuilds the output only, reading the kept input in place. Counting
  -- the kept input again made selective need more than no recomputation on the last stage (audit17: GPT-3 175B sdpa,
  -- tp 8 x pp 8, 31.631 GB of activations selective against 31.621 GB none).
  local nodes = {
    { op = "x", name = "h.keep", layer = "h", count = 8, params = 0, output = { 1000 }, attrs = {} },
    { op = "x", name = "h.core", layer = "h", count = 8, params = 0, inputs = { { 2000 } }, output = { 3000 },
      attrs = { core_attention = true, core_inputs = "1" } },
  }
  local none, sel = selective_pair(nodes)
  for d = 1, 4 do
    local inflight = 4 - d + 1 -- 1F1B
    eq(none.devices[d].activation_bytes, inflight * 2 * (4000 + 12000), "everything kept, device " .. (d - 1))
    -- the kept input per layer and microbatch, plus one layer's output rebuilt (12000 bytes) less the kept 8000
    eq(sel.devices[d].activation_bytes, inflight * 2 * (4000 + 8000) + (12000 - 8000), "device " .. (d - 1))
    assert(sel.devices[d].activation_bytes <= none.devices[d].activation_bytes, "selective never needs more")
  end
end

-- A search re-times one build for each recomputation mode and schedule (its plan's recompute and schedule changed in
-- place): with `reuse` the timeline keeps what neither changes (neusight.parallel.timeline prepare). Each re-timing is
-- the same, bit for bit, as a fresh timeline of the same plan, and a build with other times is not taken for it.
local function dump(x, seen)
  local t = type(x)
  if t == "number" then return ("%q"):format(x) end
  if t ~= "table" then return tostring(x) end
  seen = seen or {}
  if seen[x] then return "<cycle>" end
  seen[x] = true
  local keys = {}
  for k in pairs(x) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  local out = {}
  for _, k in ipairs(keys) do out[#out + 1] = tostring(k) .. "=" .. dump(x[k], seen) end
  seen[x] = nil
  return "{" .. table.concat(out, ",") .. "}"
end

function T.test_timeline_reused_across_modes_and_schedules()
  local function graph(scale)
    local nodes = {
      { op = "x", name = "emb", layer = "", count = 1, params = 7.3e6, output = { 0 }, attrs = {} },
      { op = "x", name = "h.qkv", layer = "h", count = 10, params = 3.1e6, output = { 4, 96 }, attrs = {} },
      { op = "x", name = "h.core", layer = "h", count = 10, params = 0, output = { 4, 96 },
        attrs = { core_attention = true } },
      { op = "x", name = "h.a2a", layer = "h", count = 10, params = 0, output = { 4, 96 }, attrs = { group = "ep" } },
      { op = "x", name = "h.experts", layer = "h", count = 10, params = 5.7e6, output = { 4, 96 },
        attrs = { expert = true } },
      { op = "x", name = "h.out", layer = "h", count = 10, params = 1.3e6, output = { 4, 96 }, attrs = {} },
      { op = "x", name = "head", layer = "", count = 1, params = 0, output = { 0 }, attrs = { tied = "emb" } },
      { op = "adam", name = "optimizer.adam", layer = "", count = 1, params = 0, output = { 0 }, attrs = {},
        phase = "optimizer" },
    }
    local times = {}
    for i = 1, #nodes do
      local f = (0.1 + i / 7) * scale
      times[i] = { fw = f, fw_comm = i == 4 and f / 3 or 0, bw = 2.3 * f, bw_comm = i == 4 and f / 1.7 or 0,
        opt = i == 8 and 0.37 or 0, fw_floor = f / 2.9, bw_floor = f / 1.3, opt_floor = i == 8 and 0.11 or 0 }
    end
    return nodes, times
  end
  for _, p in ipairs {
    { dp = 4, ep = 2, pp = 4, microbatches = 8, bucket_mb = 3 },
    { dp = 4, ep = 2, pp = 4, microbatches = 8, bucket_mb = 3, distributed_optimizer = true, overlap_grad_reduce = false },
    { dp = 2, pp = 3, microbatches = 6, bucket_mb = 7 },
  } do
    local nodes, times = graph(1)
    local plan = plan_of(p, 96)
    local n = 0
    for _, schedule in ipairs { "1f1b", "gpipe", "1f1b" } do
      for _, recompute in ipairs { "none", "selective", "full", "none" } do
        plan.schedule, plan.recompute = schedule, recompute
        local what = ("dp %d pp %d, %s, %s"):format(p.dp, p.pp, schedule, recompute)
        local again = P.timeline(plan, nodes, times, true, true)
        local fresh = P.timeline(plan, nodes, times, true)
        eq(dump(again), dump(fresh), what .. ": re-timed as a fresh timeline")
        n = n + 1
      end
      -- the same build with other times (a caller's table changed in place, or a new one): not the kept one
      local other = select(2, graph(1.25))
      for i, t in ipairs(times) do for k, x in pairs(other[i]) do t[k] = x end end
      eq(dump(P.timeline(plan, nodes, times, true, true)), dump(P.timeline(plan, nodes, times, true)),
        "other times: a fresh timeline")
      -- the same values of another subtype. Times (integers, then the same values as floats): the kept prep gives a
      -- fresh timeline's bits, their subtype changes no sum (timeline.lua prep_fits compares them by value alone)
      for _, t in ipairs(times) do for k, x in pairs(t) do t[k] = math.floor(x * 10) end end
      eq(dump(P.timeline(plan, nodes, times, true, true)), dump(P.timeline(plan, nodes, times, true)),
        "integer times: a fresh timeline")
      P.timeline(plan, nodes, times, true, true)
      for _, t in ipairs(times) do for k, x in pairs(t) do if math.type(x) == "integer" then t[k] = x + 0.0 end end end
      eq(dump(P.timeline(plan, nodes, times, true, true)), dump(P.timeline(plan, nodes, times, true)),
        "float times: a fresh timeline")
      -- plan fields (pp 4 → 4.0 in the same plan table): a new prep (a kept one gave integer layer counts)
      for _, f in ipairs { "pp", "dp", "ep", "bucket_mb", "virtual_stages" } do
        if math.type(plan[f]) == "integer" then
          P.timeline(plan, nodes, times, true, true)
          plan[f] = plan[f] + 0.0
          eq(dump(P.timeline(plan, nodes, times, true, true)), dump(P.timeline(plan, nodes, times, true)), "float " .. f)
          plan[f] = math.tointeger(plan[f])
        end
      end
    end
    eq(n, 12, "re-timings")
  end
end

-- Whether a layout that does not fit would fit under the distributed optimizer (neusight.parallel.memory report's
-- distributed_optimizer_fits, search's no-fit help): true where sharding brings it under the GPU's memory, false where
-- it does not; not computed (nil) for a layout that fits, or one that cannot shard (the optimizer on already).
function T.test_distributed_optimizer_fits_only_where_a_layout_does_not_fit()
  local nodes, times = synthetic(8, { layer_params = 1e9, pro_params = 5e8 })
  local function memory_of(cap, sharded)
    local plan = plan_of({ pp = 2, dp = 4, microbatches = 4, distributed_optimizer = sharded }, 16)
    plan.memory = require("neusight.memory").context { nodes = nodes, training = true, mode = "train", gpu_mem_gb = cap,
      state = { weights = 2, gradients = 4, master = 4, optimizer_state = 8, convention = "pure" } }
    return P.timeline(plan, nodes, times).memory
  end
  local plain, sharded = memory_of(nil, false).memory_gb, memory_of(nil, true).memory_gb
  assert(sharded < plain, "sharding the state takes memory off")
  local between = memory_of((plain + sharded) / 2, false)
  eq(between.fits, false, "between: does not fit") eq(between.distributed_optimizer_fits, true, "between: would")
  local below = memory_of(sharded * 0.9, false)
  eq(below.fits, false, "below both: does not fit") eq(below.distributed_optimizer_fits, false, "below both: would not")
  local above = memory_of(plain * 1.1, false)
  eq(above.fits, true, "above: fits") eq(above.distributed_optimizer_fits, nil, "a layout that fits: not asked")
  eq(memory_of(sharded * 0.9, true).distributed_optimizer_fits, nil, "on already: not asked")
end

function T.test_distributed_optimizer_shards_the_step()
  -- dp = 4, one 25 MB bucket, an optimizer step of 8 s over all parameters: with the distributed optimizer
  -- the bucket is reduce-scattered, each rank steps a quarter, then all-gathers the updated parameters.
  local params = 25e6 / 4
  local nodes = {
    { op = "x", name = "h.a", layer = "h", count = 1, params = params, output = { 0 }, attrs = {} },
    { op = "adam", name = "optimizer.adam", layer = "", count = 1, params = 0, output = { 0 }, attrs = {}, phase = "optimizer" },
  }
  local times = { { fw = 1, fw_comm = 0, bw = 1, bw_comm = 0, opt = 0 }, { fw = 0, fw_comm = 0, bw = 0, bw_comm = 0, opt = 8 } }
  local plain_plan = plan_of({ dp = 4, overlap_grad_reduce = false }, 4)
  local zero_plan = plan_of({ dp = 4, overlap_grad_reduce = false, distributed_optimizer = true }, 4)
  local plain = P.timeline(plain_plan, nodes, times).devices[1]
  local zero = P.timeline(zero_plan, nodes, times).devices[1]
  local g = zero_plan.groups.dp
  near(plain.dp_comm, C.time("all_reduce", 25e6, g, zero_plan.cluster), "all-reduce without sharding")
  near(zero.dp_comm, C.time("reduce_scatter", 25e6, g, zero_plan.cluster) + C.time("all_gather", 25e6, g, zero_plan.cluster),
    "reduce-scatter, then all-gather of the parameters", 1e-9)
  near(plain.optimizer, 8, "whole step") near(zero.optimizer, 2, "a quarter of the step")
  raises("parallel.distributed_optimizer: boolean expected, got 1", P.normalize, { distributed_optimizer = 1 })
end

-- The plan's precision recipe (neusight.precision): Megatron-LM's amp convention with its kernels, autocast's with
-- eager ones. Bytes per parameter with Adam match the table of Megatron-LM's docs/source/distrib_optimizer.md:
-- fp16 params + fp16 grads 20 (distributed 4 + 16/d), bf16 params + fp32 grads 18 (6 + 12/d), fp32 16 (8 + 8/d).
function T.test_plan_precision_recipe_is_megatrons()
  local precision = require "neusight.precision"
  local function recipe(dtype, kernels, prec)
    return P.plan(P.normalize { dp = 2, kernels = kernels }, H100,
      { batch = 2, dtype = dtype, mode = "train", precision = prec }).precision
  end
  local d = 8
  for _, c in ipairs {
    { "fp16", 20, 4 + 16 / d }, { "bf16", 18, 6 + 12 / d }, { "fp32", 16, 8 + 8 / d },
  } do
    local r = recipe(c[1], "megatron")
    local s = precision.state(r, "adam", true)
    eq(s.weights + s.gradients + s.master + s.optimizer_state, c[2], c[1] .. ": bytes per parameter")
    eq(s.weights + s.gradients + (s.master + s.optimizer_state) / d, c[3], c[1] .. ": distributed optimizer")
  end
  local mb = recipe("bf16", "megatron")
  eq(mb.name .. " " .. mb.convention, "amp megatron", "bf16 training defaults to amp, Megatron's with its kernels")
  eq(mb.param .. " " .. mb.grad .. " " .. mb.master .. " " .. mb.moment, "bf16 fp32 fp32 fp32", "bf16 roles")
  local ea = recipe("bf16", "eager")
  eq(ea.convention .. " " .. ea.param .. " " .. ea.grad, "autocast fp32 fp32", "eager kernels: autocast")
  eq(recipe("bf16", "megatron", "pure").convention, "pure", "pure asked for")
  eq(recipe("fp32", "megatron").name, "pure", "fp32 defaults to pure")
end

-- Gradient buckets are reduced in the recipe's gradient element size and the sharded step all-gathers the model's
-- parameters in theirs: bf16 Megatron amp reduces fp32 gradients and gathers bf16 parameters.
function T.test_dp_traffic_follows_the_precision_recipe()
  local params = 25e6 / 4
  local nodes = {
    { op = "x", name = "h.a", layer = "h", count = 1, params = params, output = { 0 }, attrs = {} },
    { op = "adamw", name = "optimizer.adamw", layer = "", count = 1, params = 0, output = { 0 }, attrs = {}, phase = "optimizer" },
  }
  local times = { { fw = 1, fw_comm = 0, bw = 1, bw_comm = 0, opt = 0 }, { fw = 0, fw_comm = 0, bw = 0, bw_comm = 0, opt = 8 } }
  for _, c in ipairs { { "bf16", nil, 4, 2 }, { "fp16", nil, 2, 2 }, { "bf16", "pure", 2, 2 }, { "fp32", nil, 4, 4 } } do
    local dtype, prec, eg, ep = c[1], c[2], c[3], c[4]
    local plan = P.plan(P.normalize { dp = 4, overlap_grad_reduce = false, distributed_optimizer = true }, H100,
      { batch = 4, dtype = dtype, mode = "train", precision = prec })
    local t = P.timeline(plan, nodes, times)
    local g, what = plan.groups.dp, dtype .. " " .. (prec or "default")
    eq(t.grad_bytes_per_rank, params * eg, what .. ": gradient bytes")
    local want, bytes = 0, params * eg -- in buckets of 25 MB
    while bytes > 0 do
      want = want + C.time("reduce_scatter", math.min(bytes, 25e6), g, plan.cluster)
      bytes = bytes - 25e6
    end
    want = want + C.time("all_gather", params * ep, g, plan.cluster)
    near(t.devices[1].dp_comm, want, what .. ": reduce-scatter of the gradients + all-gather of the parameters", 1e-9)
  end
end

-- Megatron's column-parallel linear launches its input-gradient all-reduce (sequence parallel: reduce-scatter) after the
-- dgrad GEMM and waits after the wgrad GEMM (neusight.nodes tp_in, attrs.hidden_by): the timeline charges
-- max(0, comm − wgrad) of it, keeps tp_comm what is on the wire and says the rest in tp_comm_hidden. PyTorch's eager
-- tensor parallelism has no such overlap; the row-parallel side (tp_out) is never hidden.
function T.test_column_parallel_input_gradient_runs_under_the_wgrad_gemm()
  local tp = 2
  local function build(kernels, sp)
    local plan = plan_of({ tp = tp, kernels = kernels, sequence_parallel = sp or nil }, 2)
    return gpt.build(CFG, { batch = 2, seq = 32, training = true, dtype = "fp32", tp = tp, parallel = plan,
                            sequence_parallel = sp }), plan
  end
  local readers = { ["h.attn.tp_in"] = "h.attn.c_attn", ["h.mlp.tp_in"] = "h.mlp.c_fc", ["lm_head.tp_in"] = "lm_head",
    ["h.attn.tp_in.reduce_scatter"] = "h.attn.c_attn", ["h.mlp.tp_in.reduce_scatter"] = "h.mlp.c_fc",
    ["lm_head.tp_in.reduce_scatter"] = "lm_head" }
  for _, sp in ipairs { false, true } do
    local nodes = build("megatron", sp)
    local hidden = 0
    for _, n in ipairs(nodes) do
      if n.attrs.group == "tp" then
        eq(n.attrs.hidden_by, readers[n.name], n.name .. (sp and " (sequence parallel)" or "") .. ": hidden by")
        if n.attrs.hidden_by then
          hidden = hidden + 1
          eq(n.attrs.direction, "backward", n.name .. ": a backward collective")
        end
      end
    end
    eq(hidden, 3, "f of c_attn, c_fc and lm_head")
    for _, n in ipairs((build("eager", sp))) do eq(n.attrs.hidden_by, nil, n.name .. ": eager kernels hide nothing") end
  end

  -- The timeline: every node 1 ms forward, 2 ms backward, of which a linear's wgrad GEMM is 1 ms / its count … a
  -- collective its priced seconds; exposed = Σ max(0, comm − wgrad), by hand.
  local function timed(nodes, wgrad_of)
    local times = {}
    for i, n in ipairs(nodes) do
      local t = { fw = 1e-3, fw_comm = 0, bw = 2e-3, bw_comm = 0, opt = 0 }
      if n.attrs.group == "tp" then
        local s = n.attrs.seconds
        t.fw, t.bw = 0, 0
        if n.attrs.direction ~= "backward" then t.fw, t.fw_comm = s, s end
        if n.attrs.direction ~= "forward" then t.bw, t.bw_comm = s, s end
      elseif n.op == "addmm" or n.op == "linear" then
        t.bw_wgrad = wgrad_of(n)
      end
      times[i] = t
    end
    return times
  end
  local nodes, plan = build("megatron", false)
  local by_name = {}
  for i, n in ipairs(nodes) do by_name[n.name] = i end
  local comm_attn = nodes[by_name["h.attn.tp_in"]].attrs.seconds
  -- c_attn's wgrad half the all-reduce (half exposed), c_fc's and lm_head's longer (all hidden)
  local function wgrad_of(n) return n.name == "h.attn.c_attn" and comm_attn / 2 or 1e-3 end
  local times = timed(nodes, wgrad_of)
  local wire, want_hidden = 0, 0
  for i, n in ipairs(nodes) do
    local t = times[i]
    wire = wire + (t.fw_comm + t.bw_comm) * n.count
    local reader = n.attrs.hidden_by and nodes[by_name[n.attrs.hidden_by]]
    if reader then
      local exposed = math.max(0, t.bw_comm - wgrad_of(reader))
      want_hidden = want_hidden + (t.bw_comm - exposed) * n.count
    end
  end
  local tl = P.timeline(plan, nodes, times)
  local dev = tl.devices[1]
  near(dev.tp_comm, wire, "tp_comm: what is on the wire")
  near(dev.tp_comm_hidden, want_hidden, "tp_comm_hidden: Σ comm − max(0, comm − wgrad)")
  near(want_hidden, nodes[by_name["h.attn.tp_in"]].count * comm_attn / 2
    + nodes[by_name["h.mlp.tp_in"]].attrs.seconds * CFG.n_layer + nodes[by_name["lm_head.tp_in"]].attrs.seconds,
    "half of c_attn's, all of c_fc's and lm_head's")
  eq(dev.tp_comm_hidden < dev.tp_comm, true, "exposed < wire")
  near(dev.exposed_comm, wire - want_hidden, "exposed: the wire less the hidden part")
  near(tl.iteration, dev.compute + dev.exposed_comm, "one device, one microbatch: compute + exposed")
  -- full recomputation re-runs the forward (its forward collectives only): the same seconds hidden
  local full = P.timeline(plan_of({ tp = tp, recompute = "full" }, 2), nodes, times).devices[1]
  near(full.tp_comm_hidden, want_hidden, "recomputation hides no more, no less")
  eq(full.tp_comm > dev.tp_comm, true, "its forward collectives run again")
  -- the same graph with eager kernels' times: every second exposed
  local eager_nodes, eager_plan = build("eager", false)
  local et = P.timeline(eager_plan, eager_nodes, timed(eager_nodes, wgrad_of)).devices[1]
  eq(et.tp_comm_hidden, 0, "eager: nothing hidden")
  near(et.exposed_comm, et.tp_comm, "eager: all exposed")
  near(et.tp_comm, wire, "the same wire")
  -- a row-parallel collective is never hidden, however long the GEMMs
  local hidden_comm = require("neusight.parallel.timeline").hidden_comm
  local long = hidden_comm(nodes, timed(nodes, function() return 1e3 end))
  for i, n in ipairs(nodes) do
    if n.attrs.group == "tp" and (n.attrs.direction ~= "backward" or n.name:match("tp_out")) then
      eq(long[i], nil, n.name .. ": row-parallel / forward, never hidden")
    end
  end
  -- a name that is no node after it: an error, not a silent serial charge
  local broken = {}
  for i, n in ipairs(nodes) do broken[i] = n end
  local i = by_name["lm_head.tp_in"]
  broken[i] = { op = nodes[i].op, name = nodes[i].name, layer = "", count = 1, params = 0, output = nodes[i].output,
    inputs = nodes[i].inputs, attrs = { group = "tp", direction = "backward", seconds = 1, hidden_by = "lm_hed" } }
  raises("timeline: node 'lm_head.tp_in' is hidden by 'lm_hed', which is no node after it", hidden_comm, broken, times)
end

function T.test_megatron_kernels_of_the_gpt_builder()
  local function names(opts)
    local set, n = {}, 0
    for _, node in ipairs(gpt.build(CFG, opts)) do set[node.name], n = node, n + 1 end
    return set, n
  end
  local base = { batch = 2, seq = 32, training = true }
  local eager = names { batch = 2, seq = 32, training = true, dtype = "bf16" }
  local fp32 = names { batch = 2, seq = 32, training = true, dtype = "fp32", megatron = true }
  local bf16 = names { batch = 2, seq = 32, training = true, dtype = "bf16", megatron = true }
  eq(eager["h.mlp.act.tanh"] ~= nil and eager["h.mlp.act"] == nil, true, "eager: HF's 8-node gelu_new")
  eq(fp32["h.mlp.act"].op, "gelu", "megatron: one fused bias-GeLU")
  eq(fp32["h.mlp.act.tanh"], nil, "no gelu_new chain")
  eq(fp32["h.attn.scale"] ~= nil and fp32["h.attn.mask"] ~= nil, true, "fp32: the unfused softmax path")
  eq(bf16["h.attn.scale"], nil, "bf16: scale fused into the softmax")
  eq(bf16["h.attn.mask"], nil, "bf16: mask fused into the softmax")
  eq(bf16["h.attn.softmax"].attrs.core_attention, true, "still core attention (selective recomputation)")
  eq(base.dtype, nil, "inputs untouched")
end

-- timeline() skips sorting the gradient buckets when only the final leftover bucket ties with the run before it:
-- that relies on table.sort never moving a last element that nothing exceeds (ltablib.c: partitions leave a[up]
-- alone, and a[up] is swapped only with a strictly greater element). Lua's own sort, checked here on that shape.
function T.test_sort_keeps_a_maximal_last_element()
  for before = 0, 300, 13 do
    for ties = 1, 90, 7 do
      local a = {}
      for i = 1, before do a[#a + 1] = { at = i, id = "run" } end
      for _ = 1, ties do a[#a + 1] = { at = before + 1, id = "full" } end
      a[#a + 1] = { at = before + 1, id = "leftover" }
      table.sort(a, function(x, y) return x.at < y.at end)
      eq(a[#a].id, "leftover", ("last of %d + %d ties"):format(before, ties))
    end
  end
end


-- timeline() orders the gradient buckets with neusight.parallel.timeline buckets_in_order: the order table.sort gives
-- the buckets one by one (as it always did), found cheaper where it can be. Checked against that sort on random runs
-- with ties between one, two and three kinds of bucket at a time, integer and float times (fewer than 100 buckets:
-- Lua randomizes the pivot of longer ranges after a lopsided partition, so only short ones sort the same every time).
function T.test_buckets_in_order_is_the_plain_sort()
  local order = require("neusight.parallel.timeline").buckets_in_order
  local seed = 4242
  local function rand(n) -- a fixed LCG: 1..n
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed % n + 1
  end
  local function expand(runs)
    local out = {}
    for _, r in ipairs(runs) do
      for _ = 1, r.n do out[#out + 1] = ("%q %q %s"):format(r.at, r.bytes, r.group) end
    end
    return out
  end
  local paths = {}
  for case = 1, 3000 do
    local ready, total = {}, 0
    local times = rand(6)
    while true do
      local n = rand(case % 3 == 0 and 12 or 3)
      if total + n > 99 then break end
      local at = rand(times) * 0.25
      if rand(4) == 1 then at = at // 1 end -- an integer time now and then (equal to a float one)
      local kind = rand(case % 5 == 0 and 3 or 2)
      ready[#ready + 1] = { at = at, bytes = kind == 1 and 25e6 or 1e6 * kind + at, group = kind == 3 and "edp" or "dp",
                            n = n }
      total = total + n
      if rand(10) == 1 then break end
    end
    local each = {}
    for _, r in ipairs(ready) do
      for _ = 1, r.n do each[#each + 1] = { at = r.at, bytes = r.bytes, group = r.group, n = 1 } end
    end
    table.sort(each, function(a, b) return a.at < b.at end)
    local arrays = { len = #ready, at = {}, bytes = {}, group = {}, n = {} }
    for k, r in ipairs(ready) do arrays.at[k], arrays.bytes[k], arrays.group[k], arrays.n[k] = r.at, r.bytes, r.group, r.n end
    local sorted, runs = order(arrays), {}
    for k = 1, sorted.len do runs[k] = { at = sorted.at[k], bytes = sorted.bytes[k], group = sorted.group[k], n = sorted.n[k] } end
    local want, got = expand(each), expand(runs)
    eq(#got, #want, "case " .. case .. " buckets")
    for k = 1, #want do eq(got[k], want[k], ("case %d bucket %d"):format(case, k)) end
  end
end

-- timeline() pours each node's gradient bytes into buckets with neusight.parallel.timeline fill_buckets: the same
-- leftover (bits and subtype) and count as the subtracting loop it replaced, on random sizes and byte counts.
function T.test_fill_buckets_is_the_loop()
  local fill = require("neusight.parallel.timeline").fill_buckets
  local seed = 777
  local function rand() -- a fixed LCG: [0, 1)
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed / 2147483648
  end
  local sizes = { 25e6, 1e6, 4e7, 25 * 1e6, 1.5e6, 1000000.1, 3e6 + 0.5, 7, 1e12 }
  for case = 1, 20000 do
    local size = sizes[case % #sizes + 1]
    local f -- up to a few thousand buckets (the loop counts them one by one)
    local r = rand()
    if r < 0.2 then f = (rand() * size * 3000) // 1 -- an integer count of bytes
    elseif r < 0.3 then f = size * ((rand() * 1000) // 1) -- an exact multiple
    elseif r < 0.35 then f = size * 0.999999
    elseif r < 0.4 and size >= 1e12 then f = 0x1p52 + rand() * size * 100 -- past 2^52: the loop itself
    else f = rand() ^ 3 * size * 4000 / 3 end
    local want_f, want_full = f, 0
    while want_f >= size do want_f, want_full = want_f - size, want_full + 1 end
    local got_f, got_full = fill(f, size)
    eq(("%q %q"):format(got_f, got_full), ("%q %q"):format(want_f, want_full), ("case %d: %q into %q"):format(case, f, size))
  end
end

-- ns.fold adds only a row's values that are not zeros (engine/lua/wrap_series.cpp fast_terms): the sums' bits are the
-- plain loop's where zeros of both signs meet cancellations to +0.0, sums of zeros only, subtractions of zeros, a NaN
-- and an infinity, each sum watched in turn.
function T.test_fold_skipping_zeros_keeps_the_sums_bits()
  local ns = require "neusight"
  local inf, nan = math.huge, 0 / 0
  local rows = {
    { 1.5, -0.0, 0.0, -1.5, 2.0 },   -- cancellation to +0.0, then zeros of both signs
    { -0.0, -0.0, 0.0, -0.0, -0.0 }, -- zeros only
    { 0.0, 3.25, -0.0, inf, 0.0 },
    { nan, -0.0, 0.0, 1.0, -0.0 },
  }
  local codes = { 1, 2, -1, 3, 2, -3, -2, 5, 4, -5, 1, -4, 2, -2, 3, 1 }
  local n = #codes
  for watch = 1, 3 do
    local fw = { { 1, rows[1] }, { 2, rows[2] }, { 3, rows[3], -1 }, { 1, rows[2], -1 } }
    local bw = { { 2, rows[1], -1 }, { 3, rows[2] }, { 1, rows[4] }, { 3, rows[1] } }
    local got = ns.fold({ codes }, { n }, fw, bw, watch)[1]
    local s, peak = { 0, 0, 0 }, 0
    for i = 1, n do
      local k = codes[i]
      for _, t in ipairs(k > 0 and fw or bw) do
        local x = t[2][k > 0 and k or -k]
        if t[3] then s[t[1]] = s[t[1]] - x else s[t[1]] = s[t[1]] + x end
      end
      if s[watch] > peak then peak = s[watch] end
    end
    for j = 1, 3 do eq(("%q"):format(got[j]), ("%q"):format(s[j]), ("watch %d: sum %d"):format(watch, j)) end
    eq(("%q"):format(got[4]), ("%q"):format(peak), ("watch %d: peak"):format(watch))
  end
end

-- The engine's loops (require("neusight").walk, fold and queue: engine/lua/wrap_series.cpp) give what the plain Lua
-- loops give, bits and subtype: on random series of integers (0 among them), floats (-0.0, negative, NaN too) and both.
function T.test_series_primitives_are_the_lua_loops()
  local ns = require "neusight"
  local seed = 4242
  local function rand()
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed / 2147483648
  end
  local function value(kind)
    local r = rand()
    if kind == "float" then
      if r < 0.05 then return -0.0 elseif r < 0.1 then return 0.0 end
      return rand() * 3
    elseif kind == "int" then
      if r < 0.3 then return 0 end
      return (rand() * 1000) // 1
    end
    if r < 0.2 then return 0 elseif r < 0.3 then return (rand() * 50) // 1 elseif r < 0.33 then return 0 / 0
    elseif r < 0.36 then return -rand() elseif r < 0.4 then return -0.0 end
    return rand() * 3
  end
  local function same(a, b, what)
    eq(("%q"):format(a), ("%q"):format(b), what)
  end
  for case = 1, 300 do
    local kinds = { "float", "int", "mixed" }
    local kind = kinds[case % 3 + 1]
    local V, n = 1 + (rand() * 6) // 1, (rand() * 40) // 1
    local codes = {}
    for i = 1, n do
      local k = 1 + (rand() * V) // 1
      codes[i] = rand() < 0.5 and k or -k
    end
    local arrays = {}
    for a = 1, 4 do
      arrays[a] = {}
      for k = 1, V do arrays[a][k] = value(kind) end
    end
    -- fold: two sums, one with a term subtracted, the second watched; a third of integer zeros only
    local zeros = {}
    for k = 1, V do zeros[k] = 0 end
    local fw = { { 1, arrays[1] }, { 2, arrays[2] }, { 2, arrays[3], -1 }, { 3, zeros } }
    local bw = { { 1, arrays[4] }, { 2, arrays[3], -1 }, { 3, zeros, -1 } }
    local got = ns.fold({ ns.pack_integers(codes, n), codes }, { n, n }, fw, bw, 2)
    local s1, s2, s3, peak = 0, 0, 0, 0
    for i = 1, n do
      local k = codes[i]
      if k > 0 then
        s1 = s1 + arrays[1][k]
        s2 = s2 + arrays[2][k] - arrays[3][k]
        s3 = s3 + zeros[k]
      else
        k = -k
        s1 = s1 + arrays[4][k]
        s2 = s2 - arrays[3][k]
        s3 = s3 - zeros[k]
      end
      if s2 > peak then peak = s2 end
    end
    for d = 1, 2 do
      same(got[d][1], s1, ("case %d (%s) fold sum 1"):format(case, kind))
      same(got[d][2], s2, ("case %d (%s) fold sum 2"):format(case, kind))
      same(got[d][3], s3, ("case %d (%s) fold sum 3"):format(case, kind))
      same(got[d][4], peak, ("case %d (%s) fold peak"):format(case, kind))
    end
    -- fold again with rows of floats only one way (forward: a sum becomes a float at its first such op) and integer
    -- zeros the other (a sum only backward ops touched stays the integer 0), the second sum watched
    got = ns.fold({ codes }, { n }, { { 1, arrays[1] }, { 2, arrays[2] }, { 2, arrays[3], -1 } },
      { { 1, zeros }, { 2, zeros, -1 } }, 2)
    s1, s2, peak = 0, 0, 0
    for i = 1, n do
      local k = codes[i]
      if k > 0 then
        s1, s2 = s1 + arrays[1][k], s2 + arrays[2][k] - arrays[3][k]
      else
        s1, s2 = s1 + zeros[-k], s2 - zeros[-k]
      end
      if s2 > peak then peak = s2 end
    end
    same(got[1][1], s1, ("case %d (%s) fold, one way floats: sum 1"):format(case, kind))
    same(got[1][2], s2, ("case %d (%s) fold, one way floats: sum 2"):format(case, kind))
    same(got[1][3], peak, ("case %d (%s) fold, one way floats: peak"):format(case, kind))
    -- queue: runs of transfers through one link
    local at, cnt, dt = {}, {}, {}
    for k = 1, V do at[k], cnt[k], dt[k] = value(kind), (rand() * 4) // 1, value(kind) end
    local free0 = rand() < 0.5 and 0 or value(kind)
    local free, sum = free0, 0
    for k = 1, V do
      for _ = 1, cnt[k] do
        local start = at[k] < free and free or at[k]
        free = start + dt[k]
        sum = sum + dt[k]
      end
    end
    local got_free, got_sum = ns.queue(at, cnt, dt, V, free0, 0)
    same(got_free, free, ("case %d (%s) queue free"):format(case, kind))
    same(got_sum, sum, ("case %d (%s) queue sum"):format(case, kind))
    -- walk: a random program (prev, dep earlier ops) over V stages
    local program, done, starts, last_bw = {}, { [0] = 0 }, {}, {}
    local fws, bws = arrays[1], arrays[2]
    for k = 1, n do
      local prev, dep = (rand() * k) // 1, (rand() * k) // 1
      local c = codes[k]
      program[k] = prev << 40 | dep << 16 | (c + 0x8000)
      local a, b = done[prev], done[dep]
      local start = a < b and b or a
      if c > 0 then done[k] = start + fws[c] else
        done[k] = start + bws[-c]
        local l = last_bw[-c]
        if not l or start > l then last_bw[-c] = start end
      end
      starts[k] = start
    end
    local last = { n, (n + 1) // 2, 0 }
    for _, all in ipairs { false, true } do
      local fin, lbw, gdone, gstarts = ns.walk(ns.pack_integers(program, n), n, fws, bws, V, last, all)
      for d = 1, 3 do same(fin[d], done[last[d]], ("case %d (%s) walk finish %d"):format(case, kind, d)) end
      for c = 1, V do same(lbw[c], last_bw[c], ("case %d (%s) walk last_bw %d"):format(case, kind, c)) end
      if all then
        for k = 0, n do same(gdone[k], done[k], ("case %d (%s) walk done %d"):format(case, kind, k)) end
        for k = 1, n do same(gstarts[k], starts[k], ("case %d (%s) walk start %d"):format(case, kind, k)) end
      end
    end
  end
end

-- The tensor-parallel rule of the model FLOPs (shard.mark_replicated): a node the rank runs in the shape the tp = 1
-- graph has (the same name, op, inputs, output, parameters) is every rank's, marked model_flops_copies = tp on its own
-- attrs table; split nodes and collectives are not; names repeat in order
function T.test_mark_replicated()
  local shared = { note = "one table" }
  local function node(name, op, inputs, output, params, attrs)
    return { name = name, op = op, inputs = inputs, output = output, params = params or 0, count = 1, attrs = attrs or {} }
  end
  local whole = {
    node("norm", "mul", { { 2, 8 } }, { 2, 8 }, 8, shared),
    node("q_proj", "linear", { { 2, 8 } }, { 2, 8 }, 64),
    node("add", "add", { { 2, 8 }, { 2, 8 } }, { 2, 8 }),
    node("add", "add", { { 2, 4 }, { 2, 4 } }, { 2, 4 }),
  }
  local rank = {
    node("norm", "mul", { { 2, 8 } }, { 2, 8 }, 8, shared),
    node("q_proj", "linear", { { 2, 8 } }, { 2, 4 }, 32, shared), -- column-parallel: split
    node("q_proj.tp_in", "all_reduce", { { 2, 8 } }, { 2, 8 }),    -- a collective: not in the whole graph
    node("add", "add", { { 2, 8 }, { 2, 8 } }, { 2, 8 }),
    node("add", "add", { { 2, 2 }, { 2, 2 } }, { 2, 2 }),           -- the second "add": split
  }
  P.mark_replicated(rank, whole, 4)
  eq(rank[1].attrs.model_flops_copies, 4, "the norm: every rank's")
  eq(rank[1].attrs.note, "one table", "its other attributes kept")
  eq(shared.model_flops_copies, nil, "on its own table: the builder's shared table untouched")
  eq(rank[2].attrs.model_flops_copies, nil, "q_proj: split")
  eq(rank[3].attrs.model_flops_copies, nil, "the collective")
  eq(rank[4].attrs.model_flops_copies, 4, "the first add: replicated")
  eq(rank[5].attrs.model_flops_copies, nil, "the second add: split")
  local one = { node("norm", "mul", { { 2, 8 } }, { 2, 8 }, 8) }
  P.mark_replicated(one, whole, 1)
  eq(one[1].attrs.model_flops_copies, nil, "tp 1: nothing")
  -- key/value heads shared by ranks (tp 8, 2 key/value heads: each rank keeps one, as at tp 2): tp / 2 copies; the
  -- graphs at the divisors of tp are asked for only when a node keeps more than 1 / tp of each of its tensors
  local kv_whole = { node("k_proj", "linear", { { 2, 8 } }, { 2, 4 }, 32), node("o_proj", "linear", { { 2, 8 } }, { 2, 8 }, 64) }
  local kv_at = { [2] = { node("k_proj", "linear", { { 2, 8 } }, { 2, 2 }, 16), node("o_proj", "linear", { { 2, 4 } }, { 2, 8 }, 32) },
    [4] = { node("k_proj", "linear", { { 2, 8 } }, { 2, 2 }, 16), node("o_proj", "linear", { { 2, 2 } }, { 2, 8 }, 16) } }
  local kv_rank = { node("k_proj", "linear", { { 2, 8 } }, { 2, 2 }, 16),  -- one of the 2 heads
    node("o_proj", "linear", { { 2, 1 } }, { 2, 8 }, 8) }                  -- row-parallel: split
  local asked = {}
  P.mark_replicated(kv_rank, kv_whole, 8, function(d) asked[#asked + 1] = d; return kv_at[d] end)
  eq(kv_rank[1].attrs.model_flops_copies, 4, "k_proj: as at tp 2, so 8 / 2 ranks alike")
  eq(kv_rank[2].attrs.model_flops_copies, nil, "o_proj: split (its input keeps 1 / 8)")
  eq(table.concat(asked, ","), "2", "the smallest divisor that matches, and no more")
  local split_only = { node("o_proj", "linear", { { 2, 1 } }, { 2, 8 }, 8) }
  asked = {}
  P.mark_replicated(split_only, kv_whole, 8, function(d) asked[#asked + 1] = d; return kv_at[d] end)
  eq(#asked, 0, "no node keeps more than 1 / tp of each tensor: no other graph built")
end

---------------------------------------------------------------------------------------------------
-- The facade

-- require "neusight.parallel" hands out the modules' own functions (no wrappers: error levels stay the callers')
-- and the one schedule registry, so a schedule registered through the facade is one normalize accepts.
function T.test_facade_is_the_modules()
  local exports = {
    config = { "normalize", "active", "check_choice" }, layout = { "group_shape", "plan" },
    shard = { "comm_node", "rule", "tensor_shard", "expert_shard", "price_reference", "split", "mark_replicated",
      "retype" },
    schedule = { "schedules", "simulate" }, stages = { "layer_count" }, timeline = { "timeline" },
    report = { "report" },
  }
  local n = 0
  for mod, names in pairs(exports) do
    local m = require("neusight.parallel." .. mod)
    for _, k in ipairs(names) do
      eq(P[k], m[k], "neusight.parallel." .. k .. " is neusight.parallel." .. mod .. "." .. k)
      n = n + 1
    end
  end
  local fields = 0
  for _ in pairs(P) do fields = fields + 1 end
  eq(fields, n, "the facade exports these and nothing else")
  P.schedules.test_only = P.schedules.gpipe
  local ok, p = pcall(P.normalize, { schedule = "test_only", pp = 2 })
  P.schedules.test_only = nil -- the registry is shared by every test file
  eq(ok and p.schedule, "test_only", "a registered schedule is valid")
end

-- tester3 problem 10: layers that do not divide over pp (one model chunk per device) warn naming the stages' split;
-- a chunked schedule's are layers_refusal's (search skips those), an even split or pp 1 says nothing.
function T.test_uneven_split_names_the_stages()
  local config = require "neusight.parallel.config"
  local w = config.uneven_split("1f1b", 32, 3, { 11, 11, 10 })
  eq(w and w:find("the model's 32 layers do not divide over pp 3: its stages run 11/11/10 layers", 1, true) ~= nil,
    true, "32 layers over pp 3")
  eq(config.uneven_split("gpipe", 36, 5, { 8, 7, 7, 7, 7 }) ~= nil, true, "gpipe too")
  eq(config.uneven_split("1f1b", 32, 4, { 8, 8, 8, 8 }), nil, "even")
  eq(config.uneven_split("1f1b", 32, 1, { 32 }), nil, "no pipeline")
  eq(config.uneven_split("interleaved", 36, 5, { 8, 7, 7, 7, 7 }), nil, "chunked: layers_refusal's words")
  eq(config.uneven_split("1f1b", 0, 3, { 0, 0, 0 }), nil, "layers not known")
end

return T
