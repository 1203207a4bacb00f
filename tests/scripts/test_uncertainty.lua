-- tests/scripts/test_uncertainty.lua — scripts/neusight/uncertainty.lua's distance from the training GPUs and the width
-- factor it gives a family's draws (the band itself: tests/cli/test_band_cli.cpp).
local U = require "neusight.uncertainty"

local close = require("neusight.testing").near  -- (got, want, what): relative 1e-12

local RANGE = { num_sm = { 20, 108 }, mem_bw_gbps = { 192, 1555 }, peak_tflops = { 5.5, 19.5 },
  peak_field = "peak_fp32_tflops" }

local T = {}

function T.test_distance_is_the_largest_log_distance_beyond_the_range()
  local d = U.distance({ num_sm = 80, mem_bw_gbps = 900, peak_fp32_tflops = 14 }, RANGE)
  assert(d == 0, "inside: 0")
  local far, why = U.distance({ num_sm = 132, mem_bw_gbps = 3350, peak_fp32_tflops = 66.9 }, RANGE)
  close(far, math.log(66.9 / 19.5), "the peak is the farthest out")
  assert(why == "peak_fp32_tflops 66.9 outside 5.5-19.5", why)
  local below = U.distance({ num_sm = 10, mem_bw_gbps = 900, peak_fp32_tflops = 14 }, RANGE)
  close(below, math.log(20 / 10), "below the range: ln(low / x)")
  -- a field the range does not span is not compared: no peak field, no peak
  local no_peak = U.distance({ num_sm = 80, mem_bw_gbps = 900, peak_fp32_tflops = 1000 },
    { num_sm = { 20, 108 }, mem_bw_gbps = { 192, 1555 } })
  assert(no_peak == 0, "the peak not compared")
  -- a GPU without the units (a peak of 0) is infinitely far from a range that has them
  assert(U.distance({ num_sm = 80, mem_bw_gbps = 900, peak_fp32_tflops = 0 }, RANGE) == math.huge, "no units")
end

function T.test_widen_is_one_up_to_the_folds_distance_then_the_ratio_capped()
  assert(U.widen(0, 0.7) == 1, "inside")
  assert(U.widen(0.5, 0.7) == 1, "nearer than the farthest fold")
  assert(U.widen(0.7, 0.7) == 1, "as far as the farthest fold")
  close(U.widen(1.05, 0.7), 1.5, "beyond: the ratio")
  assert(U.widen(10, 0.7) == U.widen_cap, "capped")
  assert(U.widen(0.1, 0) == U.widen_cap, "no fold was out: any distance is beyond every fold, the cap")
  assert(U.widen(math.huge, 0.7) == U.widen_cap, "infinitely far: the cap")
end

