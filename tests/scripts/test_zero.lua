-- tests/scripts/test_zero.lua — sharded data parallelism (neusight/parallel/zero.lua): parallel.zero's validation, the
-- model state per GPU of ZeRO stages 0-3 against closed forms, ZeRO-3's transient units, its per-unit communication
-- (volume and exposed time) and the memory report's zero_fits.
local P = require "neusight.parallel"
local Z = require "neusight.parallel.zero"
local C = require "neusight.collectives"
local precision = require "neusight.precision"
local memory = require "neusight.memory"
local testing = require "neusight.testing"
local near = testing.near

-- fn(...) raises an error (level 0) that starts with `prefix`
local function raises(prefix, fn, ...)
  local ok, err = pcall(fn, ...)
  if ok then error("expected the error '" .. prefix .. "'", 2) end
  if tostring(err):sub(1, #prefix) ~= prefix then
    error(("expected the error '%s…', got '%s'"):format(prefix, tostring(err)), 2)
  end
end

local function eq(got, want, what)
  if got ~= want then error(("%s: expected %s, got %s"):format(what, tostring(want), tostring(got)), 2) end
end

local H100 = { name = "H100-SXM5-80GB", interconnect = "nvlink4", interconnect_bw_gbps = 900.0, pcie_bw_gbps = 64.0,
               mem_gb = 80 }

-- a plan of bf16 training with the given recipe ("amp": Megatron's bf16 parameters, fp32 gradients, master copies and
-- moments; "pure": bf16 everything), Adam
local function plan_of(p, batch, recipe)
  return P.plan(P.normalize(p), H100, { batch = batch or 8, dtype = "bf16", mode = "train", precision = recipe or "amp" })
end

-- L layers of `layer` parameters each, a prologue of `root` (the embedding), an epilogue without parameters, and the
-- optimizer step (8 s over all parameters); per layer fw / bw seconds
local function graph(L, layer, root, fw, bw)
  local nodes = {
    { op = "x", name = "embed", layer = "", count = 1, params = root, output = { 0 }, attrs = {} },
    { op = "x", name = "h.a", layer = "h", count = L, params = layer, output = { 0 }, attrs = {} },
    { op = "x", name = "head", layer = "", count = 1, params = 0, output = { 0 }, attrs = {} },
    { op = "adam", name = "optimizer.adam", layer = "", count = 1, params = 0, output = { 0 }, attrs = {},
      phase = "optimizer" },
  }
  local times = {
    { fw = 0, fw_comm = 0, bw = 0, bw_comm = 0, opt = 0 },
    { fw = fw or 1e-3, fw_comm = 0, bw = bw or 2e-3, bw_comm = 0, opt = 0 },
    { fw = 0, fw_comm = 0, bw = 0, bw_comm = 0, opt = 0 },
    { fw = 0, fw_comm = 0, bw = 0, bw_comm = 0, opt = 8 },
  }
  return nodes, times
end

local function with_memory(plan, nodes, cap)
  plan.memory = memory.context { nodes = nodes, training = true, mode = "train", gpu_mem_gb = cap,
    state = precision.state(plan.precision, "adam", true) }
  return plan
end

local T = {}

function T.test_zero_field_validation()
  eq(P.normalize({}).zero, 0, "default: no sharding (DDP)")
  eq(Z.optimizer_sharded(P.normalize({})), false, "default: no distributed optimizer")
  -- distributed_optimizer = true is zero = 1: one fact, two names in the input, one field in the plan (zero), the
  -- other derived from it (neusight.parallel.zero optimizer_sharded)
  local d = P.normalize { dp = 2, distributed_optimizer = true }
  eq(d.zero, 1, "distributed_optimizer = true is zero 1")
  eq(d.distributed_optimizer, nil, "not kept beside zero")
  eq(Z.optimizer_sharded(d), true, "derived: sharded")
  for z = 1, 3 do eq(Z.optimizer_sharded(P.normalize({ dp = 2, zero = z })), true, "zero " .. z .. " shards the optimizer") end
  eq(Z.optimizer_sharded(P.normalize({ dp = 2, zero = 0 })), false, "zero 0: not")
  eq(Z.optimizer_sharded(P.normalize({ dp = 2, distributed_optimizer = false })), false, "distributed_optimizer = false")
  -- a normalized table normalized again (neusight.workload build does) keeps them
  local again = P.normalize(P.normalize { dp = 2, zero = 3 })
  eq(again.zero, 3, "normalized twice")
  eq(P.normalize({ dp = 2, zero = 2, distributed_optimizer = true }).zero, 2, "agreeing: accepted")
  raises("parallel.zero: zero = 0 and distributed_optimizer = true disagree", P.normalize,
    { dp = 2, zero = 0, distributed_optimizer = true })
  raises("parallel.zero: zero = 3 and distributed_optimizer = false disagree", P.normalize,
    { dp = 2, zero = 3, distributed_optimizer = false })
  raises("parallel.zero: 0, 1, 2 or 3 expected", P.normalize, { zero = 4 })
  raises("parallel.zero: 0, 1, 2 or 3 expected", P.normalize, { zero = -1 })
  raises("parallel.zero: 0, 1, 2 or 3 expected", P.normalize, { zero = 1.5 })
  raises('parallel.zero: 0, 1, 2 or 3 expected (the ZeRO stage: 0 none, 1 optimizer state, 2 + gradients, 3 + parameters), got "3"',
    P.normalize, { zero = "3" })
  raises("parallel: unknown field 'zeros' (did you mean 'zero'?)", P.normalize, { zeros = 3 })
  -- not modelled: refused
  raises("parallel.zero: ZeRO stage 3 shards the gradients and parameters over dp, which is not run with pipeline "
    .. "parallelism (pp = 2)", P.normalize, { dp = 2, pp = 2, zero = 3 })
  raises("parallel.zero: ZeRO stage 2 shards the gradients over dp", P.normalize, { dp = 2, pp = 2, zero = 2 })
  raises("parallel.zero: ZeRO stage 3 with expert parallelism (ep = 2) is not modelled", P.normalize,
    { dp = 4, ep = 2, zero = 3 })
  eq(P.normalize({ dp = 2, pp = 2, zero = 1 }).zero, 1, "zero 1 with a pipeline: Megatron's distributed optimizer")
  eq(P.normalize({ dp = 4, ep = 2, zero = 2 }).zero, 2, "zero 2 with experts")
  eq(P.normalize({ dp = 2, tp = 2, zero = 3 }).zero, 3, "zero 3 with tp: 2-D FSDP + TP")
end

-- Model state per GPU against the ZeRO paper's closed forms (Rajbhandari et al. 2020, Fig. 1 / Table 1), with the
-- run's recipe (Megatron amp bf16: 2 B parameters, 4 B gradients, 4 B master, 8 B moments = 18 B) over dp 8:
-- 0: 18 Ψ; 1: (2 + 4) Ψ + 12 Ψ / 8; 2: 2 Ψ + (4 + 12) Ψ / 8; 3: 18 Ψ / 8 + the largest two neighbouring units
-- unsharded (here the embedding and the first layer, parameters and gradients: (Ψ_embedding + Ψ_layer) × (2 + 4)).
function T.test_zero_state_closed_forms()
  local L, layer, root = 32, 2e8, 1e9
  local psi = L * layer + root
  local nodes, times = graph(L, layer, root)
  local want = {
    [0] = 18 * psi, [1] = 6 * psi + 12 * psi / 8, [2] = 2 * psi + 16 * psi / 8,
    [3] = 18 * psi / 8 + (root + layer) * (2 + 4),
  }
  for z = 0, 3 do
    local plan = with_memory(plan_of({ dp = 8, zero = z }, 8), nodes)
    eq(plan.precision.bytes.param, 2, "bf16 parameters") eq(plan.precision.bytes.grad, 4, "fp32 gradients")
    local tl = P.timeline(plan, nodes, times)
    near(tl.memory.stages[1].state_gb, want[z] / 1e9, "zero " .. z .. ": state per GPU", 1e-12)
    local st = tl.memory.memory.state
    if z == 3 then
      near(st.gathered_gb, (root + layer) * 6 / 1e9, "zero 3: the unsharded units", 1e-12)
      near(st.weights_gb, 2 * psi / 8 / 1e9, "zero 3: weights sharded", 1e-12)
    else
      eq(st.gathered_gb, nil, "zero " .. z .. ": no unsharded units")
    end
    if z == 2 then near(st.gradients_gb, 4 * psi / 8 / 1e9, "zero 2: gradients sharded", 1e-12) end
  end
  -- the pure recipe (bf16 parameters, gradients and Adam's two moments, no master copy): 2 + 2 + 4 = 8 B, ZeRO-3 8 Ψ / 8
  local plan = with_memory(plan_of({ dp = 8, zero = 3 }, 8, "pure"), nodes)
  near(P.timeline(plan, nodes, times).memory.stages[1].state_gb, (8 * psi / 8 + (root + layer) * 4) / 1e9,
    "pure bf16 zero 3", 1e-12)
  -- dp 1: nothing to shard over
  local one = with_memory(plan_of({ dp = 1, microbatches = 2, zero = 3, kernels = "megatron" }, 8), nodes)
  near(P.timeline(one, nodes, times).memory.stages[1].state_gb, 18 * psi / 1e9, "dp 1: unsharded", 1e-12)
end

-- ZeRO-3's unsharded units are the one computing and the one prefetched, neighbours in the run's order (FSDP's
-- one-unit prefetch): an embedding and an LM head as large as each other, first and last, are never gathered together.
-- Here the embedding (root), L layers, and the head (head): the largest neighbouring pair is the head and the last layer.
function T.test_zero3_transient_is_the_largest_neighbouring_pair()
  local L, layer, root, head = 8, 2e8, 1e9, 1.1e9
  local nodes, times = graph(L, layer, root)
  nodes[3].params = head
  local plan = with_memory(plan_of({ dp = 8, zero = 3 }, 8), nodes)
  local st = P.timeline(plan, nodes, times).memory.memory.state
  near(st.gathered_gb, (head + layer) * (2 + 4) / 1e9, "the head and the last layer (not the embedding and the head)",
    1e-12)
  eq(Z.transient_bytes({ { params = 5 } }, 2, 4), 5 * 6, "one unit: itself")
  eq(Z.transient_bytes({ { params = 5 }, { params = 1 }, { params = 7 } }, 2, 4), 8 * 6, "neighbours only")
end

-- Communication volume per GPU and step (bandwidth-optimal, the ZeRO paper §7): DDP all-reduces the gradients,
-- 2 (n − 1)/n Ψ; ZeRO-3 all-gathers each unit's parameters twice (forward and backward) and reduce-scatters the
-- gradients, 3 (n − 1)/n Ψ: 1.5× DDP's, with one element size for both (pure bf16).
function T.test_zero3_moves_one_and_a_half_times_ddp_bytes()
  local L, layer = 16, 1e8
  local nodes, times = graph(L, layer, 0)
  local n = 8
  local function dev(z, root)
    local nn, tt = graph(L, layer, root or 0)
    return P.timeline(plan_of({ dp = n, zero = z }, 8, "pure"), nn, tt).devices[1]
  end
  local psi_bytes = L * layer * 2
  local ddp, z3 = dev(0), dev(3)
  near(ddp.dp_wire_bytes, 2 * (n - 1) / n * psi_bytes, "DDP: one all-reduce of the gradients", 1e-9)
  near(z3.dp_wire_bytes, 3 * (n - 1) / n * psi_bytes, "ZeRO-3: two all-gathers and one reduce-scatter", 1e-9)
  near(z3.dp_wire_bytes / ddp.dp_wire_bytes, 1.5, "ZeRO-3 / DDP", 1e-12)
  near(z3.dp_bytes, 3 * psi_bytes, "ZeRO-3 payload: 2 gathers + 1 scatter of Ψ", 1e-9)
  -- ZeRO-1/2: reduce-scatter of the gradients and all-gather of the parameters: DDP's volume
  for z = 1, 2 do near(dev(z).dp_wire_bytes, ddp.dp_wire_bytes, "zero " .. z .. ": DDP's volume", 1e-9) end
  -- the embedding (a unit of its own, as torchtitan wraps it): the same rule
  local root = 5e8
  near(dev(3, root).dp_bytes, 3 * (psi_bytes + root * 2), "with the embedding: 3 Ψ", 1e-9)
  near(dev(3, root).dp_wire_bytes / dev(0, root).dp_wire_bytes, 1.5, "with the embedding: 1.5× DDP", 1e-12)
  -- microbatches: every microbatch gathers and scatters again (FSDP's default)
  local nn, tt = graph(L, layer, 0)
  local acc = P.timeline(plan_of({ dp = n, zero = 3, microbatches = 4 }, 32, "pure"), nn, tt).devices[1]
  near(acc.dp_bytes, 4 * 3 * psi_bytes, "4 microbatches: 4 times", 1e-9)
  local _ = nodes, times
end

-- Gradient accumulation under ZeRO-2: no rank keeps the whole gradient, so each of the microbatches' backwards
-- reduce-scatters its buckets (DeepSpeed stage 2, FSDP SHARD_GRAD_OP), where ZeRO-1 (whole gradients, sharded
-- optimizer) reduce-scatters once after the last; the parameters are all-gathered once after the step either way.
-- With the link slower than the backward (no overlap left), each reduce-scatter's tail is exposed, once per microbatch.
function T.test_zero2_reduce_scatters_every_microbatch()
  local L, layer, n, mb = 16, 1e8, 8, 4
  local function dev(z, microbatches)
    local nn, tt = graph(L, layer, 0, 1e-4, 2e-4)
    return P.timeline(plan_of({ dp = n, zero = z, microbatches = microbatches }, 8 * microbatches, "pure"), nn, tt)
      .devices[1]
  end
  local psi_bytes = L * layer * 2
  local z1, z2, z2_one = dev(1, mb), dev(2, mb), dev(2, 1)
  near(z1.dp_bytes, 2 * psi_bytes, "ZeRO-1: one reduce-scatter of Ψ, one all-gather of Ψ", 1e-9)
  near(z2.dp_bytes, (mb + 1) * psi_bytes, "ZeRO-2: a reduce-scatter per microbatch, one all-gather", 1e-9)
  near(z2.dp_wire_bytes, (mb + 1) * (n - 1) / n * psi_bytes, "ZeRO-2: its volume", 1e-9)
  near(z2_one.dp_bytes, z1.dp_bytes, "one microbatch: ZeRO-2 moves ZeRO-1's bytes", 1e-12)
  -- the parameters' all-gather after the step, priced as the timeline does (neusight.collectives over the dp group);
  -- the rest of ZeRO-1's communication is one microbatch's buckets
  local plan = plan_of({ dp = n, zero = 1 }, 8, "pure")
  local gather = C.time("all_gather", psi_bytes, plan.groups.dp, plan.cluster)
  local buckets = z1.dp_comm - gather
  assert(buckets > 0, "ZeRO-1's communication: one microbatch's buckets and the all-gather")
  near(z2.dp_comm, mb * buckets + gather, "ZeRO-2: the buckets mb times, the all-gather once", 1e-9)
  local tail1 = z1.dp_exposed - gather -- ZeRO-1's exposed tail of its one bucket pass (the gather exposed whole)
  assert(tail1 > 0, "the link slower than the backward: a tail exposed")
  near(z2.dp_exposed - gather, mb * tail1, "ZeRO-2: each microbatch's tail exposed", 1e-9)
end

-- Exposed communication per unit (neusight.parallel.zero exposed, FSDP's one-unit prefetch): with a price the test
-- sets, compute that hides each gather leaves only the first gather (forward) and the first gather and the last
-- scatter (backward) exposed; compute too short to hide them leaves the link's time less the compute.
function T.test_zero3_exposed_per_unit()
  local units = {}
  for k = 1, 4 do units[k] = { params = 1e9, fw = 1, bw = 2 } end
  local function price(c) return function(op, bytes) return (op == "all_gather" and c.ag or c.rs) * bytes / 1e9 end end
  -- gathers of 0.5 s, scatters of 0.25 s: hidden by 1 s / 2 s of compute but the first and last
  local r = Z.exposed(units, 1, 1, price { ag = 0.5, rs = 0.25 })
  near(r.fw_exposed, 0.5, "forward: the first unit's gather")
  near(r.bw_exposed, 0.5 + 0.25, "backward: the first gather and the last scatter")
  near(r.wire, 4 * 0.5 + 4 * (0.5 + 0.25), "on the link")
  -- gathers of 3 s: the link sets the pace (forward 4 gathers back to back, then the last unit's compute)
  local slow = Z.exposed(units, 1, 1, price { ag = 3, rs = 0 })
  near(slow.fw_exposed, 4 * 3 + 1 - 4 * 1, "forward: link-bound")
  -- a unit of no compute (an embedding lookup's few microseconds): its gather is not hidden, the next one's is
  local with_embedding = { { params = 1e9, fw = 0, bw = 0 } }
  for k = 1, 2 do with_embedding[k + 1] = { params = 1e9, fw = 1, bw = 2 } end
  local rr = Z.exposed(with_embedding, 1, 1, price { ag = 0.5, rs = 0.25 })
  eq(rr.gathers, 6e9, "gathers: each unit twice") eq(rr.scatters, 3e9, "scatters: each unit once")
  near(rr.fw_exposed, 0.5 + 0.5, "forward: the embedding's gather and the first layer's (issued as the embedding ran)")
  -- the timeline puts it into each microbatch's forward and backward, and leaves out the bucket reduce and the
  -- parameter all-gather after the step
  local L, layer = 8, 1e8
  local nodes, times = graph(L, layer, 0, 1e-3, 2e-3)
  local plan = plan_of({ dp = 8, zero = 3, microbatches = 2 }, 16)
  local tl = P.timeline(plan, nodes, times)
  local d = tl.devices[1]
  local ep, eg = plan.precision.bytes.param, plan.precision.bytes.grad
  local units8 = Z.units({ segments = { { nodes = { 2 }, per = { 1 }, reps = L, layered = true } } }, nodes, times, {}, {})
  local c = Z.exposed(units8, ep, eg, function(op, bytes) return C.time(op, bytes, plan.groups.dp, plan.cluster) end)
  near(d.dp_exposed, 2 * (c.fw_exposed + c.bw_exposed), "exposed: both microbatches'", 1e-12)
  near(d.dp_comm, 2 * c.wire, "on the link: both microbatches'", 1e-12)
  near(tl.iteration, 2 * (L * 3e-3) + d.dp_exposed + 8 / 8, "iteration: compute + exposed + an eighth of the step", 1e-9)
  assert(c.fw_exposed >= C.time("all_gather", layer * ep, plan.groups.dp, plan.cluster) - 1e-15,
    "the first gather is exposed")
end

-- The one test of what shards in a run (zero.active_stage): the plan's stage in data-parallel training, else 0 —
-- ZeRO-3 runs where it is 3 (the timeline, the memory report and the report's line ask it), the step is sharded where
-- it is at least 1.
function T.test_active_stage_is_the_plans_in_data_parallel_training_only()
  for z = 0, 3 do
    eq(Z.active_stage(plan_of({ dp = 2, zero = z }, 8)), z, "dp 2 training: zero " .. z)
    eq(Z.active_stage(plan_of({ dp = 1, zero = z }, 8)), 0, "dp 1: nothing to shard")
    eq(Z.active_stage(P.plan(P.normalize { dp = 2, zero = z }, H100, { batch = 8, dtype = "bf16", mode = "inference" })),
      0, "inference: nothing to shard")
  end
end

-- ZeRO-3's units are made only where they are used: the timeline makes them under zero 3, and otherwise only when the
-- memory report asks for their bytes (zero3_gathered), which it does for a stage-3 plan alone: the run's own, or the
-- one that asks whether a data-parallel layout that does not fit would under zero 3. A layout at a lower stage that
-- fits asks nothing.
function T.test_zero3_units_made_only_where_used()
  local PM = require "neusight.parallel.memory"
  local nodes, times = graph(32, 2e8, 1e9)
  local function asked(z, cap)
    local plan = with_memory(plan_of({ dp = 8, zero = z }, 8), nodes, cap)
    local r = P.timeline(plan, nodes, times)
    local total, n = 0, 0
    for _, d in ipairs(r.devices) do total = total + d.params end
    local report = PM.report(plan, r.devices, PM.context(plan, nodes, plan.precision), total, true, function()
      n = n + 1
      return 1e9
    end)
    return n, report
  end
  for z = 0, 2 do
    local n, r = asked(z, 1e6)
    eq(r.fits, true, "zero " .. z .. ": it fits")
    eq(n, 0, "zero " .. z .. ", a layout that fits: ZeRO-3's units not asked for")
  end
  local n, r = asked(3, 1e6)
  assert(n > 0 and r.fits, "zero 3: its units")
  n, r = asked(0, 1e-3)
  assert(n > 0 and not r.fits, "DDP that does not fit: the units, to ask whether zero 3 would")
end

-- zero_fits (search's no-fit help): the least higher stage under which a layout that does not fit would
function T.test_zero_fits_names_the_least_stage_that_fits()
  local L, layer, root = 32, 2e8, 1e9
  local nodes, times = graph(L, layer, root)
  local function report(z, cap)
    return P.timeline(with_memory(plan_of({ dp = 8, zero = z }, 8), nodes, cap), nodes, times).memory
  end
  local gb = {}
  for z = 0, 3 do gb[z] = report(z).memory_gb end
  assert(gb[0] > gb[1] and gb[1] > gb[2] and gb[2] > gb[3], "each stage takes memory off")
  -- a GPU between stage 2's and stage 1's needs: not DDP, not zero 1, zero 2
  local cap = (gb[1] + gb[2]) / 2 / 0.95 -- (neusight.memory capacity keeps a margin: search the cap that admits)
  local r
  for _ = 1, 60 do
    r = report(0, cap)
    if r.zero_fits == 2 or r.fits then break end
    cap = cap * 0.99
  end
  eq(r.fits, false, "DDP does not fit") eq(r.zero_fits, 2, "zero 2 would") eq(r.distributed_optimizer_fits, false, "zero 1 would not")
  -- and predict's no-fit warning says so (audit26: it said only "the forecast assumes it fits")
  assert(r.warning:find("the forecast assumes it fits; --zero 2 (shards the gradients and optimizer state", 1, true),
    "the warning names --zero 2: " .. tostring(r.warning))
  local p0 = P.timeline(with_memory(plan_of({ dp = 8 }, 8), nodes, (gb[0] + gb[1]) / 2 / 0.95), nodes, times).memory
  eq(p0.fits, false, "DDP does not fit between DDP's and zero 1's needs") eq(p0.zero_fits, 1, "zero 1 would")
  assert(p0.warning:find("; --distributed-optimizer (shards the optimizer state over the data-parallel ranks) would "
    .. "make it fit", 1, true), "the warning names --distributed-optimizer: " .. tostring(p0.warning))
  local none = report(0, 1e-3)
  assert(not none.warning:find("would make it fit", 1, true), "nothing fits: no flag named")
  eq(report(3, 1e-3).zero_fits, nil, "zero 3 and nothing fits: no higher stage")
  eq(report(0, 1e-3).zero_fits, nil, "nothing fits: none")
  eq(report(0, 1e-3).fits, false, "1 MB")
  eq(report(0, 1e6).zero_fits, nil, "it fits: not asked")
  -- pipelines: stages 2 and 3 are refused there, so never suggested
  local pp = P.timeline(with_memory(plan_of({ dp = 4, pp = 2, microbatches = 2 }, 8), nodes, 1e-3), nodes, times).memory
  eq(pp.zero_fits, nil, "pp 2: only zero 1 could be suggested, and it does not fit")
end

-- Outside data-parallel training a ZeRO stage has no effect (neusight.parallel.zero active_stage; the workload warns
-- so): the report says nothing of sharding (no "sharded over dp" on the state line, JSON distributed_optimizer false,
-- the stage as asked in JSON zero) and, with no gradients, no gradient-reduction line; data-parallel training says both.
function T.test_report_says_no_sharding_outside_data_parallel_training()
  local nodes, times = graph(4, 1e6, 1e6)
  for _, mode in ipairs { "inference", "prefill", "decode", "train" } do
    for z = 0, 3 do
      local training = mode == "train"
      local plan = P.plan(P.normalize { dp = 2, zero = z }, H100,
        { batch = 8, dtype = "bf16", mode = mode, precision = "amp" })
      plan.memory = memory.context { nodes = nodes, training = training, mode = mode,
        state = precision.state(plan.precision, training and "adam" or "none", training) }
      local r = P.report(plan, P.timeline(plan, nodes, times))
      local what = mode .. " zero " .. z
      local sharded = training and z >= 1
      eq(r.table:find("sharded over dp 2", 1, true) ~= nil, sharded, what .. ": the state line's sharding")
      eq(r.table:find("data-parallel gradient reduce-scatter and parameter all-gather", 1, true) ~= nil,
        training and (z == 1 or z == 2), what .. ": the reduce-scatter line")
      eq(r.table:find("data-parallel gradient all-reduce", 1, true) ~= nil, training and z == 0,
        what .. ": the all-reduce line")
      eq(r.table:find("ZeRO-3 parameter all-gathers", 1, true) ~= nil, training and z == 3, what .. ": the ZeRO-3 line")
      eq(r.json.distributed_optimizer, sharded, what .. ": JSON distributed_optimizer")
      eq(r.figures.distributed_optimizer, sharded, what .. ": figures' distributed_optimizer")
      eq(r.json.zero, z, what .. ": JSON zero, as asked")
    end
  end
end

-- search's no-fit hint names what the stage shards (zero.shards) and the layouts it runs with (config.zero_refusal)
function T.test_zero_help_says_what_the_stage_shards_and_where_it_runs()
  local S = require "neusight.search"
  eq(S.zero_help(2), "--zero 2 (shards the gradients and optimizer state over the data-parallel ranks; pp 1 layouts only)",
     "stage 2")
  eq(S.zero_help(3), "--zero 3 (shards the parameters, gradients and optimizer state over the data-parallel ranks; "
     .. "pp 1, ep 1 layouts only)", "stage 3")
end

return T
