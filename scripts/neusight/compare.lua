-- scripts/neusight/compare.lua — a comparison (predict with list-valued flags): one row per combination, built here
-- and rendered as a table, CSV, JSON and (M.page) neusight.html's page.
--
-- The engine (engine/cli/app.cpp run_compare, through engine/lua/session_report.cpp) makes the combinations and
-- forecasts each one; M.new starts the comparison `doc` with the list-valued flags (`inputs`: { key, column, integer }
-- each, in the rows' order) and the source (the workload script or "command line"), M.add makes a forecast's row and
-- M.add_error a row for a combination that could not be forecast. A row is an array of cells { key, column (the
-- table's header; "" for JSON and CSV only), value (nil when not available), cell (the table's text) }: the inputs,
-- the settings (M.settings_of: kernels, schedule, …; `setting` true), gpu_file, latency_ms and the figures, then
-- warnings — or the inputs, the settings (not known), gpu_file and error. So a column added to the figures (or to
-- neusight.report row) shows up in every rendering without a C++ change. The engine writes M.json's document, hands
-- M.table and M.csv the comparison as its JSON text reads back (text that is not UTF-8 shows U+FFFD there) and
-- neusight.html render_compare M.page's rows.
local report = require("neusight.report")
local zero = require("neusight.parallel.zero")
local csv_field, null = report.csv_field, report.null
local fmt, concat = string.format, table.concat
local ipairs, type, tonumber, tostring, tointeger, setmetatable = ipairs, type, tonumber, tostring, math.tointeger,
  setmetatable

local M = {}

-- A value as a CSV cell: numbers as report.number_csv writes them (exact, in the JSON's digits), nil empty, a list
-- (a row's warnings) its items joined by "; " in one cell.
local number_csv -- neusight.report's, found on first use (an older --scripts report.lua without it: a clear error)
local function value_csv(v)
  if type(v) == "number" then
    number_csv = number_csv or require("neusight").needs("neusight.report", "number_csv")
    return number_csv(v)
  end
  if type(v) == "boolean" then return v and "true" or "false" end
  if v == nil then return "" end
  if type(v) == "table" then return csv_field(concat(v, "; ")) end
  return csv_field(v)
end

-- A value as the table shows an input: "-" when not available, else its CSV text.
local function cell_of(v)
  if v == nil then return "-" end
  return value_csv(v)
end

--- A new comparison: `inputs` the list-valued flags ({ key, column, integer } each), `source` the rows' origin.
function M.new(inputs, source)
  return { inputs = inputs, source = source, rows = {} }
end

-- The settings that change a row's forecast besides the list-valued inputs, each row's as it ran (M.settings_of), in
-- the cells after the inputs: { key, column (the table's header when they differ between rows) }. Like an input, one
-- the rows share is said once above the table (on a line of its own: where it applies), one they differ in is a column.
local SETTINGS = {
  { key = "kernels", column = "kernels" }, { key = "schedule", column = "schedule" },
  { key = "virtual_stages", column = "vstages" }, { key = "sequence_parallel", column = "sp" },
  { key = "distributed_optimizer", column = "dist_opt" }, { key = "cluster", column = "cluster" },
  { key = "optimizer", column = "optimizer" }, { key = "optimizer_impl", column = "opt_impl" },
}
M.SETTINGS = SETTINGS

--- The settings of a forecast (`f` its report fields, neusight.report workload; `f.parallel.json` its plan's report) by
--- key, each nil where it does not apply: kernels always (a run without a plan builds the model's own graph, the HF
--- eager kernels: "eager"; a plan's kernels: "megatron" or "eager"); schedule where a plan has pp > 1 or microbatches;
--- virtual_stages where the schedule runs more than one model chunk per device; sequence_parallel where tp > 1;
--- distributed_optimizer in data-parallel training (dp > 1); cluster where a plan spans GPUs and a cluster file is
--- given; optimizer in training, optimizer_impl where it steps.
function M.settings_of(f)
  local par = type(f.parallel) == "table" and f.parallel.json or nil
  local out = { kernels = par and par.kernels or "eager" }
  local training = f.mode == "train"
  if par then
    local pp, mb, tp, dp = par.pp or 1, par.microbatches or 1, par.tp or 1, par.dp or 1
    if pp > 1 or mb > 1 then out.schedule = par.schedule end
    if (par.virtual_stages or 1) > 1 then out.virtual_stages = par.virtual_stages end
    if tp > 1 then out.sequence_parallel = par.sequence_parallel == true end
    -- where a ZeRO stage can shard (neusight.parallel.zero dp_gradients, the one test of it)
    if zero.dp_gradients({ training = training, dp = dp }) then
      out.distributed_optimizer = par.distributed_optimizer == true
    end
    local file = type(par.cluster) == "table" and par.cluster.file or nil
    if dp * tp * pp > 1 and type(file) == "string" and file ~= "" then out.cluster = file end
  end
  if training then
    out.optimizer = f.optimizer
    if f.optimizer ~= "none" and f.optimizer_impl ~= "" then out.optimizer_impl = f.optimizer_impl end
  end
  return out
end

--- The rows' label of each GPU of a --gpu list: `given` the items as given, `names` each one's GPU name (in order).
--- A GPU's label is its name; GPUs of different files that share a name (a copy of a GPU file with another bandwidth,
--- a what-if) read "NAME (as given)". The one rule for predict's comparisons (the engine, session::gpu_labels) and
--- serve --sweep (neusight.sweep): the list names each GPU file once (the engine's gpu_list_once).
function M.gpu_labels(given, names)
  local count, labels = {}, {}
  for _, name in ipairs(names) do count[name] = (count[name] or 0) + 1 end
  for i, q in ipairs(given) do
    local name = names[i]
    labels[i] = count[name] > 1 and fmt("%s (%s)", name, tostring(q)) or name
  end
  return labels
end

-- The GPU's file as messages show it (serve --sweep's rows and a single forecast have it too): JSON and CSV only.
local function gpu_file_cell(file)
  if file == "" then file = nil end
  return { key = "gpu_file", column = "", value = file, cell = file or "-" }
end

-- How the workload spells an input's value (neusight.workload spelling: "BF16", "bfloat16", "torch.bfloat16" → "bf16"
-- for dtype; nil for a value it has no name for and for an input spelled one way only). (A GPU list is the engine's
-- gpu_list_once: one file by two names.)
local spelling = require("neusight.workload").spelling

--- Why the items of the list-valued input `key` (`given`: its items as given, each text once) name one thing twice:
--- "--dtype: bf16 and BF16 name the same dtype (bf16): give each dtype once", as a GPU file named twice is refused;
--- nil when they do not. An item that resolves to nothing is the workload's checks to report (a misspelled dtype).
function M.repeated(key, given)
  local first = {}
  for _, item in ipairs(given) do
    local name = spelling(key, item)
    if name ~= nil then
      if first[name] ~= nil then
        return fmt("--%s: %s and %s name the same %s (%s): give each %s once", (key:gsub("_", "-")), first[name],
          tostring(item), key, name, key)
      end
      first[name] = tostring(item)
    end
  end
  return nil
end

--- The row of a forecast: its inputs as run (neusight.report row(fields, gpu)), gpu_file (the GPU's file, `gpu.file`),
--- latency_ms, the `figures` (the engine's array of { key, column, value, cell }) and the `warnings`, a list as a single
--- forecast's JSON has them (CSV joins them in one cell: value_csv). nil and why when a figure is named like a column
--- (it would overwrite that one in JSON and glue CSV cells).
function M.add(doc, fields, gpu, latency_ms, figures, warnings)
  local as_run = report.row(fields, gpu)
  local settings = M.settings_of(fields)
  local row = {}
  for i, input in ipairs(doc.inputs) do
    local v = as_run[input.key]
    row[i] = { key = input.key, column = input.column, value = v, cell = cell_of(v) }
  end
  for _, s in ipairs(SETTINGS) do
    local v = settings[s.key]
    row[#row + 1] = { key = s.key, column = s.column, value = v, cell = cell_of(v), setting = true }
  end
  row[#row + 1] = gpu_file_cell(gpu.file)
  row[#row + 1] = { key = "latency_ms", column = "latency ms", value = latency_ms, cell = fmt("%.3f", latency_ms) }
  for _, x in ipairs(figures) do
    for _, have in ipairs(row) do
      if have.key == x.key then
        return nil, fmt("figures: a figure named '%s' is already a column of the row", x.key)
      end
    end
    row[#row + 1] = { key = x.key, column = x.column, value = x.value, cell = x.cell }
  end
  local list = {}
  for i, w in ipairs(warnings) do list[i] = w end
  row[#row + 1] = { key = "warnings", column = "", value = list, cell = "", list = list }
  doc.rows[#doc.rows + 1] = row
  return row
end

--- The row of a combination that could not be forecast: its inputs as given (`given`: one text per input, "" for
--- none; integers read as such), gpu_file (`gpu_file`: the file of the GPU --gpu gave; nil or "" when none did) and the
--- error.
function M.add_error(doc, given, message, gpu_file)
  local row = {}
  for i, input in ipairs(doc.inputs) do
    local v = given[i]
    if v == "" then v = nil
    elseif input.integer then v = tointeger(tonumber(v)) or v end
    row[i] = { key = input.key, column = input.column, value = v, cell = cell_of(v) }
  end
  for _, s in ipairs(SETTINGS) do -- not known: the combination did not run
    row[#row + 1] = { key = s.key, column = s.column, value = nil, cell = "-", setting = true }
  end
  row[#row + 1] = gpu_file_cell(gpu_file)
  row[#row + 1] = { key = "error", column = "error", value = message, cell = message }
  doc.rows[#doc.rows + 1] = row
  return row
end

--- The comparison as the JSON document { rows = [ { key = value, … } in the cells' order, … ], warnings = [ … ] }
--- (nil → null; `warnings` the comparison's own, M.notes, only when there are any).
function M.json(doc)
  local rows = {}
  for i, row in ipairs(doc.rows) do
    local o, keys = {}, {}
    for k, c in ipairs(row) do
      keys[k] = c.key
      if c.value == nil then o[c.key] = null else o[c.key] = c.value end
    end
    rows[i] = setmetatable(o, { __order = keys })
  end
  local notes = M.notes(doc) -- the comparison's own warnings (rows that ran different kernels), when there are any
  if #notes == 0 then return setmetatable({ rows = rows }, { __order = { "rows" } }) end
  return setmetatable({ rows = rows, warnings = notes }, { __order = { "rows", "warnings" } })
end

-- A JSON value as read back from the document: null and numbers JSON has no text for (NaN, infinities) left out.
local function plain(v)
  if v ~= v or v == math.huge or v == -math.huge then return nil end
  return v
end

--- What the comparison's HTML page shows (the engine hands it to neusight.html render_compare): the JSON document's
--- rows as plain tables (null left out, as the JSON reads back), `inputs` the inputs' and settings' keys and, as the
--- table has them (M.columns), `varying` the keys of the inputs and settings that differ between rows, `fixed` the
--- other inputs' ({ key, row }: `row` the index from 0 of the first row with the value), `settings` the other
--- settings' said (likewise), `columns` the table's keys in its order (the varying inputs and settings, latency_ms
--- and the figures with a column) and `warnings` the comparison's own (M.notes).
function M.page(doc)
  local rows, inputs = {}, {}
  for i, row in ipairs(doc.rows) do
    local o = {}
    for _, c in ipairs(row) do o[c.key] = plain(c.value) end
    rows[i] = o
  end
  local varies, fixed_inputs, shown, model_row, fixed_settings, n = M.columns(doc)
  local head = model_row or doc.rows[1]
  for i = 1, n do inputs[i] = head and head[i].key or doc.inputs[i].key end
  local varying, fixed, settings, columns = {}, {}, {}, {}
  for i = 1, n do
    if varies[i] then varying[#varying + 1] = inputs[i] end
  end
  for k, f in ipairs(fixed_inputs) do fixed[k] = { key = f.key, row = f.row - 1 } end
  for k, f in ipairs(fixed_settings) do settings[k] = { key = f.key, row = f.row - 1 } end
  for k, i in ipairs(shown) do columns[k] = head[i].key end
  return { rows = rows, inputs = inputs, varying = varying, fixed = fixed, settings = settings, columns = columns,
    warnings = M.notes(doc) }
end

local function failed(row) return #row > 0 and row[#row].key == "error" end

--- The comparison as CSV: one line per row, the union of the rows' keys as columns (the successful rows' first,
--- then what error rows add); the comparison's own warnings (M.notes) join each forecast row's warnings.
function M.csv(doc)
  local keys, seen = {}, {}
  for _, errors in ipairs({ false, true }) do
    for _, row in ipairs(doc.rows) do
      if failed(row) == errors then
        for _, c in ipairs(row) do
          if not seen[c.key] then seen[c.key], keys[#keys + 1] = true, c.key end
        end
      end
    end
  end
  local out = { concat(keys, ","), "\n" }
  local notes = M.notes(doc) -- the comparison's own warnings: in each forecast row's warnings cell, after its own
  for _, row in ipairs(doc.rows) do
    for i, key in ipairs(keys) do
      if i > 1 then out[#out + 1] = "," end
      for _, c in ipairs(row) do
        if c.key == key then
          local v = c.value
          if key == "warnings" and type(v) == "table" and #notes > 0 then
            v = { table.unpack(v) }
            for _, note in ipairs(notes) do v[#v + 1] = note end
          end
          out[#out + 1] = value_csv(v)
        end
      end
    end
    out[#out + 1] = "\n"
  end
  return concat(out)
end

--- Which inputs differ between the rows and which are the same in all: `varies[i]` for the i-th input; `fixed`, one
--- { key, cell, row } per input every row has the same value of (`row` the first row that has it), in the inputs'
--- order. A value that is not available ("-") in a forecast row (a prefill row's context beside a decode row's) is a
--- value of its own: such an input varies. An error row's "-" is an input not given: it counts for nothing. The
--- settings (SETTINGS, the cells after the inputs) likewise, but a setting counts only in the rows it applies to ("-"
--- elsewhere: a schedule beside a one-GPU row): one value there is `settings`' ({ key, cell, row }; a false one, off,
--- is not said), two or more make it vary (a column, "-" where it does not apply). The one rule of the table (M.table)
--- and the page (M.page).
function M.columns(doc)
  local rows, n_in = doc.rows, #doc.inputs
  local varies, fixed, settings = {}, {}, {}
  local model_row  -- the first successful row: its cells give the columns
  for _, row in ipairs(rows) do
    if not failed(row) then model_row = row break end
  end
  local head = model_row or rows[1]
  local n = n_in -- the settings' cells follow the inputs' (M.add, M.add_error)
  while head and head[n + 1] and head[n + 1].setting do n = n + 1 end
  for i = 1, n do
    local setting = i > n_in
    local seen, known, first = {}, {}, nil
    for r, row in ipairs(rows) do
      local c = row[i]
      local text = c and c.cell
      if text == "-" and (setting or failed(row)) then text = nil end
      if text ~= nil and not known[text] then known[text], seen[#seen + 1] = true, text end
      if c and c.cell ~= "-" and not first then first = r end
    end
    varies[i] = #seen > 1
    if #seen == 1 and seen[1] ~= "-" then
      local key = head[i].key
      if not setting then fixed[#fixed + 1] = { key = key, cell = seen[1], row = first }
      elseif seen[1] ~= "false" then settings[#settings + 1] = { key = key, cell = seen[1], row = first } end
    end
  end
  -- the table's columns (indices into a row): the inputs and settings that vary, then latency and the figures with a
  -- column
  local shown = {}
  for i = 1, n do
    if varies[i] then shown[#shown + 1] = i end
  end
  if model_row then
    for i = n + 1, #model_row do
      if model_row[i].column ~= "" then shown[#shown + 1] = i end
    end
  end
  return varies, fixed, shown, model_row, settings, n
end

-- The words naming rows `of` (indices into `rows`, all successful) of a comparison whose table shows columns `shown`
-- (the first `n_in` cells of a row its inputs and settings; `errors` rows failed): "every row"; the rows of one value
-- of a shown input or setting, "gpu H100-SXM5-80GB"; else each row by its shown inputs and settings.
local function rows_namer(rows, shown, n_in, errors)
  local function label_of(r)
    local label = {}
    for _, i in ipairs(shown) do
      if i <= n_in then label[#label + 1] = rows[r][i].key .. " " .. rows[r][i].cell end
    end
    return concat(label, " ")
  end
  return function(of)
    if #of == #rows - errors then return "every row" end
    for _, i in ipairs(shown) do
      if i > n_in then break end
      local v, alike = rows[of[1]][i].cell, 0
      for _, row in ipairs(rows) do
        if not failed(row) and row[i].cell == v then alike = alike + 1 end
      end
      local all = alike == #of
      for _, r in ipairs(of) do all = all and rows[r][i].cell == v end
      if all then return rows[of[1]][i].key .. " " .. v end
    end
    local labels = {}
    for _, r in ipairs(of) do labels[#labels + 1] = label_of(r) end
    return concat(labels, "; ")
  end
end

--- The comparison's own warnings (not any one row's): rows that ran different kernels (the kernels setting: a
--- one-GPU row builds the HF eager graph, a parallel one Megatron-LM's fused kernels by default), whose latencies then
--- differ by their kernels as much as by what the inputs vary, once, naming the rows of each kernels; none when every
--- row ran the same.
function M.notes(doc)
  local _, _, shown, _, _, n_in = M.columns(doc)
  local rows, errors, k_at = doc.rows, 0, nil
  for _, row in ipairs(rows) do
    if failed(row) then errors = errors + 1 end
  end
  for i = 1, n_in do
    if rows[1] and rows[1][i].key == "kernels" then k_at = i end
  end
  if not k_at then return {} end
  local of, order = {}, {}
  for r, row in ipairs(rows) do
    local v = not failed(row) and row[k_at].value or nil
    if v ~= nil then
      if not of[v] then of[v], order[#order + 1] = {}, v end
      of[v][#of[v] + 1] = r
    end
  end
  if #order < 2 then return {} end
  local rows_of, parts = rows_namer(rows, shown, n_in, errors), {}
  for _, v in ipairs(order) do parts[#parts + 1] = fmt("%s in %s", v, rows_of(of[v])) end
  return { fmt("the rows ran different kernels, %s (a one-GPU run without microbatches or recomputation builds the "
    .. "model's own graph, the HF eager kernels; parallel runs Megatron-LM's fused kernels): their latencies differ by "
    .. "their kernels too, not only by what the rows vary; give --kernels megatron (or --kernels eager) to compare every "
    .. "row with the same kernels", concat(parts, ", ")) }
end

--- The comparison as a table: the inputs that differ between rows are columns, the others are said once above it
--- (M.columns); then latency and the figures with a column; an error row ends in its error.
function M.table(doc)
  local rows = doc.rows
  local _, fixed_inputs, shown, model_row, fixed_settings, n_in = M.columns(doc)
  local fixed, settings = {}, {}
  for k, f in ipairs(fixed_inputs) do fixed[k] = f.key .. " " .. f.cell end
  for k, f in ipairs(fixed_settings) do settings[k] = f.key .. " " .. f.cell end
  local head = model_row or rows[1]
  local width = {}
  for k, i in ipairs(shown) do
    width[k] = #head[i].column
    for _, row in ipairs(rows) do
      if i <= #row and (i <= n_in or not failed(row)) then width[k] = math.max(width[k], #row[i].cell) end
    end
  end
  local function left(c) return type(c.value) == "string" or type(c.value) == "boolean" end
  local function pad(text, w, l)
    local fill = (" "):rep(math.max(w - #text, 0))
    return l and text .. fill or fill .. text
  end
  local errors = 0
  for _, row in ipairs(rows) do
    if failed(row) then errors = errors + 1 end
  end
  local out = { fmt("compare   %d combination(s) from %s%s\n", #rows, doc.source,
    errors > 0 and fmt(", %d could not be forecast", errors) or "") }
  if #fixed > 0 then out[#out + 1] = "fixed     " .. concat(fixed, ", ") .. "\n" end
  if #settings > 0 then out[#out + 1] = "settings  " .. concat(settings, ", ") .. " (where they apply)\n" end
  local rows_of = rows_namer(rows, shown, n_in, errors)
  -- the calibration files the rows' forecasts applied (a row's JSON/CSV `calibration`), each with its rows, as a
  -- single forecast's "calibrated" line says it (the audit of issue 16: only the JSON said so)
  local calibrated, files = {}, {}
  for r, row in ipairs(rows) do
    for _, c in ipairs(failed(row) and {} or row) do
      if c.key == "calibration" and c.value ~= nil then
        if not calibrated[c.value] then calibrated[c.value], files[#files + 1] = {}, c.value end
        local of = calibrated[c.value]
        of[#of + 1] = r
      end
    end
  end
  for _, file in ipairs(files) do
    out[#out + 1] = fmt("calibrated %s by %s (--no-calibration ignores it)\n", rows_of(calibrated[file]), file)
  end
  out[#out + 1] = "\n"
  local line = {}
  for k, i in ipairs(shown) do line[k] = pad(head[i].column, width[k], left(head[i])) end
  out[#out + 1] = concat(line, "  ") .. "\n"
  for _, row in ipairs(rows) do
    line = {}
    for k, i in ipairs(shown) do
      if i > n_in and failed(row) then break end
      line[k] = pad(row[i].cell, width[k], left(head[i]))
    end
    if failed(row) then line[#line + 1] = "error: " .. row[#row].cell end
    out[#out + 1] = (concat(line, "  "):gsub(" +$", "")) .. "\n"
  end
  -- each row's warnings, said once each with the rows they are of (every row; the rows of one value of a varying
  -- input, "gpu H100-SXM5-80GB"; else each row by its varying inputs), as a single forecast says its own: a
  -- calibration that makes a row faster than the GPU can be, a run that does not fit, …
  local said, order = {}, {}
  for _, note in ipairs(M.notes(doc)) do -- the comparison's own, first: rows that ran different kernels
    said[note], order[#order + 1] = "comparison", note
  end
  for r, row in ipairs(rows) do
    local list = not failed(row) and row[#row].key == "warnings" and row[#row].list or {}
    for _, w in ipairs(list) do
      if not said[w] then said[w], order[#order + 1] = {}, w end
      local of = said[w]
      of[#of + 1] = r
    end
  end
  if #order > 0 then
    out[#out + 1] = "\n"
    for _, w in ipairs(order) do
      out[#out + 1] = fmt("warning   %s: %s\n", said[w] == "comparison" and said[w] or rows_of(said[w]), w)
    end
  end
  out[#out + 1] = "\nlatency: one iteration (train), forward pass (inference, prefill) or step (decode), the slowest device "
    .. "of a parallel run; MFU = model FLOPs (the graph's forward + backward) / GPUs / latency / the dtype's dense peak; "
    .. "memory per GPU; $ from price_per_hour_usd in the GPU file (- without one). --format json|csv has every figure "
    .. "and the warnings.\n"
  return concat(out)
end

return M
