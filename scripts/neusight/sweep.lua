-- scripts/neusight/sweep.lua — `neusight serve --sweep`: every combination of GPU × tp × (static batch | request
-- rate) run through scripts/neusight/serve.lua exactly as a single `neusight serve` would run it, one row each, and
-- the cheapest setting that meets the latency targets.
--
-- Rows (one per combination, GPUs outermost, then tp, then the batch or rate): the serve report's latencies — a
-- static batch's TTFT, TPOT and end to end; a rate's p50 and p90 of each over the simulated requests — its output
-- tokens/s (for the replica and per GPU), GPUs = tp, the GPU file's price_per_hour_usd (per GPU), $/hour = price ×
-- GPUs, $ per million output tokens = $/hour / 3600 / output tokens/s × 1e6, `meets` and what it `misses`. A
-- combination serve.lua refuses as a setting that cannot run (neusight.infeasible: a model that does not fit beside
-- its KV cache, tp not dividing the heads) is a row with its `error` and no numbers; a static batch beyond memory
-- keeps its numbers with the warning as `error`. Neither is ever chosen. Any other error (a script's bug) stops the
-- sweep as it was raised.
--
-- Targets (`ttft_ms`, `tpot_ms`, either or both, each an upper bound in ms) apply to the p90 of a rate run and to the
-- static batch's values (TPOT its mean over the decode steps). Choice among the rows that meet them: the lowest $ per
-- million output tokens when every GPU of the sweep has a price, else (said in the verdict) the highest output
-- tokens/s per GPU; ties go to the earlier row. No row meeting them is a result, not an error: `none_meets` = true and
-- a verdict that says so.
local type, tostring, ipairs, pairs, pcall, error = type, tostring, ipairs, pairs, pcall, error
local fmt, concat = string.format, table.concat

local S = require "neusight.serve"

local M = {}

local function fail(msg, ...) error("serve: " .. fmt(msg, ...), 0) end

local is_count = require("neusight.topology").is_count
local F = require("neusight.figures")
local positive = F.positive

---------------------------------------------------------------------------------------------------
-- Targets, cost and the choice (pure: the unit tests drive these directly)

--- The value a target applies to: the p90 of a rate run, the static batch's own value.
local function target_value(row, what)
  if row.rate ~= nil then return row[what .. "_p90"] end
  return row[what]
end

local TARGETS = { { key = "ttft_ms", name = "TTFT" }, { key = "tpot_ms", name = "TPOT" } }

--- Whether `row` meets `targets` ({ ttft_ms, tpot_ms }, each optional): true, or false and the misses as text.
--- A row with an error (or one that does not fit) meets nothing; a missing TPOT (one output token) meets any bound.
function M.meets(row, targets)
  if row.error ~= nil or row.fits == false then return false, nil end
  local misses = {}
  for _, t in ipairs(TARGETS) do
    local bound = targets[t.key]
    local v = target_value(row, t.key)
    if bound ~= nil and v ~= nil and v > bound then
      misses[#misses + 1] = fmt("%s%s %.1f > %g ms", t.name, row.rate ~= nil and " p90" or "", v, bound)
    end
  end
  if #misses > 0 then return false, concat(misses, ", ") end
  return true, nil
end

--- The cost columns of a row from its GPU's price (nil: the GPU file has none).
function M.cost(row, price)
  if not positive(price) then return end
  row.price_per_hour_usd = price
  row.cost_per_hour_usd = price * row.gpus
  if positive(row.output_tokens_per_s) then
    row.cost_per_million_output_tokens_usd = row.cost_per_hour_usd / 3600 / row.output_tokens_per_s * 1e6
  end
end

--- The choice among rows (each with `meets`, `gpu`, `price_per_hour_usd`, `cost_per_million_output_tokens_usd`,
--- `output_tokens_per_s_per_gpu`). Returns { index = i or nil, rank_by = field, unpriced = { gpu names } }: by the
--- lowest cost per million output tokens when every row's GPU has a price, else by the highest output tokens/s per
--- GPU; ties keep the earlier row.
function M.choose(rows)
  local unpriced, seen = {}, {}
  for _, r in ipairs(rows) do
    if r.price_per_hour_usd == nil and not seen[r.gpu] then
      seen[r.gpu] = true
      unpriced[#unpriced + 1] = r.gpu
    end
  end
  local by_cost = #unpriced == 0
  local rank_by = by_cost and "cost_per_million_output_tokens_usd" or "output_tokens_per_s_per_gpu"
  local best, best_v
  for i, r in ipairs(rows) do
    local v = r[rank_by]
    if r.meets and v ~= nil then
      if best == nil or (by_cost and v < best_v) or (not by_cost and v > best_v) then best, best_v = i, v end
    end
  end
  return { index = best, rank_by = rank_by, unpriced = unpriced }
end

local function targets_text(targets, mode)
  local parts = {}
  for _, t in ipairs(TARGETS) do
    if targets[t.key] ~= nil then
      parts[#parts + 1] = fmt("%s%s <= %g ms", t.name, mode == "rate" and " p90" or "", targets[t.key])
    end
  end
  return concat(parts, " and ")
end

local function setting_text(r)
  local what = r.rate ~= nil and fmt("rate %g req/s", r.rate) or fmt("batch %d", r.batch)
  return fmt("%s, tp %d, %s", r.gpu, r.tp, what)
end

--- The verdict line: the chosen setting and why, or that none meets the targets.
function M.verdict(rows, choice, targets, mode)
  local goal = targets_text(targets, mode)
  local errors = 0
  for _, r in ipairs(rows) do
    if r.error ~= nil then errors = errors + 1 end
  end
  if choice.index == nil then
    if goal == "" then
      return fmt("no setting could run (%d combinations, %d errors)", #rows, errors)
    end
    return fmt("no setting meets %s (%d combinations, %d could not run)", goal, #rows, errors)
  end
  local r = rows[choice.index]
  local head = goal == "" and "no targets given (--ttft-ms, --tpot-ms): " or ""
  if choice.rank_by == "cost_per_million_output_tokens_usd" then
    return fmt("%scheapest setting%s: %s: $%s per million output tokens (%d GPU%s x $%s/h = $%s/h, %.1f output tokens/s per GPU)",
      head, goal == "" and "" or " meeting " .. goal, setting_text(r), M.money(r.cost_per_million_output_tokens_usd),
      r.gpus, r.gpus > 1 and "s" or "", M.money(r.price_per_hour_usd), M.money(r.cost_per_hour_usd),
      r.output_tokens_per_s_per_gpu)
  end
  return fmt("%sbest setting by output tokens/s per GPU%s (not by cost: no price_per_hour_usd for %s): %s: %.1f output tokens/s per GPU",
    head, goal == "" and "" or " meeting " .. goal, concat(choice.unpriced, ", "), setting_text(r),
    r.output_tokens_per_s_per_gpu)
end

M.money = F.money

---------------------------------------------------------------------------------------------------
-- The sweep

-- The sweep's own options; the rest go to serve.lua as they are.
local AXES = { gpu = true, tp = true, batch = true, rate = true }

-- A list option: an array (from the engine) or one value.
local function list_of(v)
  if v == nil then return nil end
  if type(v) == "table" then return v end
  return { v }
end

local function first_line(s)
  s = tostring(s)
  s = s:gsub("^serve: ", "")
  return (s:match("^[^\n]*"))
end

-- The row of one combination from its serve report.
local function row_of(base, r)
  local row = base
  if r.kind == "static" then
    row.ttft_ms, row.tpot_ms, row.e2e_ms = r.ttft_ms, r.tpot_ms, r.e2e_ms
    row.output_tokens_per_s = r.output_tokens_per_s
    row.output_tokens_per_s_per_gpu = r.output_tokens_per_s_per_gpu
    row.fits = r.fits
    if not r.fits then row.error = r.warnings[#r.warnings] end -- the last: quantisation warnings come first
  else
    for _, k in ipairs { "ttft_ms", "tpot_ms", "e2e_ms" } do
      if r[k] then row[k .. "_p50"], row[k .. "_p90"] = r[k].p50, r[k].p90 end
    end
    row.output_tokens_per_s = r.throughput.output_tokens_per_s
    row.output_tokens_per_s_per_gpu = r.throughput.output_tokens_per_s_per_gpu
    row.fits = true
    -- the capacity replay's rate (nil when its steady window held no finish) and, at or near it or when the row's
    -- own queue grew (its report's `queue`), the single serve's overload warning (serve.lua overload_warning, the one
    -- rule): the row's latencies then depend on --requests
    row.capacity_requests_per_s = r.throughput.capacity_requests_per_s
    if S.overload_warning then
      row.warning, row.overload = S.overload_warning(r.rate, row.capacity_requests_per_s, r.requests, r.queue)
    end
  end
  row.calibration = r.calibration -- the GPU's calibration file its forecasts applied (nil: none)
  row.experts = r.experts -- mixtures of experts: how the routed experts ran (nil for dense models)
  return row
end

-- Serialises a phase() argument (flat: strings, numbers, booleans) as a cache key.
local function key_of(fields)
  local ks = {}
  for k in pairs(fields) do ks[#ks + 1] = k end
  table.sort(ks)
  local parts = {}
  for i, k in ipairs(ks) do parts[i] = k .. "=" .. tostring(fields[k]) end
  return concat(parts, "\1")
end

--- Runs the sweep: `raw` are serve's options with `gpu`, `tp` and `batch` or `rate` as lists (or single values) and
--- the targets `ttft_ms`, `tpot_ms`; `phase`, `progress` serve's primitives and `gpu(query)` the GPU a name resolves
--- to (its file's fields; an unknown name is an error). Every option is checked (and every GPU resolved) before the
--- first forecast. Returns the report table.
function M.run(raw, phase, progress, gpu)
  progress = progress or function() end
  local lists, rest, targets = {}, {}, {}
  for k, v in pairs(raw) do
    if AXES[k] then lists[k] = list_of(v)
    elseif k == "ttft_ms" or k == "tpot_ms" then targets[k] = v
    elseif k ~= "sweep" then rest[k] = v end
  end
  for k, v in pairs(targets) do
    if not positive(v) then fail("--%s must be a positive number of milliseconds (got %s)", k:gsub("_", "-"), tostring(v)) end
  end
  if lists.batch and lists.rate then fail("--batch (static batch) and --rate (continuous batching) exclude each other") end
  if not lists.batch and not lists.rate then fail("--sweep needs --batch N,… (static batch) or --rate R,… (continuous batching)") end
  local mode = lists.batch and "batch" or "rate"
  lists.gpu = lists.gpu or {}
  lists.tp = lists.tp or { S.DEFAULTS.tp }
  for _, k in ipairs { "gpu", "tp", mode } do
    if #lists[k] == 0 then fail("--sweep needs at least one --%s value", k) end
  end
  local gpus = {}
  for i, q in ipairs(lists.gpu) do  -- a misspelled GPU stops the sweep here
    local ok, g = pcall(gpu, q)
    if not ok then fail("--gpu %s: %s", tostring(q), first_line(g)) end
    gpus[i] = g
  end
  -- a row's gpu is its GPU's label, as predict's comparisons label theirs (neusight.compare gpu_labels: its name, or
  -- "NAME (as given)" for GPUs of different files that share a name)
  local names = {}
  for i, g in ipairs(gpus) do names[i] = g.name end
  local labels = require("neusight.compare").gpu_labels(lists.gpu, names)
  for _, tp in ipairs(lists.tp) do
    if not is_count(tp) then fail("--tp must be a positive integer (got %s)", tostring(tp)) end
  end

  local combos = {}
  for gi, q in ipairs(lists.gpu) do
    for _, tp in ipairs(lists.tp) do
      for _, v in ipairs(lists[mode]) do
        local o = {}
        for k, x in pairs(rest) do o[k] = x end
        o.gpu, o.tp, o[mode] = q, tp, v
        -- a bad option (length, rate ≤ 0 …) stops the sweep before any forecast; `checked` has serve's defaults
        combos[#combos + 1] = { options = o, checked = S.options(o), gpu = gpus[gi], label = labels[gi], tp = tp,
          value = v }
      end
    end
  end

  -- phase forecasts are shared by the combinations (the same GPU and tp at another rate asks for the same points)
  local cache = {}
  local function cached_phase(fields)
    local k = key_of(fields)
    local p = cache[k]
    if p == nil then
      p = phase(fields)
      cache[k] = p
    end
    return p
  end

  local rows, first, cal_warnings, cal_seen = {}, nil, {}, {}
  local layout_warnings, layout_seen = {}, {}  -- the combinations' layout warnings, each text once
  for i, c in ipairs(combos) do
    local label = fmt("sweep %d/%d: %s tp %d %s %g", i, #combos, c.label, c.tp, mode, c.value)
    progress(label)
    local sub = function(text, done)
      if not done then progress(label .. ": " .. tostring(text)) end
    end
    local row = { index = i, gpu = c.label, gpu_file = c.gpu.source, tp = c.tp, gpus = c.tp,
                  kernels = c.options.kernels or S.DEFAULTS.kernels } -- serve's --kernels: every row's, tp 1 as tp > 1
    row[mode] = c.value
    local ok, r = pcall(S.run, c.options, cached_phase, sub)
    if ok then
      first = first or r
      row_of(row, r)
      -- a GPU calibrated on another model: said once per calibration file (serve.lua's own warning, per GPU)
      -- (an older --scripts serve.lua keeps none: asked of figures.lua by name, as it was)
      local w
      if S.model_warning then
        w = S.model_warning(r)
      elseif F.calibration_warning then
        w = F.calibration_warning(r.calibration, r.gpu, r.calibration_model, r.model)
      end
      if w and not cal_seen[w] then cal_seen[w], cal_warnings[#cal_warnings + 1] = true, w end
      -- a calibration fitted to another version of the GPU's file: likewise once
      local sw = S.calibration_stale_warning and S.calibration_stale_warning(r)
      if sw and not cal_seen[sw] then cal_seen[sw], cal_warnings[#cal_warnings + 1] = true, sw end
      -- a phase forecast below its roofline floor (a calibration fitted to a measurement faster than the GPU can be),
      -- named by its GPU and tp: the text names neither
      for _, fw in ipairs(S.floor_warning and S.floor_warning(r) or {}) do
        fw = fmt("%s, tp %d: %s", c.label, c.tp, fw)
        if not cal_seen[fw] then cal_seen[fw], cal_warnings[#cal_warnings + 1] = true, fw end
      end
      -- a GPU file without mem_reported_gib (its memory budget a share of mem_gb: serve.lua memory_note): once per GPU
      local mn = S.memory_note and S.memory_note(r)
      if mn and not cal_seen[mn] then cal_seen[mn], cal_warnings[#cal_warnings + 1] = true, mn end
      -- fp8 GEMMs forecast slower than in bf16 (serve.lua fp8_warning): each text once, named by its GPU and tp (the
      -- text names neither: a sweep of H100, L40S and MI300X said three unattributed ones)
      local f8 = S.fp8_warning and S.fp8_warning(r)
      f8 = f8 and fmt("%s, tp %d: %s", c.label, c.tp, f8)
      if f8 and not cal_seen[f8] then cal_seen[f8], cal_warnings[#cal_warnings + 1] = true, f8 end
      -- the requests' attention beyond the attention MLPs' training contexts (serve.lua attention_warning: the rows
      -- of NVIDIA GPUs), said once
      local aw = S.attention_warning and S.attention_warning(r)
      if aw and not cal_seen[aw] then cal_seen[aw], cal_warnings[#cal_warnings + 1] = true, aw end
      -- the layout's (a tp group priced over PCIe beyond the GPU's bridge: predict's and serve's warning), said once
      for _, lw in ipairs(S.layout_warnings and S.layout_warnings(r) or {}) do
        if not layout_seen[lw] then layout_seen[lw], layout_warnings[#layout_warnings + 1] = true, lw end
      end
    elseif require("neusight").is_infeasible(r) then
      row.error = first_line(r) -- a setting that cannot run: its row says why
    else
      error(r, 0) -- a script's bug (a model's, an op rule's, a --scripts module's) is the input's: as it was raised
    end
    M.cost(row, c.gpu.price_per_hour_usd)
    row.meets, row.misses = M.meets(row, targets)
    rows[i] = row
  end
  progress(nil, true)

  local choice = M.choose(rows)
  for i, row in ipairs(rows) do row.chosen = choice.index == i end
  local o1, d1 = combos[1].options, combos[1].checked
  local report = {
    kind = "sweep",
    mode = mode,
    model = first and first.model or o1.model,
    predictor = o1.predictor or "neusight",
    dtype = first and first.dtype or o1.dtype,
    kv_dtype = first and first.kv_dtype or nil,
    weight_dtype = first and first.weight_dtype or nil,
    -- a quantised KV cache / weights: what every combination's forecasts do not know (absent otherwise)
    warnings = first and (first.kv_dtype or first.weight_dtype) and require("neusight.workload").warnings {
      mode = "decode", dtype = first.dtype, kv_dtype = first.kv_dtype, weight_dtype = first.weight_dtype } or nil,
    launch = first and first.launch or o1.launch,
    kernels = first and first.kernels or o1.kernels or S.DEFAULTS.kernels, -- every combination's (serve's --kernels)
    experts = first and first.experts or nil, -- mixtures of experts: every combination's (serve's --experts)
    input_len = tostring(o1.input_len),   -- as serve's: "1024", or a range "128..2048"
    output_len = tostring(o1.output_len),
    -- as serve's, numbers: the lengths' means (the fixed length itself when not a range)
    input_len_mean = first and first.input_len_mean or nil,
    output_len_mean = first and first.output_len_mean or nil,
    requests = mode == "rate" and d1.requests or nil,
    seed = mode == "rate" and d1.seed or nil,
    -- the gamma shape of the arrivals' gaps (--burstiness) when not Poisson's 1
    burstiness = mode == "rate" and d1.burstiness ~= 1 and d1.burstiness or nil,
    chunked_prefill = mode == "rate" and (o1.chunked_prefill or 0) or nil,
    targets = { ttft_ms = targets.ttft_ms, tpot_ms = targets.tpot_ms,
                statistic = mode == "rate" and "p90" or "static" },
    rank_by = choice.rank_by,
    unpriced_gpus = choice.unpriced,
    rows = rows,
    combinations = #rows,
    chosen_index = choice.index,
    chosen = choice.index and rows[choice.index] or nil,
    none_meets = choice.index == nil,
    forecasts = 0,
  }
  for _ in pairs(cache) do report.forecasts = report.forecasts + 1 end
  local meeting, errors = 0, 0
  for _, row in ipairs(rows) do
    if row.meets then meeting = meeting + 1 end
    if row.error ~= nil then errors = errors + 1 end
  end
  report.meeting, report.errors = meeting, errors
  report.verdict = M.verdict(rows, choice, targets, mode)
  -- a request beyond a rotary model's max_position_embeddings: one model and one length for every combination, said
  -- once as serve says it (an older --scripts serve.lua keeps none: nothing said)
  -- what the model's config file says that the forecasts do not read (a quantization_config): one file for every
  -- combination, said once, first (an older --scripts serve.lua keeps none: nothing said)
  for i, w in ipairs(first and S.config_warnings and S.config_warnings(first) or {}) do
    report.warnings = report.warnings or {}
    table.insert(report.warnings, i, w)
  end
  -- options given that do nothing (serve.lua no_effect_warnings: --experts on a dense model, --max-batched-tokens beside
  -- --chunked-prefill): the same options for every combination, said once (they were not said at all)
  for _, w in ipairs(first and S.no_effect_warnings and S.no_effect_warnings(first) or {}) do
    report.warnings = report.warnings or {}
    report.warnings[#report.warnings + 1] = w
  end
  local position_warning = first and S.position_warning and S.position_warning(first) or nil
  if position_warning then
    report.warnings = report.warnings or {}
    report.warnings[#report.warnings + 1] = position_warning
  end
  -- the bridge warnings of the tp degrees swept, one line naming them (neusight.parallel.layout
  -- bridge_warnings_merge, as search says its layouts'; an older --scripts layout.lua without it: each text once)
  local layout = require "neusight.parallel.layout"
  if layout.bridge_warnings_merge then layout_warnings = layout.bridge_warnings_merge(layout_warnings) end
  for _, w in ipairs(layout_warnings) do
    report.warnings = report.warnings or {}
    report.warnings[#report.warnings + 1] = w
  end
  for _, w in ipairs(cal_warnings) do
    report.warnings = report.warnings or {}
    report.warnings[#report.warnings + 1] = w
  end
  -- each row's overload warning (its `warning`), named by its setting: stderr says them under --format json|csv
  for _, row in ipairs(rows) do
    if row.warning then
      report.warnings = report.warnings or {}
      report.warnings[#report.warnings + 1] = fmt("%s: %s", setting_text(row), row.warning)
    end
  end
  return report
end

---------------------------------------------------------------------------------------------------
-- Rendering: a table for people and CSV (one line per row); JSON is the report as is

local function num(fmtstr)
  return function(v) return v == nil and "-" or fmt(fmtstr, v) end
end

-- The columns of a mode: { key (JSON / CSV), header (table), cell (table text) }.
local function columns(mode)
  local ms = num("%.2f")
  local cols = {
    { key = "index" },
    { key = "gpu", header = "gpu", left = true },
    { key = "gpu_file" },
    { key = "tp", header = "tp", cell = num("%d") },
    { key = "gpus", header = "GPUs", cell = num("%d") },
    { key = "kernels" }, -- JSON / CSV (a compare row's setting); the table's header line says it once
    { key = "experts" }, -- JSON / CSV, mixtures of experts only (as `kernels`; the header line says it once)
  }
  if mode == "rate" then
    cols[#cols + 1] = { key = "rate", header = "rate/s", cell = num("%g") }
    for _, k in ipairs { "ttft_ms", "tpot_ms", "e2e_ms" } do
      local name = k == "e2e_ms" and "e2e" or k:sub(1, 4):upper()
      cols[#cols + 1] = { key = k .. "_p50", header = name .. " p50", cell = ms }
      cols[#cols + 1] = { key = k .. "_p90", header = name .. " p90", cell = ms }
    end
  else
    cols[#cols + 1] = { key = "batch", header = "batch", cell = num("%d") }
    cols[#cols + 1] = { key = "ttft_ms", header = "TTFT ms", cell = ms }
    cols[#cols + 1] = { key = "tpot_ms", header = "TPOT ms", cell = ms }
    cols[#cols + 1] = { key = "e2e_ms", header = "e2e ms", cell = ms }
  end
  local more = {
    { key = "output_tokens_per_s" },
    { key = "output_tokens_per_s_per_gpu", header = "tok/s/GPU", cell = num("%.1f") },
    { key = "price_per_hour_usd" },
    { key = "cost_per_hour_usd", header = "$/hour", cell = function(v) return v and fmt("%.2f", v) or "-" end },
    { key = "cost_per_million_output_tokens_usd", header = "$/Mtok", cell = M.money },
    { key = "fits" },
    { key = "meets", header = "meets", cell = function(v) return v and "yes" or "no" end },
    { key = "chosen" },
    { key = "misses" },
    { key = "error" },
    { key = "warning" },
    { key = "calibration" }, -- the GPU's calibration file the row's forecasts applied (empty: none)
  }
  if mode == "rate" then  -- the capacity replay's rate and whether the row's rate is near or beyond it ("near",
    -- "beyond": serve.lua overload_warning's second result; the row's `warning` says it in full)
    table.insert(more, 1, { key = "capacity_requests_per_s" })
    table.insert(more, 2, { key = "overload" })
  end
  for _, c in ipairs(more) do cols[#cols + 1] = c end
  return cols
end

local function csv_cell(v)
  if v == nil then return "" end
  if type(v) == "boolean" then return v and "true" or "false" end
  local needs = require("neusight").needs
  if type(v) == "number" then return needs("neusight.report", "number_csv")(v) end
  return needs("neusight.report", "csv_field")(v)
end

-- The sweep's own settings the table's header lines show, as CSV columns after the rows' (each row repeats them, so a
-- CSV alone says what was swept: the audit of issue 16 found them only in the table and JSON): the JSON path of each.
local SETTING_COLUMNS = { "model", "dtype", "kv_dtype", "weight_dtype", "launch", "predictor", "input_len",
  "input_len_mean", "output_len", "output_len_mean", "requests", "seed", "burstiness", "chunked_prefill",
  "targets.ttft_ms", "targets.tpot_ms", "targets.statistic" }

--- CSV: a header of the JSON row fields, then the sweep's settings (their JSON paths: SETTING_COLUMNS), one line per
--- combination (numbers as report.number_csv writes them: the JSON's doubles exactly, in its digits).
function M.format_csv(report)
  local cols = columns(report.mode)
  local out, head = {}, {}
  for i, c in ipairs(cols) do head[i] = c.key end
  local settings = {}
  for _, path in ipairs(SETTING_COLUMNS) do
    local v = report
    for key in path:gmatch("[^.]+") do v = type(v) == "table" and v[key] or nil end
    head[#head + 1] = path
    settings[#settings + 1] = csv_cell(v)
  end
  out[1] = concat(head, ",")
  local tail = concat(settings, ",")
  for _, row in ipairs(report.rows) do
    local cells = {}
    for i, c in ipairs(cols) do cells[i] = csv_cell(row[c.key]) end
    out[#out + 1] = concat(cells, ",") .. "," .. tail
  end
  return concat(out, "\n") .. "\n"
end

--- The table for people (JSON and CSV carry the same numbers, unrounded).
function M.format_table(report)
  local out = {}
  local mode = report.mode
  out[#out + 1] = fmt("serve sweep   %s, %s%s%s, launch %s, kernels %s, predictor %s%s, input %s tokens, output %s "
    .. "tokens", report.model, report.dtype or "-", report.kv_dtype and ", KV cache " .. report.kv_dtype or "",
    report.weight_dtype and ", weights " .. report.weight_dtype or "", report.launch or "-", report.kernels or "-",
    report.predictor, report.experts and ", experts " .. report.experts or "", report.input_len, report.output_len)
  if mode == "rate" then
    out[#out + 1] = fmt("continuous batching: %d requests per combination, %s (seed %d)%s; latencies in ms",
      report.requests,
      report.burstiness and fmt("gamma arrivals (burstiness %.10g)", report.burstiness) or "Poisson arrivals", report.seed,
      report.chunked_prefill > 0 and fmt(", chunked prefill %d tokens", report.chunked_prefill) or "")
  else
    out[#out + 1] = "static batches; latencies in ms"
  end
  local goal = targets_text(report.targets, mode)
  out[#out + 1] = "targets       " .. (goal ~= "" and goal .. (mode == "rate" and " (p90 over the requests)" or "")
    or "none (--ttft-ms, --tpot-ms)")
  out[#out + 1] = ""
  local cols = {}
  for _, c in ipairs(columns(mode)) do
    if c.header then cols[#cols + 1] = c end
  end
  local cells, widths = {}, {}
  for j, c in ipairs(cols) do widths[j] = #c.header end
  for i, row in ipairs(report.rows) do
    cells[i] = {}
    for j, c in ipairs(cols) do
      local s = c.cell and c.cell(row[c.key]) or tostring(row[c.key] or "-")
      cells[i][j] = s
      if #s > widths[j] then widths[j] = #s end
    end
  end
  local function line(texts, note, mark)
    local parts = { mark }
    for j, c in ipairs(cols) do
      parts[#parts + 1] = c.left and fmt("%-" .. widths[j] .. "s", texts[j]) or fmt("%" .. widths[j] .. "s", texts[j])
    end
    local s = concat(parts, "  ")
    if note and note ~= "" then s = s .. "  " .. note end
    return s
  end
  local heads = {}
  for j, c in ipairs(cols) do heads[j] = c.header end
  out[#out + 1] = line(heads, "why not", " ")
  for i, row in ipairs(report.rows) do
    local note = row.error or row.misses
    -- a rate at or beyond the capacity: said here in short, in full among the warnings below (serve.lua's words)
    local load = row.warning and ({ near = "rate near capacity", grew = "queue grew" })[row.overload]
    load = load or (row.warning and "rate beyond capacity")
    if load then note = (note and note .. "; " or "") .. load .. " (see its warning)" end
    out[#out + 1] = line(cells[i], note, row.chosen and "*" or " ")
  end
  out[#out + 1] = ""
  out[#out + 1] = (report.none_meets and "" or "* ") .. report.verdict
  if report.rank_by == "cost_per_million_output_tokens_usd" then
    out[#out + 1] = "  ($/hour = price_per_hour_usd of the GPU file x GPUs; $/Mtok = $/hour / 3600 / output tokens/s x 1e6)"
  end
  out[#out + 1] = fmt("%d combinations, %d meet the targets, %d could not run; %d phase forecasts", report.combinations,
    report.meeting, report.errors, report.forecasts)
  for _, w in ipairs(report.warnings or {}) do out[#out + 1] = "warning: " .. w end  -- as serve's own table
  return concat(out, "\n") .. "\n"
end

return M
