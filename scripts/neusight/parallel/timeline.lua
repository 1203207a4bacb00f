-- scripts/neusight/parallel/timeline.lua — the per-device timeline of a parallel iteration from the predicted per-node times.
--
-- Owns the time side of a parallel run: per virtual stage its forward/backward compute, in-graph (tp, ep)
-- communication and send/recv per microbatch (recomputed forwards included), the schedule's simulation
-- (neusight.parallel.schedule), tied-embedding copies and their gradient sync, the data-parallel gradient buckets
-- that overlap the last backward (all-reduce, or reduce-scatter + parameter all-gather under the distributed
-- optimizer), the optimizer step's share, and per device: compute, exposed communication and bubble. The stage
-- partition is neusight.parallel.stages', the memory per stage neusight.parallel.memory's.
local C = require "neusight.collectives"
local precision = require "neusight.precision"
local K = require "neusight.kernels"
local stages_of = require "neusight.parallel.stages"
local schedule = require "neusight.parallel.schedule"
local PM = require "neusight.parallel.memory"
local Z = require "neusight.parallel.zero"
local numel = require("neusight.parallel.shard").numel
local replica_group = require("neusight.parallel.layout").replica_group
local fold, queue = require("neusight").fold, require("neusight").queue
local kv_cache_resident = require("neusight").needs("neusight.workload", "kv_cache_resident")
local regions, partition, boundary_shape = stages_of.regions, stages_of.partition, stages_of.boundary_shape
local simulate_times = schedule.simulate_times
local max, min = math.max, math.min
local ipairs, pairs, type, tostring, sort, rawequal = ipairs, pairs, type, tostring, table.sort, rawequal
local table_move = table.move
local math_type, tointeger = math.type, math.tointeger

local M = {}

-- C.time prices with the group's size, spans_nodes, per_node, min_per_node and spans_domains and the cluster alone: one timeline asks each
-- distinct question once (a 175B model fills tens of thousands of equal gradient buckets; the pipeline links of
-- neusight.parallel.layout.plan differ only in spans_nodes). A group that is not a table goes to C.time for its error.
-- The groups (the plan's, not changed while a timeline runs) are also looked up by identity first: a deep pipeline's
-- ten thousand buckets skip the key.
local function pricer(cluster)
  -- by group identity, weakly: the pricer outlives a timeline (pricer_of), the layouts' group tables need not
  local memo, of_group = {}, setmetatable({}, { __mode = "k" })
  return function(op, bytes, group)
    if type(group) ~= "table" then return C.time(op, bytes, group, cluster) end
    local by_op = of_group[group]
    if not by_op then by_op = {}; of_group[group] = by_op end
    local by_bytes = by_op[op]
    if not by_bytes then
      local fields = 0
      for _ in pairs(group) do fields = fields + 1 end
      local key = ("%s|%s|%s|%s|%s|%s|%d"):format(op, tostring(group.size), tostring(group.spans_nodes),
        tostring(group.per_node), tostring(group.min_per_node), tostring(group.spans_domains), fields)
      by_bytes = memo[key]
      if not by_bytes then by_bytes = {}; memo[key] = by_bytes end
      by_op[op] = by_bytes
    end
    local t = by_bytes[bytes]
    if t == nil then
      t = C.time(op, bytes, group, cluster)
      by_bytes[bytes] = t
    end
    return t
  end
end

-- The pricer of a plan's cluster, kept while the cluster table lives: the timelines of one plan (a search re-times a
-- layout for each recomputation mode and schedule) ask the same questions of the same groups and cluster.
local pricers = setmetatable({}, { __mode = "k" })
local function pricer_of(cluster)
  if type(cluster) ~= "table" then return pricer(cluster) end
  local p = pricers[cluster]
  if not p then p = pricer(cluster); pricers[cluster] = p end
  return p
end

-- Same kind of bucket: the same time, bytes and group, subtypes included (interchangeable in the link walk).
local function same_kind(a, b)
  return a.at == b.at and a.bytes == b.bytes and a.group == b.group and math_type(a.at) == math_type(b.at)
    and math_type(a.bytes) == math_type(b.bytes)
end

