-- scripts/neusight/parallel/report.lua — a parallel run as the forecast report shows it: the JSON `parallel` object,
-- the table's layout, per-stage and memory lines, the model state per GPU and what neusight/figures.lua gets of the
-- layout.
--
-- The engine renders what M.report returns as it is (engine/lua/session_hooks.cpp): the object through its generic
-- Lua → JSON bridge, the text verbatim. A field added here shows up in the JSON without a C++ change. Keys keep the
-- order of the metatable's __order list (the rest follow, sorted), so the JSON reads in a fixed, documented order.
local precision = require "neusight.precision"
local PM = require "neusight.parallel.memory"
local Z = require "neusight.parallel.zero"
local max, tointeger, fmt = math.max, math.tointeger, string.format
local ipairs, pairs, type, tostring, error, setmetatable = ipairs, pairs, type, tostring, error, setmetatable

local M = {}

local function ordered(t, keys) return setmetatable(t, { __order = keys }) end

-- A count the report shows as an integer (plan degrees, stage numbers, layers, buckets).
local function int(x, what)
  local i = tointeger(x)
  if not i then error(("parallel report: %s must be an integer (got %s)"):format(what, tostring(x)), 0) end
  return i
end

-- A quantity the report shows as a number (floats in the JSON, as 4.0 rather than 4).
local function num(x, what)
  if type(x) ~= "number" then error(("parallel report: %s must be a number (got %s)"):format(what, tostring(x)), 0) end
  return x + 0.0
end

local ms = 1e3

local DEVICE_KEYS = { "stage", "layers", "params", "expert_params", "state_gb", "activation_gb", "memory_gb",
  "compute_ms", "exposed_comm_ms", "bubble_ms", "optimizer_ms", "tp_comm_ms", "tp_comm_hidden_ms", "ep_comm_ms", "p2p_ms", "dp_comm_ms", "dp_exposed_ms",
  "dp_buckets", "grad_bytes", "microbatch_forward_ms", "microbatch_backward_ms", "finish_ms" }
local OP_KEYS = { "device", "kind", "microbatch", "chunk", "start_ms", "end_ms", "comm_ms", "send_ms" }
local LINK_KEYS = { "bw_gbps", "latency_us", "efficiency" }
local CLUSTER_KEYS = { "file", "gpus_per_node", "nodes", "intra", "inter" }
local KEYS = { "dp", "tp", "pp", "ep", "microbatches", "schedule", "virtual_stages", "kernels", "recompute",
  "sequence_parallel", "distributed_optimizer", "zero", "world", "micro_batch", "bucket_mb", "overlap_grad_reduce", "cluster",
  "iteration_ms", "pipeline_ms", "compute_ms", "exposed_comm_ms", "bubble_ms", "optimizer_ms", "critical_stage",
  "imbalance_ms", "p2p_bytes", "grad_bytes_per_rank", "embedding_sync_ms", "memory_gb", "fits", "devices" }

--- A device's busy time in seconds: its compute, the communication it does not hide and its optimizer step (the
--- timeline's bubble is the iteration less this).
local function busy(d) return d.compute + d.exposed_comm + d.optimizer end

