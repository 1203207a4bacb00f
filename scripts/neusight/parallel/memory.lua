-- scripts/neusight/parallel/memory.lua — memory per GPU of a pipeline stage: saved activations over the schedule, temporaries, the state share.
--
-- Owns the parallel side of neusight/memory.lua's model: which tensors a virtual stage keeps alive per microbatch
-- under full or selective recomputation, the peak of them over a device's op order, its largest temporary, and each
-- stage's memory parts (its share of the model state, sharded by the distributed optimizer; workspace; KV cache)
-- handed to memory.parallel for the report.
local memory = require "neusight.memory"
local precision = require "neusight.precision"
local zero = require "neusight.parallel.zero"
local max = math.max
local ipairs, pairs, type, setmetatable = ipairs, pairs, type, setmetatable

local M = {}

--- Saved tensors per node (neusight.memory): from the workload's build (plan.memory), else from the op rules now
--- (an imported reference graph: ops without a rule are charged their output); mem.core[i] marks the core-attention
--- nodes selective recomputation re-runs.
---@param plan table neusight.parallel.plan()
---@param nodes table[]
---@param recipe table the run's precision recipe
function M.context(plan, nodes, recipe)
  local mem = plan.memory or memory.context { nodes = nodes, rule_of = memory.engine_rules(), training = plan.training,
    state = precision.state(recipe, "none", plan.training), recipe = recipe, mode = plan.training and "train" or "inference" }
  mem.core = {}
  for i, n in ipairs(nodes) do mem.core[i] = (n.attrs or {}).core_attention == true end
  if plan.saves_known == false then  -- an imported graph: what its nodes keep for backward is not known, not counted
    for i in ipairs(nodes) do mem.saved[i], mem.kept[i] = 0, 0 end
  end
  return mem
end

-- Bytes one microbatch leaves alive for backward in a virtual stage: the tensors each node saves (neusight.memory:
-- its op rule's `saves`, per instance in mem.saved). With full recomputation a layer keeps only its input
-- (`boundary` bytes) and `transient` is one layer's saved tensors, rebuilt in backward. With selective recomputation
-- the core-attention nodes keep only the region's inputs they read (mem.kept: Q, K, V) and one layer's core
-- attention is rebuilt at a time: its saved tensors less those kept inputs, which the re-run reads in place (until
-- 2026-11-29 they were counted again, so selective could need more than no recomputation under sdpa).
local function activation_bytes(mem, st, recompute, boundary, selective)
  local bytes, transient = 0, 0
  for _, seg in ipairs(st.segments) do
    local one, core = 0, 0 -- one rep
    for j, i in ipairs(seg.nodes) do
      local b = mem.saved[i] * seg.per[j]
      if selective and seg.layered and (mem.core[i]) then
        -- rebuilt in backward: what it saves beyond the kept inputs (the re-run reads those very tensors, not copies)
        local kept = mem.kept[i] * seg.per[j]
        core, one = core + max(0, b - kept), one + kept
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

--- Activation bytes per virtual stage (activations[k] of stage k, set by M.stage): a device's peak kept for backward
--- is their running sum over its op order, + a stage's bytes at each forward, − at its backward (walked by
--- neusight.parallel.timeline along with its other sums over the ops).
function M.stage_activations(stages)
  local out = {}
  for k, st in ipairs(stages) do out[k] = st.activations end
  return out
end

--- Activation, transient and temporary bytes of virtual stage `st` per microbatch (set on st): activations and the
--- transient only in training; the largest temporary of its nodes.
---@param boundary number bytes of the stage-boundary activation (what a fully recomputed layer keeps)
function M.stage(mem, st, training, full, boundary, selective)
  st.activations, st.transient, st.temporary, st.temporary_node = 0, 0, 0, nil
  if training then
    st.activations, st.transient = activation_bytes(mem, st, full, boundary, selective)
  end
  local names = mem.names or {}
  for _, it in ipairs(st.items) do
    local b = mem.temporary[it.node]
    if b > st.temporary then st.temporary, st.temporary_node = b, names[it.node] end
  end
end

--- Largest transient and temporary bytes over device d's chunks (virtual stages c·P + d, 1-based d), and the name of
--- the node whose temporary that is (nil when none has one).
function M.device_peaks(stages, P, v, d)
  local transient, temporary, node = 0, 0, nil
  for c = 0, v - 1 do
    local st = stages[c * P + d]
    transient = max(transient, st.transient)
    if st.temporary > temporary then temporary, node = st.temporary, st.temporary_node end
  end
  return transient, temporary, node
