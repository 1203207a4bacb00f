-- scripts/neusight/search.lua — what `neusight search` (engine/cli/search_cmd.cpp) needs to know about a model before
-- it enumerates layouts: the expert count (the expert-parallel degrees ep worth trying divide it) and the layer count
-- (the interleaved schedule wants layers divisible by pp × virtual_stages, as Megatron-LM does); and which schedules
-- and recomputation modes it may try (neusight.parallel's names: search lists none of its own), which of them share a
-- build (SHARED_BUILD) and which run model chunks (neusight.parallel.config's CHUNKED; their pp and layer rules:
-- pipeline_skip below). engine/cli/search_cmd.cpp names no schedule. And how the ranking reads: format_table,
-- format_json and format_csv render the document search_cmd.cpp hands over once (a column or field added here shows
-- without a C++ change).
local ipairs, pairs, type, setmetatable, getmetatable = ipairs, pairs, type, setmetatable, getmetatable

local M = {}

--- The schedules whose variants (the same ep, the schedule's default virtual stages) share one model build in search:
--- each device runs one model chunk under them, so the graph, its kernels and their times do not depend on which
--- (only the timeline does), and search re-times one build with the plan's schedule changed. Interleaved builds its
--- own (its model chunks); a schedule a --scripts override registers builds its own unless it is added here.
M.SHARED_BUILD = { gpipe = true, ["1f1b"] = true }

-- The schedules that run several model chunks per device (virtual stages), neusight.parallel.config's CHUNKED (name →
-- default chunks): search tries --virtual-stages with them only, and shows their rows as schedule/v.
-- An older --scripts config.lua (before CHUNKED) ran interleaved alone with chunks, 2 by default.
local function chunked() return require("neusight.parallel.config").CHUNKED or { interleaved = 2 } end

--- search's --schedule and --recompute checked against neusight.parallel's names, with normalize's messages
--- (did-you-mean included): each of `schedules` a schedule of the registry (neusight.parallel.schedule: a --scripts
--- override may add one), `recompute` "auto", "all" or one of neusight.parallel.config's CHOICES.recompute. Returns
--- { schedules = the names given (the default schedule when none), shared_build = for each of them whether it is one
--- of M.SHARED_BUILD, virtual_stages = for each whether it is one of chunked(), virtual_schedules = the names
--- of chunked() (sorted; for search's legend), virtual_stages_refusal = what search says of --virtual-stages when
--- none of the schedules runs model chunks (nil when one does), recompute = the modes, least recomputation first }.
---@param schedules string[]
---@param recompute string
function M.choices(schedules, recompute, zero)
  local config = require "neusight.parallel.config"
  local out = { schedules = {}, shared_build = {}, virtual_stages = {}, virtual_schedules = {}, recompute = {} }
  for i, s in ipairs(schedules) do out.schedules[i] = config.check_schedule(s, "search: --schedule") end
  if #out.schedules == 0 then out.schedules[1] = config.check_schedule(config.DEFAULT_SCHEDULE, "search: default schedule") end
  local chunks = chunked()
  for i, s in ipairs(out.schedules) do
    out.shared_build[i], out.virtual_stages[i] = M.SHARED_BUILD[s] == true, chunks[s] ~= nil
  end
  for s in pairs(chunks) do out.virtual_schedules[#out.virtual_schedules + 1] = s end
  table.sort(out.virtual_schedules)
  local any = false
  for _, v in ipairs(out.virtual_stages) do any = any or v end
  if not any then
    local v = out.virtual_schedules
    out.virtual_stages_refusal = #v == 0
      and "search: --virtual-stages: no schedule runs model chunks (scripts/neusight/parallel/config.lua CHUNKED names none)"
      or ("search: --virtual-stages applies to the %s schedule%s only (add %s to --schedule)")
        :format(table.concat(v, ", "), #v > 1 and "s" or "", #v > 1 and "one" or "it")
  end
  if #config.CHOICES.recompute == 0 then
    error("neusight.parallel.config: CHOICES.recompute is empty: search has no recomputation mode to try", 0)
  end
  local accepted = { "auto", "all" }
  for i, mode in ipairs(config.CHOICES.recompute) do
    out.recompute[i] = mode
    accepted[#accepted + 1] = mode
  end
  config.one_of(recompute, accepted, "search: --recompute")
  out.zero = M.zero_stages(zero)
  return out
end

--- search's --zero (`zero`: "" or nil not given, "all", or stages "0,3"): the ZeRO stages (neusight.parallel.zero)
--- each layout is forecast under, in order, or {} when not given (the layouts run the workload's own, DDP, or the
--- distributed optimizer's with --distributed-optimizer). "all": 0, 1, 2 and 3.
---@return integer[]
function M.zero_stages(zero)
  if zero == nil or zero == "" then return {} end
  if zero == "all" then return { 0, 1, 2, 3 } end
  local out, seen = {}, {}
  for item in (zero .. ","):gmatch("([^,]*),") do
    local z = math.tointeger(tonumber(item))
    if not z or z < 0 or z > 3 or not item:match("^%d$") then
      error(("search: --zero: 0, 1, 2, 3 (ZeRO stages, a comma-separated list) or all expected, got %q"):format(item), 0)
    end
    if not seen[z] then out[#out + 1], seen[z] = z, true end
  end
  return out
end

--- Why search skips a layout under ZeRO stage `zero`, or nil: neusight.parallel.config zero_refusal's reason (stages 2
--- and 3 with a pipeline, 3 with expert parallelism), the one rule predict refuses them by.
---@return string?
function M.zero_skip(zero, pp, ep) return require("neusight.parallel.config").zero_refusal(zero, pp, ep) end

--- search's no-fit hint for ZeRO stage `stage`: the flag (M.zero_flag), what the stage shards (neusight.parallel.zero
--- roles) and the layouts it runs with (those neusight.parallel.config zero_refusal lets through), as one line: the
--- words of search_cmd.cpp's no-fit help and of predict's no-fit warning (neusight.parallel.memory report) for every
--- stage. `one_layout` true: predict's hint for its one layout (which names only a stage that layout runs with):
--- "needs pp 1, which this layout has" rather than search's "pp 1 layouts only".
---@param one_layout? boolean
---@return string
function M.zero_help(stage, one_layout)
  local sharded = require("neusight.parallel.zero").roles(stage)
  local roles = {}
  for _, r in ipairs({ { "weights", "parameters" }, { "gradients", "gradients" }, { "optimizer", "optimizer state" } }) do
    if sharded[r[1]] then roles[#roles + 1] = r[2] end
  end
  local what = #roles > 1 and table.concat(roles, ", ", 1, #roles - 1) .. " and " .. roles[#roles] or roles[1] or "nothing"
  local refusal, only = require("neusight.parallel.config").zero_refusal, {}
  if refusal(stage, 2, 1) then only[#only + 1] = "pp 1" end
  if refusal(stage, 1, 2) then only[#only + 1] = "ep 1" end
  local runs = ""
  if #only > 0 then
    runs = one_layout and "; needs " .. table.concat(only, " and ") .. ", which this layout has"
      or "; " .. table.concat(only, ", ") .. " layouts only"
  end
  return ("%s (shards the %s over the data-parallel ranks%s)"):format(M.zero_flag(stage), what, runs)
end

--- The flag that asks for ZeRO stage `stage`: --distributed-optimizer for 1 (Megatron's name of it), else --zero N.
---@return string
function M.zero_flag(stage) return stage == 1 and "--distributed-optimizer" or ("--zero %d"):format(stage) end

--- Layers as neusight.parallel's stage partition counts them (parallel.layer_count).
M.layers = function(nodes) return require("neusight.parallel").layer_count(nodes) end

--- Why search skips a pipeline variant before forecasting it, or nil: a schedule with model chunks (chunked())
--- needs what neusight.parallel.config chunks_refusal says (pp >= 2, at least 2 chunks) and, as Megatron-LM requires,
--- the model's `layers` divisible by pp × virtual_stages (neusight.parallel.config layers_refusal; `virtual_stages` 0:
--- the schedule's default, neusight.parallel.config CHUNKED; `layers` 0: unknown, not checked). Other schedules are never skipped here; the
--- forecasts themselves refuse what cannot run (neusight.parallel).
---@return string?
function M.pipeline_skip(layers, pp, schedule, virtual_stages)
  local config = require "neusight.parallel.config"
  local default = config.chunks_of and config.chunks_of(schedule) or chunked()[schedule]
  if not default then return nil end
  local v = virtual_stages > 0 and virtual_stages or default
  if config.chunks_refusal then
    local field, why = config.chunks_refusal(schedule, pp, v) -- the reason alone: a skip names no parallel field
    -- (a --scripts config.lua older than the field and reason apart returns "parallel.<field>: <reason>" alone)
    if field and not why then why = tostring(field):gsub("^parallel%.[%w_]+: ", "") end
    if why then return why end
  end
  -- the layers' rule is neusight.parallel.config's (predict warns with it); a --scripts config.lua older than it would
  -- rank layouts Megatron-LM cannot run: neusight.needs' error naming that file and the bundled one
  return require("neusight").needs("neusight.parallel.config", "layers_refusal")(schedule, layers, pp, v)
end

--- { experts = E (1: a dense model, or a model function, whose experts cannot be known), layers = L } of a normalized
--- workload (neusight.workload normalize), from its model built without a parallel plan at batch 1.
---@param w table
function M.model_facts(w)
  local workload = require("neusight.workload")
  local probe = {}
  for k, v in pairs(w) do probe[k] = v end
  probe.parallel, probe.batch, probe.mode, probe.optimizer = nil, 1, "inference", nil
  local _, nodes = workload.graph(probe)
  local experts = 1
  local cfg, builder = workload.model_builder(w.model) -- a function model: nil, nil
  if builder and builder.expert_parallel and builder.num_experts then experts = builder.num_experts(cfg) end
  return { experts = experts, layers = M.layers(nodes) }
end

--- What search's JSON (engine/cli/search_cmd.cpp) says of the workloads it forecast beside the layouts, from their
--- report fields (neusight.report workload's table `f`: the last layout loaded; these are the same in every layout),
--- under predict's keys: the optimizer and its implementation as normalize resolved them ("" without one), and for a
--- mixture of experts how its routed experts ran (`experts`: "loop" or "grouped", --experts; absent for dense models,
--- as in predict's JSON).
---@param f table
---@return table
function M.json_fields(f)
  local t, order = { optimizer = f.optimizer, optimizer_impl = f.optimizer_impl }, { "optimizer", "optimizer_impl" }
  if type(f.experts) == "string" and f.experts ~= "" then t.experts, order[3] = f.experts, "experts" end
  return setmetatable(t, { __order = order })
end

-- The ranking's document (engine/cli/search_cmd.cpp hands it over once, whole): model, gpu, gpu_mem_gb, gpus, batch,
-- seq, mode, dtype, precision, sequence_parallel, distributed_optimizer, cluster (null without a parallel plan),
-- predictor, calibration (the calibration file applied, or nil), evaluated (forecasts), fitting (layouts that fit),
-- choices (M.choices' table: the schedules tried), expert_parallel (rows say their ep), optimizer_step (a forecast has
-- one), layouts (the layouts shown, best first: dp, tp, pp, ep, microbatches, schedule, virtual_stages, recompute,
-- iteration_ms, compute_ms, exposed_comm_ms, bubble_ms, optimizer_ms, imbalance_ms, memory_gb, fits, and figures, an
-- array of { key, value, column, cell }: neusight.figures search_figures'), skipped (an array of { reason, layouts }),
-- warnings, figure_lines (the table's words on the figures' columns) and error (no layout fits: the JSON's only).
-- A JSON null in it is a table whose metatable has __json = "null".

local function is_null(v)
  local mt = type(v) == "table" and getmetatable(v)
  return mt and mt.__json == "null" or false
end

-- An object written in the order its fields are put (a field put again keeps its place); nil is written as null.
local function ordered_object()
  local keys, t = {}, {}
  local function put(k, v)
    if t[k] == nil then keys[#keys + 1] = k end
    t[k] = v == nil and require("neusight.report").null or v
  end
  return put, function() return setmetatable(t, { __order = keys }) end, keys, t
end

-- What the table, the JSON and the CSV show of the document: ep and schedule columns, the optimizer column.
local function shown(doc)
  local ch = doc.choices
  local chunks, any = {}, false -- schedule -> runs model chunks (its rows say schedule/v)
  for i, s in ipairs(ch.schedules) do
    if type(ch.virtual_stages) == "table" and ch.virtual_stages[i] == true then chunks[s], any = true, true end
  end
  local unfit = false -- a layout shown does not fit (--all): its rows say why (M.no_fit)
  for _, c in ipairs(doc.layouts or {}) do unfit = unfit or c.fits == false end
  return { ep = doc.expert_parallel == true, schedule = #ch.schedules > 1 or any, optimizer = doc.optimizer_step == true,
           chunks = chunks, zero = type(ch.zero) == "table" and #ch.zero > 0, no_fit = unfit }
end

--- Why layout `c` of the document does not fit, as one line, or nil where it fits: the GB per GPU it needs against the
--- capacity it was held to (neusight.memory capacity_gb_text, as search's no-fit error words it) and the flag that
--- would make it fit (the layout's zero_fits: neusight.parallel.memory report; M.zero_flag). search --all's JSON and
--- CSV rows carry it (field no_fit) when a layout shown does not fit.
---@return string?
function M.no_fit(doc, c)
  if c.fits ~= false then return nil end
  local cap = require("neusight.memory").capacity_gb_text(doc.gpu_mem_gb,
    type(doc.gpu_mem_reported_gib) == "number" and doc.gpu_mem_reported_gib or nil)
  -- zero_fits 1: the distributed optimizer (neusight.parallel.memory report asks it first)
  local help = type(c.zero_fits) == "number" and c.zero_fits > 0 and "; " .. M.zero_flag(c.zero_fits)
    .. " would make it fit" or ""
  return ("needs %.1f GB per GPU, more than the %s GB of %s%s"):format(c.memory_gb, cap, tostring(doc.gpu), help)
end

--- One layout `c` of the document as the JSON's `layouts` and the CSV's rows give it: its fields' names in order and
--- their values (a figure not available: null); `no_fit` (M.no_fit, null where it fits) after `fits` where a layout
--- shown does not fit (search --all).
---@return string[] keys, table values
function M.layout_fields(doc, c, show)
  show = show or shown(doc)
  local put, _, keys, t = ordered_object()
  put("dp", c.dp) put("tp", c.tp) put("pp", c.pp)
  if show.ep then put("ep", c.ep) end
  put("microbatches", c.microbatches)
  if show.schedule then put("schedule", c.schedule) put("virtual_stages", c.virtual_stages) end
  if show.zero then put("zero", c.zero) end
  put("recompute", c.recompute) put("iteration_ms", c.iteration_ms) put("compute_ms", c.compute_ms)
  put("exposed_comm_ms", c.exposed_comm_ms) put("bubble_ms", c.bubble_ms)
  if show.optimizer then put("optimizer_ms", c.optimizer_ms) end
  put("imbalance_ms", c.imbalance_ms) put("memory_gb", c.memory_gb) put("fits", c.fits)
  if show.no_fit then put("no_fit", M.no_fit(doc, c)) end
  for _, x in ipairs(c.figures or {}) do put(x.key, x.value) end -- tokens_per_s, mfu, cost_…_usd
  return keys, t
end

local function skipped_total(doc)
  local n = 0
  for _, s in ipairs(doc.skipped) do n = n + s[2] end
  return n
end

--- search's JSON: the workload it searched (with M.json_fields of `fields`, the report fields of the last layout
--- loaded, under predict's keys), the parallel flags and cluster, the counts, the layouts shown (M.layout_fields),
--- the reasons layouts were skipped, the warnings, and `error` when no layout fits.
---@param doc table the ranking's document (above)
---@param fields table? neusight.report workload's table
---@return table
function M.format_json(doc, fields)
  local show = shown(doc)
  local put, done = ordered_object()
  for _, k in ipairs { "model", "gpu", "gpus", "batch", "seq", "mode", "dtype", "precision" } do put(k, doc[k]) end
  if fields then
    local f = M.json_fields(fields)
    for _, k in ipairs(require("neusight.report").keys_in_order(f)) do put(k, f[k]) end
  end
  local parallel, par = ordered_object()
  parallel("sequence_parallel", doc.sequence_parallel)
  parallel("distributed_optimizer", doc.distributed_optimizer)
  parallel("cluster", doc.cluster)
  put("parallel", par())
  put("predictor", doc.predictor)
  if doc.calibration then put("calibration", doc.calibration) end
  put("evaluated", doc.evaluated)
  put("fitting", doc.fitting)
  local layouts = {}
  for i, c in ipairs(doc.layouts) do
    local keys, t = M.layout_fields(doc, c, show)
    layouts[i] = setmetatable(t, { __order = keys })
  end
  put("layouts", layouts)
  if show.ep or show.schedule then put("skipped_layouts", skipped_total(doc)) end
  local skip, skipped = ordered_object()
  for _, s in ipairs(doc.skipped) do skip(s[1], s[2]) end
  put("skipped", skipped())
  put("warnings", doc.warnings)
  if doc.error then put("error", doc.error) end
  return done()
end

--- search's CSV: the JSON's layouts (M.layout_fields), one row each, the columns a row's fields (the first layout's;
--- without one, the fields any layout has). Numbers as every CSV writes them (neusight.report number_csv: exact, in the
--- JSON's digits), booleans true/false, null empty, names as neusight.report csv_field quotes them.
---@param doc table the ranking's document (above)
---@return string
function M.format_csv(doc)
  local needs = require("neusight").needs
  local number_csv, csv_field = needs("neusight.report", "number_csv"), needs("neusight.report", "csv_field")
  local function cell(v)
    if type(v) == "number" then return number_csv(v) end
    if type(v) == "boolean" then return v and "true" or "false" end
    if v == nil or is_null(v) then return "" end
    return csv_field(v)
  end
  local show = shown(doc)
  local columns = M.layout_fields(doc, doc.layouts[1] or {}, show)
  local out = { table.concat(columns, ",") }
  for _, c in ipairs(doc.layouts) do
    local _, row = M.layout_fields(doc, c, show)
    local cells = {}
    for i, k in ipairs(columns) do cells[i] = cell(row[k]) end
    out[#out + 1] = table.concat(cells, ",")
  end
  return table.concat(out, "\n") .. "\n"
end

-- `s` padded with blanks to `width` characters (right-aligned, or left-aligned with `left`), counting UTF-8 characters
-- as the table always counted them (bytes where `s` is not UTF-8).
local function pad(s, width, left)
  local n = utf8.len(s) or #s
  local blanks = string.rep(" ", width - n)
  return left and s .. blanks or blanks .. s
end

--- search's table: the search in a line, one row per layout shown (rank, dp, tp, pp, ep and schedule where shown,
--- microbatches, recomputation in training, iteration, the figures' columns, compute, exposed communication, bubble,
--- optimizer and imbalance where there are any, memory), the reasons layouts were skipped, and the columns' legend.
---@param doc table the ranking's document (above)
---@return string
function M.format_table(doc)
  local fmt, concat = string.format, table.concat
  local show = shown(doc)
  local layouts, training = doc.layouts, doc.mode == "train"
  -- the ZeRO column only in training: outside it no layout shards anything (the stage asked sat beside the warning
  -- that --zero has no effect); JSON/CSV keep the field, the stage as asked
  show.zero = show.zero and training
  local out = {}
  local function add(s) out[#out + 1] = s end
  local skips = skipped_total(doc)
  add(fmt("search    %s on %d x %s (%.0f GB), %s, %s %s, global batch %d, seq %d: %d forecasts%s\n", doc.model, doc.gpus,
    doc.gpu, doc.gpu_mem_gb, doc.mode, doc.dtype, doc.precision, doc.batch, doc.seq, doc.evaluated,
    (show.ep or show.schedule) and skips > 0 and fmt(", %d layouts skipped", skips) or ""))
  if doc.calibration then
    add(fmt("calibrated: kernel times corrected by %s (--no-calibration ignores it)\n", doc.calibration))
  end
  add("\n")
  -- the recomputation column only in training (an inference layout recomputes nothing: JSON/CSV keep the field)
  local function recompute_cell(v) return training and pad(v, 10, true) .. " " or "" end
  -- the figures' columns (those with one: tokens/s, MFU %, $/Mtoken), each as wide as its header and cells
  local columns = {}
  local first = layouts[1] and layouts[1].figures or {}
  for k, x in ipairs(first) do
    if x.column ~= "" then
      local width = #x.column
      for _, c in ipairs(layouts) do
        if c.figures[k] then width = math.max(width, #c.figures[k].cell) end
      end
      columns[#columns + 1] = { k, width }
    end
  end
  local function figure_cells(c) -- nil: the headers
    local cells = {}
    for _, col in ipairs(columns) do
      local k, width = col[1], col[2]
      local x = (c or layouts[1]).figures[k]
      cells[#cells + 1] = pad(x == nil and "-" or c and x.cell or x.column, width) .. " "
    end
    return concat(cells)
  end
  -- the imbalance column where a layout shown has one the table's 0.1 ms shows (uneven pipeline stages)
  local imbalance = false
  for _, c in ipairs(layouts) do imbalance = imbalance or c.imbalance_ms >= 0.05 end
  add(fmt("%4s %4s %4s %4s %s%4s %s%s%s%13s %s%11s %12s %10s %s%s%10s\n", "rank", "dp", "tp", "pp",
    show.ep and fmt("%4s ", "ep") or "", "mb", show.schedule and pad("schedule", 14, true) .. " " or "",
    show.zero and fmt("%4s ", "zero") or "", recompute_cell("recompute"), "iteration ms", figure_cells(nil), "compute ms", "exposed comm", "bubble ms",
    show.optimizer and fmt("%12s ", "optimizer ms") or "", imbalance and fmt("%12s ", "imbalance ms") or "",
    "memory GB"))
  for i, c in ipairs(layouts) do
    local schedule = show.chunks[c.schedule] and fmt("%s/%d", c.schedule, c.virtual_stages) or c.schedule
    add(fmt("%4d %4d %4d %4d %s%4d %s%s%s%13.1f %s%11.1f %12.1f %10.1f %s%s%10.1f%s\n", i, c.dp, c.tp, c.pp,
      show.ep and fmt("%4d ", c.ep) or "", c.microbatches, show.schedule and pad(schedule, 14, true) .. " " or "",
      show.zero and fmt("%4d ", c.zero) or "", recompute_cell(c.recompute), c.iteration_ms, figure_cells(c), c.compute_ms, c.exposed_comm_ms, c.bubble_ms,
      show.optimizer and fmt("%12.1f ", c.optimizer_ms) or "", imbalance and fmt("%12.1f ", c.imbalance_ms) or "",
      c.memory_gb, c.fits and "" or "  (does not fit)"))
  end
  if #layouts == 0 then add("  no layout fits in memory (--all lists them anyway)\n") end
  if #doc.skipped > 0 then
    add("\nskipped\n")
    for _, s in ipairs(doc.skipped) do add(fmt("  %d layout(s): %s\n", s[2], s[1])) end
  end
  if show.ep then add("\nep = expert-parallel degree (the experts spread over ep of the dp ranks)") end
  if show.zero then
    add("\nzero = ZeRO stage over the dp ranks: 0 none (DDP), 1 optimizer state (distributed optimizer), 2 + gradients, "
      .. "3 + parameters (FSDP full sharding)")
  end
  if show.schedule then
    local v = doc.choices.virtual_schedules or {}
    add(fmt("\nschedule = pipeline schedule%s", #v == 0 and "" or fmt(" (%s/v: v model chunks per device)",
      concat(v, "/v, "))))
  end
  add("\nmb = microbatches per iteration; compute, exposed comm, bubble and optimizer are the busiest device's (the "
    .. "pipeline stage with the least idle time; its bubble is the iteration less the other three)"
    .. (imbalance and "; imbalance = its busy time less the least busy stage's (uneven stages, not the schedule's fill "
      .. "and drain)" or "")
    .. " (neusight predict --dp/--tp/--pp/--microbatches/--recompute shows one layout in full)\n")
  for _, line in ipairs(doc.figure_lines) do add(line .. "\n") end
  return concat(out)
end

return M
