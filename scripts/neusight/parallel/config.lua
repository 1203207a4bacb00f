-- scripts/neusight/parallel/config.lua — the workload's `parallel` table: its fields, defaults and validation (normalize, active).
--
-- Owns what a user may write in `parallel = { … }` (or predict's --dp/--tp/--pp/… flags): the known keys with
-- did-you-mean, each field's type and default, and the cross-field rules (ep divides dp, interleaving needs pp ≥ 2
-- and microbatches a multiple of pp, sequence parallelism needs tp ≥ 2). The schedule names come from the registry
-- of neusight.parallel.schedule, so a schedule a workload registers is accepted here too.
local T = require "neusight.topology"
local schedules = require("neusight.parallel.schedule").schedules -- the registry (workloads may add to it)
local floor, huge = math.floor, math.huge
local ipairs, pairs, type, tostring, error, sort = ipairs, pairs, type, tostring, error, table.sort
local show = T.show

local M = {}

-- PyTorch DDP's default bucket (bucket_cap_mb = 25). Megatron sizes its buckets differently
-- (max(40 M parameters, 1 M · dp)); set bucket_mb to model it.
local DEFAULT_BUCKET_MB = 25

local KEYS = {
  dp = true, tp = true, pp = true, microbatches = true, schedule = true, virtual_stages = true,
  bucket_mb = true, overlap_grad_reduce = true, cluster = true, kernels = true, ep = true, recompute = true,
  sequence_parallel = true, distributed_optimizer = true, zero = true,
}

--- A positive whole number below infinity (a degree, a count); shared with neusight.parallel.layout.
local is_count = require("neusight.topology").is_count
-- Each count at most 2^24 (the largest batch: microbatches divide it), and at most as many GPUs (dp × tp × pp) in a
-- layout as a cluster may count (engine/core/cluster_spec.h's cluster_max_count, 2^20; search's --gpus too).
local MAX_COUNT, MAX_GPUS = 1 << 24, require("neusight").cluster_limits().count

-- Field `name` of the plan table `p`: a boolean, `default` when absent.
local function boolean_field(p, name, default)
  local v = p[name]
  if v == nil then return default end
  if type(v) ~= "boolean" then error(("parallel.%s: boolean expected, got %s"):format(name, show(v)), 0) end
  return v
end

-- The error `<label>: <expected> expected, got <v>` with did-you-mean among the keys of `names` (level 0): a name
-- field's refusal, one_of's and schedule_name's alike.
-- A list of names given where one is expected (predict --schedule 1f1b,interleaved): each item a name of `names`.
local function names_list(v, names)
  if type(v) ~= "string" or not v:find(",", 1, true) then return false end
  for item in (v .. ","):gmatch("([^,]*),") do
    if not names[item] then return false end
  end
  return true
end

-- What takes a list of the names a field takes one of: the schedule's, search's --schedule.
local LISTS_OF = { ["parallel.schedule"] = "`neusight search --schedule %s` ranks layouts under each" }

local function not_a_name(v, expected, names, label)
  if names_list(v, names) then -- a list where one name goes: say so rather than guess one of the list's names
    local where = LISTS_OF[label]
    error(("%s: one name expected (%s), got the list %s: a forecast runs one%s"):format(label, expected, show(v),
      where and "; " .. where:format(v) or ""), 0)
  end
  error(("%s: %s expected, got %s%s"):format(label, expected, show(v),
    type(v) == "string" and T.did_you_mean(v, names) or ""), 0)
end