--- The critical device, whose parts the summary gives (JSON compute_ms, exposed_comm_ms, bubble_ms, optimizer_ms and
--- critical_stage; search's columns; the CSV's iteration rows): the busiest one, the largest compute + exposed
--- communication + optimizer step, so the least idle (ties: the first); nil without devices. Its bubble is then the
--- iteration less its busy time. Not the device that finishes last: in 1F1B that is always stage 0, which with
--- uneven stages (DeepSeek-V3's 3 dense first layers, tester7 P2) is the lightest one, its idle time mostly the
--- other stages' extra work rather than the pipeline's fill and drain.
---@return table? crit the device
---@return number imbalance seconds: its busy time less the least busy device's (0 with one stage)
function M.critical(devices)
  local crit, least
  for _, d in ipairs(devices) do
    local b = busy(d)
    if not crit or b > busy(crit) then crit = d end
    if not least or b < least then least = b end
  end
  return crit, crit and busy(crit) - least or 0.0
end

local function link(l, what)
  return ordered({ bw_gbps = num(l.bw_gbps, what .. ".bw_gbps"), latency_us = num(l.latency_us, what .. ".latency_us"),
    efficiency = num(l.efficiency, what .. ".efficiency") }, LINK_KEYS)
end

--- The JSON `parallel` object of a run: its layout, the cluster's links, the iteration and the critical device's
--- parts, memory per GPU (neusight.memory.parallel, in result.memory) and per device its times and memory parts.
---@param plan table neusight.parallel.plan()
---@param result table neusight.parallel.timeline()
---@param lean? boolean without the per-device list (a search's ranking drops it)
function M.json(plan, result, lean)
  local memory = result.memory
  if type(memory) ~= "table" then error("parallel report: the timeline has no memory report (result.memory)", 0) end
  local stages = type(memory.stages) == "table" and memory.stages or {}
  local devices = not lean and {} or nil
  for i, d in ipairs(devices and result.devices or {}) do
    local o = ordered({
      stage = int(d.stage, "device stage"), layers = int(d.layers, "device layers"), params = num(d.params, "device params"),
      -- under expert parallelism, how many of them are its experts' (their state shards over dp / ep, not dp)
      expert_params = plan.ep > 1 and num(d.expert_params, "device expert_params") or nil,
      activation_gb = d.activation_bytes / 1e9,
      compute_ms = d.compute * ms, exposed_comm_ms = d.exposed_comm * ms, bubble_ms = d.bubble * ms,
      -- tp_comm_ms: the tensor-parallel collectives on the wire; tp_comm_hidden_ms: of them, the seconds under
      -- weight-gradient GEMMs (Megatron's column-parallel overlap: not in exposed_comm_ms)
      optimizer_ms = d.optimizer * ms, tp_comm_ms = d.tp_comm * ms, tp_comm_hidden_ms = d.tp_comm_hidden * ms,
      ep_comm_ms = d.ep_comm * ms, p2p_ms = d.p2p * ms,
      dp_comm_ms = d.dp_comm * ms, dp_exposed_ms = d.dp_exposed * ms, dp_buckets = int(d.buckets, "device buckets"),
      grad_bytes = num(d.grad_bytes, "device grad_bytes"),
      microbatch_forward_ms = d.microbatch_fw * ms, microbatch_backward_ms = d.microbatch_bw * ms,
      finish_ms = d.finish * ms,
    }, DEVICE_KEYS)
    for k, v in pairs(stages[i] or {}) do o[k] = v end -- the stage's memory parts (state, activations, temporary, …)
    devices[i] = o
  end
  if type(memory.memory_gb) ~= "number" then error("parallel report: memory.memory_gb must be a number", 0) end
  if type(memory.fits) ~= "boolean" then error("parallel report: memory.fits must be a boolean", 0) end
  local crit, imbalance = M.critical(result.devices)
  local c = plan.cluster
  return ordered({
    dp = int(plan.dp, "dp"), tp = int(plan.tp, "tp"), pp = int(plan.pp, "pp"), ep = int(plan.ep, "ep"),
    microbatches = int(plan.microbatches, "microbatches"), schedule = plan.schedule,
    virtual_stages = int(plan.virtual_stages, "virtual_stages"), kernels = plan.kernels, recompute = plan.recompute,
    sequence_parallel = plan.sequence_parallel and true or false,
    -- whether the optimizer is sharded: only in data-parallel training (neusight.parallel.zero active_stage; elsewhere
    -- a --zero or distributed_optimizer has no effect, as the workload's warning says); zero: the stage as asked
    distributed_optimizer = Z.active_stage(plan) >= 1,
    zero = int(Z.stage(plan), "zero"),
    world = int(plan.world, "world"), micro_batch = int(plan.micro_batch, "micro_batch"),
    bucket_mb = num(plan.bucket_mb, "bucket_mb"), overlap_grad_reduce = plan.overlap_grad_reduce and true or false,
    cluster = ordered({ file = plan.cluster_name or "", gpus_per_node = int(c.gpus_per_node, "cluster.gpus_per_node"),
      nodes = int(c.nodes, "cluster.nodes"), intra = link(c.intra, "cluster.intra"), inter = link(c.inter, "cluster.inter") },
      CLUSTER_KEYS),
    iteration_ms = result.iteration * ms, pipeline_ms = result.pipeline * ms,
    compute_ms = crit and crit.compute * ms or 0.0, exposed_comm_ms = crit and crit.exposed_comm * ms or 0.0,
    bubble_ms = crit and crit.bubble * ms or 0.0, optimizer_ms = crit and crit.optimizer * ms or 0.0,
    critical_stage = crit and int(crit.stage, "device stage") or 0, imbalance_ms = imbalance * ms,
    p2p_bytes = num(result.p2p_bytes, "p2p_bytes"), grad_bytes_per_rank = num(result.grad_bytes_per_rank, "grad_bytes_per_rank"),
    embedding_sync_ms = result.embedding_sync * ms,
    memory_gb = memory.memory_gb, fits = memory.fits,
    devices = devices,
  }, KEYS)
end

--- The JSON `parallel.timeline` of a run (`result` neusight.parallel.timeline()'s, made without `lean`): its ops
--- (neusight.parallel.timeline ops), device by device in the order each runs them, each { device, kind, start_ms,
--- end_ms } and for a forward or backward op also microbatch (the schedule's label: an integer for the built-in
--- schedules; a registered schedule's label that is neither an integer nor a string, its number from 0), chunk,
--- comm_ms and send_ms. O(ops): the report builds it only when the JSON is written (neusight.report format_json).
function M.timeline_json(result)
  local out = {}
  for i, op in ipairs(require("neusight.parallel.timeline").ops(result)) do
    local o = { device = int(op.device, "op device"), kind = op.kind, start_ms = op.start * ms, end_ms = op.finish * ms }
    if op.chunk ~= nil then
      local mb = op.mb
      if math.type(mb) ~= "integer" and type(mb) ~= "string" then mb = op.index end
      o.microbatch, o.chunk, o.comm_ms, o.send_ms = mb, int(op.chunk, "op chunk"), op.comm * ms, op.send * ms
    end
    out[i] = ordered(o, OP_KEYS)
  end
  return out
end

--- The table's lines of a run (layout, links, per-stage times, memory, state, gradient reduction, iteration), each
--- ending in a newline. `j` is M.json's object, `s` the state per parameter, `recipe` the recipe's name, `most` the
--- largest state of a GPU (GB) and `most_stage` its stage (0-based; M.report's state_gb).
function M.format_table(plan, result, j, s, recipe, most, most_stage)
  local out = {}
  local function add(...) out[#out + 1] = fmt(...) end
  local c = j.cluster
  -- the ZeRO stage where it shards (data-parallel training: neusight.parallel.zero active_stage); elsewhere it has no
  -- effect and is not said
  local zero = Z.active_stage(plan)
  local kernels = j.kernels .. " kernels" .. (j.sequence_parallel and ", sequence parallel" or "")
    .. (zero >= 2 and fmt(", ZeRO-%d", zero) or zero == 1 and ", distributed optimizer" or "")
    .. (j.recompute ~= "none" and ", " .. j.recompute .. " recomputation" or "")
  add("\nparallel  dp %d x tp %d x pp %d%s = %d GPUs (%d node(s) x %d), %d microbatch(es) of %d, schedule %s%s, %s\n",
    j.dp, j.tp, j.pp, j.ep > 1 and fmt(" (ep %d)", j.ep) or "", j.world, c.nodes, c.gpus_per_node, j.microbatches,
    j.micro_batch, j.schedule, j.virtual_stages > 1 and fmt(" (%d chunks per device)", j.virtual_stages) or "", kernels)
  add("links     intra %.0f GB/s x %.2f, %.1f us; inter %.4g GB/s x %.2f, %.1f us (%s)\n", c.intra.bw_gbps,
    c.intra.efficiency, c.intra.latency_us, c.inter.bw_gbps, c.inter.efficiency, c.inter.latency_us,
    c.file == "" and "scripts/neusight/topology.lua" or c.file)
  local ep, tp = j.ep > 1, j.tp > 1
  -- tp comm ms: on the wire; tp hidden: of it, under weight-gradient GEMMs (tensor parallelism only)
  add("%5s %6s %12s %12s %s%s%12s %12s %12s %12s %12s\n", "stage", "layers", "compute ms", "tp comm ms",
    tp and fmt("%12s ", "tp hidden") or "", ep and fmt("%12s ", "ep comm ms") or "", "p2p ms", "dp exposed",
    "optimizer ms", "bubble ms", "finish ms")
  for _, d in ipairs(result.devices) do
    add("%5d %6d %12.3f %12.3f %s%s%12.3f %12.3f %12.3f %12.3f %12.3f\n", d.stage, d.layers, d.compute * ms,
      d.tp_comm * ms, tp and fmt("%12.3f ", d.tp_comm_hidden * ms) or "", ep and fmt("%12.3f ", d.ep_comm * ms) or "",
      d.p2p * ms, d.dp_exposed * ms, d.optimizer * ms, d.bubble * ms, d.finish * ms)
  end
  for _, line in ipairs(result.memory.lines or {}) do out[#out + 1] = line .. "\n" end -- per stage (neusight.memory)
  add("state     per parameter: %s (%s recipe%s)%s\n", precision.state_breakdown(s), recipe,
    recipe == "amp" and ", " .. s.convention .. " convention" or "",
    zero >= 1 and fmt("; %smaster + optimizer sharded over dp %d%s",
      zero >= 3 and "weights + gradients + " or zero == 2 and "gradients + " or "", j.dp,
      j.ep > 1 and fmt(", the experts' over dp / ep = %d", PM.optimizer_shards(plan, "edp")) or "") or "")
  -- per GPU: the largest state (JSON state_gb) and, when another stage is the fullest GPU (the most memory in all: state
  -- plus activations and the rest), that one's state (memory.state_gb), worded so the two do not read as a contradiction
  local fullest = result.memory.memory or {}
  if most and most_stage then
    add("state     per GPU: at most %.3f GB (stage %d, JSON state_gb)%s\n", most, most_stage,
      (fullest.stage and fullest.stage ~= most_stage and type(fullest.state_gb) == "number")
        and fmt("; stage %d, the GPU with the most memory in all, holds %.3f GB of state (memory.state_gb)", fullest.stage,
          fullest.state_gb) or "")
  end
  local first = result.devices[1]
  if first and zero == 3 then
    add("data-parallel ZeRO-3 parameter all-gathers (before each layer's forward and backward) and gradient "
      .. "reduce-scatters: %.3f ms on stage 0 over %d microbatch(es), %.3f ms exposed (prefetched one unit ahead); "
      .. "%.2f GB of unsharded units in memory\n", first.dp_comm * ms, j.microbatches, first.dp_exposed * ms,
      (first.zero_gathered or 0) / 1e9)
  elseif Z.dp_gradients(plan) and first then -- (no gradients to reduce outside training: neusight.parallel.zero)
    -- (ZeRO-2 reduce-scatters the buckets after every microbatch's backward: neusight.parallel.timeline)
    add("data-parallel gradient %s: %.3f ms in %d bucket(s) of <= %g MB%s on stage 0, %.3f ms exposed%s\n",
      zero >= 1 and "reduce-scatter and parameter all-gather" or "all-reduce", first.dp_comm * ms,
      first.buckets, j.bucket_mb, (zero == 2 and j.microbatches > 1)
        and fmt(" per microbatch (ZeRO-2: %d microbatches)", j.microbatches) or "", first.dp_exposed * ms,
      j.overlap_grad_reduce and " (overlapped with backward)" or " (after backward)")
  end
  if #result.devices > 1 then -- the summary's device (M.critical, JSON critical_stage): its parts sum to the iteration
    add("busiest   stage %d: compute %.3f + exposed comm %.3f + optimizer %.3f + bubble %.3f ms%s\n", j.critical_stage,
      j.compute_ms, j.exposed_comm_ms, j.optimizer_ms, j.bubble_ms,
      j.imbalance_ms > 0 and fmt("; %.3f ms busier than the least busy stage (JSON imbalance_ms)", j.imbalance_ms) or "")
  end
  add("iteration        %12.3f ms   (slowest device; every dp x tp rank of a stage alike)\n", result.iteration * ms)
  return table.concat(out)
end

--- Everything the engine reports of a parallel run (engine/lua/session_hooks.cpp):
---   iteration  seconds of the slowest device (the run's latency)
---   json       the report's `parallel` object (M.json)
---   table      the table's lines (M.format_table)
---   state_gb   the largest model state of any GPU (the stage with the most parameters: the largest of the memory
---              report's per-stage state_gb, neusight.parallel.memory), the report's state_gb. It is an upper bound
---              of every GPU's state; the fullest GPU (memory.stage, by its whole memory) may be another stage, whose
---              own state is memory.state_gb.
---   optimizer_shards  the GPUs its master copies and optimizer moments are split over (neusight.parallel.memory
---              optimizer_shards), the report's optimizer_shards
---   expert_optimizer_shards  under expert parallelism (ep > 1, else nil), those an expert's are split over (the same
---              function of the edp group), the report's expert_optimizer_shards
---   distributed_optimizer_fits  where the layout does not fit and the distributed optimizer is off and could shard
---              (training, dp > 1), whether the layout would fit in memory with it on (neusight.parallel.memory
---              report), else nil: search's no-fit help suggests --distributed-optimizer by it
---   zero_fits  where the layout does not fit, the least higher ZeRO stage (neusight.parallel.zero) under which it would
---              (neusight.parallel.memory report), else nil: search's no-fit help suggests --zero N by it
---   figures    what neusight/figures.lua compute() gets of the layout: dp, tp, pp, microbatches, distributed_optimizer,
---              step_copies (how many copies of the graph's optimizer step the iteration runs over all GPUs: tp · dp
---              without the distributed optimizer, tp with it, more for experts sharded over dp / ep only),
---              and device_floor_s, the roofline floor of the busiest device's kernels (the timeline's `floor`) its
---              forecast is held to
---   layers_refusal  the layers' rule's reason (neusight.parallel.config layers_refusal) when the layout breaks it,
---              else nil
---   timeline   (not lean) a function that returns M.timeline_json's array: the JSON's parallel.timeline, built only
---              when the JSON is written (neusight.report format_json)
---   warnings   what the layout runs that Megatron-LM would not: layers a chunked schedule's model chunks do not divide
---              (neusight.parallel.config layers_refusal, the rule search skips such layouts by), and the plan's own
---              (neusight.parallel.layout: a cluster file built for another GPU); the forecast is made
---@param plan table neusight.parallel.plan()
---@param result table neusight.parallel.timeline(): its `state` is the state per parameter the memory report used
---@param lean? boolean a search's ranking: json without `devices`, table ""
function M.report(plan, result, lean)
  local s = result.state
  if type(s) ~= "table" then error("parallel report: the timeline has no state layout (result.state)", 0) end
  local j = M.json(plan, result, lean)
  -- model state per GPU of a stage (neusight.parallel.memory report: its parameters', the optimizer's part over dp
  -- under the distributed optimizer, an expert's over dp / ep): the largest of them
  local shard = PM.optimizer_shards(plan, "dp")
  local expert_shard = plan.ep > 1 and PM.optimizer_shards(plan, "edp") or nil
  local most, most_stage = 0.0, nil
  for d, st in ipairs(result.memory.stages or {}) do
    local gb = num(st.state_gb, "memory stage state_gb")
    if not most_stage or gb > most then most, most_stage = gb, d - 1 end
  end
  local recipe = type(plan.precision) == "table" and plan.precision.name or "pure"
  local warnings = {}
  local layers, params, expert, split = 0, 0, 0, {}
  for i, d in ipairs(result.devices) do
    layers, params, expert = layers + d.layers, params + d.params, expert + (d.expert_params or 0)
    split[i] = int(d.layers, "device layers")
  end
  -- the layers' rule (neusight.parallel.config layers_refusal; search skips layouts by it): a --scripts config.lua
  -- older than it gets neusight.needs' error, not a forecast of a layout Megatron-LM cannot run without a word
  local uneven = require("neusight").needs("neusight.parallel.config", "layers_refusal")(plan.schedule, layers, plan.pp,
    plan.virtual_stages)
  for _, w in ipairs(plan.warnings or {}) do warnings[#warnings + 1] = w end -- neusight.parallel.layout plan's
  if type(result.memory.max_batch_error) == "string" then -- the graph failed at a micro-batch the search built
    warnings[#warnings + 1] = "the largest micro-batch that fits is not shown: the model fails "
      .. result.memory.max_batch_error
  end
  if uneven then
    warnings[#warnings + 1] = ("parallel: %s (pp %d x virtual_stages %d = %d model chunks), as Megatron-LM requires; search skips "
      .. "this layout. Forecast as asked, the layers spread as evenly as they go (earlier chunks take one more)")
      :format(uneven, plan.pp, plan.virtual_stages, plan.pp * plan.virtual_stages)
  end
  -- one model chunk per device: the stages' split, when the layers do not divide over pp (neusight.parallel.config
  -- uneven_split; an older --scripts config.lua without it: not said, as before)
  local config = require "neusight.parallel.config"
  local split_warning = config.uneven_split and config.uneven_split(plan.schedule, layers, plan.pp, split)
  if split_warning then warnings[#warnings + 1] = split_warning end
  return {
    iteration = result.iteration, json = j,
    table = lean and "" or M.format_table(plan, result, j, s, recipe, most, most_stage),
    state_gb = most, optimizer_shards = shard, expert_optimizer_shards = expert_shard,
    distributed_optimizer_fits = result.memory.distributed_optimizer_fits,
    zero_fits = result.memory.zero_fits,
    layers_refusal = uneven, -- search skips the layout by it when it could not count the layers before (search_cmd.cpp)
    timeline = not lean and function() return M.timeline_json(result) end or nil,
    figures = { dp = j.dp, tp = j.tp, pp = j.pp, microbatches = j.microbatches,
                distributed_optimizer = j.distributed_optimizer,
                -- the copies of one rank's optimizer step the iteration runs: tp · dp over the GPUs each parameter's
                -- step is split over (PM.step_shards: dp, an expert's dp / ep, under the distributed optimizer)
                step_copies = params > 0 and j.tp * j.dp / PM.step_shards(plan, params, expert) or nil,
                device_floor_s = type(result.floor) == "number" and result.floor > 0 and result.floor + 0.0 or nil },
    warnings = warnings,
  }
end

return M
