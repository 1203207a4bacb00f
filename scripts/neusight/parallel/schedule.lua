-- scripts/neusight/parallel/schedule.lua — pipeline schedules (GPipe, 1F1B, interleaved 1F1B) as a registry, and their op-by-op simulation.
--
-- Owns the order in which each pipeline device runs its forward and backward microbatches (M.schedules: one
-- function per schedule; a workload adds one by assigning require("neusight.parallel").schedules.<name>) and the
-- event simulation that turns per-stage forward/backward seconds into start and finish times per op.
local T = require "neusight.topology"
local ns = require "neusight"
local walk_program, compile = ns.walk, ns.compile
local max, min = math.max, math.min
local ipairs, pairs, type, tostring, error = ipairs, pairs, type, tostring, error
local show = T.show

local M = {}

--- Pipeline schedules by name: function(P, M, v, training) → per-device arrays of ops
--- { fw = bool, chunk = c (0-based: an integer of 0 to v − 1, else an error naming the op), mb = m (0-based; a
--- label the simulation only compares) }, in the order the device runs them.
M.schedules = {}

-- The built-in schedules write each device's ops into flat arrays (lists[d] = { n, fw = {}, chunk = {}, mb = {} }):
-- the simulation reads those (a deep pipeline has 10⁵ ops) and M.schedules' functions make the op tables from them.
local function lists_new(P)
  local lists = {}
  for d = 1, P do lists[d] = { n = 0, fw = {}, chunk = {}, mb = {} } end
  return lists
end
local function push(l, fw, chunk, mb)
  local n = l.n + 1
  l.n, l.fw[n], l.chunk[n], l.mb[n] = n, fw, chunk, mb
end
local function tables_of(lists)
  local orders = {}
  for d, l in ipairs(lists) do
    local o, fw, chunk, mb = {}, l.fw, l.chunk, l.mb
    for i = 1, l.n do o[i] = { fw = fw[i], chunk = chunk[i], mb = mb[i] } end
    orders[d] = o
  end
  return orders
end
local lists_of = {} -- built-in schedule function → its flat-array maker

-- GPipe (Huang et al. 2019): every forward microbatch, then every backward one.
local function gpipe(P, Mb, _, training)
  local lists = lists_new(P)
  for d = 1, P do -- push(l, …) written out: these run once per op
    local l = lists[d]
    local fw, chunk, mb, n = l.fw, l.chunk, l.mb, 0
    for m = 0, Mb - 1 do n = n + 1; fw[n], chunk[n], mb[n] = true, 0, m end
    if training then
      for m = 0, Mb - 1 do n = n + 1; fw[n], chunk[n], mb[n] = false, 0, m end
    end
    l.n = n
  end
  return lists
end
M.schedules.gpipe = function(P, Mb, v, training) return tables_of(gpipe(P, Mb, v, training)) end
lists_of[M.schedules.gpipe] = gpipe

-- 1F1B (PipeDream-Flush; Narayanan et al. 2021): device d runs P−d−1 warm-up forwards, then
-- alternates one forward and one backward, then drains the remaining backwards. Inference: M.schedules.gpipe.
local function one_f_one_b(P, Mb, _, training)
  local lists = lists_new(P)
  for d = 0, P - 1 do
    local l = lists[d + 1]
    local fw, chunk, mb, n = l.fw, l.chunk, l.mb, 0 -- push(l, …) written out: these run once per op
    local warm = min(P - d - 1, Mb)
    for m = 0, warm - 1 do n = n + 1; fw[n], chunk[n], mb[n] = true, 0, m end
    for i = 0, Mb - warm - 1 do
      n = n + 1; fw[n], chunk[n], mb[n] = true, 0, warm + i
      n = n + 1; fw[n], chunk[n], mb[n] = false, 0, i
    end
    for m = Mb - warm, Mb - 1 do n = n + 1; fw[n], chunk[n], mb[n] = false, 0, m end
    l.n = n
  end
  return lists
