-- scripts/neusight/parallel/schedule.lua — pipeline schedules (GPipe, 1F1B, interleaved 1F1B) as a registry, and their op-by-op simulation.
--
-- Owns the order in which each pipeline device runs its forward and backward microbatches (M.schedules: one
-- function per schedule; a workload adds one by assigning require("neusight.parallel").schedules.<name>) and the
-- event simulation that turns per-stage forward/backward seconds into start and finish times per op.
local T = require "neusight.topology"
local max, min = math.max, math.min
local ipairs, type, tostring, error = ipairs, type, tostring, error
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

-- The schedules' op lists by schedule function and (P, Mb, v, training), each device's compiled into flat arrays
-- (ops[d] = { n = ops, fw = {truthy?}, mb = {m}, vs = {c·P + d − 1} }: the simulation and the timeline walk 10⁵ ops
-- of a deep pipeline without a table per op). A search asks for the same few shapes many times (every recomputation
-- mode of a layout, every tp of a pipeline depth). Read-only once made; recent shapes are kept up to ORDERS_MEMO_OPS
-- ops in all, about 48 MB (a 64-stage, 512-microbatch schedule is 65 536 ops; GPT-3's 768-GPU search with tp up to
-- 32 asks for 532 480 ops of shapes over and over, once per tp).
local orders_memo, orders_memo_ops, ORDERS_MEMO_OPS = {}, 0, 1 << 20
local function schedule_ops(make, schedule, P, Mb, v, training)
  local key = ("%s|%d|%d|%d|%s"):format(tostring(make), P, Mb, v, tostring(training))
  local ops = orders_memo[key]
  if ops then return ops end
  local orders = make(P, Mb, v, training)
  ops = {}
  local total = 0
  for d = 1, P do
    local o = type(orders) == "table" and orders[d]
    if type(o) ~= "table" then error(("schedule %s: no op list for device %d"):format(schedule, d - 1), 0) end
    local n = #o
    local fw, mb, vs = {}, {}, {}
    for i = 1, n do
      local op = o[i]
      fw[i], mb[i], vs[i] = op.fw, op.mb, op.chunk * P + (d - 1)
    end
    ops[d] = { n = n, fw = fw, mb = mb, vs = vs }
    total = total + n
  end
  if orders_memo_ops + total > ORDERS_MEMO_OPS then orders_memo, orders_memo_ops = {}, 0 end
  orders_memo[key], orders_memo_ops = ops, orders_memo_ops + total
  return ops
end

-- The simulation of M.simulate without its per-op records: the compiled op lists (schedule_ops), starts[d][i] and
-- finishes[d][i] of the i-th op of device d, each device's finish, the makespan and last_bw[vs] = the start of
-- virtual stage vs's last backward op (the latest; the first of equal ones). `lean`: no starts and finishes (nil),
-- the rest alone. Argument errors are raised at `level` (2: the caller's line).
function M.simulate_times(stages, P, Mb, v, schedule, training, level, lean)
  local make = M.schedules[schedule]
  if not make then error(("simulate: unknown schedule %s"):format(show(schedule)), level + 1) end
  local V = P * v
  if #stages ~= V then error(("simulate: %d stages given, %d expected (P·v)"):format(#stages, V), level + 1) end
  local ops = schedule_ops(make, schedule, P, Mb, v, training)
  -- a forward op lasts stage.fw (stage.bw where fw is false or nil: the `op.fw and st.fw or st.bw` of old), a
  -- backward op stage.bw
  local dur_fw, dur_bw = {}, {}
  for k = 1, V do
    local st = stages[k]
    dur_fw[k - 1], dur_bw[k - 1] = st.fw or st.bw, st.bw
  end
  local done_fw, done_bw = {}, {} -- [vs][mb] = finish time
  for vs = 0, V - 1 do done_fw[vs], done_bw[vs] = {}, {} end
  local starts, finishes, finish, ptr, left, last_bw = {}, {}, {}, {}, 0, {}
  for d = 1, P do
    if not lean then starts[d], finishes[d] = {}, {} end
    finish[d], ptr[d] = 0, 1
    left = left + ops[d].n
  end
  local record = not lean
  local last = V - 1
  local progress = true
  while left > 0 and progress do
    progress = false
    for d = 1, P do
      local od = ops[d]
      local ofw, ovs, omb, n = od.fw, od.vs, od.mb, od.n
      local st_d, fi_d = starts[d], finishes[d]
      local i0 = ptr[d]
      local i, f = i0, finish[d]
      while i <= n do
        local vs, mb = ovs[i], omb[i]
        if ofw[i] then
          local ready = vs == 0 and 0 or done_fw[vs - 1][mb]
          if ready == nil then break end
          local start = f < ready and ready or f -- math.max(f, ready), inline: f unless f < ready
          f = start + dur_fw[vs]
          if record then st_d[i], fi_d[i] = start, f end
          done_fw[vs][mb] = f
        else
          local ready = vs == last and done_fw[vs][mb] or done_bw[vs + 1][mb]
          if ready == nil or not done_fw[vs][mb] then break end
          local start = f < ready and ready or f
          f = start + dur_bw[vs]
          if record then st_d[i], fi_d[i] = start, f end
          done_bw[vs][mb] = f
          local l = last_bw[vs]
          if not l or start > l then last_bw[vs] = start end
        end
        i = i + 1
      end
      if i > i0 then
        ptr[d], finish[d], left, progress = i, f, left - (i - i0), true
      end
    end
  end
  if left > 0 then
    error(("schedule %s deadlocks with %d device(s), %d microbatch(es), %d chunk(s)"):format(schedule, P, Mb, v), 0)
  end
  local makespan = 0
  for d = 1, P do makespan = max(makespan, finish[d]) end
  if lean then starts, finishes = nil, nil end
  return ops, starts, finishes, finish, makespan, last_bw
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
  local compiled, starts, finishes, finish, makespan = M.simulate_times(stages, P, Mb, v, schedule, training, 2)
  local devices = {}
  for d = 1, P do
    local ops, od = {}, compiled[d]
    for i = 1, od.n do
      local vs = od.vs[i]
      ops[i] = { fw = od.fw[i], chunk = (vs - (d - 1)) // P, mb = od.mb[i], vs = vs, start = starts[d][i],
                 finish = finishes[d][i] }
    end
    devices[d] = { ops = ops, finish = finish[d] }
  end
  return devices, makespan
end

return M