end

--- Over how many GPUs a rank's master copies and optimizer moments (and its optimizer step) are split, for the
--- parameters replicated over plan.groups[group] (neusight.parallel.layout replica_group: "dp", the default, or
--- "edp", an expert's): that group's size under the distributed optimizer (Megatron-LM --use-distributed-optimizer,
--- ZeRO stage 1) in data-parallel training, else 1. An expert's state shards over its dp / ep replicas only, the rest
--- over dp. The state per GPU is M.state_parts'; the report's JSON says the two as optimizer_shards and (ep > 1)
--- expert_optimizer_shards.
---@param plan table neusight.parallel.plan()
---@param group? "dp"|"edp"
function M.optimizer_shards(plan, group)
  if zero.active_stage(plan) < 1 then return 1 end
  return plan.groups[group or "dp"].size
end

--- Over how many GPUs the optimizer step of a stage's `params` parameters is split, `expert` of them an expert's
--- (replica group "edp"): M.optimizer_shards(plan) when they all shard alike, else params over what one GPU steps,
--- (params − expert) / the dp shards + expert / the edp shards. The timeline divides a device's share of the step's
--- time (and floor) by it.
function M.step_shards(plan, params, expert)
  local dense, ex = M.optimizer_shards(plan, "dp"), M.optimizer_shards(plan, "edp")
  if expert == 0 or dense == ex then return dense end
  return params / ((params - expert) / dense + expert / ex)
end

--- Model-state bytes by role of one GPU of a stage (neusight.precision.state_parts, the one formula of them) holding
--- `params` parameters, `expert` of them an expert's: the master copies and moments of the rest over
--- M.optimizer_shards(plan, "dp"), an expert's over M.optimizer_shards(plan, "edp").
---@param plan table neusight.parallel.plan()
---@param s table neusight.precision.state()
--- Under ZeRO stages 2 and 3 (plan.zero) the gradients, and at 3 the weights, shard over the same groups
--- (neusight.parallel.zero shards).
function M.state_parts(plan, s, params, expert)
  local dense = zero.shards(plan, M.optimizer_shards(plan, "dp"))
  local ex = zero.shards(plan, M.optimizer_shards(plan, "edp"))
  if expert == 0 or dense.optimizer == ex.optimizer then return precision.state_parts(params, s, dense) end
  local p, e = precision.state_parts(params - expert, s, dense), precision.state_parts(expert, s, ex)
  for k, v in pairs(e) do p[k] = p[k] + v end
  return p
end

-- Times of a node that takes none (M.at): read, never written.
local NO_TIME = { fw = 0, fw_comm = 0, bw = 0, bw_comm = 0, bw_wgrad = 0, opt = 0, fw_floor = 0, bw_floor = 0,
                  opt_floor = 0 }

--- Bytes per GPU of the fullest stage of `plan` running `nodes` (plan.memory their context, as neusight.workload
--- builds it): the memory report of the timeline (neusight.parallel.timeline, lean) itself, with every time 0 — what
--- it counts of memory depends on no time (the stage partition and saved bytes are the graph's, the op order the
--- schedule's shape, compiled without times), so this is the run's own per-stage memory, no second formula of it.
--- neusight.workload rebuilds the graph at another micro-batch and asks this for the largest micro-batch that fits.
function M.at(plan, nodes)
  local times = {}
  for i = 1, #nodes do times[i] = NO_TIME end
  return require("neusight.parallel.timeline").timeline(plan, nodes, times, true, false).memory.total
end

--- The run's memory (memory.parallel) from the timeline's devices (params, expert_params, activation_bytes,
--- temporary_bytes, kv_cache_bytes each) and `params_total` parameters over all stages; `lean`: without the per-stage
--- lines. Not lean, with mem.at_micro_batch (neusight.workload's: function(plan, mb) → the bytes per GPU of the fullest
--- stage at micro-batch size mb, this plan's dp and microbatches): the largest micro-batch that fits
--- (memory.parallel sizing). `zero3_gathered(d)`: the bytes of ZeRO-3's unsharded units on device d (the timeline's),
--- asked only for a stage-3 plan: the run's own, or the one that asks whether a layout would fit under zero 3.
function M.report(plan, devices, mem, params_total, lean, zero3_gathered)
  -- Memory per GPU of each stage (neusight.memory): its state share (master copies and moments over dp under the
  -- distributed optimizer, an expert's over dp / ep: M.state_parts), the peak saved activations, its largest
  -- temporary, workspace (autocast's weight cache by parameter share), and its own layers' serving KV cache
  -- (dev.kv_cache_bytes: every microbatch's sequences', neusight.workload kv_cache_resident).
  local function stage_parts(p)
    local parts = {}
    for d, dev in ipairs(devices) do
      local share = params_total > 0 and dev.params / params_total or 1 / p.pp
      local state = M.state_parts(p, mem.state, dev.params, dev.expert_params or 0)
      -- ZeRO-3's unsharded units (neusight.parallel.zero transient_bytes: the largest two neighbouring units' full
      -- parameters and gradients, the one computing and the one prefetched), counted with the state they are the gathered copies of
      local gathered = zero.active_stage(p) == 3 and zero3_gathered and zero3_gathered(d) or 0
      if gathered > 0 then
        state.gathered = gathered
        state.total = state.total + state.gathered
      end
      local autocast = mem.autocast_cache * share
      parts[d] = {
        state = state.total, activations = dev.activation_bytes,
        temporary = dev.temporary_bytes, workspace = mem.cublas + autocast,
        kv_cache = dev.kv_cache_bytes,  -- its own layers' cache (the timeline's sum over its nodes)
        -- the parts' breakdown, as a one-GPU run's memory object has it (neusight.memory breakdown)
        state_parts = state, cublas = mem.cublas, autocast_cache = autocast, temporary_node = dev.temporary_node,
      }
    end
    return parts
  end
  local cap_gb, unsaved = mem.gpu_mem_gb or plan.gpu_mem_gb, plan.saves_known == false
  local sizing
  if not lean and type(mem.at_micro_batch) == "function" then
    sizing = { micro_batch = plan.micro_batch, dp = plan.dp, microbatches = plan.microbatches,
               at = function(mb) return mem.at_micro_batch(plan, mb) end }
  end
  local out = memory.parallel(stage_parts(plan), cap_gb, plan.recompute or "none", lean, unsaved, mem.mode,
    mem.gpu_reported_gib, sizing)
  -- whether the layout fits under ZeRO stage z (1: the distributed optimizer)
  local function fits_at(z)
    local sharded = setmetatable({ zero = z }, { __index = plan })
    return memory.parallel(stage_parts(sharded), cap_gb, plan.recompute or "none", true, unsaved, mem.mode,
      mem.gpu_reported_gib).fits
  end
  -- whether the same layout would fit under the distributed optimizer, where it does not fit, and the optimizer is off
  -- and could shard (training, dp > 1): search suggests --distributed-optimizer only where it would make a layout fit
  -- (search_cmd.cpp no_fit: only when no layout fits). Nil for a layout that fits: a second memory.parallel per layout
  -- no one reads.
  if not out.fits and not zero.optimizer_sharded(plan) and zero.dp_gradients(plan) then
    out.distributed_optimizer_fits = fits_at(1)
  end
  -- the least higher ZeRO stage (neusight.parallel.zero) under which the layout would fit, where it does not fit and
  -- one could shard more (data-parallel training; stages 2 and 3 without a pipeline, 3 without expert parallelism, as
  -- neusight.parallel.config allows them): search suggests --zero N by it. Nil where it fits or none would.
  if not out.fits and zero.dp_gradients(plan) then
    local refusal = require("neusight.parallel.config").zero_refusal -- the one rule of what a stage runs with
    for z = zero.stage(plan) + 1, 3 do
      -- (stage 1 is the distributed optimizer, asked just above — z = 1 only from stage 0, where it always is: not
      -- asked twice)
      local fits
      if z == 1 then fits = out.distributed_optimizer_fits
      elseif not refusal(z, plan.pp, plan.ep) then fits = fits_at(z) end
      if fits then
        out.zero_fits = z
        break
      end
    end
  end
  -- the no-fit warning (neusight.memory parallel) says what would make this layout fit, as search's no-fit help does
  -- (audit26: predict --dp 8 --ep 8 said only "the forecast assumes it fits")
  if not out.fits and out.zero_fits and type(out.warning) == "string" then
    out.warning = out.warning .. "; " .. require("neusight.search").zero_help(out.zero_fits, true)
      .. " would make it fit"
  end
  return out
end

return M
