-- tests/scripts/test_sweep.lua — scripts/neusight/sweep.lua (`neusight serve --sweep`) with a synthetic phase() and
-- GPU catalog: the choice (cheapest meeting the targets, none meets, no price → tokens/s per GPU), target filtering,
-- error rows, rows equal to single serve.lua runs, CSV = rows.
local W = require "neusight.sweep"
local S = require "neusight.serve"

local function eq(got, want, what)
  if got ~= want then error(("%s:\n  expected %s\n  got      %s"):format(what, tostring(want), tostring(got)), 2) end
end
local function near(got, want, rel, what)
  if math.abs(got - want) > rel * math.abs(want) then
    error(("%s:\n  expected %.17g\n  got      %.17g"):format(what, want, got), 2)
  end
end
local function has(text, part, what)
  if not text:find(part, 1, true) then error(("%s: %q not in\n%s"):format(what, part, text), 2) end
end

-- Three GPUs: "fast" (4x the speed, $8/h), "slow" ($1/h), "free" (slow's speed, no price). tp divides the time
-- (plus 0.1 ms per step of communication) and the weights; tp = 3 does not divide the model's heads.
local CATALOG = {
  fast = { name = "FAST", source = "gpus/fast.toml", mem_gb = 80, price_per_hour_usd = 8 },
  slow = { name = "SLOW", source = "gpus/slow.toml", mem_gb = 24, price_per_hour_usd = 1 },
  free = { name = "FREE", source = "gpus/free.toml", mem_gb = 24 },
  buggy = { name = "BUGGY", source = "gpus/buggy.toml", mem_gb = 24 },
}
local SPEED = { fast = 4, slow = 1, free = 1, buggy = 1 }
local calls = 0
local function gpu(q)
  local g = CATALOG[q]
  if not g then error("unknown GPU '" .. tostring(q) .. "'", 0) end
  return g
end
local function phase(f)
  calls = calls + 1
  local g = gpu(f.gpu)
  local tp = f["parallel.tp"] or 1
  if tp == 3 then -- a setting that cannot run: raised as one (neusight.infeasible), as shard.split raises it
    require("neusight").infeasible("field 'parallel.tp': tp = 3 does not divide the 8 attention heads")
  end
  if f.gpu == "buggy" then local bug = nil; return bug.field end -- a script's bug (line 41), not a setting's
  local b = f.batch
  local ms, tokens
  if f.mode == "decode" then
    ms, tokens = 5 + 0.01 * b + 1e-4 * b * (f.context + 1), b * (f.context + 1)
  else
    ms, tokens = 2 + 0.05 * b * f.seq, b * f.seq
  end
  ms = ms / SPEED[f.gpu] / tp + (tp > 1 and 0.1 or 0)
  return {
    latency_ms = ms, kv_cache_gb = 1e-3 * tokens / tp, state_gb = 16 / tp, params = 8e9, flops = 1,
    launch = f.launch, dtype = f.dtype, model = f.model,
    gpu = { name = g.name, source = g.source, mem_gb = g.mem_gb, mem_bw_gbps = 1000 },
    kernels = { { name = "mlp", op = "linear", kernel = "Linear", kind = "gemm", kernel_op = "", count = 1, ms = ms,
                  compute_ms = 0.1, memory_ms = ms } },
  }
end

local M = {}

function M.test_choose_cheapest_meeting_targets()
  local rows = {
    { gpu = "A", meets = true, price_per_hour_usd = 2, cost_per_million_output_tokens_usd = 5, output_tokens_per_s_per_gpu = 100 },
    { gpu = "B", meets = false, price_per_hour_usd = 1, cost_per_million_output_tokens_usd = 1, output_tokens_per_s_per_gpu = 900 },
    { gpu = "A", meets = true, price_per_hour_usd = 2, cost_per_million_output_tokens_usd = 3, output_tokens_per_s_per_gpu = 50 },
    { gpu = "B", meets = true, price_per_hour_usd = 1, cost_per_million_output_tokens_usd = 3, output_tokens_per_s_per_gpu = 70 },
    { gpu = "B", meets = false, price_per_hour_usd = 1, error = "does not fit" },
  }
  local c = W.choose(rows)
  eq(c.rank_by, "cost_per_million_output_tokens_usd", "every GPU priced: by cost")
  eq(c.index, 3, "the cheapest that meets; a tie keeps the earlier row")
  eq(#c.unpriced, 0, "no unpriced GPU")
end

function M.test_choose_without_a_price_ranks_by_tokens_per_gpu()
  local rows = {
    { gpu = "A", meets = true, price_per_hour_usd = 2, cost_per_million_output_tokens_usd = 1, output_tokens_per_s_per_gpu = 100 },
    { gpu = "N", meets = true, output_tokens_per_s_per_gpu = 300, tp = 2, gpus = 2, rate = 4 },
    { gpu = "N", meets = false, output_tokens_per_s_per_gpu = 900 },
  }
  local c = W.choose(rows)
  eq(c.rank_by, "output_tokens_per_s_per_gpu", "a GPU without a price: by tokens/s per GPU")
  eq(c.index, 2, "the fastest per GPU that meets")
  eq(c.unpriced[1], "N", "names the GPU without a price")
  local v = W.verdict(rows, c, { ttft_ms = 100 }, "rate")
  eq(v, "best setting by output tokens/s per GPU meeting TTFT p90 <= 100 ms (not by cost: no price_per_hour_usd for N): "
    .. "N, tp 2, rate 4 req/s: 300.0 output tokens/s per GPU", "verdict says why")
end

function M.test_meets_applies_targets_to_p90_and_static_values()
  local rate_row = { rate = 4, ttft_ms_p50 = 50, ttft_ms_p90 = 150, tpot_ms_p50 = 9, tpot_ms_p90 = 11 }
  eq((W.meets(rate_row, { ttft_ms = 200, tpot_ms = 12 })), true, "p90 under both")
  local ok, misses = W.meets(rate_row, { ttft_ms = 100 })
  eq(ok, false, "p90 TTFT above (p50 below)")
  eq(misses, "TTFT p90 150.0 > 100 ms", "misses")
  ok, misses = W.meets(rate_row, { ttft_ms = 100, tpot_ms = 10 })
  eq(misses, "TTFT p90 150.0 > 100 ms, TPOT p90 11.0 > 10 ms", "both misses")
  local static_row = { batch = 8, ttft_ms = 90, tpot_ms = 20, fits = true }
  eq((W.meets(static_row, { ttft_ms = 100, tpot_ms = 20 })), true, "static values, bounds inclusive")
  eq((W.meets(static_row, { tpot_ms = 19.5 })), false, "static TPOT")
  eq((W.meets({ batch = 8, ttft_ms = 1, tpot_ms = 1, fits = false }, {})), false, "a batch that does not fit")
  eq((W.meets({ rate = 1, error = "x" }, {})), false, "an error row")
  eq((W.meets({ rate = 1, ttft_ms_p90 = 1e9 }, {})), true, "no targets: everything that ran meets")
end

local BASE = { model = "m", input_len = 256, output_len = 32, requests = 200, seed = 1 }
local function opts(extra)
  local o = {}
  for k, v in pairs(BASE) do o[k] = v end
  for k, v in pairs(extra) do o[k] = v end
  return o
end

function M.test_rows_are_single_serve_runs_and_the_cheapest_is_chosen()
  local r = W.run(opts { gpu = { "fast", "slow" }, tp = { 1, 2 }, rate = { 2, 50 }, ttft_ms = 200, tpot_ms = 4 },
    phase, nil, gpu)
  eq(r.kind, "sweep", "kind")
  eq(r.mode, "rate", "mode")
  eq(#r.rows, 8, "2 GPUs x 2 tp x 2 rates")
  local i = 0
  for _, g in ipairs { "fast", "slow" } do
    for _, tp in ipairs { 1, 2 } do
      for _, rate in ipairs { 2, 50 } do
        i = i + 1
        local row = r.rows[i]
        eq(row.gpu, CATALOG[g].name, "gpus outermost")
        eq(row.tp, tp, "then tp")
        eq(row.rate, rate, "then the rate")
        eq(row.gpus, tp, "GPUs = tp")
        local one = S.run(opts { gpu = g, tp = tp, rate = rate }, phase)
        eq(row.ttft_ms_p50, one.ttft_ms.p50, "TTFT p50 = a single run's")
        eq(row.ttft_ms_p90, one.ttft_ms.p90, "TTFT p90")
        eq(row.tpot_ms_p90, one.tpot_ms.p90, "TPOT p90")
        eq(row.e2e_ms_p90, one.e2e_ms.p90, "e2e p90")
        eq(row.output_tokens_per_s_per_gpu, one.throughput.output_tokens_per_s_per_gpu, "tokens/s per GPU")
        local price = CATALOG[g].price_per_hour_usd
        eq(row.price_per_hour_usd, price, "price per GPU")
        eq(row.cost_per_hour_usd, price * tp, "$/hour = price x GPUs")
        near(row.cost_per_million_output_tokens_usd, price * tp / 3600 / one.throughput.output_tokens_per_s * 1e6,
          1e-12, "$ per million output tokens")
        local ok = one.ttft_ms.p90 <= 200 and one.tpot_ms.p90 <= 4
        eq(row.meets, ok, "meets = p90s under the targets")
      end
    end
  end
  -- the choice: the lowest cost among the rows that meet
  local best
  for j, row in ipairs(r.rows) do
    if row.meets and (best == nil or row.cost_per_million_output_tokens_usd < r.rows[best].cost_per_million_output_tokens_usd) then
      best = j
    end
  end
  assert(best, "some row meets")
  eq(r.chosen_index, best, "chosen = cheapest meeting")
  eq(r.chosen.index, best, "chosen row")
  eq(r.none_meets, false, "found")
  eq(r.rows[best].chosen, true, "the row is marked")
  has(r.verdict, "cheapest setting meeting TTFT p90 <= 200 ms and TPOT p90 <= 4 ms: ", "verdict")
  -- the slow GPU misses TPOT 4 ms (its decode steps take > 5 ms alone); the fast one at tp 1 meets it
  eq(r.rows[5].meets, false, "slow tp 1 misses")
  has(r.rows[5].misses, "TPOT p90", "says which target")
  local t = W.format_table(r)
  has(t, "* " .. r.verdict, "table verdict")
  has(t, "TTFT p90", "table columns")
end

function M.test_none_meets_is_a_result()
  local r = W.run(opts { gpu = { "slow" }, rate = { 1, 4 }, ttft_ms = 0.5 }, phase, nil, gpu)
  eq(r.none_meets, true, "none meets")
  eq(r.chosen, nil, "nothing chosen")
  eq(r.chosen_index, nil, "no index")
  eq(r.verdict, "no setting meets TTFT p90 <= 0.5 ms (2 combinations, 0 could not run)", "verdict")
  has(W.format_table(r), "\nno setting meets TTFT p90 <= 0.5 ms", "table says so")
end

function M.test_static_sweep_error_rows_and_no_price()
  local r = W.run(opts { gpu = { "slow", "free" }, tp = { 1, 3 }, batch = { 1, 2000 }, ttft_ms = 1e6 }, phase, nil, gpu)
  eq(r.mode, "batch", "static")
  eq(#r.rows, 8, "rows")
  -- tp 3 does not divide the heads: error rows, no numbers
  for _, j in ipairs { 3, 4, 7, 8 } do
    local row = r.rows[j]
    eq(row.tp, 3, "tp 3 rows")
    has(row.error, "model 'm' cannot be served: field 'parallel.tp': tp = 3 does not divide", "error cell")
    eq(row.ttft_ms, nil, "no numbers")
    eq(row.meets, false, "never meets")
  end
  -- batch 2000 of 287 tokens needs 574 GB of KV cache: numbers kept, marked as not fitting, never chosen
  local big = r.rows[2]
  eq(big.batch, 2000, "batch 2000")
  eq(big.fits, false, "does not fit")
  has(big.error, "batch 2000 does not fit", "warning as the error")
  assert(big.ttft_ms > 0, "numbers kept")
  eq(big.meets, false, "not chosen")
  local one = S.run(opts { gpu = "slow", batch = 1 }, phase)
  eq(r.rows[1].ttft_ms, one.ttft_ms, "static TTFT = a single run's")
  eq(r.rows[1].tpot_ms, one.tpot_ms, "static TPOT")
  eq(r.rows[1].e2e_ms, one.e2e_ms, "static e2e")
  -- FREE has no price: ranked by tokens/s per GPU (slow and free run at the same speed: the earlier row wins)
  eq(r.rank_by, "output_tokens_per_s_per_gpu", "no price")
  eq(r.unpriced_gpus[1], "FREE", "the GPU without one")
  eq(r.rows[5].cost_per_hour_usd, nil, "no cost without a price")
  eq(r.chosen_index, 1, "slow batch 1")
  eq(r.errors, 6, "4 error rows + 2 batches that do not fit")
  has(r.verdict, "not by cost: no price_per_hour_usd for FREE", "verdict says it")
end

-- Only a setting's reason (neusight.infeasible) is a row: a script's error stops the sweep as it was raised, its
-- file:line kept (it was a row's "why not", and the sweep said "no setting could run" and succeeded).
function M.test_a_script_error_stops_the_sweep()
  local ok, err = pcall(W.run, opts { gpu = { "slow", "buggy" }, tp = { 1, 3 }, batch = { 1 } }, phase, nil, gpu)
  eq(ok, false, "stopped")
  has(tostring(err), "test_sweep.lua:41: attempt to index a nil value (local 'bug')", "the script's error, its line")
  eq(tostring(err):find("cannot be served", 1, true), nil, "not told as a setting's")
end

function M.test_bad_names_and_options_stop_before_any_forecast()
  local function fails(o, msg)
    calls = 0
    local ok, err = pcall(W.run, opts(o), phase, nil, gpu)
    eq(ok, false, msg)
    assert(tostring(err):find(msg, 1, true), ("expected %q in %q"):format(msg, tostring(err)))
    eq(calls, 0, "no forecast ran")
  end
  fails({ gpu = { "fast", "fats" }, rate = { 1 } }, "serve: --gpu fats: unknown GPU 'fats'")
  fails({ gpu = { "fast" }, rate = { 1, -2 } }, "--rate must be a positive number of requests per second (got -2)")
  fails({ gpu = { "fast" }, tp = { 1, 0 }, rate = { 1 } }, "--tp must be a positive integer (got 0)")
  fails({ gpu = { "fast" }, rate = { 1 }, ttft_ms = -1 }, "--ttft-ms must be a positive number")
  fails({ gpu = { "fast" } }, "--sweep needs --batch")
  fails({ gpu = { "fast" }, rate = { 1 }, input_len = "uniform:0:3" }, "uniform:LO:HI needs 1 <= LO <= HI")
end

function M.test_csv_is_the_rows()
  local r = W.run(opts { gpu = { "fast", "free" }, rate = { 3 }, tp = { 1, 3 } }, phase, nil, gpu)
  local csv = W.format_csv(r)
  local lines = {}
  for l in csv:gmatch("[^\n]+") do lines[#lines + 1] = l end
  eq(#lines, 1 + #r.rows, "a header and a line per row")
  local head = {}
  for k in lines[1]:gmatch("[^,]+") do head[#head + 1] = k end
  eq(head[1], "index", "first column")
  for j, row in ipairs(r.rows) do
    local cells, k, cell, quoted = {}, 1, "", false
    local text = lines[j + 1]
    local at = 1
    while at <= #text do
      local ch = text:sub(at, at)
      if quoted then
        if ch == '"' and text:sub(at + 1, at + 1) == '"' then cell, at = cell .. '"', at + 1
        elseif ch == '"' then quoted = false
        else cell = cell .. ch end
      elseif ch == '"' then quoted = true
      elseif ch == "," then cells[head[k]], k, cell = cell, k + 1, ""
      else cell = cell .. ch end
      at = at + 1
    end
    cells[head[k]] = cell
    eq(k, #head, "as many cells as columns")
    for _, key in ipairs { "ttft_ms_p90", "tpot_ms_p50", "output_tokens_per_s_per_gpu", "cost_per_million_output_tokens_usd" } do
      if row[key] == nil then eq(cells[key], "", key .. " empty")
      else eq(tonumber(cells[key]), row[key], key .. " exactly") end
    end
    eq(cells.gpu, row.gpu, "gpu")
    eq(cells.meets, tostring(row.meets), "meets")
    eq(cells.chosen, tostring(row.chosen), "chosen")
  end
end

-- A mixture of experts' sweep: every JSON row field is a CSV column (the rows' `experts` and `calibration` were JSON
-- only: the audit of 2026-11-29 found `experts` missing from the CSV, which the README says carries the JSON's row
-- fields), and the table's header line says how the experts ran, as a single serve's does.
function M.test_moe_rows_csv_carries_every_row_field()
  local function moe_phase(f)
    local p = phase(f)
    p.active_params = 1e9 -- a mixture of experts (serve.lua reports `experts` for one)
    return p
  end
  for _, mode in ipairs { { batch = { 1, 4 } }, { rate = { 3 } } } do
    local r = W.run(opts { gpu = { "fast" }, batch = mode.batch, rate = mode.rate }, moe_phase, nil, gpu)
    r.rows[1].calibration = "gpus/fast.calibration.toml" -- as a calibrated GPU's row carries it
    local head = {}
    for k in (W.format_csv(r):match("^[^\n]+")):gmatch("[^,]+") do head[k] = true end
    for i, row in ipairs(r.rows) do
      eq(row.experts, "grouped", "row " .. i .. " experts")
      for key in pairs(row) do
        if not head[key] then error(("row %d field %q is not a CSV column"):format(i, key)) end
      end
    end
    has(W.format_table(r), ", experts grouped,", "the table's header line")
  end
end

-- Options given that do nothing are said once by the sweep, as a single serve says them (audit 2026-11-29: the sweep
-- said neither --max-batched-tokens beside --chunked-prefill nor --experts on a dense model).
function M.test_options_without_effect_are_said_once()
  local r = W.run(opts { gpu = { "fast", "slow" }, rate = { 3 }, chunked_prefill = 64, max_batched_tokens = 4096,
    experts = "loop" }, phase, nil, gpu)
  local n, m = 0, 0
  for _, w in ipairs(r.warnings or {}) do
    if w:find("max_batched_tokens (--max-batched-tokens 4096) has no effect with --chunked-prefill", 1, true) then
      n = n + 1
    end
    if w:find("experts (--experts) has no effect", 1, true) then m = m + 1 end
  end
  eq(n, 1, "--max-batched-tokens said once")
  eq(m, 1, "--experts said once")
end

-- The rows' GPU label (neusight.compare gpu_labels, predict's comparisons' rule too): the name, or "NAME (as given)"
-- for different files that share a name.
function M.test_gpu_labels()
  local C = require "neusight.compare"
  local labels = C.gpu_labels({ "fast", "/tmp/fast2.toml", "slow" }, { "FAST", "FAST", "SLOW" })
  eq(#labels, 3, "one label per GPU")
  eq(labels[1], "FAST (fast)", "a shared name: as given")
  eq(labels[2], "FAST (/tmp/fast2.toml)", "a shared name: as given")
  eq(labels[3], "SLOW", "a name of its own")
  eq(#C.gpu_labels({}, {}), 0, "no GPUs")
  CATALOG.twin = { name = "FAST", source = "gpus/twin.toml", mem_gb = 80, price_per_hour_usd = 8 }
  SPEED.twin = 4
  local ok, r = pcall(W.run, opts { gpu = { "fast", "twin" }, batch = { 1 } }, phase, nil, gpu)
  CATALOG.twin, SPEED.twin = nil, nil
  assert(ok, r)
  eq(r.rows[1].gpu, "FAST (fast)", "sweep row 1")
  eq(r.rows[2].gpu, "FAST (twin)", "sweep row 2")
  eq(r.rows[2].gpu_file, "gpus/twin.toml", "sweep row 2's file")
end

return M