-- The band's quantiles and the widened draws' medians by selection (quantiles_of), not a sort: the same values a sort
-- gives at the same indices, on draws with ties and on sorted and reversed lists (the partition's worst orders).
function T.test_quantiles_of_equals_the_sorted_lists_values()
  local x = 0x2545F4914F6CDD1D
  local function draw()
    x = x ~ (x << 13); x = x ~ (x >> 7); x = x ~ (x << 17)
    return ((x >> 11) + 0.5) / 9007199254740992.0
  end
  local lists = {}
  for _, n in ipairs({ 1, 2, 3, 10, 2000 }) do
    local plain, ties = {}, {}
    for i = 1, n do plain[i], ties[i] = math.exp(draw()), (draw() * 5) // 1 end
    lists[#lists + 1] = plain
    lists[#lists + 1] = ties
    local up = table.move(plain, 1, n, 1, {})
    table.sort(up)
    lists[#lists + 1] = up
    local down = {}
    for i = 1, n do down[i] = up[n + 1 - i] end
    lists[#lists + 1] = down
  end
  local xs = { 0.10, 0.50, 0.90 }
  for li, list in ipairs(lists) do
    local n = #list
    local sorted = table.move(list, 1, n, 1, {})
    table.sort(sorted)
    local at = U.quantiles_of(table.move(list, 1, n, 1, {}), xs)
    for _, q in ipairs(xs) do
      local want = sorted[math.max(1, math.min(n, math.floor(q * n + 0.5)))]
      assert(at(q) == want, string.format("list %d (n %d) at %.2f: %s, sorted %s", li, n, q, at(q), want))
    end
    local median = U.quantiles_of(table.move(list, 1, n, 1, {}), { 0.5 })(0.5)
    assert(median == sorted[math.max(1, math.min(n, math.floor(0.5 * n + 0.5)))], "median of list " .. li)
  end
  assert(not pcall(U.quantiles_of({ 1, 2, 3 }, { 0.5 }), 0.9), "a quantile not asked for is an error")
end

-- A band of `family_s` (seconds) and `floor_s` (each family's roofline floor, nil: none) from a table of one fold per
-- family whose error quantiles at 10 / 50 / 90 % are `q` (ln of measured / forecast), width factor `spread`.
local function band_of(family_s, floor_s, q, spread)
  local families, total, n = {}, 0, {}
  for name, s in pairs(family_s) do
    families[name] = { quantiles = { q[name] } }
    total, n[name] = total + s, 1
  end
  local r = { latency_s = total, family_s = family_s, family_n = n, floor_s = floor_s,
    gpu = { name = "Test-GPU", vendor = "nvidia", architecture = "hopper", num_sm = 132, mem_bw_gbps = 3350 },
    uncertainty = { format_version = 2, levels = { 0.1, 0.5, 0.9 }, spread = spread, families = families },
    uncertainty_source = "test.toml" }
  return U.band(r), r
end

local SLOW = { math.log(0.5), math.log(0.6), math.log(0.7) }  -- the forecast 1.4-2x the measured: draws 0.5-0.7
local EXACT = { 0, 0, 0 }

-- The calibration's floor slack reads the band's p10 as drawn (neusight.uncertainty band carries it always: its test
-- below): a band without one is an error, never the floored p10 in its place (which leaves no slack where the forecast
-- sits at its floor).
function T.test_calibration_floor_slack_needs_the_drawn_p10()
  local C = require "neusight.calibration"
  local floors, r = { gemm_tc16 = 0.9 }, { latency_s = 1.0 }
  local within = C.floor_refusal("test", 0.85, floors, nil, r, { p10 = 0.9, p10_drawn = 0.6 })
  assert(within == nil, "0.85 s is within the drawn band's slack under the 0.9 s floor: " .. tostring(within))
  local ok, err = pcall(C.floor_refusal, "test", 0.85, floors, nil, r, { p10 = 0.9, p50 = 1.0, p90 = 1.2 })
  assert(not ok and tostring(err):find("calibration floor_refusal: the band has no p10_drawn", 1, true),
    "a band without p10_drawn: " .. tostring(err))
end

-- The band's quantiles are held to the whole roofline floor (a physically impossible time is no quantile); the low side
-- as drawn stays for the calibration's slack (p10_drawn, in every band: band_of asks for no more than U.band(r)).
function T.test_engine_band_quantiles_are_held_to_the_whole_floor()
  local held = band_of({ gemm_tc16 = 1 }, { gemm_tc16 = 0.9 }, { gemm_tc16 = SLOW })
  assert(held.p10 >= 0.9 and held.p50 >= 0.9 and held.p90 >= 0.9, "every quantile at or above the floor " .. held.p10)
  local drawn = band_of({ gemm_tc16 = 1 }, nil, { gemm_tc16 = SLOW })
  assert(drawn.p10 < 0.6 and drawn.p10 == drawn.p10_drawn, "without floors: the band as drawn " .. drawn.p10)
  close(held.p10_drawn, drawn.p10, "the low side as drawn: the band without the floors")
  -- a floor under every quantile changes nothing: the band to the bit
  local low = band_of({ gemm_tc16 = 1 }, { gemm_tc16 = 0.1 }, { gemm_tc16 = SLOW })
  assert(low.p10 == drawn.p10 and low.p50 == drawn.p50 and low.p90 == drawn.p90, "a floor below every quantile")
end

-- Only in aggregate, not family by family: a family's summed kernel floor is no hard bound on its measured time as the
-- floor counts bytes (an L2 serves some, traffic overcounted; per-family floors moved fp32 GPT-2 Large's A100 p10
-- 464.7 -> 514.5 ms and put a measured V100 step, 576.9 ms, under its p10), so a family drawn under its own floor keeps
-- its draws while the sum stays above the whole floor.
function T.test_engine_band_a_family_drawn_under_its_own_floor_is_not_clamped()
  local floors = { gemm_tc16 = 0.05, attention = 0.9 }
  local two = band_of({ gemm_tc16 = 1, attention = 1 }, floors, { gemm_tc16 = EXACT, attention = SLOW })
  local free = band_of({ gemm_tc16 = 1, attention = 1 }, nil, { gemm_tc16 = EXACT, attention = SLOW })
  assert(two.p10 < 1 + 0.9, "attention drawn under its 0.9 s floor is not lifted to it: p10 " .. two.p10)
  assert(two.p10 == free.p10 and two.p50 == free.p50 and two.p90 == free.p90,
    "the whole floor 0.95 s is under every quantile: the band as drawn " .. two.p10 .. " vs " .. free.p10)
  -- the same family alone: the whole floor is its own, and the quantiles are held to it
  local one = band_of({ attention = 1 }, { attention = 0.9 }, { attention = SLOW })
  assert(one.p10 >= 0.9 and one.p90 >= 0.9, "one family: its floor is the whole floor " .. one.p10)
end

-- The whole floor is summed in one order whatever the order pairs() walks the families in (a per-state hash seed and
-- the table's history set it): a p10 held at the floor is the same to the bit. The family tables below hold the same
-- six families, built with different histories; their pairs() sums differ in the last bit in almost every Lua state
-- (checked: at least two distinct sums in 198 of 200 states), and where they do the bands must not.
function T.test_engine_band_floor_is_the_same_whatever_order_the_families_are_walked_in()
  local names = { "gemm_tc16", "attention_prefill", "layernorm", "elementwise", "softmax", "attention_decode" }
  local floors = { gemm_tc16 = 0.3, attention_prefill = 0.6, layernorm = 0.9, elementwise = 9e-16, softmax = 2.1,
    attention_decode = 1 }
  local q = {}
  for _, n in ipairs(names) do q[n] = SLOW end
  local function built(pad, rot)  -- the same keys, another history: a larger hash part, another insertion order
    local t = {}
    for i = 1, pad do t["pad" .. i] = 1 end
    for i = 0, #names - 1 do t[names[(i + rot) % #names + 1]] = 1 end
    for i = 1, pad do t["pad" .. i] = nil end
    return t
  end
  local sums, p10 = {}, {}
  for pad = 0, 64, 4 do
    for rot = 0, 5 do
      local family_s = built(pad, rot)
      local s = 0
      for n in pairs(family_s) do s = s + floors[n] end
      local b = band_of(family_s, floors, q)
      assert(b.p10 >= 4.9 * (1 - 1e-12), "the p10 sits at the 4.9 s floor: " .. b.p10)
      sums[string.format("%a", s)] = true
      p10[string.format("%a", b.p10)] = true
    end
  end
  local n_sums, n_p10 = 0, 0
  for _ in pairs(sums) do n_sums = n_sums + 1 end
  for _ in pairs(p10) do n_p10 = n_p10 + 1 end
  assert(n_p10 == 1, ("%d different p10s from one forecast (%d different pairs() sums of its floors)"):format(n_p10,
    n_sums))
end

-- A table's spread above 1 widens the quantiles about their median: the low side is held to the forecast's floor
-- after it too.
function T.test_engine_band_low_side_is_held_to_the_floor_whatever_the_spread()
  local wide = band_of({ gemm_tc16 = 1 }, { gemm_tc16 = 0.55 }, { gemm_tc16 = SLOW }, 4)
  assert(wide.p10 >= 0.55, "spread 4: p10 " .. wide.p10 .. " held to the 0.55 s floor")
  assert(wide.p10_drawn < 0.55, "spread 4 as drawn: " .. wide.p10_drawn)
end

-- per_sm_beyond of a GPU table without num_sm (one a script made): an error naming the field and the GPU, at the
-- caller's line, not Lua's bare "attempt to perform arithmetic on a nil value"; a training GPU's table likewise.
function T.test_per_sm_beyond_names_a_missing_num_sm()
  local a100 = { name = "A100-PCIE-40GB", vendor = "nvidia", num_sm = 108, mem_bw_gbps = 1555, mem_gb = 40,
    architecture = "ampere", peak_fp32_tflops = 19.5 }
  local trained = { linear = { a100 } }
  local beyond = U.per_sm_beyond(a100, trained, "linear")
  assert(type(beyond) == "table" and #beyond == 0, "a training GPU is within its own range")
  local ok, err = pcall(function()
    local r = U.per_sm_beyond({ name = "mine", vendor = "nvidia", mem_bw_gbps = 3350, mem_gb = 80 }, trained, "linear")
    return r
  end)
  assert(not ok, "no num_sm: an error")
  err = tostring(err)
  assert(err:find("per-SM range needs the GPU table's num_sm, a positive finite number (GPU mine: got nil)", 1, true), err)
  assert(err:find("test_uncertainty.lua:%d+:"), "at the caller's line: " .. err)
  local ok2, err2 = pcall(U.per_sm_beyond, a100, { linear = { { name = "old", vendor = "nvidia", num_sm = 80,
    mem_gb = 16, architecture = "volta", peak_fp32_tflops = 15.7 } } }, "linear")
  assert(not ok2 and tostring(err2):find("GPU table's mem_bw_gbps, a positive finite number (GPU old: got nil)", 1, true),
    "a training GPU without mem_bw_gbps: " .. tostring(err2))
end

-- An infinite num_sm, mem_bw_gbps or mem_gb of a GPU table a script made (a GPU file refuses one) is refused with the
-- field and the GPU named, the forecast GPU's and a training GPU's alike: it had given bandwidth per SM inf ("inf GB/s
-- of memory bandwidth per SM" beyond the range) or 0 (within it, without a word).
function T.test_per_sm_beyond_refuses_an_infinite_resource()
  local function a100(over)
    local g = { name = "A100-PCIE-40GB", vendor = "nvidia", num_sm = 108, mem_bw_gbps = 1555, mem_gb = 40,
      architecture = "ampere", peak_fp32_tflops = 19.5 }
    for k, v in pairs(over or {}) do g[k] = v end
    return g
  end
  for _, key in ipairs({ "num_sm", "mem_bw_gbps", "mem_gb" }) do
    for _, v in ipairs({ math.huge, -math.huge }) do
      local ok, err = pcall(U.per_sm_beyond, a100({ name = "mine", [key] = v }), { linear = { a100() } }, "linear")
      local want = ("GPU table's %s, a positive finite number (GPU mine: got %s)"):format(key, tostring(v))
      assert(not ok and tostring(err):find(want, 1, true), key .. " " .. tostring(v) .. ": " .. tostring(err))
      local ok2, err2 = pcall(U.per_sm_beyond, a100(), { linear = { a100({ name = "old", [key] = v }) } }, "linear")
      local want2 = ("GPU table's %s, a positive finite number (GPU old: got %s)"):format(key, tostring(v))
      assert(not ok2 and tostring(err2):find(want2, 1, true), "training " .. key .. ": " .. tostring(err2))
    end
  end
end

-- The training range's peak (the family's peak field of its training GPUs, a table's range.peak_field) of a GPU table
-- a script made is finite, as its resources: an infinite one spanned every GPU, so none was out of distribution (a
-- band reads ns.families: the engine runs it).
function T.test_engine_training_range_refuses_an_infinite_peak()
  local old = { name = "old", vendor = "nvidia", num_sm = 80, mem_bw_gbps = 900, mem_gb = 16, architecture = "hopper",
    peak_fp32_tflops = math.huge }
  local r = { latency_s = 1, family_s = { linear = 1 }, family_n = { linear = 1 },
    gpu = { name = "Test-GPU", vendor = "nvidia", architecture = "hopper", num_sm = 132, mem_bw_gbps = 3350,
      peak_fp32_tflops = 66.9 },
    trained_gpus = { linear = { old } },
    uncertainty = { format_version = 2, levels = { 0.1, 0.5, 0.9 }, families = { linear = { quantiles = { EXACT },
      range = { peak_field = "peak_fp32_tflops" } } } },
    uncertainty_source = "test.toml" }
  local ok, err = pcall(U.band, r)
  local want = "the training range needs the GPU table's peak_fp32_tflops, a finite number >= 0 (GPU old: got inf)"
  assert(not ok and tostring(err):find(want, 1, true), tostring(err))
  old.peak_fp32_tflops = 19.5
  assert(pcall(U.band, r), "a finite peak: a band")
end

-- An untrained_s.<variant> figure input that is not finite was dropped silently (NaN: NaN > 0 is false) or made the
-- untrained share infinite (+inf): refused, naming the field (a band reads ns.families: the engine runs it).
function T.test_engine_untrained_seconds_not_finite_are_refused_by_name()
  for _, bad in ipairs({ 0 / 0, math.huge }) do
    local _, r = band_of({ attention_prefill = 1 }, nil, { attention_prefill = EXACT })
    r.untrained_s, r.untrained_n = { full = bad }, { full = 1 }
    local ok, err = pcall(U.band, r)
    assert(not ok and tostring(err):find("untrained_s.full must be a finite number", 1, true),
      tostring(bad) .. ": " .. tostring(err))
  end
end

-- The kernels beyond the range their family's weights were trained on are said by the band, against the manifests'
-- range handed over (r.trained_range: a --weights DIR's own), not a constant: at 8192 trained keys a 16384-key prefill
-- is beyond, at the shipped 16384 it is not; a family without a recorded range says nothing (a band reads ns.families:
-- the engine runs it).
function T.test_engine_range_beyond_the_weights_trained_range_is_said_from_the_manifests()
  local function said(trained, longest)
    local _, r = band_of({ attention_prefill = 1, attention_decode = 1 }, nil,
      { attention_prefill = EXACT, attention_decode = EXACT })
    r.trained_range, r.longest = trained, longest
    local b = U.band(r)
    for _, w in ipairs(b.warnings) do
      if w:find("beyond the contexts", 1, true) then return w, b end
    end
    return nil, b
  end
  local longest = { attention_prefill = { keys = 16384 }, attention_decode = { cached_tokens = 4096 } }
  assert(said({ attention_prefill = { keys = 16384 }, attention_decode = { cached_tokens = 131072 } }, longest) == nil,
    "within the shipped ranges")
  local w, b = said({ attention_prefill = { keys = 8192 }, attention_decode = { cached_tokens = 131072 } }, longest)
  assert(w == "a prefill attention over 16384 tokens (attention_prefill was trained on prompts of up to 8192): beyond "
    .. "the contexts the neusight predictor's attention MLPs were trained on, so their utilisation is extrapolated and "
    .. "these kernels' times are indicative only (held to their roofline floor, not measured)", tostring(w))
  assert(b.range_beyond_for == "attention_prefill keys 16384 > 8192" and b.out_of_distribution == true,
    tostring(b.range_beyond_for))
  assert(said({ attention_decode = { cached_tokens = 131072 } }, longest) == nil, "no range recorded: nothing said")
end

return T
