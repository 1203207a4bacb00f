-- scripts/neusight/parallel/schedule.lua — pipeline schedules (GPipe, 1F1B, interleaved 1F1B) as a registry, and their op-by-op simulation.
--
-- Owns the order in which each pipeline device runs its forward and backward microbatches (M.schedules: one
-- function per schedule; a workload adds one by assigning require("neusight.parallel").schedules.<name>) and the
-- event simulation that turns per-stage forward/backward seconds into start and finish times per op.
local T = require "neusight.topology"
local max, min = math.max, math.min
local type, tostring, error = type, tostring, error
local show = T.show

local M = {}

--- Pipeline schedules by name: function(P, M, v, training) → per-device arrays of ops
--- { fw = bool, chunk = c (0-based), mb = m (0-based) }, in the order the device runs them.
M.schedules = {}

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

-- The simulation's rules: each device runs its ops in order; a forward of virtual stage vs is ready when the forward
-- of vs − 1 (same microbatch) is done (at once on the first stage), a backward when the backward of vs + 1 is (on the
-- last stage: its own forward), and a backward also waits for its own forward. Devices take turns, each running what
-- it can, until every op ran (or none can: a deadlock). The turn order depends on which ops are done, never on their
-- times. `on_op(d, i, op, vs, ready)` runs op i of device d (`ready`: what on_op returned for the op it waited for,
-- 0 for none) and returns what the ops waiting for it see (a finish time, or anything but nil and false).
local function run(orders, P, Mb, v, schedule, on_op)
  local V = P * v
  local done_fw, done_bw = {}, {} -- [vs][mb] = on_op's value
  for vs = 0, V - 1 do done_fw[vs], done_bw[vs] = {}, {} end
  local ptr, left = {}, 0
  for d = 1, P do
    if type(orders[d]) ~= "table" then error(("schedule %s: no op list for device %d"):format(schedule, d - 1), 0) end
    ptr[d] = 1
    left = left + #orders[d]
  end
  local progress = true
  while left > 0 and progress do
    progress = false
    for d = 1, P do
      local o = orders[d]
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
        local value = on_op(d, i, op, vs, ready)
        if op.fw then done_fw[vs][op.mb] = value else done_bw[vs][op.mb] = value end
        i, left, progress = i + 1, left - 1, true
      end
      ptr[d] = i
    end
  end
  if left > 0 then
    error(("schedule %s deadlocks with %d device(s), %d microbatch(es), %d chunk(s)"):format(schedule, P, Mb, v), 0)
  end
end

local function schedule_of(schedule, stages, P, v, level)
  local make = M.schedules[schedule]
  if not make then error(("simulate: unknown schedule %s"):format(show(schedule)), level + 1) end
  local V = P * v
  if #stages ~= V then error(("simulate: %d stages given, %d expected (P·v)"):format(#stages, V), level + 1) end
  return make
end

-- A schedule shape (P, Mb, v, training) compiled once into flat arrays (a deep pipeline has 10⁵ ops): per device d,
-- code[d][i] = +(vs + 1) for its i-th op when a forward of virtual stage vs, −(vs + 1) for a backward, n[d] ops,
-- last[d] = the program position of its last op (0: none); and the program: the ops in the order `run` takes them
-- (k = 1, 2, …), prev[k] = the position of the op before it on its device, dep[k] = that of the op it waits for (0
-- for either: none, time 0), pcode[k] its code. As that order does not depend on times, walking the program computes
-- each op's max(previous finish, ready) + seconds from the same two finishes, in an order the simulation allows: the
-- same bits for every set of stage times (tests/scripts/test_parallel.lua checks it against M.simulate). A search
-- asks for the same few shapes many times (every recomputation mode of a layout, every tp of a pipeline depth).
-- Read-only once made; recent shapes are kept up to SHAPES_MEMO_OPS ops in all, about 64 MB (GPT-3's 768-GPU search
-- with tp up to 32 asks for 532 480 ops of shapes, again for each tp).
local shapes_memo, shapes_memo_ops, SHAPES_MEMO_OPS = {}, 0, 1 << 20
local function shape_of(make, schedule, P, Mb, v, training)
  local key = ("%s|%d|%d|%d|%s"):format(tostring(make), P, Mb, v, tostring(training))
  local shape = shapes_memo[key]
  if shape then return shape end
  local orders = make(P, Mb, v, training)
  local code, n, last, prev, dep, pcode, k = {}, {}, {}, {}, {}, {}, 0
  for d = 1, P do code[d], n[d], last[d] = {}, 0, 0 end
  run(orders, P, Mb, v, schedule, function(d, i, op, vs, ready)
    k = k + 1
    local c = op.fw and vs + 1 or -(vs + 1)
    prev[k], dep[k], pcode[k], code[d][i] = last[d], ready, c, c
    n[d], last[d] = i, k
    return k
  end)
  shape = { code = code, n = n, last = last, prev = prev, dep = dep, pcode = pcode, total = k }
  if shapes_memo_ops + k > SHAPES_MEMO_OPS then shapes_memo, shapes_memo_ops = {}, 0 end
  shapes_memo[key], shapes_memo_ops = shape, shapes_memo_ops + k
  return shape
end

-- The simulation for the timeline: the compiled shape (shape_of: per device code[d] and n[d]), each device's finish,
-- the makespan and last_bw[vs] = the start of virtual stage vs's last backward op (the latest; the first of equal
-- ones; by 1-based stage: last_bw[vs + 1]), as M.simulate gives them. Argument errors are raised at `level` (2: the caller's line).
function M.simulate_times(stages, P, Mb, v, schedule, training, level)
  local make = schedule_of(schedule, stages, P, v, level + 1)
  local shape = shape_of(make, schedule, P, Mb, v, training)
  local V = P * v
  -- a forward op lasts stage.fw (stage.bw where fw is false or nil: `op.fw and st.fw or st.bw`), a backward stage.bw
  local dur_fw, dur_bw = {}, {}
  for s = 1, V do
    local st = stages[s]
    dur_fw[s], dur_bw[s] = st.fw or st.bw, st.bw
  end
  local prev, dep, pcode = shape.prev, shape.dep, shape.pcode
  local done, last_bw = { [0] = 0 }, {} -- done[k]: finish of the k-th op run
  for k = 1, shape.total do
    local a, b = done[prev[k]], done[dep[k]]
    local start = a < b and b or a -- max(previous finish, ready), inline: the previous unless it is less
    local c = pcode[k]
    if c > 0 then
      done[k] = start + dur_fw[c]
    else
      c = -c
      done[k] = start + dur_bw[c]
      local l = last_bw[c]
      if not l or start > l then last_bw[c] = start end
    end
  end
  local finish, makespan, last = {}, 0, shape.last
  for d = 1, P do
    finish[d] = done[last[d]]
    makespan = max(makespan, finish[d])
  end
  return shape, finish, makespan, last_bw
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
  local make = schedule_of(schedule, stages, P, v, 2)
  local orders = make(P, Mb, v, training)
  local devices = {}
  for d = 1, P do devices[d] = { ops = {}, finish = 0 } end
  run(orders, P, Mb, v, schedule, function(d, i, op, vs, ready)
    local dev = devices[d]
    local start = max(dev.finish, ready)
    local fin = start + (op.fw and stages[vs + 1].fw or stages[vs + 1].bw)
    dev.ops[i] = { fw = op.fw, chunk = op.chunk, mb = op.mb, vs = vs, start = start, finish = fin }
    dev.finish = fin
    return fin
  end)
  local makespan = 0
  for d = 1, P do makespan = max(makespan, devices[d].finish) end
  return devices, makespan
end

return M