local function sorted_runs(ready) -- not in order (M.buckets_in_order): runs as tables
  local times, rank, distinct = {}, {}, true
  for _, r in ipairs(ready) do
    local at = r.at
    if at ~= at then times = nil break end -- NaN: no rank
    if rank[at] == nil then rank[at], times[#times + 1] = false, at else distinct = false end
  end
  if times and distinct then
    local runs = {}
    for k, r in ipairs(ready) do runs[k] = r end
    sort(runs, function(a, b) return a.at < b.at end)
    return runs
  end
  if times then
    sort(times)
    for i, at in ipairs(times) do rank[at] = i end
    local kinds, proxies, np = {}, {}, 0 -- kinds[rank] = { first kind's run, second kind's run }
    for _, r in ipairs(ready) do
      local i = rank[r.at]
      local ks = kinds[i]
      if not ks then ks = { r }; kinds[i] = ks end
      local p
      if same_kind(ks[1], r) then
        p = i
      else
        if not ks[2] then ks[2] = r end
        if not same_kind(ks[2], r) then kinds = nil break end -- a third kind at one time
        p = i + 0.0
      end
      for _ = 1, r.n do np = np + 1; proxies[np] = p end
    end
    if kinds then
      sort(proxies)
      local runs, last, last_p = {}, nil, nil
      for k = 1, np do
        local p = proxies[k]
        if last and rawequal(p, last_p) and math_type(p) == math_type(last_p) then
          last.n = last.n + 1
        else
          local ks = kinds[p // 1]
          local r = math_type(p) == "integer" and ks[1] or ks[2]
          last, last_p = { at = r.at, bytes = r.bytes, group = r.group, n = 1 }, p
          runs[#runs + 1] = last
        end
      end
      return runs
    end
  end
  local each = {}
  for _, r in ipairs(ready) do
    for _ = 1, r.n do each[#each + 1] = { at = r.at, bytes = r.bytes, group = r.group, n = 1 } end
  end
  sort(each, function(a, b) return a.at < b.at end)
  return each
end

-- Runs of buckets from parallel arrays (M.buckets_in_order) to tables { at, bytes, group, n }, and back.
local function run_tables(runs)
  local list, at, bytes, group, n = {}, runs.at, runs.bytes, runs.group, runs.n
  for k = 1, runs.len do list[k] = { at = at[k], bytes = bytes[k], group = group[k], n = n[k] } end
  return list
end
local function run_arrays(list)
  local runs = { len = #list, at = {}, bytes = {}, group = {}, n = {} }
  for k, r in ipairs(list) do runs.at[k], runs.bytes[k], runs.group[k], runs.n[k] = r.at, r.bytes, r.group, r.n end
  return runs
end

--- The data-parallel gradient buckets in order of readiness, as runs of n equal buckets in parallel arrays
--- ({ len = runs, at = {}, bytes = {}, group = {}, n = {} }): `ready`'s buckets one by one sorted by `at` with
--- table.sort, as they always were (equal buckets interchangeable), at a fraction of the cost where that order can be
--- known without it:
---   * runs strictly increasing in `at` are in the one sorted order already; so are they when only the final leftover
---     bucket ties with the run before it: Lua's table.sort never moves a last element that nothing exceeds (its
---     partitions leave a[up] in place; tests/scripts/test_parallel.lua checks it);
---   * runs at distinct times (the interleaved schedule's chunks, one after the other) have one sorted order, whichever
---     the sort: the runs sorted;
---   * otherwise, where no time has more than two kinds of bucket, table.sort runs on numbers that compare as the
---     times do (the rank of each bucket's time) with the default order: the same comparisons, so the same moves,
---     as on the buckets, C-fast. The rank is an integer for the first kind at its time, the same value as a float
---     for the second (equal under <, told apart after): where each kind ended up.
---   * else the buckets one by one, sorted.
---@param ready table runs in the order they became ready, parallel arrays as above
function M.buckets_in_order(ready)
  local at, count, len = ready.at, ready.n, ready.len
  local in_order = true
  for k = 2, len do
    local a, b = at[k - 1], at[k]
    if not (a < b or (k == len and count[k] == 1 and a == b)) then in_order = false break end
  end
  if in_order then return ready end
  return run_arrays(sorted_runs(run_tables(ready)))
end

--- Gradient bytes `f` poured into buckets of `size` bytes: the bytes left over and the buckets filled, as
--- `while f >= size do f, full = f - size, full + 1 end` leaves them. With a whole size and f below 2^52, each
--- f − size of that loop is exact (both are multiples of f's ulp, at most 1, and the difference is below f): it ends
--- at f − full·size exactly, computed here at once (tens of thousands of buckets in a 175B model's timeline).
function M.fill_buckets(f, size)
  local full = 0
  if not (f >= size) then return f, full end
  if size == size // 1 and f < 0x1p52 then
    full = tointeger(f // size)
    if full then
      local r = f - full * size
      while r < 0 do full = full - 1; r = f - full * size end
      while r >= size do full = full + 1; r = f - full * size end
      return r, full
    end
    full = 0
  end
  while f >= size do f, full = f - size, full + 1 end
  return f, full
end

local fill_buckets = M.fill_buckets

-- What a timeline computes that neither the recomputation mode nor the pipeline schedule changes, made once per build
-- and reused: a search re-times one build (its plan, nodes and predicted times) for each mode and schedule
-- (engine/cli/search_cmd.cpp), and all of this is the same in each of them. Kept per nodes table (weakly), used again
-- only for the same plan table with the same values in PREP_FIELDS (value and subtype) and the same per-node times.
-- Each value is computed as the timeline computed it before (the same terms in the same order), so reusing it gives
-- the same bits; tests/scripts/test_parallel.lua compares the timelines of one build re-timed against fresh ones.
local PREP_FIELDS = { "pp", "virtual_stages", "dtype", "precision", "training", "cluster", "pp_links", "memory",
  "saves_known", "dp", "ep", "bucket_mb", "groups", "zero" }
local TIME_FIELDS = { "fw", "fw_comm", "bw", "bw_comm", "bw_wgrad", "opt", "fw_floor", "bw_floor", "opt_floor" }
local preps = setmetatable({}, { __mode = "k" }) -- nodes → the prep of its last plan and times

-- Equal, and of one subtype where numbers: Lua 5.4's == and rawequal hold for 4 and 4.0 alike, and a prep made with
-- pp = 4 gave integer layer counts where pp = 4.0 gives floats (tests/scripts/test_parallel.lua).
local function same_value(a, b) return a == b and math_type(a) == math_type(b) end

local function prep_fits(prep, plan, times)
  if not rawequal(prep.plan, plan) or #times ~= #prep.times then return false end
  local fields = prep.fields
  for k, f in ipairs(PREP_FIELDS) do
    if not same_value(plan[f], fields[k]) then return false end
  end
  -- (a ~= b, not same_value: this runs on every node for every re-timing of a build. A time's subtype cannot change
  -- what the prep holds: each enters its sums times a float (an item's share, per = count / layers) or beside a float
  -- time, and the engine's times are floats (session::timeline's lua_pushnumber); tests/scripts/test_parallel.lua
  -- re-times integer zeros as 0.0 against a fresh timeline)
  local old, nf = prep.times, #TIME_FIELDS
  for i = 1, #times do
    local a, b = times[i], old[i]
    if type(a) ~= "table" then return false end
    for k = 1, nf do
      if a[TIME_FIELDS[k]] ~= b[k] then return false end
    end
  end
  return true
end

-- The per-node times as they were (a caller may change its tables after a call)
local function times_copy(times)
  local out = {}
  for i = 1, #times do
    local t, c = times[i], {}
    for k, f in ipairs(TIME_FIELDS) do c[k] = t[f] end
    out[i] = c
  end
  return out
end

--- The seconds of each node's backward collective that run under a weight-gradient GEMM, per instance (hidden[i], nil
--- for none): a collective node with attrs.hidden_by (neusight.nodes tp_in under Megatron's kernels: the input-gradient
--- all-reduce or reduce-scatter its column-parallel linear launches asynchronously after the dgrad GEMM and waits for
--- after the wgrad GEMM) hides min(its backward collective time, that linear's wgrad GEMM time, times[j].bw_wgrad) —
--- it is exposed for max(0, comm − wgrad). The linear is the first node after it of that name; it runs as often (the
--- same count: one layer's). The one place the overlap is priced (the stage sums and the gradient-bucket walk read it).
--- SM contention between the NCCL kernel and the GEMM is not modelled (README, parallel training).
---@param nodes table[]
---@param times table[] per node { bw_comm, bw_wgrad, … } (bw_wgrad: the backward's weight-gradient GEMM seconds)
---@return table<integer, number> hidden
function M.hidden_comm(nodes, times)
  local hidden = {}
  for i, n in ipairs(nodes) do
    local a = n.attrs
    local column = type(a) == "table" and a.hidden_by or nil
    if column ~= nil then
      local j = i + 1
      while nodes[j] and nodes[j].name ~= column do j = j + 1 end
      if not nodes[j] then
        error(("timeline: node '%s' is hidden by '%s', which is no node after it"):format(n.name, tostring(column)), 0)
      end
      if (nodes[j].count or 1) ~= (n.count or 1) then
        error(("timeline: node '%s' (count %s) is hidden by '%s' (count %s): they must run as often")
          :format(n.name, tostring(n.count or 1), column, tostring(nodes[j].count or 1)), 0)
      end
      local comm, wgrad = times[i].bw_comm, times[j].bw_wgrad or 0
      local h = min(comm, wgrad)
      if h > 0 then hidden[i] = h end
    end
  end
  return hidden
end

local function prepare(plan, nodes, times, reuse)
  local prep = reuse and preps[nodes]
  if prep and prep_fits(prep, plan, times) then return prep end
  local hidden = M.hidden_comm(nodes, times)
  local P, v = plan.pp, plan.virtual_stages
  local V = P * v
  -- gradients (reduced over dp, tied-embedding sync) and parameters (all-gathered after a sharded step): the
  -- precision recipe's element sizes (fp32 gradients in amp except Megatron fp16; 16-bit parameters in Megatron amp)
  local recipe = plan.precision or precision.recipe(nil, plan.dtype, "autocast", plan.training and "train" or "inference")
  local eg = recipe.bytes.grad
  local prologue, groups, epilogue, optimizer = regions(nodes, times)
  local stages = partition(nodes, prologue, groups, epilogue, V)
  local mem = PM.context(plan, nodes, recipe) -- saved, kept and temporary bytes per node (neusight.parallel.memory)
  local comm_time = pricer_of(plan.cluster)

  -- Point-to-point transfers between consecutive virtual stages (on device boundaries).
  -- The activation a stage hands on: the boundary node's output in its own dtype (the compute dtype, but bf16 in fp8
  -- training, whose activations Transformer Engine keeps in bf16: neusight.workload fp8_dtypes).
  local shape, at = boundary_shape(nodes, groups)
  local p2p_bytes = shape and numel(shape) * K.dtype_bytes(at.dtype or plan.dtype or "fp32") or 0
  local p2p = {} -- p2p[vs] = seconds of the transfer vs → vs+1 (0-based vs)
  for vs = 0, V - 2 do -- device vs mod P sends to the next one (the last device to the first: interleaving)
    p2p[vs] = P == 1 and 0 or comm_time("send_recv", p2p_bytes, plan.pp_links[vs % P + 1])
  end

  -- Per virtual stage: compute and tensor-parallel communication per microbatch (recomputed forwards not yet added:
  -- M.timeline adds them per mode, after these sums as before), parameters. A stage that is one run of layers of a
  -- group, as many as an earlier stage's (a deep pipeline's middle stages), has that stage's sums and memory
  -- (neusight.parallel.memory stage: activations, transient, temporary): the same computation on the same nodes, the
  -- same bits. alike[per][reps] = the first such stage; base[k] = stage k's sums, twin[k] = its twin (nil: none).
  local params_total, alike, base, twin_of = 0, {}, {}, {}
  for k, st in ipairs(stages) do
    local segs = st.segments
    local seg1 = #segs == 1 and segs[1].layered and segs[1] or nil
    local twin = seg1 and alike[seg1.per] and alike[seg1.per][seg1.reps]
    local b
    if twin then
      b = base[twin]
      twin_of[k] = twin
    else
      local fw, fwc, bw, bwc, params, expert, ep_fw, ep_bw, fwf, bwf, kv = 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
      local bwh = 0 -- of bwc, the seconds under weight-gradient GEMMs (hidden)
      for _, it in ipairs(st.items) do
        local t, n = times[it.node], nodes[it.node]
        fw, fwc = fw + (t.fw - t.fw_comm) * it.share, fwc + t.fw_comm * it.share
        bw, bwc = bw + (t.bw - t.bw_comm) * it.share, bwc + t.bw_comm * it.share
        local h = hidden[it.node]
        if h then bwh = bwh + h * it.share end
        fwf, bwf = fwf + (t.fw_floor or 0) * it.share, bwf + (t.bw_floor or 0) * it.share
        local a = n.attrs
        if a and a.group == "ep" then
          ep_fw, ep_bw = ep_fw + t.fw_comm * it.share, ep_bw + t.bw_comm * it.share
        end
        params = params + n.params * it.share
        -- an expert's parameters (replicated over edp, not dp): the distributed optimizer shards them over fewer GPUs
        if replica_group(n) == "edp" then expert = expert + n.params * it.share end
        -- a serving graph's KV cache of this stage's own layers (one microbatch's; neusight.workload kv_cache_bytes:
        -- a sliding-window layer's holds at most the window, so stages of windowed and full layers differ)
        local kvb = type(a) == "table" and a.kv_cache_bytes
        if type(kvb) == "number" then kv = kv + kvb * it.share end
      end
      b = { fw = fw, fwc = fwc, bw = bw, bwc = bwc, bwh = bwh, params = params, expert = expert, ep_fw = ep_fw,
            ep_bw = ep_bw, fwf = fwf, bwf = bwf, kv = kv }
      if seg1 then
        local by_reps = alike[seg1.per]
        if not by_reps then by_reps = {}; alike[seg1.per] = by_reps end
        by_reps[seg1.reps] = k
      end
    end
    base[k] = b
    local vs = k - 1
    st.send_fw = vs < V - 1 and p2p[vs] or 0
    st.send_bw = (plan.training and vs > 0) and p2p[vs - 1] or 0
    st.params, st.expert_params, st.kv_cache_bytes = b.params, b.expert, b.kv
    st.fw_compute, st.fw_comm, st.fw_ep, st.fw_floor = b.fw, b.fwc, b.ep_fw, b.fwf
    st.fw = b.fw + b.fwc + st.send_fw
    params_total = params_total + b.params
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

  -- Optimizer step time, shared out by the parameters each device holds.
  local opt_total, opt_floor = 0, 0
  for _, i in ipairs(optimizer) do
    opt_total = opt_total + times[i].opt * nodes[i].count
    opt_floor = opt_floor + (times[i].opt_floor or 0) * nodes[i].count
  end

  -- Data-parallel gradient buckets: per virtual stage, walked backward from the start of its last backward op (the
  -- schedule's and mode's), the buckets each of its nodes fills (its gradient bytes into the open bucket of its group):
  -- where they fill does not depend on when. events[vs + 1] = { step = {}, bytes = {}, group = {}, n = {}, dt = {},
  -- len, steps, left_dp, left_edp }: the e-th run of full buckets is ready after the walk's step[e]-th node (its
  -- n[e] buckets of bytes[e] over group[e], each dt[e] seconds on the link), the leftover buckets at the end.
  local events, buckets_of = {}, {}
  -- (ZeRO-3 reduce-scatters each unit's gradients inside its backward, neusight.parallel.zero: no buckets after it)
  local zero3 = Z.active_stage(plan) == 3
  if Z.dp_gradients(plan) and not zero3 then
    local bucket_bytes = plan.bucket_mb * 1e6
    local reduce = Z.optimizer_sharded(plan) and "reduce_scatter" or "all_reduce"
    -- per layered segment (by its `per`): its nodes' gradient bytes and groups
    local seg_grads = {}
    for d = 1, P do
      local buckets = 0
      for c = 0, v - 1 do
        local vs = c * P + (d - 1)
        local st = stages[vs + 1]
        local ev = { step = {}, bytes = {}, group = {}, n = {}, dt = {}, len = 0, steps = 0 }
        local fill_dp, fill_edp, step = 0, 0, 0 -- the bytes in the open bucket of each group
        local function add(bytes, gk, n)
          local len = ev.len + 1
          ev.len, ev.step[len], ev.bytes[len], ev.group[len], ev.n[len] = len, step, bytes, gk, n
          ev.dt[len] = comm_time(reduce, bytes, plan.groups[gk])
          buckets = buckets + n
        end
        for si = #st.segments, 1, -1 do -- backward order: last segment, last layer, last node first
          local seg = st.segments[si]
          local seg_nodes, n_seg = seg.nodes, #seg.nodes
          local prep_seg = seg.layered and seg_grads[seg.per]
          local grads_of, edp_of
          if prep_seg then
            grads_of, edp_of = prep_seg[1], prep_seg[2]
          else
            grads_of, edp_of = {}, {}
            for j = 1, n_seg do
              local i = seg_nodes[j]
              grads_of[j] = (nodes[i].params + (tied_extra[i] or 0)) * eg * seg.per[j]
              -- expert weights sync over their own replicas (edp), the rest over dp
              edp_of[j] = replica_group(nodes[i]) == "edp"
            end
            if seg.layered then seg_grads[seg.per] = { grads_of, edp_of } end
          end
          for _ = 1, seg.reps do
            for j = n_seg, 1, -1 do
              step = step + 1
              local grads = grads_of[j]
              if grads > 0 then
                local edp = edp_of[j]
                local f, full = (edp and fill_edp or fill_dp) + grads, 0
                -- fill_buckets only where a bucket fills (below the size it hands f back, 0 buckets)
                if f >= bucket_bytes then f, full = fill_buckets(f, bucket_bytes) end
                if edp then fill_edp = f else fill_dp = f end
                if full > 0 then add(bucket_bytes, edp and "edp" or "dp", full) end
              end
            end
          end
        end
        ev.steps = step
        ev.regular = ev.len
        if fill_dp > 0 then add(fill_dp, "dp", 1) end
        if fill_edp > 0 then add(fill_edp, "edp", 1) end
        events[vs + 1] = ev
      end
      buckets_of[d] = buckets
    end
  end

  local fields = {}
  for k, f in ipairs(PREP_FIELDS) do fields[k] = plan[f] end
  prep = {
    plan = plan, fields = fields, times = reuse and times_copy(times), stages = stages, base = base, twin_of = twin_of, mem = mem,
    recipe = recipe, p2p_bytes = p2p_bytes, params_total = params_total, tied_sync = tied_sync, hidden = hidden,
    opt_total = opt_total, opt_floor = opt_floor, events = events, buckets_of = buckets_of, rerun = {}, walk_dt = {},
  }
  if reuse then preps[nodes] = prep end
  return prep
end

--- Per-device timeline of one training iteration (or inference pass) from per-node times.
--- `times[i]` (one instance of node i, seconds) = { fw, fw_comm, bw, bw_comm, bw_wgrad, opt } where bw
--- includes gradient accumulation, *_comm is the part spent in collective kernels and bw_wgrad (optional, 0) the part
--- in weight-gradient GEMMs (kernels with wgrad set: neusight.rules linear).
--- In-graph collectives count as tp_comm, or ep_comm for nodes of group "ep" (expert all-to-all): what is on the
--- wire; tp_comm_hidden is the part of tp_comm that runs under weight-gradient GEMMs (M.hidden_comm: Megatron's
--- column-parallel input-gradient collectives), not on the device's critical path nor in exposed_comm; p2p is
--- the stage-boundary send/recv plus, for tied embeddings split over stages, the first/last-stage
--- gradient all-reduce.
--- `times[i].fw_floor`, `bw_floor`, `opt_floor` (optional, 0 when absent): the roofline floors of those kernels
--- (engine/core/roofline.h roofline_floor_seconds; a collective's is 0).
--- Returns { iteration, floor, devices = { per pipeline stage: compute, tp_comm, tp_comm_hidden, ep_comm, p2p, dp_comm,
--- dp_exposed, optimizer, bubble, finish, floor, layers, … }, … } — all dp × tp ranks of a stage behave
--- alike, so one row stands for each of them; a device's `floor` is the least time its own kernels take (their
--- floors over its ops, recomputed forwards included, and its share of the optimizer step's), the run's `floor` the
--- largest; `memory` (neusight.memory.parallel) and `state`, the state per parameter it counted.
---@param plan table neusight.parallel.plan()
---@param nodes table[] the graph's nodes (as built)
---@param times table[]
---@param lean? boolean a search's ranking: the memory report without its per-stage lines
---@param reuse? boolean nodes and plan are not changed between calls (the engine's): what does not depend on the
--- recomputation mode or the schedule is kept from the last call with this nodes table, the same plan and times
function M.timeline(plan, nodes, times, lean, reuse)
  local prep = prepare(plan, nodes, times, reuse)
  local P, v, Mb = plan.pp, plan.virtual_stages, plan.microbatches
  local V = P * v
  local stages, base, twin_of, mem, hidden = prep.stages, prep.base, prep.twin_of, prep.mem, prep.hidden
  local p2p_bytes, params_total, tied_sync = prep.p2p_bytes, prep.params_total, prep.tied_sync
  local opt_total, opt_floor = prep.opt_total, prep.opt_floor
  local eg, ep = prep.recipe.bytes.grad, prep.recipe.bytes.param
  -- Recomputation: whether node i re-runs its forward before its backward where it is in a layered segment
  -- (seg.layered and rerun[i]; training only).
  local full, selective = plan.recompute == "full", plan.recompute == "selective"
  local rerun = prep.rerun[plan.recompute or false]
  if not rerun then
    rerun = {}
    for i, n in ipairs(nodes) do
      local a = n.attrs
      rerun[i] = plan.training and (full or (selective and (a and a.core_attention) == true))
    end
    prep.rerun[plan.recompute or false] = rerun
  end
  local comm_time = pricer_of(plan.cluster)

  -- Per virtual stage: the backward sums with the recomputed forwards (kernels and tp collectives) that run again
  -- before their backward, after the stage's own (prepare: the same order as when they were one loop); the memory.
  for k, st in ipairs(stages) do
    local twin = twin_of[k]
    local bw, bwc, bwf, ep_bw
    local bwh = base[k].bwh -- the seconds of bwc under weight-gradient GEMMs (a recomputed forward adds none)
    if twin then
      twin = stages[twin]
      bw, bwc, bwf, ep_bw = twin.bw_compute, twin.bw_comm, twin.bw_floor_sum, twin.bw_ep
      st.activations, st.transient, st.temporary = twin.activations, twin.transient, twin.temporary
      st.temporary_node = twin.temporary_node
    else
      local b = base[k]
      bw, bwc, bwf, ep_bw = b.bw, b.bwc, b.bwf, b.ep_bw
      PM.stage(mem, st, plan.training, full, p2p_bytes, selective)
      for _, seg in ipairs(st.segments) do
        for j, i in ipairs(seg.nodes) do
          if seg.layered and rerun[i] then
            local t, x = times[i], seg.per[j] * seg.reps
            bw, bwc = bw + (t.fw - t.fw_comm) * x, bwc + t.fw_comm * x
            bwf = bwf + (t.fw_floor or 0) * x
            local a = nodes[i].attrs
            if a and a.group == "ep" then ep_bw = ep_bw + t.fw_comm * x end
          end
        end
      end
    end
    st.bw_ep = ep_bw
    st.bw_compute, st.bw_comm, st.bw_floor_sum, st.bw_hidden = bw, bwc, bwf, bwh
    st.bw_floor = plan.training and bwf or 0
    st.bw = plan.training and (bw + (bwc - bwh) + st.send_bw) or 0
  end

  -- ZeRO-3 (neusight.parallel.zero; pp = 1, one stage: parallel.config refuses it with a pipeline): each microbatch's
  -- forward and backward wait for the parameter all-gathers and gradient reduce-scatters their compute does not hide.
  local zero_of = {}
  -- (where ZeRO-3 can run: neusight.parallel.zero dp_gradients and neusight.parallel.config zero_refusal, the one rule of
  -- the layouts a stage runs with; a plan at stage 3 passed it, so pp = 1 there)
  local zero_able = Z.dp_gradients(plan) and not require("neusight.parallel.config").zero_refusal(3, plan.pp, plan.ep)
  if Z.active_stage(plan) == 3 then
    for k, st in ipairs(stages) do
      local units = Z.units(st, nodes, times, hidden, rerun)
      local dp_group = plan.groups.dp
      local c = Z.exposed(units, ep, eg, function(op, bytes) return comm_time(op, bytes, dp_group) end)
      zero_of[k] = { gathered = Z.transient_bytes(units, ep, eg), comm = c }
      -- (st.fw is prepare's, kept across re-timings of one build: its own value is kept aside once)
      if st.fw_unsharded == nil then st.fw_unsharded = st.fw end
      st.fw, st.bw = st.fw_unsharded + c.fw_exposed, st.bw + c.bw_exposed
    end
  end
  -- The bytes of ZeRO-3's unsharded units (its transient) of device d's stage, for the memory report: under stage 3
  -- made above; below it made only where the report asks what zero 3 would need (a data-parallel training layout that
  -- does not fit: neusight.parallel.memory report), then kept. 0 where ZeRO-3 cannot run.
  local function zero3_gathered(d)
    local z = zero_of[d]
    if z then return z.gathered end
    if not zero_able then return 0 end
    z = { gathered = Z.transient_bytes(Z.units(stages[d], nodes, times, hidden, rerun), ep, eg) }
    zero_of[d] = z
    return z.gathered
  end
  local shape, finish, makespan, last_bw = simulate_times(stages, P, Mb, v, plan.schedule, plan.training, 1)

  -- Data-parallel gradient all-reduce: buckets of bucket_mb filled in backward order during each
  -- virtual stage's last backward; a bucket starts when its last gradient is ready (or after all
  -- compute without overlap) and waits for the link while the previous bucket is in flight.
  -- per virtual stage (1-based), what each of its forward and backward ops adds to its device's sums
  local fw_compute, fw_comm, fw_ep, send_fw, bw_compute, bw_comm, bw_ep, send_bw = {}, {}, {}, {}, {}, {}, {}, {}
  local fw_floor, bw_floor, bw_hidden = {}, {}, {}
  for k, st in ipairs(stages) do
    fw_compute[k], fw_comm[k], fw_ep[k], send_fw[k] = st.fw_compute, st.fw_comm, st.fw_ep, st.send_fw
    bw_compute[k], bw_comm[k], bw_ep[k], send_bw[k] = st.bw_compute, st.bw_comm, st.bw_ep, st.send_bw
    fw_floor[k], bw_floor[k], bw_hidden[k] = st.fw_floor, st.bw_floor, st.bw_hidden
  end
  local activations = PM.stage_activations(stages)
  -- Per virtual stage k, its nodes' backward seconds (with a recomputed forward) in the bucket walk's order (backward:
  -- last segment, last layer, last node first), one per step, made once per build and mode (kept in prep; the
  -- schedules differ only in when the walk starts) and shared by a stage's twins (prepare: the same nodes, reps and
  -- per, so the same seconds). seg_dt: per layered segment (by its `per`), its nodes' seconds for one rep.
  local walk_dt = prep.walk_dt[plan.recompute or false]
  if not walk_dt then walk_dt = {}; prep.walk_dt[plan.recompute or false] = walk_dt end
  local seg_dt = {}
  local function stage_dt(k)
    local flat = walk_dt[k]
    if flat then return flat end
    if twin_of[k] then
      flat = stage_dt(twin_of[k])
    else
      local st, n = stages[k], 0
      flat = {}
      for si = #st.segments, 1, -1 do
        local seg = st.segments[si]
        local seg_nodes, n_seg = seg.nodes, #seg.nodes
        local dt_of = seg.layered and seg_dt[seg.per]
        if not dt_of then
          dt_of = {}
          for j = 1, n_seg do
            local i = seg_nodes[j]
            -- (a collective under a weight-gradient GEMM: its exposed part, prep.hidden)
            dt_of[j] = (times[i].bw - (hidden[i] or 0) + (seg.layered and rerun[i] and times[i].fw or 0)) * seg.per[j]
          end
          if seg.layered then seg_dt[seg.per] = dt_of end
        end
        -- one rep's seconds last node first, then copied once per rep (table.move: a deep stage's hundreds of reps)
        local rev = {}
        for j = n_seg, 1, -1 do rev[n_seg - j + 1] = dt_of[j] end
        for _ = 1, seg.reps do
          table_move(rev, 1, n_seg, n + 1, flat)
          n = n + n_seg
        end
      end
      flat.n = n
    end
    walk_dt[k] = flat
    return flat
  end
  -- Per device, its ops (codes: ±(virtual stage + 1), a forward (+) or backward op) summed in op order, in the engine
  -- (ns.fold: 10⁵ ops in a deep pipeline), each sum as `s = s + x` (or `- x`) in the terms' order: compute, tensor-
  -- parallel communication (the op's collectives but its expert all-to-all), the expert all-to-all, point-to-point
  -- sends, the activations kept for backward (a forward keeps its stage's, a backward frees them; training) with
  -- their peak along the way (after the sums), the roofline floors of the op's kernels, and of the tensor-parallel
  -- communication the seconds under weight-gradient GEMMs (hidden: on the wire, not on the device's critical path).
  local sums = fold(shape.packed_codes, shape.n, {
    { 1, fw_compute }, { 2, fw_comm }, { 2, fw_ep, -1 }, { 3, fw_ep }, { 4, send_fw }, { 5, activations },
    { 6, fw_floor },
  }, {
    { 1, bw_compute }, { 2, bw_comm }, { 2, bw_ep, -1 }, { 3, bw_ep }, { 4, send_bw }, { 5, activations, -1 },
    { 6, bw_floor }, { 7, bw_hidden },
  }, 5)
  local devices, iteration, floor = {}, 0, 0
  -- per device, when its last op ends and its exposed gradient reduce after it (M.ops; not in a search's lean timeline)
  local ops_end, reduce_ends = not lean and {} or nil, not lean and {} or nil
  -- the devices' runs of buckets (below), in arrays made once for all of them: each device writes its own from the
  -- first, and every reader takes only its `nr` (or `len`) first entries
  local r_at, r_bytes, r_group, r_n, r_dt, q_at = {}, {}, {}, {}, {}, {}
  for d = 1, P do
    local dev = {
      stage = d - 1, compute = 0, tp_comm = 0, tp_comm_hidden = 0, ep_comm = 0, p2p = 0, dp_comm = 0, dp_exposed = 0, dp_bytes = 0, dp_wire_bytes = 0,
      optimizer = 0,
      layers = 0, params = 0, expert_params = 0, buckets = 0, microbatch_fw = 0, microbatch_bw = 0, kv_cache_bytes = 0,
    }
    local s = sums[d]
    local peak = s[8]
    dev.compute, dev.tp_comm, dev.ep_comm, dev.p2p, dev.tp_comm_hidden = s[1], s[2], s[3], s[4], s[7]
    local transient, temporary, temporary_node = PM.device_peaks(stages, P, v, d)
    dev.activation_bytes = peak + transient
    dev.temporary_bytes, dev.temporary_node = temporary, temporary_node
    for c = 0, v - 1 do
      local st = stages[c * P + d]
      dev.layers, dev.params = dev.layers + st.layers, dev.params + st.params
      dev.expert_params = dev.expert_params + st.expert_params
      -- every microbatch's sequences keep their cache (neusight.workload kv_cache_resident, the whole graph's rule)
      dev.kv_cache_bytes = dev.kv_cache_bytes + kv_cache_resident(st.kv_cache_bytes, plan)
      dev.microbatch_fw, dev.microbatch_bw = dev.microbatch_fw + st.fw, dev.microbatch_bw + st.bw
    end
    local compute_end = finish[d]
    local dp_end = compute_end
    local z = zero_of[d]
    dev.zero_gathered = z and z.gathered or 0
    if z and z.comm then -- ZeRO-3: every microbatch's gathers and scatters, exposed inside its forward and backward
      dev.dp_comm, dev.dp_exposed = Mb * z.comm.wire, Mb * (z.comm.fw_exposed + z.comm.bw_exposed)
      dev.dp_bytes = Mb * z.comm.bytes
      dev.dp_wire_bytes = Mb * (Z.wire_bytes("all_gather", z.comm.gathers, plan.dp)
        + Z.wire_bytes("reduce_scatter", z.comm.scatters, plan.dp))
    elseif Z.dp_gradients(plan) then
      -- runs of buckets: n[k] buckets of bytes[k] ready at at[k], group[k], each dt[k] on the link (parallel arrays)
      local nr, last_at, last_bytes, last_group = 0, nil, nil, nil
      for c = 0, v - 1 do
        local vs = c * P + (d - 1)
        local ev = prep.events[vs + 1]
        local e_step, e_bytes, e_group, e_n, e_dt = ev.step, ev.bytes, ev.group, ev.n, ev.dt
        -- Walk the stage backward from the start of its last backward op: gradients of node i are ready when its
        -- backward kernels finish; the buckets they fill are prepare's (events: the e-th regular run after the walk's
        -- e_step[e]-th node, steps increasing; the buckets left open at the end). t sums the nodes' seconds one by one.
        local dts = stage_dt(vs + 1)
        -- (the last run's at, bytes and group also in locals: last_at, last_bytes, last_group)
        local t, x0, regular, steps = last_bw[vs + 1], 1, ev.regular, dts.n
        for e = 1, ev.len do
          if e <= regular then
            local stop = e_step[e]
            for x = x0, stop do t = t + dts[x] end
            x0 = stop + 1
          elseif x0 <= steps then -- the buckets left open: dp, then edp, at the end of the walk
            for x = x0, steps do t = t + dts[x] end
            x0 = steps + 1
          end
          local bytes, gk = e_bytes[e], e_group[e]
          if nr > 0 and last_at == t and last_bytes == bytes and last_group == gk then
            r_n[nr] = r_n[nr] + e_n[e]
          else
            nr = nr + 1
            r_at[nr], r_bytes[nr], r_group[nr], r_n[nr], r_dt[nr] = t, bytes, gk, e_n[e], e_dt[e]
            last_at, last_bytes, last_group = t, bytes, gk
          end
        end
      end
      local ready = M.buckets_in_order { len = nr, at = r_at, bytes = r_bytes, group = r_group, n = r_n }
      -- with the distributed optimizer each rank only needs its shard of the summed gradient
      local reduce = Z.optimizer_sharded(plan) and "reduce_scatter" or "all_reduce"
      local b_at, b_n = ready.at, ready.n
      local q_dt = r_dt -- per run: when its buckets may start (q_at), each one's time on the link
      local overlap = plan.overlap_grad_reduce
      if overlap then -- min(b_at[k], compute_end) written out (math.min's choice: the second where it is less)
        for k = 1, ready.len do
          local a = b_at[k]
          if compute_end < a then a = compute_end end
          q_at[k] = a
        end
      else
        for k = 1, ready.len do q_at[k] = compute_end end
      end
      if not rawequal(ready.at, r_at) then -- reordered: the runs priced again
        -- a run of the bytes and group of the one before: its time, as priced (the pricer caches it too, but this
        -- skips its lookups)
        local b_bytes, b_group = ready.bytes, ready.group
        local last_bytes, last_group, dt
        q_dt = {}
        for k = 1, ready.len do
          local bytes, gk = b_bytes[k], b_group[k]
          if not (bytes == last_bytes and gk == last_group) then
            dt, last_bytes, last_group = comm_time(reduce, bytes, plan.groups[gk]), bytes, gk
          end
          q_dt[k] = dt
        end
      end
      -- the buckets through the link one after the other, each from max(its start, the link free) for its time, and
      -- their times summed (ns.queue: a 175B model's tens of thousands of buckets)
      local link_free, dp_comm = queue(q_at, b_n, q_dt, ready.len, 0, dev.dp_comm)
      -- the payload handed to the bucket collectives and what each rank sends of it (neusight.parallel.zero wire_bytes)
      local bytes, wire, b_bytes, b_group = 0, 0, ready.bytes, ready.group
      for k = 1, ready.len do
        local b = b_bytes[k] * b_n[k]
        bytes, wire = bytes + b, wire + Z.wire_bytes(reduce, b, plan.groups[b_group[k]].size)
      end
      dev.dp_bytes, dev.dp_wire_bytes = bytes, wire
      dev.buckets, dev.dp_comm = prep.buckets_of[d], dp_comm
      dp_end = max(compute_end, link_free)
      -- ZeRO-2 (neusight.parallel.zero) keeps only its shard of the gradients, so every microbatch's backward
      -- reduce-scatters its buckets (DeepSpeed stage 2 and FSDP SHARD_GRAD_OP by default), not the last one's alone:
      -- pp = 1 (parallel.config), the microbatches' backwards alike, each earlier one's exposed tail delaying the next
      -- forward as the last one's delays the step (counted at the end: M.ops shows them in the dp_reduce tail)
      if Mb > 1 and Z.stage(plan) == 2 then
        dev.dp_comm, dev.dp_bytes, dev.dp_wire_bytes = Mb * dp_comm, Mb * bytes, Mb * wire
        dp_end = dp_end + (Mb - 1) * (dp_end - compute_end)
      end
      dev.dp_exposed = dp_end - compute_end
    end
    local reduce_end = dp_end
    if tied_sync > 0 and (d == 1 or d == P) then -- the embedding group: first and last stage
      dp_end, dev.p2p = dp_end + tied_sync, dev.p2p + tied_sync
    end
    dev.optimizer = params_total > 0 and opt_total * dev.params / params_total or 0
    local gather = 0
    -- over how many GPUs this stage's step is split (neusight.parallel.memory step_shards: 1/dp of its parameters
    -- under the distributed optimizer, an expert's 1/(dp / ep))
    local step_shards = PM.step_shards(plan, dev.params, dev.expert_params)
    if Z.active_stage(plan) >= 1 then
      -- the step runs on this rank's shard; then every rank all-gathers the updated parameters over the group they
      -- were sharded over (an expert's over edp) — but under ZeRO-3, whose parameters stay sharded (the next forward
      -- gathers them, neusight.parallel.zero)
      dev.optimizer = dev.optimizer / step_shards
      if opt_total > 0 and not (z and z.comm) then
        -- the experts' parameters gathered over edp, the rest over dp (edp is dp at ep 1: one group, one all-gather)
        local expert = plan.ep > 1 and dev.expert_params or 0
        if expert == 0 then
          gather = comm_time("all_gather", dev.params * ep, plan.groups.dp)
        else -- (collectives: a group of one rank, or no bytes, costs 0)
          gather = comm_time("all_gather", (dev.params - expert) * ep, plan.groups.dp)
            + comm_time("all_gather", expert * ep, plan.groups.edp)
        end
        dev.dp_comm, dev.dp_exposed = dev.dp_comm + gather, dev.dp_exposed + gather
        dev.dp_bytes = dev.dp_bytes + dev.params * ep
        dev.dp_wire_bytes = dev.dp_wire_bytes + Z.wire_bytes("all_gather", (dev.params - expert) * ep, plan.dp)
          + Z.wire_bytes("all_gather", expert * ep, plan.groups.edp.size)
      end
    end
    dev.finish = dp_end + dev.optimizer + gather
    if ops_end then ops_end[d], reduce_ends[d] = compute_end, reduce_end end
    iteration = max(iteration, dev.finish)
    -- the least time its own kernels can take (their roofline floors over its ops, and its share of the optimizer
    -- step's, shared out as the step's time is): bubbles and communication are the forecast's, not the floor's
    local step_floor = params_total > 0 and opt_floor * dev.params / params_total or 0
    if Z.active_stage(plan) >= 1 then step_floor = step_floor / step_shards end
    dev.floor = s[6] + step_floor
    floor = max(floor, dev.floor)
    devices[d] = dev
  end
  -- gradient bytes per rank: each device's own parameters' (its stage, its tp shard; the tied-embedding copy of the
  -- last stage included), what it reduces over dp; the run's is the device with the most (as state_gb, memory_gb)
  local grad_most = 0
  for _, dev in ipairs(devices) do
    dev.exposed_comm = (dev.tp_comm - dev.tp_comm_hidden) + dev.ep_comm + dev.p2p + dev.dp_exposed
    -- a difference of sums: what is left at rounding's scale is no idle time (without a pipeline it read 4e-17 s,
    -- JSON and CSV bubble_ms 2.8e-14, where a device that never waits has none)
    local idle = iteration - dev.compute - dev.optimizer - dev.exposed_comm
    dev.bubble = idle > 1e-12 * iteration and idle or 0
    dev.grad_bytes = plan.training and dev.params * eg or 0  -- no backward, no gradient: nothing reduced
    grad_most = max(grad_most, dev.grad_bytes)
  end
  local out = {
    iteration = iteration, floor = floor, pipeline = makespan, devices = devices, p2p_bytes = p2p_bytes,
    grad_bytes_per_rank = grad_most, embedding_sync = tied_sync,
    memory = PM.report(plan, devices, mem, params_total, lean, zero3_gathered), state = mem.state,
  }
  if ops_end then
    -- what M.ops needs to give every op's times: the schedule and, per virtual stage k, its ops' seconds as simulated
    -- and their parts, at per[6k - 5 … 6k]: forward, backward, forward collectives, backward collectives (exposed),
    -- forward send, backward send (copied: a search re-times the same stage tables), O(stages) here; the ops only
    -- when asked
    local per, n = {}, 0
    for _, st in ipairs(stages) do
      per[n + 1], per[n + 2], per[n + 3], per[n + 4], per[n + 5], per[n + 6] =
        st.fw, st.bw, st.fw_comm, st.bw_comm - st.bw_hidden, st.send_fw, st.send_bw
      n = n + 6
    end
    out.ops_of = { P = P, Mb = Mb, v = v, schedule = plan.schedule, training = plan.training and true or false,
                   per = per, ops_end = ops_end, reduce_end = reduce_ends, tied_sync = tied_sync }
  end
  return out
end

-- Per device, what follows its last op, in order; each starts where the one before it ends (the first at its last op's
-- end). A part of no time is left out.
local TAIL = { "dp_reduce", "embedding_sync", "optimizer", "param_gather" }

--- Every op of a timeline made without `lean` (its `ops_of`; nil otherwise: an error), device by device in the order
--- it runs them: { device (0-based: its pipeline stage), kind, start, finish (seconds from the iteration's start) }
--- with, for kind "forward" or "backward" (a microbatch through one model chunk, as neusight.parallel.schedule
--- simulates it), mb (the schedule's label of the microbatch), index (its number from 0), chunk (0-based), comm (the
--- seconds of its tensor- and expert-parallel collectives not hidden under weight-gradient GEMMs, among its kernels)
--- and send (its point-to-point send to the next stage, at its end); then the device's exposed tail: "dp_reduce" (the
--- data-parallel gradient buckets still on the link after its last op), "embedding_sync" (the tied embedding's
--- gradient all-reduce, first and last stage), "optimizer" (its step), "param_gather" (the distributed optimizer's
--- parameter all-gather). Gaps between them are the device's bubbles; the last finish of all is the iteration.
---@param t table M.timeline's result
function M.ops(t)
  local o = type(t) == "table" and t.ops_of
  if type(o) ~= "table" then error("timeline ops: the timeline was made lean (a search's): it keeps no op times", 2) end
  local per, stages = o.per, {}
  for k = 1, #per // 6 do stages[k] = { fw = per[6 * k - 5], bw = per[6 * k - 4] } end
  local devices = schedule.simulate(stages, o.P, o.Mb, o.v, o.schedule, o.training)
  local dev_of = t.devices
  local out = {}
  for d, dev in ipairs(devices) do
    for _, op in ipairs(dev.ops) do
      local at = 6 * op.vs + (op.fw and 0 or 1)
      out[#out + 1] = { device = d - 1, kind = op.fw and "forward" or "backward", mb = op.mb, index = op.index,
        chunk = op.chunk, start = op.start, finish = op.finish, comm = per[at + 3], send = per[at + 5] }
    end
    -- the tail's ends as M.timeline summed them (the same terms in the same order: the same bits)
    local reduce_end, optimizer, finish = o.reduce_end[d], dev_of[d].optimizer, dev_of[d].finish
    local synced = reduce_end
    if o.tied_sync > 0 and (d == 1 or d == o.P) then synced = synced + o.tied_sync end
    local ends = { reduce_end, synced, synced + optimizer, finish }
    local at = o.ops_end[d]
    for i, kind in ipairs(TAIL) do
      local to = ends[i]
      if to > at then out[#out + 1] = { device = d - 1, kind = kind, start = at, finish = to } end
      at = to
    end
  end
  return out
end
return M
