-- scripts/neusight/compare.lua — a comparison (predict with list-valued flags) laid out as a table and CSV: one row
-- per combination.
--
-- The engine hands over `doc` (engine/cli/report.cpp compare_doc, through session::render): source (the workload
-- script or "command line"), inputs (how many leading cells of every row are its inputs: model … recompute) and rows,
-- each an array of cells { key, column (the table's header; "" for JSON and CSV only), value (nil when not
-- available), cell (the table's text) }: the inputs, latency_ms and the figures, then warnings — or the inputs and
-- error. Its JSON is the rows' key → value objects, written by the engine.
local csv_field = require("neusight.report").csv_field
local fmt, concat = string.format, table.concat
local ipairs, type = ipairs, type

local M = {}

-- A value as a CSV cell: integers as such, other numbers exactly (%.17g), nil empty.
local function value_csv(v)
  if math.type(v) == "integer" then return fmt("%d", v) end
  if type(v) == "number" then return fmt("%.17g", v) end
  if type(v) == "boolean" then return v and "true" or "false" end
  if v == nil then return "" end
  return csv_field(v)
end

local function failed(row) return #row > 0 and row[#row].key == "error" end

--- The comparison as CSV: one line per row, the union of the rows' keys as columns (the successful rows' first,
--- then what error rows add).
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
  for _, row in ipairs(doc.rows) do
    for i, key in ipairs(keys) do
      if i > 1 then out[#out + 1] = "," end
      for _, c in ipairs(row) do
        if c.key == key then out[#out + 1] = value_csv(c.value) end
      end
    end
    out[#out + 1] = "\n"
  end
  return concat(out)
end

--- The comparison as a table: the inputs that differ between rows are columns, the others are said once above it;
--- then latency and the figures with a column; an error row ends in its error.
function M.table(doc)
  local rows, n_in = doc.rows, doc.inputs
  local varies, fixed = {}, {}
  for i = 1, n_in do
    local seen, known = {}, {}
    for _, row in ipairs(rows) do
      local c = row[i]
      if c and c.cell ~= "-" and not known[c.cell] then known[c.cell], seen[#seen + 1] = true, c.cell end
    end
    varies[i] = #seen > 1
    if #seen == 1 and #rows > 0 then fixed[#fixed + 1] = rows[1][i].key .. " " .. seen[1] end
  end
  local model_row  -- the first successful row: its cells give the columns
  for _, row in ipairs(rows) do
    if not failed(row) then model_row = row break end
  end
  local shown = {}
  for i = 1, n_in do
    if varies[i] then shown[#shown + 1] = i end
  end
  if model_row then
    for i = n_in + 1, #model_row do
      if model_row[i].column ~= "" then shown[#shown + 1] = i end
    end
  end
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
  out[#out + 1] = "\nlatency: one iteration (train), forward pass (inference, prefill) or step (decode), the slowest device "
    .. "of a parallel run; MFU = model FLOPs (the graph's forward + backward) / GPUs / latency / the dtype's dense peak; "
    .. "memory per GPU; $ from price_per_hour_usd in the GPU file (- without one). --format json|csv has every figure "
    .. "and the warnings.\n"
  return concat(out)
end

return M