-- `v` when it is one of `choices` (strings); else the error `<label>: "a", "b" or "c" expected, got …` with
-- did-you-mean (level 0).
local function one_of(v, choices, label)
  if #choices == 0 then error(("%s: no names to choose from (an empty list of choices)"):format(label), 0) end
  for _, c in ipairs(choices) do
    if v == c then return v end
  end
  local quoted = {}
  for i, c in ipairs(choices) do quoted[i] = ("%q"):format(c) end
  local list = #quoted == 1 and quoted[1] or #quoted == 2 and quoted[1] .. " or " .. quoted[2]
    or table.concat(quoted, ", ", 1, #quoted - 1) .. " or " .. quoted[#quoted]
  local set = {}
  for _, c in ipairs(choices) do set[c] = true end
  not_a_name(v, list, set, label)
end

-- Field `name` of `p`: one of `choices` (strings, the first is the default when absent).
local function choice_field(p, name, choices, default)
  local v = p[name]
  if v == nil then return default or choices[1] end
  return one_of(v, choices, "parallel." .. name)
end

-- The schedule named `v` when the registry (neusight.parallel.schedule's, workloads may add to it) has it; else the
-- error `<label>: one of "1f1b", "gpipe", … expected, got …` with did-you-mean (level 0).
local function schedule_name(v, label)
  if type(v) == "string" and schedules[v] then return v end
  local names = {}
  for name in pairs(schedules) do names[#names + 1] = ('"' .. name .. '"') end
  sort(names)
  not_a_name(v, "one of " .. table.concat(names, ", "), schedules, label)
end
M.is_count = is_count

-- The fields that take one of a few names: the one list of each (normalize below; M.check_choice for a comparison's
-- up-front check of every value given on the command line, neusight.workload check_fields; neusight.search for
-- search's --recompute). recompute goes from the least recomputation to the most: search tries the modes in this
-- order and, for each layout, stops at the first that fits (--recompute auto).
M.CHOICES = { recompute = { "none", "selective", "full" }, kernels = { "megatron", "eager" } }
--- Raises normalize's error for a value of choice field `name` that is none of its names (the schedule: none of the
--- registry's); nil for other fields.
function M.check_choice(name, v)
  if M.CHOICES[name] then
    choice_field({ [name] = v }, name, M.CHOICES[name])
  elseif name == "schedule" and v ~= nil then
    M.check_schedule(v)
  end
end
--- `v` when it is one of `choices`, else normalize's error for a choice field, under `label` (neusight.search: a flag).
M.one_of = one_of

--- The schedule of a plan that names none.
M.DEFAULT_SCHEDULE = "1f1b"
--- `v` when it names a schedule of the registry, else normalize's parallel.schedule error, under `label` when given.
function M.check_schedule(v, label) return schedule_name(v, label or "parallel.schedule") end

--- The schedules that run several model chunks per device (virtual stages), each with its default number of chunks
--- (an integer >= 2): the one list normalize and neusight.search (which tries --virtual-stages with these only) read.
M.CHUNKED = { interleaved = 2 }

--- The default model chunks per device of `schedule`, or nil when it runs one: M.CHUNKED's, checked.
---@return integer?
function M.chunks_of(schedule)
  local v = M.CHUNKED[schedule]
  if v ~= nil and not (is_count(v) and v >= 2 and v <= MAX_COUNT) then
    error(("neusight.parallel.config CHUNKED.%s: the schedule's default model chunks per device, an integer >= 2, "
      .. "expected, got %s"):format(tostring(schedule), show(v)), 0)
  end
  return v and floor(v)
end

--- Why `schedule` cannot run `v` model chunks per device on `pp` stages, or nil: the parallel field at fault and the
--- reason, apart. A chunked schedule needs at least 2 chunks and pp >= 2; any other runs one chunk. Shared by normalize
--- (the error "parallel.<field>: <reason>") and neusight.search (the reason, a skip).
---@return string? field
---@return string? reason
function M.chunks_refusal(schedule, pp, v)
  if M.chunks_of(schedule) then
    if v < 2 then return "virtual_stages", ("the %s schedule needs at least 2 model chunks per device"):format(schedule) end
    if pp < 2 then return "schedule", ("the %s schedule needs pp >= 2"):format(schedule) end
  elseif v ~= 1 then
    return "virtual_stages", M.one_chunk_only(schedule)
  end
  return nil
end

--- Why `layers` model layers do not suit `schedule` with `v` model chunks per device on `pp` stages, or nil: a chunked
--- schedule (M.chunks_of) needs them divisible by pp × v, as Megatron-LM requires (its interleaved schedule asserts
--- it); any other schedule, or `layers` 0 (not known), is not checked. neusight.search skips such a layout with this
--- reason; predict forecasts it (a user's model may be uneven on purpose: the stage partition spreads the layers as
--- evenly as it can) and warns with it (neusight.parallel.report warnings).
---@return string?
function M.layers_refusal(schedule, layers, pp, v)
  if not M.chunks_of(schedule) or layers <= 0 or layers % (pp * v) == 0 then return nil end
  return ("the %s schedule needs the model's %d layers divisible by pp x virtual_stages"):format(schedule, layers)
end

--- What a pipeline does with `layers` model layers that its `pp` stages (one model chunk each) do not divide, as a
--- warning naming the split, or nil (they divide, pp = 1, a chunked schedule — M.layers_refusal says those —, or
--- `layers` 0: not known). `split` the layers of each stage in order (neusight.parallel.stages partition: earlier
--- stages take the remainder). Forecast, not refused: Megatron-LM runs uneven non-interleaved pipelines with its
--- uneven-stage flags and other trainers (DeepSpeed's partitioner, torchtitan) split unevenly as well, but not in
--- this shape, and the fullest stage sets the iteration. neusight.parallel.report warns with it (predict, run) and
--- search, whose layouts' warnings these are, says it once per pipeline depth.
---@param schedule string
---@param layers integer
---@param pp integer
---@param split integer[]
---@return string?
function M.uneven_split(schedule, layers, pp, split)
  if M.chunks_of(schedule) or pp < 2 or layers <= 0 or layers % pp == 0 then return nil end
  local parts = {}
  for i, n in ipairs(split) do parts[i] = tostring(n) end
  return ("parallel: the model's %d layers do not divide over pp %d: its stages run %s layers (earlier stages take "
    .. "one more), and the fullest sets the iteration. Megatron-LM refuses layers not divisible by pp unless "
    .. "--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers set the first or last stage's "
    .. "count; forecast with this split (search ranks such layouts too)"):format(layers, pp, table.concat(parts, "/"))
end

--- What a run of one model chunk per device under `schedule` says of parallel.virtual_stages: only the chunked
--- schedules (M.CHUNKED, by name) take it.
function M.one_chunk_only(schedule)
  local names = {}
  for s in pairs(M.CHUNKED) do names[#names + 1] = ("%q"):format(s) end
  sort(names)
  if #names == 0 then
    return ("no schedule runs several model chunks per device (neusight.parallel.config CHUNKED names none; "
      .. "schedule is %q)"):format(schedule)
  end
  return ("only the %s schedule runs several model chunks per device (schedule is %q)")
    :format(table.concat(names, ", "), schedule)
end

--- Why ZeRO stage `zero` cannot run with `pp` pipeline stages and expert-parallel degree `ep`, or nil: what is not
--- modelled is refused. ZeRO-2/3 with a pipeline (DeepSpeed's PipelineEngine asserts ZeRO stage <= 1; Megatron-LM
--- shards no more than the optimizer state under pipelining); ZeRO-3 with expert parallelism (the experts' parameter
--- gathers over their own replicas are not priced). With tp, ZeRO-2/3 shard each tensor-parallel shard over its dp
--- group (torchtitan's 2-D FSDP + TP): allowed. Shared by normalize (the error "parallel.zero: <reason>") and
--- neusight.search (the reason a layout is skipped).
---@return string?
function M.zero_refusal(zero, pp, ep)
  if zero >= 2 and pp > 1 then
    return ("ZeRO stage %d shards the gradients%s over dp, which is not run with pipeline parallelism (pp = %d): "
      .. "DeepSpeed's pipeline engine allows ZeRO stage 0 or 1 only and Megatron-LM shards the optimizer state alone "
      .. "(zero = 1, its distributed optimizer); use zero <= 1 with pp > 1, or pp = 1")
      :format(zero, zero == 3 and " and parameters" or "", pp)
  end
  if zero == 3 and ep > 1 then
    return ("ZeRO stage 3 with expert parallelism (ep = %d) is not modelled (the experts' parameter all-gathers over "
      .. "their own replicas); use zero <= 2 with ep > 1, or ep = 1"):format(ep)
  end
  return nil
end

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
    if v > MAX_COUNT then error(("parallel.%s: at most 2^24 expected, got %s"):format(k, show(v)), 0) end
    out[k] = floor(v)
  end
  -- the layout lists every rank: tp = 2^40 ran out the script budget, pp = 2^40 its memory, dp = 1e308 failed in a
  -- format (found by tests/fuzz/mutate.py)
  if out.dp * out.tp * out.pp > MAX_GPUS then
    error(("parallel: dp × tp × pp = %d GPUs, more than the 2^%d (%d) a layout may have"):format(
      out.dp * out.tp * out.pp, math.floor(math.log(MAX_GPUS, 2) + 0.5), MAX_GPUS), 0)
  end
  local schedule = schedule_name(p.schedule == nil and M.DEFAULT_SCHEDULE or p.schedule, "parallel.schedule")
  out.schedule = schedule
  -- Expert parallelism (MoE): the experts are spread over `ep` of the data-parallel ranks (DeepSpeed-MoE,
  -- Megatron-LM's expert_model_parallel_size), so ep must divide dp.
  if out.dp % out.ep ~= 0 then
    error(("parallel.ep: expert parallelism spreads the experts over data-parallel ranks: ep = %d must divide dp = %d")
      :format(out.ep, out.dp), 0)
  end
  local v = p.virtual_stages
  if v == nil then v = M.chunks_of(schedule) or 1 end
  if not is_count(v) then error(("parallel.virtual_stages: positive integer expected, got %s"):format(show(v)), 0) end
  if v > MAX_COUNT then error(("parallel.virtual_stages: at most 2^24 expected, got %s"):format(show(v)), 0) end
  out.virtual_stages = floor(v)
  local field, why = M.chunks_refusal(schedule, out.pp, out.virtual_stages)
  if field then error(("parallel.%s: %s"):format(field, why), 0) end
  if M.chunks_of(schedule) and out.microbatches % out.pp ~= 0 then
    error(("parallel.microbatches: the %s schedule needs a multiple of pp = %d (got %d), as Megatron-LM does")
      :format(schedule, out.pp, out.microbatches), 0)
  end
  local bucket = p.bucket_mb == nil and DEFAULT_BUCKET_MB or p.bucket_mb
  if type(bucket) ~= "number" or not (bucket > 0) or bucket == huge then
    error(("parallel.bucket_mb: positive number expected, got %s"):format(show(bucket)), 0)
  end
  -- a bucket under 1 MB (PyTorch's smallest useful bucket_cap_mb) is a unit slip, and millions of buckets would
  -- take minutes to lay out
  if bucket < 1 then error(("parallel.bucket_mb: at least 1 (MB) expected, got %s"):format(show(bucket)), 0) end
  out.bucket_mb = bucket
  out.overlap_grad_reduce = boolean_field(p, "overlap_grad_reduce", true)
  -- kernels: whose kernels the model runs. "megatron" (Megatron-LM's model code, the framework these
  -- parallel layouts come from: fused bias-GeLU, see models/gpt.lua) or "eager" (the HF eager graph). One GPU
  -- (microbatches or recomputation only) defaults to "eager", the graph of the plain one-GPU run: a one-GPU layout
  -- compared with it (search --gpus 1) differs by its microbatches or recomputation, not by its kernels.
  local one_gpu = out.dp * out.tp * out.pp == 1
  out.kernels = choice_field(p, "kernels", M.CHOICES.kernels, one_gpu and "eager" or "megatron")
  -- recompute: "none"; "full" activation recomputation (Megatron-LM --recompute-granularity full, uniform):
  -- each layer keeps only its input and re-runs its forward during backward; "selective" (Korthikanti et al.
  -- 2022, Megatron's --recompute-activations): only the core-attention nodes (attrs.core_attention: QKᵀ,
  -- scale, mask, softmax, dropout, ·V) drop their outputs and re-run in backward.
  out.recompute = choice_field(p, "recompute", M.CHOICES.recompute)
  -- sequence_parallel (Megatron-LM --sequence-parallel): layer norms, dropouts and residual adds on s/tp tokens.
  -- It needs tensor parallelism: at tp 1 it is off, and the workload says so (neusight.workload ignored_fields: "has no
  -- effect", as the distributed optimizer at dp 1 — so a comparison over --tp 1,2,4 --sequence-parallel keeps its
  -- one-GPU row; tester10 #10).
  out.sequence_parallel = boolean_field(p, "sequence_parallel", false) and out.tp >= 2
  -- distributed_optimizer (Megatron-LM --use-distributed-optimizer, ZeRO stage 1): optimizer state and step
  -- sharded over dp; gradients reduce-scattered, updated parameters all-gathered after the step.
  -- zero (ZeRO stage, Rajbhandari et al. 2020; DeepSpeed zero_optimization.stage; PyTorch FSDP's sharding
  -- strategies): what of the model state each data-parallel rank keeps 1/dp of. 0 plain DDP (the default); 1 the
  -- optimizer state (master copies and moments) and its step, which is Megatron-LM's distributed optimizer: the same
  -- fact as distributed_optimizer = true, which is its other name (giving both is refused: one source of it);
  -- 2 the gradients too (DeepSpeed stage 2, FSDP SHARD_GRAD_OP); 3 the parameters too (DeepSpeed stage 3, FSDP
  -- FULL_SHARD / FSDP2 fully_shard, torchtitan): each layer's parameters are all-gathered before its forward and
  -- again before its backward, its gradients reduce-scattered after it (neusight.parallel.zero prices both).
  local zero = p.zero
  if zero ~= nil and (math.type(zero) ~= "integer" and not (type(zero) == "number" and zero == floor(zero))
      or zero < 0 or zero > 3) then
    error(("parallel.zero: 0, 1, 2 or 3 expected (the ZeRO stage: 0 none, 1 optimizer state, 2 + gradients, "
      .. "3 + parameters), got %s"):format(show(zero)), 0)
  end
  local dist = boolean_field(p, "distributed_optimizer", nil)
  if zero == nil then
    zero = dist and 1 or 0
  elseif dist ~= nil and dist ~= (zero >= 1) then
    -- both given and saying different things (a normalized table has both, agreeing: zero >= 1 shards the optimizer)
    error(("parallel.zero: zero = %s and distributed_optimizer = %s disagree: distributed_optimizer = true is zero = 1 "
      .. "(stages 2 and 3 shard the optimizer state too); give one of them"):format(show(p.zero), show(dist)), 0)
  end
  out.zero = floor(zero)
  -- what the rest of the engine reads of it: the optimizer state and step are sharded (zero >= 1), derived here only
  out.distributed_optimizer = out.zero >= 1
  local why = M.zero_refusal(out.zero, out.pp, out.ep)
  if why then error("parallel.zero: " .. why, 0) end
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

return M