end
M.schedules["1f1b"] = function(P, Mb, v, training)
  if not training then return M.schedules.gpipe(P, Mb, 1, false) end
  return tables_of(one_f_one_b(P, Mb, v, training))
end
lists_of[M.schedules["1f1b"]] = one_f_one_b

-- Interleaved 1F1B (Narayanan et al. 2021 §2.2; Megatron-LM's
-- forward_backward_pipelining_with_interleaving): each device holds v model chunks (virtual stage
-- c·P + d for chunk c); the k-th forward runs chunk (k // P) mod v on microbatch
-- (k // (P·v))·P + k mod P, backwards walk the chunks in reverse; warm-up (P−d−1)·2 + (v−1)·P.
local function interleaved(P, Mb, v, training)
  local total = Mb * v
  local function mb_of(k) return (k // (P * v)) * P + k % P end
  local function fw(l, k) push(l, true, (k // P) % v, mb_of(k)) end
  local function bw(l, k) push(l, false, v - 1 - (k // P) % v, mb_of(k)) end
  local lists = lists_new(P)
  for d = 0, P - 1 do
    local l = lists[d + 1]
    if not training then
      for k = 0, total - 1 do fw(l, k) end
    else
      local warm = min((P - d - 1) * 2 + (v - 1) * P, total)
      for k = 0, warm - 1 do fw(l, k) end
      for i = 0, total - warm - 1 do
        fw(l, warm + i)
        bw(l, i)
      end
      for k = total - warm, total - 1 do bw(l, k) end
    end
  end
  return lists
end
M.schedules.interleaved = function(P, Mb, v, training) return tables_of(interleaved(P, Mb, v, training)) end
lists_of[M.schedules.interleaved] = interleaved

--- Whether schedule `name` runs inference as GPipe does (every forward microbatch in order on each device, no backward
--- to interleave): the built-in gpipe and 1f1b (whose inference is M.schedules.gpipe), while the registry's gpipe is
--- the built-in one. Between such schedules the choice changes nothing in inference (neusight.workload warns of it);
--- interleaved (its model chunks) and a schedule a workload registers are never said to.
function M.inference_as_gpipe(name)
  local f = M.schedules[name]
  if f == nil or lists_of[M.schedules.gpipe] ~= gpipe then return false end
  return lists_of[f] == gpipe or lists_of[f] == one_f_one_b
end

-- Schedule `make`'s ops as flat arrays and the number of microbatch labels they use: a built-in's own (unless it
-- hands over to a replaced M.schedules.gpipe, as 1F1B in inference does; microbatches 0 to Mb − 1), else its op
-- tables copied, each op's chunk checked (an integer of 0 to v − 1) and its microbatch, a label the turns only compare
-- (equal as table keys are), numbered 0, 1, … in the order first seen (mb; `label` keeps the schedule's own).
local function op_lists(make, schedule, P, Mb, v, training)
  local fast = lists_of[make]
  if fast and not (fast == one_f_one_b and not training) then return fast(P, Mb, v, training), Mb end
  if fast and lists_of[M.schedules.gpipe] == gpipe then return gpipe(P, Mb, 1, false), Mb end
  local orders = make(P, Mb, v, training)
  local lists, ids, labels = {}, {}, 0
  for d = 1, P do
    local o = type(orders) == "table" and orders[d]
    if type(o) ~= "table" then error(("schedule %s: no op list for device %d"):format(schedule, d - 1), 0) end
    local fw, chunk, mb, label, n = {}, {}, {}, {}, #o
    for i = 1, n do
      local op = o[i]
      local c, m = op.chunk, op.mb
      label[i] = m
      if math.type(c) == "float" and c == c // 1 then c = math.tointeger(c) or c end
      if math.type(c) ~= "integer" or c < 0 or c >= v then
        error(("schedule %s: device %d, op %d: chunk %s is not one of 0 to %d (v = %d)"):format(schedule, d - 1, i,
          show(c), v - 1, v), 0)
      end
      local id = ids[m]
      if id == nil then id, labels = labels, labels + 1; ids[m] = id end
      fw[i], chunk[i], mb[i] = op.fw, c, id
    end
    lists[d] = { n = n, fw = fw, chunk = chunk, mb = mb, label = label }
  end
  return lists, labels
end

local function schedule_of(schedule, stages, P, v, level)
  local make = M.schedules[schedule]
  if not make then error(("simulate: unknown schedule %s"):format(show(schedule)), level + 1) end
  local V = P * v
  if #stages ~= V then error(("simulate: %d stages given, %d expected (P·v)"):format(#stages, V), level + 1) end
  return make
end

-- The simulation's rules: each device runs its ops in order; a forward of virtual stage vs is ready when the forward
-- of vs − 1 (same microbatch) is done (at once on the first stage), a backward when the backward of vs + 1 is (on the
-- last stage: its own forward), and a backward also waits for its own forward; an op starts at max(its device's
-- previous finish, ready) and takes its stage's seconds. Devices take turns, each running what it can, until every
-- op ran (or none can: a deadlock).
--
-- The order of those turns depends on which ops are done, never on their times. So a schedule shape (P, Mb, v,
-- training) is compiled once, without times, into a program: the ops in the order the turns take them (k = 1, 2, …),
-- each as prev (the position of the op before it on its device), dep (that of the op it waits for; 0 for either:
-- none, time 0) and code = +(vs + 1) for a forward of virtual stage vs, −(vs + 1) for a backward, packed into one
-- integer: program[k] = prev << 40 | dep << 16 | (code + 2^15) (positions below 2^24, codes within ±2^15). Walking the
-- program computes each op's max(previous finish, ready) + seconds from the same two finishes as the turns would: the
-- same bits for every set of stage times (tests/scripts/test_parallel.lua checks it against the turn-by-turn
-- simulation). Also per device d: packed_codes[d] (the codes of its ops in its order, packed for ns.fold; the same as
-- the program's codes along its prev links from last[d]), n[d] ops and last[d] (its last op's position, 0: none).
-- (Each virtual stage's last backward op is found by the walk itself: ns.walk returns last_bw.)
--
-- A search asks for the same few shapes many times (every recomputation mode of a layout, every tp of a pipeline
-- depth, in turn). Read-only once made; shapes are kept up to SHAPES_MEMO_OPS ops in all, about 100 MB (48 bytes an
-- op, packed copies included; the per-device codes are kept packed only), the first ones made: a search going round more shapes than that finds those every round instead of none
-- (GPT-3's 768-GPU search with tp up to 32 asks for 532 380 ops of 1F1B shapes, again for each tp; with GPipe too,
-- twice that).
local shapes_memo, shapes_memo_ops, SHAPES_MEMO_OPS = {}, 0, 1 << 21
local MAX_OPS, MAX_CODE = (1 << 24) - 1, (1 << 15) - 1
local function shape_of(make, schedule, P, Mb, v, training)
  local key = ("%s|%d|%d|%d|%s"):format(tostring(make), P, Mb, v, tostring(training))
  local shape = shapes_memo[key]
  if shape then return shape end
  local lists, labels = op_lists(make, schedule, P, Mb, v, training)
  local V, left = P * v, 0
  local n = {}
  for d = 1, P do n[d] = lists[d].n; left = left + n[d] end
  if left > MAX_OPS or V > MAX_CODE then -- the layout's (neusight.infeasible: search skips it with this reason)
    ns.infeasible(("schedule %s: %d device(s), %d microbatch(es), %d chunk(s) make %d ops (at most %d "
      .. "ops and %d stages)"):format(schedule, P, Mb, v, left, MAX_OPS, MAX_CODE))
  end
  -- the turns, in the engine (ns.compile: each device's ops in order while ready, devices in turn); the program and
  -- each device's codes come back packed for the engine's loops (ns.walk, ns.fold)
  local k, program, packed, packed_codes, last = compile(lists, P, v, labels)
  if not k then
    error(("schedule %s deadlocks with %d device(s), %d microbatch(es), %d chunk(s)"):format(schedule, P, Mb, v), 0)
  end
  shape = { total = k, program = program, n = n, last = last, packed = packed, packed_codes = packed_codes }
  if shapes_memo_ops + k <= SHAPES_MEMO_OPS then shapes_memo[key], shapes_memo_ops = shape, shapes_memo_ops + k end
  return shape
end

-- Walks a shape's program with per-stage seconds (ns.walk, engine/lua/wrap_series.cpp): done[k] = the finish of op
-- k, max(the finish of its prev, of its dep) + its stage's seconds (done[0] = 0; the max: the first unless it is
-- less); last_bw[vs + 1] = the start of virtual stage vs's last backward op (the latest; the first of equal ones);
-- finishes[d] = done[last[d]]. A forward lasts stage.fw (stage.bw where fw is false or nil: `op.fw and st.fw or
-- st.bw`). Returns finishes, last_bw and, with `all`, done and starts (every op's).
local function walk(shape, stages, all)
  local dur_fw, dur_bw = {}, {}
  for s, st in ipairs(stages) do dur_fw[s], dur_bw[s] = st.fw or st.bw, st.bw end
  return walk_program(shape.packed, shape.total, dur_fw, dur_bw, #stages, shape.last, all)
end

-- The simulation for the timeline: the compiled shape (per device d: packed_codes[d], its i-th op's ±(virtual stage
-- + 1), + a forward, − a backward, packed for ns.fold; n[d] ops), each device's finish, the makespan and last_bw[vs + 1] = the start of
-- virtual stage vs's last backward op (the latest; the first of equal ones), as M.simulate gives them. Argument errors
-- are raised at `level` (2: the caller's line).
function M.simulate_times(stages, P, Mb, v, schedule, training, level)
  local make = schedule_of(schedule, stages, P, v, level + 1)
  local shape = shape_of(make, schedule, P, Mb, v, training)
  local finish, last_bw = walk(shape, stages, false)
  local makespan = 0
  for d = 1, P do makespan = max(makespan, finish[d]) end
  return shape, finish, makespan, last_bw
end

--- Simulates a schedule: each device runs its ops in order; a forward of virtual stage vs waits for
--- the forward of vs−1 (same microbatch), a backward for the backward of vs+1 (the last stage's for
--- its own forward). stages[vs+1] = { fw = seconds, bw = seconds } per microbatch, sends included.
--- Returns per device { ops = { {fw, chunk, mb, index, vs, start, finish}… }, finish } and the makespan (mb: the
--- schedule's own label of the microbatch; index: its number from 0 in the order first seen, the same for built-ins).
---@param stages { fw: number, bw: number }[] one entry per virtual stage (P·v of them)
---@param P integer devices
---@param Mb integer microbatches
---@param v integer chunks per device
---@param schedule string a key of M.schedules
---@param training boolean
function M.simulate(stages, P, Mb, v, schedule, training)
  local make = schedule_of(schedule, stages, P, v, 2)
  local shape = shape_of(make, schedule, P, Mb, v, training)
  local lists = op_lists(make, schedule, P, Mb, v, training)
  local _, _, done, starts = walk(shape, stages, true)
  local devices, makespan = {}, 0
  for d = 1, P do
    local l, pd, ops = lists[d], {}, {}
    local k = shape.last[d]
    for i = l.n, 1, -1 do pd[i], k = k, shape.program[k] >> 40 end -- program positions of its ops, from the last back
    for i = 1, l.n do
      local k = pd[i]
      ops[i] = { fw = l.fw[i], chunk = l.chunk[i], mb = (l.label or l.mb)[i], index = l.mb[i], vs = l.chunk[i] * P + (d - 1),
                 start = starts[k], finish = done[k] }
    end
    devices[d] = { ops = ops, finish = done[shape.last[d]] }
    makespan = max(makespan, devices[d].finish)
  end
  return devices, makespan
end

return M
