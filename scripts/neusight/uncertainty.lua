-- scripts/neusight/uncertainty.lua — the uncertainty band of a forecast: p10 / p50 / p90 latency from the predictor's
-- own leave-one-GPU-out errors.
--
-- Data: weights/<vendor>/uncertainty.toml (weights/uncertainty.sh): for each kernel family and each leave-one-GPU-out
-- fold (a training GPU held out of that family's training), quantiles of r = ln(measured / predicted) over the held-out
-- GPU's rows, time-weighted (and, for the record, whether that GPU lay outside the range of the GPUs trained on, and
-- that range; of the table's range only `peak_field` is read: which peak a family's range compares). The GPUs the
-- weights were trained on are their manifests' (training.gpus, handed over as r.trained_gpus): one source for whether
-- the GPU is one of them (trained_on: the band's centre, the calibration prior) and for their range (training_range:
-- SMs, bandwidth, the family's peak, architectures, and the most bandwidth and memory per SM). A target GPU outside
-- that range for a family is out of distribution for it, and one beyond its per-SM bandwidth or memory may not be
-- forecast monotonically (M.range_warnings): warnings say so. A vendor without a table of its own (AMD) borrows the
-- nvidia one for the band, said in a warning and in JSON (band_borrowed_from); its range and training GPUs are its own
-- weights'. The band
-- itself is the spread over all folds, most of which held out a GPU outside its training range (an unseen
-- architecture, the largest or smallest part): drawing only from the folds on the target's side of its range was tried and covered
-- fewer measured values (weights/ACCURACY.md, "Uncertainty band").
--
-- Distance (M.distance, M.widen): that spread is what the folds measured as far out as they were, and no further. A
-- GPU's distance from a range is the largest, over its numeric features (SMs, bandwidth, the family's peak), of the
-- log-distance beyond [low, high]; each fold's is its GPU's from the range of the table's other folds' GPUs (their
-- bundled GPU files, by name), and the family's fold distance d_f the largest of them (fold_distance). A target whose
-- distance d_t from the family's training GPUs (training_range) exceeds d_f has the family's draws' log-deviations
-- from their median scaled by w = min(d_t / d_f, M.widen_cap) (the cap when d_f = 0), said in a warning, the band
-- line and JSON (band_widened, band_widened_for); w = 1 up to d_f, so a GPU inside the range, or no further out than a
-- fold was, keeps its band to the bit. An assumption (the error grows in proportion to the distance), not fitted and
-- not validated: no measured labels exist further out than the folds. An AMD forecast's distance is from its own
-- weights' training GPUs, its d_f the borrowed table's folds'; the fallback's families are not widened.
--
-- Aggregation over the graph (M.band): the forecast's latency is scaled by
--     (Σ_f T_f · F_f + T_other) / (Σ_f T_f + T_other)
-- where T_f is the forecast's time of family f's kernels, F_f a draw of the family's error factor, and T_other the time
-- of kernels no family prices (memory copies, collectives, fixed latencies; kept as forecast: no error data exists for
-- them, and the band says what share of the time that is). The quantiles of that ratio over `M.samples` draws of a
-- fixed-seed generator (the same band every run) give p10 / p50 / p90. In a parallel run the ratio, from one device's
-- kernels, scales the iteration time.
--
-- The physical floor (floor_of): no kernel runs faster than max(FLOPs / peak, bytes / bandwidth) (engine/core/roofline.h
-- roofline_floor_seconds; every kernel's forecast is held there), so the band's quantiles (p10 / p50 / p90) are held to
-- the whole forecast's floor, Σ r.floor_s.<family>, as a share of its kernel time, after the width factor (a `spread`
-- above 1 could widen them under it). Only the quantiles, in aggregate: the draws are not clamped family by family.
-- A family's summed kernel floor is no hard bound on the family's measured time as the floor counts bytes (bytes an L2
-- serves, traffic overcounted), and holding each family's draws to it moved bands the labels had: fp32 GPT-2 Large
-- inference on the A100-PCIE-40GB, p10 464.7 -> 514.5 ms, and a V100 GPT-2 Large training step measured at 576.9 ms fell
-- out of its band (new p10 577.1 ms; `neusight eval models` 61 of 65 in p10-p90 instead of 62), while the aggregate
-- floor moves no band the labels have. A band whose quantiles lie above the floor is unchanged to the bit. The
-- calibration's slack under the floor (scripts/neusight/calibration.lua floor_refusal) reads the band as drawn instead
-- (M.band's p10_drawn).
--
-- Kernels the neusight predictor priced by its untrained fallback (a family without weights for the GPU's vendor: an
-- AMD GPU's bf16 / fp8 GEMMs and attention, roofline / scripts/neusight/efficiency.lua's fraction) have no fold of this
-- table; their F_f is drawn from the fallback's own spread, efficiency.lua's `errors` (quantiles of ln(measured /
-- (roofline / efficiency)) over the NVIDIA rows its constants were fitted on): one draw per family and sample for all
-- of its kernels (one constant prices them, so its error moves them all: fully correlated), independent between
-- families, and outside the table's `spread` (below), which was fitted on the table's forecasts (M.band). A family
-- efficiency.lua has no errors for stays in T_other.
--
-- Width (the table's optional `spread`, default 1): the quantiles' distance from the median, in ln, times `spread`:
--     q'(u) = q50 · (q(u) / q50)^spread
-- The median stays; only the width changes. As drawn, the band is wider than the end-to-end errors are (38 end-to-end
-- labels of the five fp32 training GPUs, each forecast by weights and a table that never saw its GPU: 36 inside
-- p10-p90, 95 %; the kernel-level fold biases disagree more than the end-to-end errors do). weights/band_spread.py
-- (via weights/band_coverage.sh --write) fits `spread` as the smallest factor that puts 80 % of those labels inside,
-- and measures the coverage that gives on each GPU with a factor fitted on the other GPUs' labels only
-- (weights/ACCURACY.md, "Uncertainty band"). Fitted on fp32 forecasts, it narrows the tensor-core families' band
-- alike: an assumption, as no bf16 end-to-end labels check it.
local type, pairs, ipairs, next = type, pairs, ipairs, next
local fmt, exp, floor, sort = string.format, math.exp, math.floor, table.sort

local M = {}

M.samples = 2000  -- draws per forecast

-- Per error table (the engine hands the same table to every forecast of a session): its grids and draws. Weak keys:
-- a table the session drops (session::file_text_set replaces it) takes its memo with it.
local memos = setmetatable({}, { __mode = "k" })
local function memo(tbl)
  local m = memos[tbl]
  if not m then
    m = { grids = {}, draws = {}, fold_distance = {}, fold_distance_by = {}, fold_gpus = {} }
    memos[tbl] = m
  end
  return m
end

-- r at probability u by linear interpolation of the table's quantiles (flat beyond the outer levels).
local function inverse(levels, values, u)
  if u <= levels[1] then return values[1] end
  for i = 2, #levels do
    if u <= levels[i] then
      local t = (u - levels[i - 1]) / (levels[i] - levels[i - 1])
      return values[i - 1] + t * (values[i] - values[i - 1])
    end
  end
  return values[#values]
end

local function num(x)
  return fmt("%.4g", x)
end

-- One distribution's quantiles `fq` at `levels` (checked: #levels finite numbers, non-decreasing; `where` names the
-- list in the error) as an inverse CDF on M.grid points, with its { mean, var }: a fold of the leave-one-GPU-out table,
-- or the fallback's errors of a family (fallback_errors).
local function quantile_grid(levels, fq, where)
  if type(fq) ~= "table" or #fq ~= #levels then error(fmt("%s needs %d values", where, #levels), 0) end
  for j, v in ipairs(fq) do  -- finite and non-decreasing: a NaN would make the whole band NaN (JSON null)
    if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge or (j > 1 and v < fq[j - 1]) then
      error(fmt("%s[%d] must be a finite number, not below the one before it", where, j), 0)
    end
  end
  local grid, sum, sq = {}, 0, 0
  for k = 1, M.grid do
    local v = inverse(levels, fq, (k - 0.5) / M.grid)
    grid[k] = v
    sum, sq = sum + v, sq + v * v
  end
  return grid, { mean = sum / M.grid, var = math.max(0, sq / M.grid - (sum / M.grid) ^ 2) }
end

-- Raises "<where>: unknown key 'k' (did you mean …?)" for a key of `t` not in `known` (a list): a misspelt `spread`
-- or `quantiles` must not fall back to its default.
local function known_keys(where, t, known)
  local unknown = {}
  for k in pairs(t) do
    local ok = false
    for _, n in ipairs(known) do ok = ok or k == n end
    if not ok then unknown[#unknown + 1] = tostring(k) end
  end
  if #unknown == 0 then return end
  sort(unknown)  -- the same key named first on every run (pairs order is unspecified)
  local k = unknown[1]
  local c = require("neusight").closest(k, known)
  error(fmt("%s: unknown key '%s'%s (known: %s)", where, k, c and fmt(" (did you mean '%s'?)", c) or "",
    table.concat(known, ", ")), 0)
end
local TABLE_KEYS = { "format_version", "vendor", "levels", "spread", "families" }
local FAMILY_KEYS = { "rows", "folds", "fold_rows", "outside", "quantiles", "range" }
local RANGE_KEYS = { "num_sm", "mem_bw_gbps", "peak_tflops", "peak_field", "architectures", "gpus" }

-- A family's `range` as the table's generator writes it, checked: spans are [low, high] of finite numbers, peak_field
-- names a GPU peak (peak_<type>_tflops, one of the GPU fields: ns.gpu_fields), architectures are names. Raises
-- "<src>: families.<name>.range…" otherwise (found by the uncertainty_toml fuzz target: a range without peak_field read
-- the GPU's field nil, an error that named no file; a peak_field naming no GPU field was not compared, without a word).
local function check_range(src, name, range)
  if range == nil then return {} end
  local where = fmt("%s: families.%s.range", src, name)
  if type(range) ~= "table" then error(where .. " must be a table", 0) end
  known_keys(where, range, RANGE_KEYS)
  for _, k in ipairs({ "num_sm", "mem_bw_gbps", "peak_tflops" }) do
    local span = range[k]
    if span ~= nil then
      local lo, hi = type(span) == "table" and span[1], type(span) == "table" and span[2]
      if type(lo) ~= "number" or type(hi) ~= "number" or #span ~= 2 or not (lo <= hi) or lo == -math.huge
        or hi == math.huge then
        error(fmt("%s.%s must be [low, high], two finite numbers", where, k), 0)
      end
    end
  end
  local pf = range.peak_field
  if range.peak_tflops ~= nil or pf ~= nil then
    if type(pf) ~= "string" or not pf:match("^peak_[%w_]+_tflops$") then
      error(where .. ".peak_field must name a GPU peak (peak_<type>_tflops) beside peak_tflops", 0)
    end
    local ns, known = require "neusight", false
    for _, k in ipairs(ns.gpu_fields()) do known = known or k == pf end
    if not known then
      error(fmt("%s.peak_field: '%s' is not a GPU field%s", where, pf, ns.did_you_mean(pf, ns.gpu_fields())), 0)
    end
  end
  local archs = range.architectures
  if archs ~= nil then
    local ok = type(archs) == "table"
    for _, a in pairs(ok and archs or {}) do ok = ok and type(a) == "string" end
    if not ok or (#archs == 0 and next(archs) ~= nil) then
      error(where .. ".architectures must be a list of architecture names", 0)
    end
  end
  return range
end

-- Why the GPU is outside a family's training range (checked by check_range): a list of reasons (empty: inside).
-- A field the GPU does not give (a plain GPU table's) is not compared.
local function outside(gpu, range)
  local why = {}
  local gpu_optional = require("neusight").gpu_optional
  for _, f in ipairs({ { "num_sm", "num_sm" }, { "mem_bw_gbps", "mem_bw_gbps" }, { range.peak_field, "peak_tflops" } }) do
    local span = f[1] and range[f[2]]
    local v = span and gpu_optional(gpu, f[1])
    if type(v) == "number" and span then
      if v < span[1] then
        why[#why + 1] = fmt("%s %s < %s", f[1], num(v), num(span[1]))
      elseif v > span[2] then
        why[#why + 1] = fmt("%s %s > %s", f[1], num(v), num(span[2]))
      end
    end
  end
  local seen = false
  for _, a in ipairs(range.architectures or {}) do
    if a == gpu.architecture then seen = true end
  end
  if not seen then
    why[#why + 1] = fmt("architecture %s not among %s", tostring(gpu.architecture),
      table.concat(range.architectures or {}, ", "))
  end
  return why
end

-- Whether the GPU of `r` is among the GPUs the weights of family `name` were trained on: r.trained_gpus[name], the
-- weights' manifests' training.gpus (weights/<vendor>/<family>/model.toml; the weights the forecast used, of the GPU's
-- own vendor), by the GPU's name or one of its aliases (each entry the training GPU's view, by its name, or the name no
-- GPU file answers). The manifests, not the error table's range.gpus: a leave-one-GPU-out fold's weights exclude the
-- held-out GPU just as its table does, and a vendor without a table of its own (AMD) has its weights' own training GPUs
-- (MI100, MI210), not the borrowed table's.
-- Such a GPU is in distribution: its forecasts carry no leave-one-GPU-out bias (the folds' mean log bias is what a GPU
-- the weights never saw tends to be off by), so the band (M.band) and the calibration prior
-- (scripts/neusight/calibration.lua prior_of) are centred on the forecast there. Leave one GPU out decided the prior of
-- an unseen GPU (weights/CALIBRATION_PRIOR_RULE.md); on the training GPUs' own labels the folds' bias moved a
-- measurement equal to the forecast +1.1-1.4 % and put the band's p50 above the forecast (weights/ACCURACY.md).
local function trained_on(r, name)
  local gpu = r.gpu or {}
  local list = (r.trained_gpus or {})[name]
  if type(list) ~= "table" then return false end
  local names = { [tostring(gpu.name)] = true }
  for _, a in ipairs(type(gpu.aliases) == "table" and gpu.aliases or {}) do names[a] = true end
  for _, g in ipairs(list) do
    if names[type(g) == "string" and g or tostring(g.name)] then return true end  -- a name, or the GPU's view
  end
  return false
end
M.trained_on = trained_on

-- Adds `name` to the list of `key` in `groups`, the keys in first-seen order in `order`: families grouped by what one
-- warning line says of them (out of distribution, beyond the per-SM range).
local function group_add(groups, order, key, name)
  local list = groups[key]
  if not list then
    list = {}
    groups[key] = list
    order[#order + 1] = key
  end
  list[#list + 1] = name
end

-- The spans [low, high] of the GPU tables `gpus` on the range's numeric features: { num_sm, mem_bw_gbps, peak_tflops
-- (of the GPU field `peak_field`, when given), peak_field }; a feature no GPU gives has no span (not compared). The one
-- rule of a range's spans: the training GPUs' (training_range) and the other folds' of a fold (fold_distance).
local function spans_of(gpus, peak_field)
  local gpu_optional = require("neusight").gpu_optional
  local range = { peak_field = peak_field }
  for _, g in ipairs(gpus) do
    for _, k in ipairs({ { "num_sm", "num_sm" }, { "mem_bw_gbps", "mem_bw_gbps" }, { "peak_tflops", peak_field } }) do
      local v = k[2] and gpu_optional(g, k[2])
      if type(v) == "number" then
        local span = range[k[1]]
        range[k[1]] = span and { math.min(span[1], v), math.max(span[2], v) } or { v, v }
      end
    end
  end
  return range
end

--- How far the GPU table `gpu` is beyond `range` (spans as spans_of makes them, or training_range's): the largest over
--- the range's numeric features (num_sm, mem_bw_gbps, the family's peak `range.peak_field`) of the log-distance beyond
--- [low, high], max(0, ln(x / high), ln(low / x)); 0 inside. A feature the GPU or the range does not give is not
--- compared (as `outside`); architectures are not a distance. Returns the distance and, when above 0, what sets it
--- ("mem_bw_gbps 3350 outside 192-1555").
---@param gpu table
---@param range table
function M.distance(gpu, range)
  local gpu_optional = require("neusight").gpu_optional
  local d, why = 0, nil
  for _, f in ipairs({ { "num_sm", "num_sm" }, { "mem_bw_gbps", "mem_bw_gbps" }, { range.peak_field, "peak_tflops" } }) do
    local span = f[1] and range[f[2]]
    local v = span and gpu_optional(gpu, f[1])
    if type(v) == "number" and span[2] > 0 then
      -- a GPU without the units (a peak of 0) is infinitely far from a range that has them: the cap (M.widen_cap)
      local x = math.max(math.log(v / span[2]), v > 0 and math.log(span[1] / v) or math.huge)
      if x > d then d, why = x, fmt("%s %s outside %s-%s", f[1], num(v), num(span[1]), num(span[2])) end
    end
  end
  return d, why
end

-- The table's fold distance of family `name` (its entry `e`): the largest, over its leave-one-GPU-out folds, of the
-- fold's GPU's distance (M.distance) from the range of the table's other folds' GPUs (spans_of, on the family's peak
-- `e.range.peak_field`): how far out the farthest fold was from what its fold was trained on. The folds' GPUs are the
-- bundled GPU files their names answer (ns.gpu_find), so a table with fewer folds (a nested fold table: the other
-- GPUs only) has its own. Memoised per table and family. Returns the distance, the fold's name and what sets its
-- distance, or nil and why there is none (fewer than two folds; a fold without a GPU file).
local function fold_distance(tbl, name, e)
  local c = memo(tbl).fold_distance
  if c[name] then return table.unpack(c[name], 1, c[name].n) end
  local folds, gpus = e.folds, {}
  local find = require("neusight").gpu_find
  local function keep(...)
    c[name] = table.pack(...)
    return ...
  end
  if type(folds) ~= "table" or #folds < 2 then
    return keep(nil, "the table has fewer than two folds of it")
  end
  local peak_field = (e.range or {}).peak_field
  -- families with the same folds and peak (the fp32 ones; the tensor-core ones) share it: computed once per table
  local key = {}
  for i, f in ipairs(folds) do key[i] = tostring(f) end
  key = table.concat(key, "\0") .. "\0" .. tostring(peak_field)
  local same = memo(tbl).fold_distance_by[key]
  if same then return keep(table.unpack(same, 1, same.n)) end
  local views = memo(tbl).fold_gpus  -- name -> its GPU view (false: none), each asked once per table
  for i, f in ipairs(folds) do
    if type(f) == "string" then  -- (a fold that is no name, a number of a broken table, has no GPU file: below)
      if views[f] == nil then views[f] = find and find(f) or false end
      gpus[i] = views[f] or nil
    end
    if not gpus[i] then return keep(nil, fmt("its fold %s has no GPU file", tostring(f))) end
  end
  local function keep_shared(...)
    memo(tbl).fold_distance_by[key] = table.pack(...)
    return keep(...)
  end
  local d_f, fold, why = 0, folds[1], nil
  for i, g in ipairs(gpus) do
    local others = {}
    for j, o in ipairs(gpus) do
      if j ~= i then others[#others + 1] = o end
    end
    local d, w = M.distance(g, spans_of(others, peak_field))
    if d > d_f then d_f, fold, why = d, folds[i], w end
  end
  return keep_shared(d_f, fold, why)
end

M.widen_cap = 3  -- the most a family's band is widened by (M.widen)

--- The width factor of a family's draws for a GPU at distance `d_t` from the family's training GPUs when the table's
--- farthest fold was `d_f` from its fold's (fold_distance): 1 up to d_f (the folds measured that far out: their spread
--- is the band's), d_t / d_f beyond it, at most M.widen_cap; with d_f = 0 (no fold was outside the others' range) any
--- d_t > 0 is beyond every fold: the cap. Not fitted and not validated: no labels exist further out than the folds
--- were; an assumption that the error grows in proportion to the distance.
---@param d_t number
---@param d_f number
function M.widen(d_t, d_f)
  if not (d_t > d_f) then return 1 end
  if d_f <= 0 then return M.widen_cap end
  return math.min(d_t / d_f, M.widen_cap)
end

-- The range of the GPUs the weights of family `name` were trained on: trained[name] (`trained`: r.trained_gpus, or
-- ns.trained_gpus's), their manifests' training.gpus (weights/<vendor>/<family>/model.toml: the weights the forecast
-- used), each GPU's table; `vendor` the GPU's (for the message). The one rule of "the training GPUs' range", for both
-- of its uses: the out-of-distribution check (M.parts: SMs, bandwidth, the family's peak `peak_field` when given,
-- architectures) and the per-SM bandwidth / memory rule (M.per_sm_beyond: the training GPUs with the most of each per
-- SM). Memoised per list (the engine hands the same r.trained_gpus table to every forecast of a session;
-- ns.trained_gpus makes a fresh one each call) and peak field. Returns { num_sm, mem_bw_gbps, peak_tflops (spans
-- [low, high]), peak_field, architectures, gpus, bw_per_sm, mem_per_sm (each { value, the GPU's name }) }, or nil, why
-- none can be made and the training GPU without a GPU file (if that is why).
local range_memo = setmetatable({}, { __mode = "k" })
-- A GPU table's memory bandwidth and memory per SM, or an error naming the field it lacks or has out of range (a table
-- a script made, not one read from a GPU file, which refuses both: "attempt to perform arithmetic on a nil value" had
-- named none, and an infinite field gave bandwidth per SM inf or 0 without a word); `level` as error()'s, of the
-- function calling this one.
local function per_sm(g, level)
  for _, key in ipairs { "num_sm", "mem_bw_gbps", "mem_gb" } do
    local v = g[key]
    if type(v) ~= "number" or not (v > 0 and v < math.huge) then
      error(fmt("neusight.uncertainty: the per-SM range needs the GPU table's %s, a positive finite number (GPU %s: "
        .. "got %s)", key, tostring(g.name), tostring(v)), level + 1)
    end
  end
  return g.mem_bw_gbps / g.num_sm, g.mem_gb / g.num_sm
end

local function training_range(trained, vendor, name, peak_field)
  local list = (trained or {})[name]
  if type(list) ~= "table" or #list == 0 then
    return nil, fmt("no record of the GPUs the %s %s weights were trained on", tostring(vendor), name)
  end
  local by_peak = range_memo[list]
  if not by_peak then
    by_peak = {}
    range_memo[list] = by_peak
  end
  local key = peak_field or ""
  if by_peak[key] then return table.unpack(by_peak[key]) end
  for _, g in ipairs(list) do
    if type(g) == "string" then
      by_peak[key] = { nil, fmt("its training GPU %s has no GPU file", g), g }
      return table.unpack(by_peak[key])
    end
  end
  -- a training GPU's peak the range spans (a table a script made: a GPU file's is finite), as per_sm its resources: an
  -- infinite one would span every GPU
  local gpu_optional = require("neusight").gpu_optional
  for _, g in ipairs(list) do
    local v = peak_field and gpu_optional(g, peak_field)
    if v and not (type(v) == "number" and v >= 0 and v < math.huge) then
      error(fmt("neusight.uncertainty: the training range needs the GPU table's %s, a finite number >= 0 (GPU %s: got "
        .. "%s)", peak_field, tostring(g.name), tostring(v)))
    end
  end
  local bws, mems = {}, {}
  for i, g in ipairs(list) do bws[i], mems[i] = per_sm(g, 1) end
  local range = spans_of(list, peak_field)
  range.architectures, range.gpus = {}, {}
  local seen = {}
  for i, g in ipairs(list) do
    -- the most per SM: the first of the largest, in the manifest's order
    local bw, mem = bws[i], mems[i]
    if not range.bw_per_sm or bw > range.bw_per_sm[1] then range.bw_per_sm = { bw, g.name } end
    if not range.mem_per_sm or mem > range.mem_per_sm[1] then range.mem_per_sm = { mem, g.name } end
    if not seen[g.architecture] then
      seen[g.architecture] = true
      range.architectures[#range.architectures + 1] = g.architecture
    end
    range.gpus[#range.gpus + 1] = g.name
  end
  sort(range.architectures)
  by_peak[key] = { range }
  return range
end

--- What the GPU table `gpu` has beyond the per-SM memory bandwidth or memory of the GPUs family `name`'s weights were
--- trained on (training_range's bw_per_sm, mem_per_sm; `trained`: { family = { GPU tables } }, a forecast's
--- r.trained_gpus or ns.trained_gpus(predictor, vendor)): the one rule of "beyond the per-SM range", for the range
--- warning (M.range_warnings) and for `--predictor neusight_vector_form` (scripts/neusight/predictors/
--- neusight_vector_form.lua), so a --weights DIR trained on other GPUs moves both alike. Returns a list of what is beyond
--- ("25.4 GB/s of memory bandwidth per SM (the most of their training GPUs: 14.4, A100-PCIE-40GB)"; empty: within),
--- or nil, why there is no range and the training GPU without a GPU file when that is why.
---@param gpu table
---@param trained table?
---@param name string
function M.per_sm_beyond(gpu, trained, name)
  local range, why, missing = training_range(trained, gpu.vendor, name)
  if not range then return nil, why, missing end
  local what = {}
  local bw, mem = per_sm(gpu, 2)
  if bw > range.bw_per_sm[1] then
    what[#what + 1] = fmt("%.3g GB/s of memory bandwidth per SM (the most of their training GPUs: %.3g, %s)", bw,
      range.bw_per_sm[1], range.bw_per_sm[2])
  end
  if mem > range.mem_per_sm[1] then
    what[#what + 1] = fmt("%.3g GB of memory per SM (the most of their training GPUs: %.3g, %s)", mem,
      range.mem_per_sm[1], range.mem_per_sm[2])
  end
  return what
end

--- What a forecast says when its GPU is beyond the per-SM memory bandwidth or memory of a family's training GPUs
--- (M.per_sm_beyond), for the families present (r.family_s) whose MLPs read both per SM
--- (ns.families' per_sm: the fp32 families; the tensor-core ones do not): their forecasts there may not be monotone in
--- bandwidth or memory (tests/core/test_forecast_physics.cpp; the GPU envelopes tried were not adopted,
--- weights/MONOTONE_GPU_RULE.md). One line per what is beyond, the families of it together in the engine's family
--- order; a family whose training GPU has no GPU file gets a line saying its range is unknown instead. Needs no error
--- table: r.trained_gpus (the predictor's weights' manifests) and r.gpu are all it reads. Returns a list of warnings.
---@param r table
function M.range_warnings(r)
  local gpu, present, out = r.gpu, r.family_s or {}, {}
  if type(r.trained_gpus) ~= "table" or not gpu then return out end
  local by_what, order = {}, {}
  for _, f in ipairs(require("neusight").families()) do
    if f.per_sm and present[f.name] ~= nil and type(r.trained_gpus[f.name]) == "table" then
      local what, _, missing = M.per_sm_beyond(gpu, r.trained_gpus, f.name)
      if missing then
        out[#out + 1] = fmt("the %s weights name a training GPU '%s' with no GPU file: their training range of per-SM "
          .. "bandwidth and memory is unknown (no warning of a GPU beyond it)", f.name, missing)
      elseif what and #what > 0 then
        group_add(by_what, order, table.concat(what, " and "), f.name)
      end
    end
  end
  for _, key in ipairs(order) do
    out[#out + 1] = fmt("%s is beyond the range the %s weights were trained on with %s: their forecasts there may not be "
      .. "monotone in bandwidth or memory (a GPU with more of either may be forecast slower; "
      .. "weights/MONOTONE_GPU_RULE.md)", gpu.name, table.concat(by_what[key], ", "), key)
  end
  return out
end

M.untrained_min = 0.05  -- the share of the kernel time in untrained backward variants from which M.parts warns of them
M.max_draws = 8  -- kernel errors averaged per family and draw (a family's effective kernel count, at most this)
M.grid = 64      -- points of each fold's inverse CDF, precomputed per forecast

local EFFICIENCY_WHERE = "neusight.efficiency (scripts/neusight/efficiency.lua or its --scripts override)"
local fallback_memo = setmetatable({}, { __mode = "k" })

-- The fallback's own errors (neusight.efficiency's `errors`: per family, quantiles at `levels` of ln(measured /
-- (roofline / efficiency)) over the rows its constants were fitted on; weights/roofline_efficiency.py), checked and
-- as inverse-CDF grids: { grids = { family → grid }, draws = {} }, once per table; nil when the module has none (a
-- --scripts override without them: the fallback's families are then not widened, and the band says so).
local function fallback_errors()
  local eff = require("neusight.efficiency")
  local errs = type(eff) == "table" and eff.errors or nil
  if errs == nil then return nil end
  local m = fallback_memo[errs]
  if m then return m end
  if type(errs) ~= "table" then error(EFFICIENCY_WHERE .. ": errors must be a table", 0) end
  local where = EFFICIENCY_WHERE .. ": errors"
  local known = { "levels" }
  for _, f in ipairs(require("neusight").families()) do known[#known + 1] = f.name end
  known_keys(where, errs, known)
  local levels = errs.levels
  if type(levels) ~= "table" or #levels < 2 then error(where .. ".levels must be a list of probabilities", 0) end
  for i, l in ipairs(levels) do
    if type(l) ~= "number" or not (l > 0 and l < 1) or (i > 1 and not (l > levels[i - 1])) then
      error(fmt("%s.levels must be increasing probabilities in (0, 1) (levels[%d])", where, i), 0)
    end
  end
  m = { grids = {}, draws = {} }
  local names = {}
  for name in pairs(errs) do
    if name ~= "levels" then names[#names + 1] = name end
  end
  sort(names)  -- the same family named first on every run
  for _, name in ipairs(names) do m.grids[name] = quantile_grid(levels, errs[name], where .. "." .. name) end
  fallback_memo[errs] = m
  return m
end

-- Kernel variants a family's weights never saw. The family totals (family_s, family_n) cannot tell them apart, so the
-- pipeline (scripts/neusight/pipeline.lua) sums them kernel by kernel (M.untrained_inputs) and M.parts says so. The
-- attention_prefill weights were trained on AIConfigurator's context attention only: causal self-attention forward
-- over a prompt, queries = keys (its rows have step 0: engine/ingest/dataset.cpp aiconfigurator_attention_load). Full
-- attention (BERT / ViT encoders), cross-attention (queries != keys: a T5 decoder over its encoder), a prefill that
-- continues a cache (queries < keys) and the backward kernels (scripts/tiling/attention.lua prices them "for want of
-- measurements") are priced as if they were that kernel. All are attention_prefill's (M.untrained_family: a variant
-- of another family would need its own warning's words, which name what that family saw). In the order the warning
-- lists them.
M.untrained_family = "attention_prefill"
M.untrained_variants = {
  { key = "full", what = "full (non-causal) self-attention" },
  { key = "cross", what = "cross-attention (queries != keys)" },
  { key = "cached", what = "causal attention continuing a cache (queries < keys)" },
  { key = "backward", what = "attention backward" },
}

-- Kernels beyond the range of the input their family's weights were trained on: the largest value among the rows
-- `neusight train` trained on, which it records in the manifest ([training.range], weights/<vendor>/<family>/
-- model.toml: engine/core/tile_model.h family_range_input), handed over as r.trained_range (the engine's, from the
-- predictor's manifests: the --weights DIR's when given; a Lua predictor has none, so a band of its forecast says
-- nothing, while the ns.predict calls inside it say it of their kernels), against the largest among the forecast's
-- kernels of the family (r.longest, the engine's family inputs longest.<family>.<input>) or a serve's requests
-- (neusight.serve). Beyond it the MLP extrapolates its utilisation: a 131072-token prefill (a 128k-context model's
-- whole prompt) was 8x the longest measured one and nothing said so (audit25). The roofline floor still holds the
-- kernel; its time beyond is not measured. What each input is called in the warning, in its order; a family not
-- listed is named by its input.
M.range_words = {
  { family = "attention_prefill", input = "keys", what = "a prefill attention over %s tokens", of = "prompts" },
  { family = "attention_decode", input = "cached_tokens", what = "a decode attention over %s cached tokens",
    of = "caches" },
}

local function whole(x) return fmt("%.15g", x) end

--- The warning of inputs beyond the range their family's weights were trained on, and its JSON text
--- ("attention_prefill keys 32768 > 16384, …"), or nil. `trained`: { family = { input = the largest trained on } }
--- (r.trained_range, a serve phase's trained_range; nil: none); `longest`: { family = { input = the largest of the forecast } }
--- (r.longest; nil: none). A family without a range in `trained` (no weights for the vendor, another predictor,
--- weights from before the key) says nothing.
---@param trained table?
---@param longest table?
---@return string?, string?
function M.range_warning(trained, longest)
  if type(trained) ~= "table" or type(longest) ~= "table" then return nil end
  local parts, json, attention = {}, {}, false
  local function check(family, input, w)
    local most, v = (trained[family] or {})[input], (longest[family] or {})[input]
    if type(most) ~= "number" or type(v) ~= "number" or not (v > most) then return end
    if w then
      attention = true
      parts[#parts + 1] = fmt("%s (%s was trained on %s of up to %s)", fmt(w.what, whole(v)), family, w.of, whole(most))
    else
      parts[#parts + 1] = fmt("%s kernels of %s %s (their weights were trained on up to %s)", family, input, whole(v),
        whole(most))
    end
    json[#json + 1] = fmt("%s %s %s > %s", family, input, whole(v), whole(most))
  end
  local named = {}
  for _, w in ipairs(M.range_words) do
    named[w.family] = true
    check(w.family, w.input, w)
  end
  local others = {}
  for family in pairs(longest) do
    if not named[family] and type(family) == "string" then others[#others + 1] = family end
  end
  sort(others)
  for _, family in ipairs(others) do
    local inputs = {}
    for input in pairs(type(longest[family]) == "table" and longest[family] or {}) do inputs[#inputs + 1] = input end
    sort(inputs)
    for _, input in ipairs(inputs) do check(family, input, nil) end
  end
  if #parts == 0 then return nil end
  return fmt("%s: beyond the %s the neusight predictor's %s trained on, so their utilisation is extrapolated and "
    .. "these kernels' times are indicative only (held to their roofline floor, not measured)",
    table.concat(parts, " and "), attention and #json == #parts and "contexts" or "range",
    attention and #json == #parts and "attention MLPs were" or "weights were"), table.concat(json, ", ")
end

--- The untrained variant of a kernel (M.untrained_variants' key), or nil for one its family's weights were trained on.
--- `k`: a kernel as run.kernels() gives it (kind, op, m = query length, k = key length).
---@param k table
---@return string?
function M.untrained_variant(k)
  if k.kind ~= "attention" or k.op == "decode" or k.seconds then return nil end
  if k.op == "causal_bwd" or k.op == "full_bwd" then return "backward" end
  if k.m ~= k.k then return k.op == "full" and "cross" or "cached" end
  if k.op == "full" then return "full" end
  return nil
end

--- The figure inputs of a run's kernels of untrained variants (M.untrained_variant): untrained_s.<variant> (seconds:
--- per-launch seconds x the node's count, as family_s sums them) and untrained_n.<variant> (launches), for the
--- variants present; {} when none is. `kernels` and `seconds` as run.kernels() and run.latencies() give them.
---@param kernels table
---@param seconds table
---@return table { { key, value }, … }
function M.untrained_inputs(kernels, seconds)
  local s, n = {}, {}
  for i, k in ipairs(kernels) do
    local v = M.untrained_variant(k)
    if v then
      local c = k.count or 1
      s[v], n[v] = (s[v] or 0) + seconds[i] * c, (n[v] or 0) + c
    end
  end
  local out = {}
  for _, v in ipairs(M.untrained_variants) do
    if n[v.key] then
      out[#out + 1] = { "untrained_s." .. v.key, s[v.key] }
      out[#out + 1] = { "untrained_n." .. v.key, n[v.key] }
    end
  end
  return out
end

-- What M.parts says of r.untrained_s / r.untrained_n (M.untrained_inputs) over the families it has error data for
-- (`priced`: the MLP priced them; the roofline fallback was trained on nothing, its own note says so): nil when none;
-- else { s, n, share (of `total`), text ("attention backward 21 %, …"), forward (seconds of forward variants) }.
local function untrained_of(r, priced, total)
  if not priced[M.untrained_family] then return nil end
  local s_of, n_of = r.untrained_s or {}, r.untrained_n or {}
  local s, n, fwd, what = 0, 0, 0, {}
  for _, v in ipairs(M.untrained_variants) do
    local vs = s_of[v.key]
    -- a NaN was dropped silently (NaN > 0 is false) and an infinity made the share infinite: refused, named
    if type(vs) == "number" and (vs ~= vs or vs == math.huge or vs == -math.huge) then
      error(fmt("untrained_s.%s must be a finite number of seconds (got %s)", v.key, tostring(vs)), 0)
    end
    if type(vs) == "number" and vs > 0 then
      s, n = s + vs, n + (n_of[v.key] or 0)
      if v.key ~= "backward" then fwd = fwd + vs end
      what[#what + 1] = fmt("%s %.1f %%", v.what, 100 * vs / total)
    end
  end
  if n == 0 then return nil end
  return { s = s, n = n, share = s / total, forward = fwd, text = table.concat(what, ", ") }
end

--- Each kernel family's error distributions: one per leave-one-GPU-out fold of the table, as inverse-CDF grids, with
--- their mean and variance; and the out-of-distribution warnings for this GPU.
--- `r` as M.band's. Returns { parts = { { name, s, n, folds = { grids }, stats = { {mean, var} }, bias (the folds' mean
--- log bias: the mean of stats[].mean), trained (the GPU is one the family's weights were trained on: trained_on), widen
--- (the width factor of its draws: M.widen of the GPU's distance and the table's fold distance, 1 within it) },
--- … }, other (seconds without the table's error data: the fallback's families' included), total, unmeasured (families
--- the table lacks; the fallback's families without errors of their own), fallback (seconds the fallback priced),
--- fallback_families, fallback_parts ({ name, s, n = 1, folds = { the grid of efficiency.lua's errors } } of those with
--- errors: their time is in `other` too), warnings, out_of_distribution, borrowed_from (the table's vendor when it is not
--- the GPU's), source } or nil and why.
---@param r table
function M.parts(r)
  local tbl = r.uncertainty
  if type(tbl) ~= "table" then return nil, "the predictor has no leave-one-GPU-out error table" end
  local src = r.uncertainty_source or "the error table"
  if tbl.format_version ~= 2 then error(fmt("%s: format_version must be 2", src), 0) end
  local levels, families = tbl.levels, tbl.families
  if type(levels) ~= "table" or #levels < 2 or type(families) ~= "table" then
    error(fmt("%s: needs `levels` and [families.*]", src), 0)
  end
  local m = memo(tbl)
  if not m.keys_checked then  -- every family's keys, whichever families this forecast uses: a file is valid or not
    known_keys(src, tbl, TABLE_KEYS)
    local names, bad = {}, {}  -- in name order: the same family named first on every run
    for name in pairs(families) do
      if type(name) == "string" then names[#names + 1] = name else bad[#bad + 1] = tostring(name) end
    end
    table.sort(bad)
    -- [[families]] (an array) has no family names: its entries matched no kernel family, their keys went unchecked
    -- and the band had no error data, with exit 0
    if #bad > 0 then
      error(fmt("%s: families: entry %s has no family name (each family is a [families.<name>] table, not an array "
        .. "entry)", src, bad[1]), 0)
    end
    table.sort(names)
    for _, name in ipairs(names) do
      local e = families[name]
      if type(e) == "table" then
        known_keys(fmt("%s: families.%s", src, name), e, FAMILY_KEYS)
        check_range(src, name, e.range)
      end
    end
    m.keys_checked = true
  end
  local spread = tbl.spread
  if spread ~= nil and (math.type(spread) == nil or not (spread > 0 and spread <= 4)) then
    error(fmt("%s: spread must be a number in (0, 4] (the band's width factor; got %s)", src, tostring(spread)), 0)
  end
  for i, l in ipairs(levels) do  -- probabilities, increasing: an inverse CDF's abscissae
    if type(l) ~= "number" or not (l > 0 and l < 1) or (i > 1 and not (l > levels[i - 1])) then
      error(fmt("%s: levels must be increasing probabilities in (0, 1) (levels[%d])", src, i), 0)
    end
  end
  local gpu = r.gpu
  local other_vendor = tbl.vendor ~= nil and tbl.vendor ~= gpu.vendor
  local out = { parts = {}, other = 0, total = 0, unmeasured = {}, warnings = {}, source = src, spread = spread or 1,
    fallback = 0, fallback_families = {}, fallback_parts = {} }
  local fb_errors = fallback_errors()  -- checked on every forecast: a broken one is an error, NVIDIA's or not
  local ood_by_reason, order, names, unchecked = {}, {}, {}, {}
  local widened, widened_order, unwidened, unwidened_order = {}, {}, {}, {}
  for name in pairs(r.family_s or {}) do names[#names + 1] = name end
  sort(names)
  for _, name in ipairs(names) do
    local s = r.family_s[name]
    out.total = out.total + s
    local e = families[name]
    if name == "other" or s <= 0 then
      out.other = out.other + s
    elseif type(e) ~= "table" or (r.roofline or {})[name] then  -- no data, or the roofline priced them
      out.other = out.other + s
      local grid = (r.roofline or {})[name] and fb_errors and fb_errors.grids[name]
      if grid then  -- the fallback's own errors (efficiency.lua): one draw moves all the family's kernels (n = 1)
        out.fallback_parts[#out.fallback_parts + 1] = { name = name, s = s, n = 1, folds = { grid } }
      else
        out.unmeasured[#out.unmeasured + 1] = (r.roofline or {})[name] and name .. " (roofline)" or name
      end
      if (r.roofline or {})[name] then  -- the untrained fallback (roofline / efficiency.lua): see M.fallback_note
        out.fallback = out.fallback + s
        out.fallback_families[#out.fallback_families + 1] = name
      end
    else
      -- the range of the family's training GPUs (training_range: the weights' manifests), compared on the fields the
      -- table's range (checked once per table above) names the peak of
      local range, no_range = training_range(r.trained_gpus, r.gpu.vendor, name, (e.range or {}).peak_field)
      local why = range and outside(gpu, range) or {}
      if no_range then unchecked[#unchecked + 1] = fmt("%s (%s)", name, no_range) end
      -- beyond the distance of the table's farthest fold: the family's draws widened (M.widen)
      local widen, d_t, d_why = 1, 0, nil
      if range then d_t, d_why = M.distance(gpu, range) end
      if d_t > 0 then
        local d_f, fold, f_why = fold_distance(tbl, name, e)
        if not d_f then
          group_add(unwidened, unwidened_order, fold, name)
        else
          widen = M.widen(d_t, d_f)
          if widen > 1 then
            -- grouped by the factor and what the line says after the families
            local tail = fmt("%s is further from the GPUs they were trained on than any leave-one-GPU-out fold of %s "
              .. "was from its fold's (log-distance %.3g, %s; the farthest fold %s)", gpu.name, src, d_t, d_why,
              d_f > 0 and fmt("%.3g, %s: %s", d_f, tostring(fold), f_why) or "0: none was outside the others' range")
            group_add(widened, widened_order, fmt("x%.2f for the %%s: %s", widen, tail), name)
          end
        end
      end
      local q = e.quantiles
      if type(q) ~= "table" or #q == 0 then
        error(fmt("%s: families.%s needs `quantiles` (one list per fold)", src, name), 0)
      end
      local c = memo(tbl).grids
      local g = c[name]
      if not g then  -- each fold's inverse CDF on a grid, with its mean and variance: once per table and family
        g = { folds = {}, stats = {} }
        for i, fq in ipairs(q) do
          g.folds[i], g.stats[i] = quantile_grid(levels, fq, fmt("%s: families.%s.quantiles[%d]", src, name, i))
        end
        c[name] = g
      end
      local folds, stats = g.folds, g.stats
      if not g.bias then
        local sum = 0
        for _, st in ipairs(stats) do sum = sum + st.mean end
        g.bias = sum / #stats
      end
      out.parts[#out.parts + 1] = { name = name, s = s, n = (r.family_n or {})[name] or 1, folds = folds, stats = stats,
        bias = g.bias, trained = trained_on(r, name), widen = widen }
      if #why > 0 then group_add(ood_by_reason, order, table.concat(why, ", "), name) end
    end
  end
  if not (out.total > 0) then return nil, "the forecast has no kernel time" end
  for _, key in ipairs(order) do
    local fams = ood_by_reason[key]
    out.warnings[#out.warnings + 1] = fmt("%s is out of distribution for the %s predictor%s (beyond the GPUs trained on: %s); "
      .. "see the band for the spread to expect", gpu.name, table.concat(fams, ", "), #fams > 1 and "s" or "", key)
  end
  for _, key in ipairs(widened_order) do
    local fams = widened[key]
    local at = key:find("%s", 1, true)  -- the families' place (the rest is text, not a format)
    out.warnings[#out.warnings + 1] = "the uncertainty band is widened " .. key:sub(1, at - 1)
      .. fmt("%s predictor%s", table.concat(fams, ", "), #fams > 1 and "s" or "") .. key:sub(at + 2)
      .. fmt(", so their draws' deviations from the median are scaled by the ratio of the two (at most x%g): an "
        .. "assumption, not fitted and not validated (no measured labels exist that far out)", M.widen_cap)
  end
  for _, key in ipairs(unwidened_order) do
    local fams = unwidened[key]
    out.warnings[#out.warnings + 1] = fmt("%s is beyond the GPUs the %s predictor%s %s trained on, but the uncertainty "
      .. "band is not widened for how far: the distance of %s's folds is unknown (%s)", gpu.name,
      table.concat(fams, ", "), #fams > 1 and "s" or "", #fams > 1 and "were" or "was", src, key)
  end
  if #unchecked > 0 then
    out.warnings[#out.warnings + 1] = fmt("%s is not checked for out of distribution for the %s predictor%s",
      gpu.name, table.concat(unchecked, ", "), #unchecked > 1 and "s" or "")
  end
  if other_vendor then  -- said in JSON as well (band_borrowed_from): a band of another vendor's GPUs' errors
    out.borrowed_from = tostring(tbl.vendor)
    out.warnings[#out.warnings + 1] = fmt("no leave-one-GPU-out errors of the %s weights: the uncertainty band is "
      .. "borrowed from the %s weights' folds (%s), whose errors on %s GPUs are not those of the %s weights",
      tostring(gpu.vendor), tostring(tbl.vendor), src, tostring(tbl.vendor), tostring(gpu.vendor))
  end
  -- kernels of variants their family's weights never saw (M.untrained_variants), summed kernel by kernel
  local priced = {}
  for _, part in ipairs(out.parts) do priced[part.name] = true end
  local u = untrained_of(r, priced, out.total)
  out.untrained = u
  -- kernels beyond the range of the input their family's weights were trained on (M.range_warning)
  local beyond, beyond_for = M.range_warning(r.trained_range, r.longest)
  if beyond then
    out.warnings[#out.warnings + 1] = beyond
    out.range_beyond_for = beyond_for
  end
  -- said always in JSON (M.figures: untrained_share, untrained_kernels, untrained_for); warned of when a forward
  -- variant is present (the model itself is outside the data: BERT, T5) or the backward's share reaches
  -- M.untrained_min: every training run has backward attention, and at a few per cent of the time (Llama-3-8B at 2048
  -- tokens: 2.4 %) even a 50 % error in it moves the forecast less than the band's own width
  if u and (u.forward > 0 or u.share >= M.untrained_min) then
    out.warnings[#out.warnings + 1] = fmt("%s kernel launch%s (%.1f %% of the kernel time: %s) %s of %s the "
      .. M.untrained_family .. " predictor was not trained on (it saw causal self-attention forward only, queries = keys: "
      .. "AIConfigurator's context attention): priced and banded as that kernel, with no measurement of their own, so "
      .. "their error may exceed the band", fmt("%.0f", u.n), u.n == 1 and "" or "es", 100 * u.share, u.text,
      u.n == 1 and "is" or "are", u.n == 1 and "a variant" or "variants")
    u.warned = true
  end
  out.out_of_distribution = #order > 0 or (u ~= nil and u.warned == true) or beyond ~= nil
  return out
end

-- Draws of a family's error factor for k distinct kernels: M.samples of { pick a fold; the mean of k kernel errors
-- e^r from it }, from a generator seeded by the family's name and k (the same draws for every forecast of a session —
-- comparisons differ by their forecasts, not by noise — and independent between families). Memoised in `c` (the
-- table's draws; the fallback's errors' with the key's `prefix` "fallback:", a stream of its own).
local function factors(c, part, prefix)
  local k = math.max(1, math.min(M.max_draws, floor(part.n + 0.5)))
  local key = (prefix or "") .. part.name .. ":" .. k
  if c[key] then return c[key] end
  local seed = 0x2545F4914F6CDD1D
  for i = 1, #key do seed = (seed ~ key:byte(i)) * 0x100000001B3 end
  -- The draws take most of a forecast's band (2000 x (1 + k) uniforms per family), so the loop is written flat: the
  -- generator inline (xorshift64, Marsaglia: deterministic and independent of the scripts' math.random), a uniform
  -- u in (0, 1] as ((x >> 11) + 0.5) / 2^53 (it rounds to 1 at the top: the index is clamped to the last), floor by
  -- `// 1` (an integral float indexes as the integer), and e^r of each fold's grid points taken once, not per pick.
  -- The same numbers as a generator closure, math.floor and exp per pick gave (the startup benchmark: identical JSON).
  local x, grid, folds, out = seed, M.grid, part.folds, {}
  local nf, efolds = #folds, {}
  for j = 1, nf do
    local fold, e = folds[j], {}
    for q = 1, grid do e[q] = exp(fold[q]) end
    efolds[j] = e
  end
  for i = 1, M.samples do
    x = x ~ (x << 13); x = x ~ (x >> 7); x = x ~ (x << 17)
    local j = (((x >> 11) + 0.5) / 9007199254740992.0 * nf) // 1 + 1  -- 2^53
    local e = efolds[j > nf and nf or j]
    local f = 0
    for _ = 1, k do
      x = x ~ (x << 13); x = x ~ (x >> 7); x = x ~ (x << 17)
      local q = (((x >> 11) + 0.5) / 9007199254740992.0 * grid) // 1 + 1
      f = f + e[q > grid and grid or q]
    end
    out[i] = f / k
  end
  c[key] = out
  return out
end

-- Rearranges the numbers a[lo..hi] so that a[k] holds the one a sort of them would put there, every one before it no
-- larger and every one after it no smaller (Hoare's selection, FIND), and returns a[k]: an order statistic in O(n)
-- where table.sort takes O(n log n) and a C comparison per step (the band's quantiles and the widened draws' medians
-- were a tenth of the main job's instructions). The same value as sorted[k]: numbers are totally ordered (the draws
-- and ratios are finite: quantile_grid checks the table).
local function select_kth(a, lo, hi, k)
  while lo < hi do
    local x = a[(lo + hi) // 2]
    local i, j = lo, hi
    while i <= j do
      while a[i] < x do i = i + 1 end
      while x < a[j] do j = j - 1 end
      if i <= j then
        a[i], a[j] = a[j], a[i]
        i, j = i + 1, j - 1
      end
    end
    if k <= j then hi = j elseif k >= i then lo = i else break end  -- between j and i: equal to x, in place
  end
  return a[k]
end

-- at(x) of the list `a` (rearranged in place): the value at index max(1, min(n, floor(x · n + 0.5))) of `a` sorted,
-- for each x of `xs` (increasing), found by selection (select_kth) instead of a sort; at(x) of any other x is an error.
local function quantiles_of(a, xs)
  local n, lo, at = #a, 1, {}
  for _, x in ipairs(xs) do
    local k = math.max(1, math.min(n, floor(x * n + 0.5)))
    at[x] = select_kth(a, lo, n, k)
    lo = math.max(lo, k + 1)  -- a[1..k] are the k smallest: the next (larger) index is among those after
  end
  return function(x) return at[x] or error("quantiles_of: no quantile " .. tostring(x)) end
end
M.quantiles_of = quantiles_of

-- The median of the draws `f` (factors': memoised and shared, so selected in a copy, `scratch` when given), memoised
-- per list: the centre of widened draws, m · (f / m)^w (M.band).
local medians = setmetatable({}, { __mode = "k" })
local function median_of(f, scratch)
  local m = medians[f]
  if not m then
    m = quantiles_of(table.move(f, 1, #f, 1, scratch or {}), { 0.5 })(0.5)
    medians[f] = m
  end
  return m
end

-- The roofline floor of the forecast `r` the band's quantiles are held to, in seconds: the sum of r.floor_s.<family>
-- (the engine's family inputs: Σ max(FLOPs / peak, bytes / bandwidth) over each family's kernels, engine/core/roofline.h
-- roofline_floor_seconds) over the families r.family_s has; nil when it has none (a caller without floors: the band as
-- drawn). The whole floor only, not each family's (the file's header: why).
local function floor_of(r)
  local floor_s, total = r.floor_s, 0
  if type(floor_s) ~= "table" then return nil end
  -- summed in name order: pairs' order varies between Lua states (a per-state hash seed), and a sum's last bit with it
  -- (the same forecast's p10 differed in its last digit from run to run where it sat at the floor)
  local names = {}
  for name in pairs(r.family_s or {}) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local v = floor_s[name]
    if type(v) == "number" and v > 0 and v < math.huge then total = total + v end
  end
  return total > 0 and total or nil
end

--- The band of one forecast.
--- `r`: latency_s, family_s (seconds by family name, "other" for kernels no family prices), family_n (effective kernel
--- count by family), roofline (families the roofline priced for want of weights: no error data), gpu (the GPU's table), uncertainty (the error table; nil: the predictor has none),
--- uncertainty_source (its file name), trained_gpus (family → the GPU tables its weights for the GPU's vendor were
--- trained on: the range when the table is another vendor's).
--- Each draw picks, per family, one held-out GPU of the table (independently per family), then the mean of
--- min(family_n, max_draws) kernel errors from that GPU's distribution: the GPU's bias is shared by the family's
--- kernels, their own scatter averages out over the distinct kernels. On a GPU the family's weights were trained on
--- (trained_on) each draw is divided by e^bias (the folds' mean log bias): the spread stays, the centre is the
--- forecast's.
--- A family further from its training GPUs than the table's farthest fold (M.parts' widen > 1) has its draws'
--- log-deviations from their median scaled by its factor (m · (f / m)^w, m their median) before they are summed.
--- Families the fallback priced (r.roofline) with errors in efficiency.lua (`errors`, the fallback's spread where its
--- constants were fitted) are drawn from those: one draw per family and sample for all its kernels (fully correlated:
--- one constant prices them, its error moves them together), independent of the other families, and not narrowed by
--- the table's `spread` (fitted on the table's forecasts): the table's part takes the spread draw by draw, then the
--- fallback's draws are added. Without them (every NVIDIA forecast) the band is the table's alone, as before.
--- The quantiles are held to the whole roofline floor (Σ r.floor_s.<family>, floor_of) after the spread, the draws are
--- not (the file's header: why); the result's p10_drawn is the band's p10 without the floor (the calibration's slack
--- under the floor: scripts/neusight/calibration.lua floor_refusal), always there, so no caller gets the floored p10
--- in its place.
--- Returns { p10, p50, p90 (seconds), spread (the table's width factor), unmodelled_share (time neither drawn from the
--- table nor from the fallback's errors), fallback_share (the kernel time the roofline priced for want of weights),
--- fallback_families, fallback_covered (those drawn from the fallback's errors), unmeasured, out_of_distribution (boolean),
--- widened ({ { name, widen }, … }: the families whose draws were widened, M.parts' widen > 1, in name order),
--- borrowed_from (the table's vendor when it is not the GPU's: the band is that vendor's folds), warnings, source }
--- or nil and why there is no band.
---@param r table
function M.band(r)
  local p, why = M.parts(r)
  if not p then return nil, why end
  local fb_s = 0  -- the fallback's families with errors of their own: drawn apart, below
  for _, part in ipairs(p.fallback_parts) do fb_s = fb_s + part.s end
  local rest = p.total - fb_s  -- the time the table's draws scale (or leave as forecast: `other`)
  local ratios = {}
  for i = 1, M.samples do ratios[i] = p.other - fb_s end
  local widened, scratch = {}, nil
  for _, part in ipairs(p.parts) do
    local f = factors(memo(r.uncertainty).draws, part)
    -- on a GPU the family was trained on, the draws without the folds' mean bias (trained_on): centred on the forecast
    local s = part.trained and part.s * exp(-part.bias) or part.s
    if part.widen > 1 then  -- beyond the folds' distance (M.parts): the draws' log-deviations from their median x widen
      scratch = scratch or {}
      local m, w = median_of(f, scratch), part.widen
      for i = 1, M.samples do ratios[i] = ratios[i] + s * (m * (f[i] / m) ^ w) end  -- in place: no widened copy
      widened[#widened + 1] = { name = part.name, widen = part.widen }
    else
      for i = 1, M.samples do ratios[i] = ratios[i] + s * f[i] end
    end
  end
  if #p.fallback_parts == 0 or rest > 1e-9 * p.total then
    for i = 1, M.samples do ratios[i] = ratios[i] / rest end
  end
  local spread = p.spread
  local QS = { 0.10, 0.50, 0.90 }  -- the band's quantiles (M.samples draws each: quantiles_of)
  local median, q
  if #p.fallback_parts == 0 then
    local at = quantiles_of(ratios, QS)
    median = at(0.50)
    q = function(x) return median * (at(x) / median) ^ spread end
  else
    -- The table's part takes its width factor draw by draw (the same quantiles: a monotone map), the fallback's
    -- families their own draws unscaled (the spread was fitted on the table's forecasts, not the fallback's): one draw
    -- per family and sample, all its kernels moved together (one constant prices them all), independent between
    -- families; then the quantiles of the whole.
    local fb = fallback_errors()
    if rest > 1e-9 * p.total then  -- else all the kernel time is the fallback's
      local m = quantiles_of(table.move(ratios, 1, M.samples, 1, {}), { 0.50 })(0.50)
      for i = 1, M.samples do ratios[i] = rest * (m * (ratios[i] / m) ^ spread) end
    else
      for i = 1, M.samples do ratios[i] = 0 end
    end
    for _, part in ipairs(p.fallback_parts) do
      local f = factors(fb.draws, part, "fallback:")
      for i = 1, M.samples do ratios[i] = ratios[i] + part.s * f[i] end
    end
    for i = 1, M.samples do ratios[i] = ratios[i] / p.total end
    q = quantiles_of(ratios, QS)
    median = q(0.50)
  end
  local p50, drawn, floor = median, q, floor_of(r)
  if floor then
    -- the quantiles held to the forecast's whole floor (as a share of its kernel time: the ratio scales the latency),
    -- after the table's spread (`median` stays: the spread's closure above reads it)
    local at, least = q, floor / p.total
    q = function(x)
      local v = at(x)
      return v > least and v or least
    end
    p50 = median > least and median or least
  end
  local lat = r.latency_s
  local covered = {}
  for _, part in ipairs(p.fallback_parts) do covered[#covered + 1] = part.name end
  return {
    p10 = lat * q(0.10), p50 = lat * p50, p90 = lat * q(0.90),
    p10_drawn = lat * drawn(0.10),
    spread = spread,
    unmodelled_share = (p.other - fb_s) / p.total,
    fallback_covered = covered,
    fallback_share = p.fallback / p.total,
    fallback_families = p.fallback_families,
    unmeasured = p.unmeasured,
    out_of_distribution = p.out_of_distribution,
    untrained = p.untrained,
    range_beyond_for = p.range_beyond_for,
    widened = widened,
    borrowed_from = p.borrowed_from,
    warnings = p.warnings,
    source = p.source,
  }
end

--- What a band line says of a width factor (`spread`) other than 1, after `sep` ("width x0.62 by the table's spread"), or
--- "": predict's band line (M.figures) and serve's two.
---@param spread number?
---@param sep string
function M.spread_note(spread, sep)
  if not spread or spread == 1 then return "" end
  return fmt("%swidth x%.2f by the table's spread", sep, spread)
end

-- The training-range warnings (M.range_warnings), then `more` (the band's), in one new list.
local function with_range_warnings(r, more)
  local out = M.range_warnings(r)
  for _, w in ipairs(more or {}) do out[#out + 1] = w end
  return out
end

--- The band's warnings alone, as figures (no fields, no lines; M.parts draws nothing): the per-SM range ones
--- (M.range_warnings) and the out-of-distribution ones. What `neusight search` (engine/cli/search_cmd.cpp) tells once
--- of its layouts' forecasts without a band for each, and what ns.predict (engine/lua/session_predict.cpp) adds to a
--- Lua predictor's forecast.
---@param r table
function M.warnings(r)
  local p = M.parts(r)
  return { fields = {}, lines = {}, warnings = with_range_warnings(r, p and p.warnings) }
end

M.fallback_min = 0.005  -- the share of the kernel time priced by the fallback from which the band is marked

--- What the band says of the kernel time priced by the untrained fallback, or nil (below M.fallback_min of it):
--- families a GPU's vendor has no weights of, AMD's tensor-core and fused-attention kernels, priced by the roofline over
--- efficiency.lua's fractions, fitted on NVIDIA GPUs. No error of them on this GPU exists; their band is the fallback's
--- own spread where it was fitted (efficiency.lua `errors`, in sample, on NVIDIA: M.band), and a family without such
--- errors is not widened. Either way the band is marked: JSON `band_note`, this warning, and p10 / p90 cells marked `*`
--- in a comparison. `b`: M.band's result.
---@param b table
---@param gpu table
function M.fallback_note(b, gpu)
  if not (b.fallback_share >= M.fallback_min) then return nil end
  local covered, bare, is_covered = b.fallback_covered or {}, {}, {}
  for _, f in ipairs(covered) do is_covered[f] = true end
  for _, f in ipairs(b.fallback_families) do
    if not is_covered[f] then bare[#bare + 1] = f end
  end
  local how = {}
  if #covered > 0 then
    how[#how + 1] = fmt("the uncertainty band's width for %s is the fallback's own spread (measured / (roofline / "
      .. "efficiency) over the NVIDIA kernels scripts/neusight/efficiency.lua was fitted on, in sample; one draw moves "
      .. "all of a family's kernels together), not an error measured on %s GPUs", table.concat(covered, ", "),
      tostring(gpu.vendor))
  end
  if #bare > 0 then
    how[#how + 1] = fmt("the uncertainty band does not cover the error of %s (no error data of the fallback for it)",
      table.concat(bare, ", "))
  end
  return fmt("%.0f %% of the kernel time (%s) is priced by the untrained roofline fallback (no weights of these "
    .. "families for %s GPUs): %s (p10 / p90 marked * in a comparison)",
    100 * b.fallback_share, table.concat(b.fallback_families, ", "), tostring(gpu.vendor), table.concat(how, "; "))
end

--- The band as figures (neusight.figures merges them into every forecast's): latency_ms_p10 / p50 / p90 beside
--- latency_ms in JSON, p10 / p90 columns of a comparison, a table line, the per-SM range warnings (M.range_warnings)
--- and the out-of-distribution ones.
---@param r table
function M.figures(r)
  local b, why = M.band(r)
  local sig = require("neusight.figures").sig
  local ms = function(x) return b and x * 1e3 or nil end
  local uncovered = b and M.fallback_note(b, r.gpu)
  local mark = uncovered and "*" or ""
  local fields = {
    { key = "latency_ms_p10", value = ms(b and b.p10), top = true, column = "p10 ms", cell = sig(ms(b and b.p10)) .. mark },
    { key = "latency_ms_p50", value = ms(b and b.p50), top = true },
    { key = "latency_ms_p90", value = ms(b and b.p90), top = true, column = "p90 ms", cell = sig(ms(b and b.p90)) .. mark },
    { key = "out_of_distribution", value = b and b.out_of_distribution },
    { key = "band_unmodelled_share", value = b and b.unmodelled_share },
    { key = "band_spread", value = b and b.spread },
  }
  local widest, widened_for = 1, {}
  for _, w in ipairs(b and b.widened or {}) do
    widest = math.max(widest, w.widen)
    widened_for[#widened_for + 1] = fmt("%s x%.2f", w.name, w.widen)
  end
  if widest > 1 then  -- only then: a band no family of which is widened keeps its JSON
    fields[#fields + 1] = { key = "band_widened", value = widest }
    fields[#fields + 1] = { key = "band_widened_for", value = table.concat(widened_for, ", ") }
  end
  if b and b.untrained then  -- only then: a forecast of trained variants only keeps its JSON
    fields[#fields + 1] = { key = "untrained_share", value = b.untrained.share }
    fields[#fields + 1] = { key = "untrained_kernels", value = b.untrained.n }
    fields[#fields + 1] = { key = "untrained_for", value = b.untrained.text }
  end
  if b and b.range_beyond_for then  -- only then: a forecast within its families' training ranges keeps its JSON
    fields[#fields + 1] = { key = "beyond_training_range", value = b.range_beyond_for }
  end
  if b and b.borrowed_from then  -- only then: a band of the GPU's own vendor keeps its JSON
    fields[#fields + 1] = { key = "band_borrowed_from", value = b.borrowed_from }
  end
  local warnings = with_range_warnings(r, b and b.warnings)  -- the per-SM range ones with or without a band
  if uncovered then  -- only then: a forecast the band covers keeps its JSON
    fields[#fields + 1] = { key = "band_fallback_share", value = b.fallback_share }
    fields[#fields + 1] = { key = "band_note", value = uncovered }
    warnings[#warnings + 1] = uncovered
  end
  local lines = {}
  if b then
    local note = ""
    if b.unmodelled_share >= 0.005 then
      note = fmt("; %.0f %% of the kernel time (%s) has no error data and is not widened", 100 * b.unmodelled_share,
        #b.unmeasured > 0 and "copies, collectives, " .. table.concat(b.unmeasured, ", ") or "copies, collectives")
    end
    lines[1] = fmt("band p10-p90     %12s - %s ms (p50 %s ms; leave-one-GPU-out errors per kernel family, %s%s%s%s%s%s%s)",
      sig(ms(b.p10)), sig(ms(b.p90)), sig(ms(b.p50)), b.source,
      M.spread_note(b.spread, ", "),
      b.borrowed_from and fmt(", borrowed from %s GPUs: see warnings", b.borrowed_from) or "",
      #(b.fallback_covered or {}) > 0 and fmt("; the roofline fallback's own spread for %s (efficiency.lua errors): "
        .. "see warnings", table.concat(b.fallback_covered, ", ")) or "",
      b.out_of_distribution and "; out of distribution: see warnings" or "",
      widest > 1 and fmt("; widened up to x%.2f, further out than any fold: see warnings", widest) or "", note)
  else
    lines[1] = fmt("band p10-p90     %12s   (%s)", "-", why)
  end
  return { fields = fields, lines = lines, warnings = warnings }
end

return M
