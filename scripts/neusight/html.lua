-- scripts/neusight/html.lua — `--report FILE.html`: one self-contained HTML page (inline CSS and SVG, no scripts, no
-- external resources) of a forecast, rendered from its JSON report (the table of `predict --format json`).
--
-- Every number printed carries data-key (its JSON path: "latency_ms", "figures.mfu", "parallel.devices[1].bubble_ms")
-- and data-value (the exact JSON number, %.17g), so a test can compare the page to the JSON. Sums the page computes
-- name their rows: "ops[op=matmul,phase=forward].ms" is the sum of ops[].ms over the ops with that op and phase,
-- "ops[op=matmul].ms" over all phases. All text is escaped: names come from user scripts.
local M = {}

local ENTITIES = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&#39;" }

-- Text as HTML (element content and attribute values alike).
function M.escape(s)
  return (tostring(s):gsub("[&<>\"']", ENTITIES))
end
local esc = M.escape

-- The exact JSON number as text: integers as such, floats with 17 significant digits (round-trips).
function M.number_text(x)
  if math.type(x) == "integer" then return ("%d"):format(x) end
  return ("%.17g"):format(x)
end

-- A number for people: a few significant digits, thousands kept whole.
function M.pretty(x)
  if math.type(x) == "integer" then return ("%d"):format(x) end
  local a = math.abs(x)
  if a == 0 then return "0" end
  if a >= 1e15 or a < 1e-4 then return ("%.3e"):format(x) end
  if a >= 1000 then return ("%.0f"):format(x) end
  return ("%.4g"):format(x)
end

local function attrs(key, value)
  return ('data-key="%s" data-value="%s"'):format(esc(key), M.number_text(value))
end

-- <span> of a number with its JSON path.
local function num(key, value, suffix)
  return ('<span class="num" %s>%s%s</span>'):format(attrs(key, value), esc(M.pretty(value)), esc(suffix or ""))
end

local CSS = [[
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#222;background:#fff;max-width:1000px}
h1{font-size:1.4em;margin:0 0 4px}h2{font-size:1.1em;margin:24px 0 8px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.9em}td,th{padding:2px 10px;text-align:left;border-bottom:1px solid #eee}
td.n{text-align:right;font-variant-numeric:tabular-nums}.big{font-size:1.6em;font-weight:600}
.legend span{display:inline-block;margin-right:14px;font-size:.85em}.sw{display:inline-block;width:10px;height:10px;margin-right:4px}
.warn{color:#a40}svg text{font-size:12px;fill:#222}svg text.warn{fill:#a40}
.fixed{font-size:.9em;color:#444}table.rows td,table.rows th{white-space:nowrap}
.scroll{overflow-x:auto;min-width:0}.split{display:flex;align-items:flex-start}table.keys{border-right:2px solid #ddd}td.scope{color:#444;font-size:.9em}a.note{text-decoration:none;margin-right:2px}
]]

local PHASE_ORDER = { "forward", "backward", "accumulate", "optimizer" }
local COLORS = { forward = "#4e79a7", backward = "#f28e2b", accumulate = "#76b7b2", optimizer = "#e15759",
  compute = "#4e79a7", comm = "#f28e2b", bubble = "#bab0ac" }
local EXTRA_COLORS = { "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac" }

local function color_of(name, i)
  return COLORS[name] or EXTRA_COLORS[(i - 1) % #EXTRA_COLORS + 1]
end

local function legend(names)
  local out = { '<div class="legend">' }
  for i, n in ipairs(names) do
    out[#out + 1] = ('<span><i class="sw" style="background:%s"></i>%s</span>'):format(color_of(n, i), esc(n))
  end
  out[#out + 1] = "</div>"
  return table.concat(out)
end

-- The width in pixels a label of 12 px text takes at most (the svg text style below): DejaVu Sans' advances, the
-- widest of the fonts a headless browser falls back on, rounded up per class of character.
function M.text_width(s)
  local w = 0
  for _, c in utf8.codes(tostring(s)) do
    local ch = c < 128 and string.char(c) or ""
    w = w + (ch:match("[mwMW@%%]") and 12 or ch:match("[ilIjft.,:;!|'()%[%] ]") and 4.4 or ch:match("%l") and 7.4
      or ch:match("%d") and 7.7 or ch:match("%u") and 8.6 or ch:match("[%-_/*]") and 6 or 12)
  end
  return w
end

local LABEL_MIN_W, LABEL_MAX_W = 100, 340

local function chars(s)
  local out = {}
  for _, c in utf8.codes(s) do out[#out + 1] = utf8.char(c) end
  return out
end

-- A label's text: `label` a string or a list of parts (joined by ", ").
local function label_text(label)
  return type(label) == "table" and table.concat(label, ", ") or tostring(label)
end

-- `label` (a string or a list of parts) cut to fit `width` pixels (M.text_width), and whether it was: the widest part
-- loses characters from its middle ("…" there) until the whole fits, so each part keeps its start and its end (a
-- GPU's name and its file's, the batch after it).
function M.fit_label(label, width)
  local parts = type(label) == "table" and label or { tostring(label) }
  local whole = label_text(parts)
  if M.text_width(whole) <= width then return whole, false end
  local cs, keep, texts = {}, {}, {}
  for i, p in ipairs(parts) do
    cs[i] = chars(tostring(p))
    keep[i] = #cs[i]
    texts[i] = tostring(p)
  end
  while true do
    local widest, most = nil, -1
    for i, t in ipairs(texts) do
      local w = M.text_width(t)
      if keep[i] > 0 and w > most then widest, most = i, w end
    end
    if not widest then return table.concat(texts, ", "), true end
    keep[widest] = keep[widest] - 1
    local c, k = cs[widest], keep[widest]
    local head = (k + 1) // 2
    texts[widest] = table.concat(c, "", 1, head) .. "…" .. table.concat(c, "", #c - (k - head) + 1, #c)
    local text = table.concat(texts, ", ")
    if M.text_width(text) <= width then return text, true end
  end
end

-- A horizontal stacked bar chart. rows = { { label (a string or a list of parts: M.fit_label), key?, total,
-- segments = { { name, key, value } }, color?, note?, title? } };
-- `names` orders the legend (colors by name; a row's `color` overrides its segments'). `scale`: the value of the full
-- width (default the largest total); `marker`: { value, label } drawn as a vertical line (the GPU's capacity). The
-- label column is as wide as the longest label (at most LABEL_MAX_W: a longer label is cut, its whole text in a
-- <title>); a row without a bar shows its `note` there. Each bar is <g class="`class`">.
local function bar_chart(rows, names, unit, opts)
  opts = opts or {}
  local widest = 0
  for _, r in ipairs(rows) do widest = math.max(widest, M.text_width(label_text(r.label))) end
  local label_w = math.ceil(math.min(math.max(widest + 12, LABEL_MIN_W), LABEL_MAX_W))
  local bar_w, row_h, value_w = 560, 22, 150
  local max = opts.scale or 0
  for _, r in ipairs(rows) do
    if r.total > max then max = r.total end
  end
  if opts.marker and opts.marker.value > max then max = opts.marker.value end
  if max <= 0 then max = 1 end
  local color = {}
  for i, n in ipairs(names) do color[n] = color_of(n, i) end
  local h = #rows * row_h + 10
  local out = {
    ('<svg width="%d" height="%d" role="img">'):format(label_w + bar_w + value_w, h),
  }
  for i, r in ipairs(rows) do
    local y = (i - 1) * row_h + 4
    out[#out + 1] = ('<g class="%s">'):format(esc(opts.class or "bar"))
    local shown, cut = M.fit_label(r.label, label_w - 12)
    local title = (cut or r.title) and ("<title>%s</title>"):format(esc(r.title or label_text(r.label))) or ""
    out[#out + 1] = ('<text class="label" x="%d" y="%d" text-anchor="end">%s%s</text>'):format(label_w - 6, y + 13,
      title, esc(shown))
    local x = label_w
    for _, s in ipairs(r.segments) do
      local w = s.value / max * bar_w
      if w > 0 then
        out[#out + 1] = ('<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" %s><title>%s: %s %s</title></rect>')
          :format(x, y, w, row_h - 6, r.color or color[s.name] or "#999", attrs(s.key, s.value), esc(s.name),
                  esc(M.pretty(s.value)), esc(unit))
        x = x + w
      end
    end
    if r.key then
      out[#out + 1] = ('<text x="%.2f" y="%d" %s>%s %s</text>'):format(x + 4, y + 13, attrs(r.key, r.total),
                                                                     esc(M.pretty(r.total)), esc(unit))
    elseif r.note then
      out[#out + 1] = ('<text class="warn" x="%.2f" y="%d">%s</text>'):format(x + 4, y + 13, esc(r.note))
    end
    out[#out + 1] = "</g>"
  end
  if opts.marker then
    local mx = label_w + opts.marker.value / max * bar_w
    out[#out + 1] = ('<line x1="%.2f" x2="%.2f" y1="0" y2="%d" stroke="#000" stroke-dasharray="4 3"/>'):format(mx, mx, h)
  end
  out[#out + 1] = "</svg>"
  return table.concat(out, "\n")
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

local function page(title, body)
  return table.concat({
    "<!DOCTYPE html>",
    '<html lang="en"><head><meta charset="utf-8">',
    "<title>" .. esc(title) .. "</title>",
    "<style>" .. CSS .. "</style></head><body>",
    body,
    "</body></html>",
    "",
  }, "\n")
end

-- Time by op kind, split by phase: sums of ops[].ms. Returns kinds (largest first) and phases present.
function M.op_sums(ops)
  local by, totals, phases_seen, kinds = {}, {}, {}, {}
  for _, o in ipairs(ops or {}) do
    local kind, phase, ms = tostring(o.op or "?"), tostring(o.phase or "?"), o.ms or 0
    if not by[kind] then
      by[kind] = {}
      totals[kind] = 0
      kinds[#kinds + 1] = kind
    end
    by[kind][phase] = (by[kind][phase] or 0) + ms
    totals[kind] = totals[kind] + ms
    phases_seen[phase] = true
  end
  table.sort(kinds, function(a, b)
    if totals[a] ~= totals[b] then return totals[a] > totals[b] end
    return a < b
  end)
  local phases = {}
  for _, p in ipairs(PHASE_ORDER) do
    if phases_seen[p] then
      phases[#phases + 1] = p
      phases_seen[p] = nil
    end
  end
  for _, p in ipairs(sorted_keys(phases_seen)) do phases[#phases + 1] = p end
  return { kinds = kinds, phases = phases, by = by, totals = totals }
end

-- A parallel run's optimizer step on one GPU (`p` its report's parallel object): the device whose own step
-- (devices[].optimizer_ms: its stage's parameters, over dp too under the distributed optimizer) is the longest, its
-- index from 0 and that time; nil without one.
local function gpu_step(p)
  if type(p) ~= "table" or type(p.devices) ~= "table" then return nil end
  local at, most = nil, 0
  for i, d in ipairs(p.devices) do
    if type(d.optimizer_ms) == "number" and d.optimizer_ms > most then at, most = i - 1, d.optimizer_ms end
  end
  return at, most
end

local function ops_section(r)
  -- a parallel run's ops are its graph's: one microbatch through all stages of one tp shard, and the whole optimizer
  -- step of that shard, which no GPU runs (each steps its stage's parameters, over dp too with the distributed
  -- optimizer): the optimizer phase is drawn as the GPU's with the longest step (parallel.devices[i].optimizer_ms)
  local at, step = gpu_step(r.parallel)
  local ops = r.ops
  if at then
    ops = {}
    for _, o in ipairs(r.ops or {}) do
      if o.phase ~= "optimizer" then ops[#ops + 1] = o end
    end
  end
  local s = M.op_sums(ops)
  if #s.kinds == 0 and not at then return "" end
  local rows = {}
  for _, k in ipairs(s.kinds) do
    local segs = {}
    for _, p in ipairs(s.phases) do
      local v = s.by[k][p]
      if v then segs[#segs + 1] = { name = p, key = ("ops[op=%s,phase=%s].ms"):format(k, p), value = v } end
    end
    rows[#rows + 1] = { label = k, key = ("ops[op=%s].ms"):format(k), total = s.totals[k], segments = segs }
  end
  local phases, scope = s.phases, ""
  if at then
    local key = ("parallel.devices[%d].optimizer_ms"):format(at)
    local stage = r.parallel.devices[at + 1].stage or at
    rows[#rows + 1] = { label = ("optimizer step, one GPU of stage %s"):format(tostring(stage)), key = key,
                        total = step, segments = { { name = "optimizer", key = key, value = step } } }
    table.sort(rows, function(a, b) return a.total > b.total end)
    phases = {}
    for _, p in ipairs(s.phases) do phases[#phases + 1] = p end
    phases[#phases + 1] = "optimizer"
    scope = ("<p>One microbatch through all pipeline stages of one tp shard; the optimizer step is one GPU's: stage "
      .. "%s's, the longest (%s; each GPU steps its stage's parameters, over dp too with the distributed optimizer), "
      .. "not the shard's whole step (JSON optimizer_ms, %s).</p>\n"):format(esc(tostring(stage)), num(key, step, " ms"),
      type(r.optimizer_ms) == "number" and num("optimizer_ms", r.optimizer_ms, " ms") or "-")
  elseif type(r.parallel) == "table" then
    scope = "<p>One microbatch through all pipeline stages of one tp shard.</p>\n"
  end
  return "<h2>Time by op kind</h2>\n" .. scope .. legend(phases) .. "\n"
    .. bar_chart(rows, phases, "ms", { class = "op-bar" })
end

local function memory_section(r)
  local m = r.memory
  if type(m) ~= "table" then return "" end
  local parts, names, total = {}, {}, 0
  for _, k in ipairs(sorted_keys(m)) do
    local v = m[k]
    if type(v) == "number" and k:match("_gb$") and k ~= "capacity_gb" and k ~= "memory_gb" then
      local name = k:gsub("_gb$", "")
      names[#names + 1] = name
      parts[#parts + 1] = { name = name, key = "memory." .. k, value = v }
      total = total + v
    end
  end
  -- a parallel run's memory is its fullest GPU's (neusight.memory: memory.stage, the pipeline stage it serves)
  local stage = math.type(m.stage) == "integer" and m.stage or nil
  local out = { "<h2>Memory per GPU" .. (stage and " (the fullest: a GPU of stage " .. stage .. ")" or "") .. "</h2>",
    legend(names) }
  local cap = type(m.capacity_gb) == "number" and m.capacity_gb or nil
  out[#out + 1] = bar_chart({ { label = stage and "stage " .. stage or "memory", total = total, segments = parts } },
                            names, "GB",
                            { class = "memory-bar", marker = cap and { value = cap } })
  local line = { "<p>" }
  if type(r.memory_gb) == "number" then line[#line + 1] = "Total " .. num("memory_gb", r.memory_gb, " GB") end
  if cap then line[#line + 1] = " of " .. num("memory.capacity_gb", cap, " GB") .. " (dashed line)" end
  if r.fits == false then line[#line + 1] = ' <b class="warn">does not fit</b>' end
  line[#line + 1] = "</p>"
  out[#out + 1] = table.concat(line)
  local rowsout = { "<table><tr><th>part</th><th>GB</th></tr>" }
  for _, p in ipairs(parts) do
    rowsout[#rowsout + 1] = ('<tr><td>%s</td><td class="n">%s</td></tr>'):format(esc(p.name), num(p.key, p.value))
  end
  rowsout[#rowsout + 1] = "</table>"
  out[#out + 1] = table.concat(rowsout)
  return table.concat(out, "\n")
end

local function parallel_section(r)
  local p = r.parallel
  if type(p) ~= "table" or type(p.devices) ~= "table" then return "" end
  -- each device's own optimizer step (training with an optimizer), between its communication and its bubble
  local stepped = false
  for _, d in ipairs(p.devices) do stepped = stepped or (type(d.optimizer_ms) == "number" and d.optimizer_ms > 0) end
  local parts = { { "compute", "compute_ms" }, { "comm", "exposed_comm_ms" } }
  if stepped then parts[#parts + 1] = { "optimizer", "optimizer_ms" } end
  parts[#parts + 1] = { "bubble", "bubble_ms" }
  local names = {}
  for i, f in ipairs(parts) do names[i] = f[1] end
  -- the busiest stage (the report's critical_stage: the least idle, whose parts are the run's summary) marked, with
  -- the report's imbalance_ms beside the layout: uneven stages, not the schedule's fill and drain
  local busiest = #p.devices > 1 and type(p.critical_stage) == "number" and p.critical_stage or nil
  local rows = {}
  for i, d in ipairs(p.devices) do
    local base = ("parallel.devices[%d]."):format(i - 1)
    local segs = {}
    for _, f in ipairs(parts) do
      if type(d[f[2]]) == "number" then segs[#segs + 1] = { name = f[1], key = base .. f[2], value = d[f[2]] } end
    end
    local total = 0
    for _, s in ipairs(segs) do total = total + s.value end
    local stage = d.stage or i - 1
    rows[#rows + 1] = { label = "stage " .. tostring(stage) .. (stage == busiest and " (busiest)" or ""), total = total,
                        segments = segs }
  end
  local layout = {}
  for _, k in ipairs { "dp", "tp", "pp", "ep", "microbatches" } do
    if type(p[k]) == "number" then layout[#layout + 1] = esc(k) .. " " .. num("parallel." .. k, p[k]) end
  end
  local head = "<p>" .. table.concat(layout, " · ")
  if p.schedule then head = head .. " · schedule " .. esc(p.schedule) end
  if type(p.iteration_ms) == "number" then head = head .. " · iteration " .. num("parallel.iteration_ms", p.iteration_ms, " ms") end
  if busiest then
    head = head .. " · busiest stage " .. num("parallel.critical_stage", busiest)
    if type(p.imbalance_ms) == "number" then
      head = head .. " (imbalance " .. num("parallel.imbalance_ms", p.imbalance_ms, " ms") .. " over the least busy)"
    end
  end
  head = head .. "</p>"
  return "<h2>Pipeline stages (per device: " .. table.concat(names, " / "):gsub("comm", "exposed comm", 1) .. ")</h2>\n" .. head .. "\n" .. legend(names) ..
    "\n" .. bar_chart(rows, names, "ms", { class = "stage-bar" })
end

-- The pipeline timeline (parallel.timeline, neusight.parallel.report timeline_json): one row per pipeline stage, time
-- from the iteration's start (left) to its end (the dashed line, parallel.iteration_ms), one box per op: a forward or
-- backward microbatch through one model chunk (its number in the box where it fits, everything in its tooltip; a later
-- chunk lighter), its point-to-point send at its end and its exposed tensor- / expert-parallel collectives along its
-- foot; after the last one the device's exposed data-parallel gradient reduce, tied-embedding sync, optimizer step
-- and parameter all-gather. Gaps are bubbles. Each box is a <g class="tl-op"> (its start: data-key …start_ms) around a
-- <rect> (its end: …end_ms). A stage of more than TIMELINE_MAX_BOXES / stages ops (at least 16) draws its first and
-- last half of that many one by one and the ops between as one hatched box (<g class="tl-run">, from the first one's
-- start to the last one's end), so that the page stays small for a deep pipeline.
local TIMELINE_MAX_BOXES = 2400

local TL = { forward = "#4e79a7", backward = "#f28e2b", send = "#b07aa1", collectives = "#59a14f",
  dp_reduce = "#ff9da7", embedding_sync = "#9c755f", optimizer = "#e15759", param_gather = "#76b7b2", bubble = "#f1f1f1" }
local TL_NAMES = { dp_reduce = "data-parallel gradient reduce (exposed)", embedding_sync = "tied-embedding gradient sync",
  optimizer = "optimizer step", param_gather = "parameter all-gather (distributed optimizer)" }

-- The section of report `r` (nothing without a timeline); `max_boxes` (default TIMELINE_MAX_BOXES) the ops it draws one
-- by one at most.
function M.timeline_section(r, max_boxes)
  local p = r.parallel
  local tl = type(p) == "table" and p.timeline
  if type(tl) ~= "table" or #tl == 0 or type(p.iteration_ms) ~= "number" or p.iteration_ms <= 0 then return "" end
  local by_device, stages = {}, 0
  for i, e in ipairs(tl) do
    local d = math.tointeger(e.device)
    if d and d >= 0 and type(e.start_ms) == "number" and type(e.end_ms) == "number" then
      local row = by_device[d + 1]
      if not row then
        row = { ops = {}, tail = {} }
        by_device[d + 1] = row
      end
      local list = (e.kind == "forward" or e.kind == "backward") and row.ops or row.tail
      list[#list + 1] = i
      if d + 1 > stages then stages = d + 1 end
    end
  end
  if stages == 0 then return "" end
  local budget = math.max(16, (max_boxes or TIMELINE_MAX_BOXES) // stages)
  local most, kinds = 0, {}
  for d = 1, stages do
    local row = by_device[d] or { ops = {}, tail = {} }
    by_device[d] = row
    most = math.max(most, math.min(#row.ops, budget))
    for _, i in ipairs(row.tail) do kinds[tl[i].kind] = true end
  end
  local label_w, right_w, row_h, box_h, top = 80, 170, 24, 18, 20
  local plot_w = math.min(4000, math.max(730, 6 * most))
  local total = p.iteration_ms
  local function x_of(t) return label_w + t / total * plot_w end
  local out = {
    ('<svg width="%d" height="%d" role="img" class="timeline">'):format(label_w + plot_w + right_w, top + stages * row_h + 6),
    '<defs><pattern id="tl-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
      .. '<rect width="3" height="6" fill="#888"/></pattern></defs>',
  }
  local function span(i, class, fill, title, extra)
    local e = tl[i]
    local key = ("parallel.timeline[%d]."):format(i - 1)
    local x0, x1 = x_of(e.start_ms), x_of(e.end_ms)
    out[#out + 1] = ('<g class="%s" %s><title>%s</title><rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" %s/>%s</g>')
      :format(class, attrs(key .. "start_ms", e.start_ms), esc(title), x0, extra.y, math.max(0, x1 - x0), box_h, fill,
              attrs(key .. "end_ms", e.end_ms), extra.inner or "")
  end
  local interval = function(e) return ("%s – %s ms"):format(M.pretty(e.start_ms), M.pretty(e.end_ms)) end
  local cut = false
  for d = 1, stages do
    local row, y = by_device[d], top + (d - 1) * row_h
    local dev = type(p.devices) == "table" and p.devices[d] or nil
    out[#out + 1] = ('<g class="tl-stage"><text x="%d" y="%d" text-anchor="end">stage %d</text>'):format(label_w - 6,
      y + 13, d - 1)
    out[#out + 1] = ('<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>'):format(label_w, y, plot_w, box_h, TL.bubble)
    local ops, n = row.ops, #row.ops
    local draw_from, draw_to = n + 1, n -- ops draw_from to draw_to: one hatched box
    if n > budget then draw_from, draw_to, cut = budget // 2 + 1, n - budget // 2, true end
    for j, i in ipairs(ops) do
      if j == draw_from then
        local first, last = tl[ops[draw_from]], tl[ops[draw_to]]
        local fw = 0
        for k = draw_from, draw_to do
          if tl[ops[k]].kind == "forward" then fw = fw + 1 end
        end
        local count = draw_to - draw_from + 1
        local key0 = ("parallel.timeline[%d].start_ms"):format(ops[draw_from] - 1)
        local key1 = ("parallel.timeline[%d].end_ms"):format(ops[draw_to] - 1)
        local x0, x1 = x_of(first.start_ms), x_of(last.end_ms)
        out[#out + 1] = ('<g class="tl-run" %s><title>%s</title><rect x="%.2f" y="%d" width="%.2f" height="%d" '
          .. 'fill="url(#tl-hatch)" %s/></g>'):format(attrs(key0, first.start_ms),
          esc(("stage %d: %d ops drawn as one (%d forward, %d backward, the bubbles between them included): %s – %s ms")
            :format(d - 1, count, fw, count - fw, M.pretty(first.start_ms), M.pretty(last.end_ms))),
          x0, y, math.max(0, x1 - x0), box_h, attrs(key1, last.end_ms))
      elseif j < draw_from or j > draw_to then
        local e = tl[i]
        local key = ("parallel.timeline[%d]."):format(i - 1)
        local chunk = math.tointeger(e.chunk) or 0
        local fill = TL[e.kind]
        local x0, x1 = x_of(e.start_ms), x_of(e.end_ms)
        local inner = {}
        if chunk > 0 then -- a later model chunk: the same color, lighter
          inner[#inner + 1] = ('<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="#fff" fill-opacity="%.2f"/>')
            :format(x0, y, math.max(0, x1 - x0), box_h, math.min(0.6, 0.35 * chunk))
        end
        if type(e.send_ms) == "number" and e.send_ms > 0 then
          local w = e.send_ms / total * plot_w
          inner[#inner + 1] = ('<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" %s/>'):format(x1 - w, y, w,
            box_h, TL.send, attrs(key .. "send_ms", e.send_ms))
        end
        if type(e.comm_ms) == "number" and e.comm_ms > 0 then
          inner[#inner + 1] = ('<rect x="%.2f" y="%d" width="%.2f" height="4" fill="%s" %s/>'):format(x0,
            y + box_h - 4, e.comm_ms / total * plot_w, TL.collectives, attrs(key .. "comm_ms", e.comm_ms))
        end
        local mb = e.microbatch
        local mb_text = type(mb) == "number" and M.pretty(mb) or tostring(mb)
        if M.text_width(mb_text) + 4 <= x1 - x0 then
          inner[#inner + 1] = ('<text class="tl-mb" x="%.2f" y="%d" text-anchor="middle" %s>%s</text>')
            :format((x0 + x1) / 2, y + 13, type(mb) == "number" and attrs(key .. "microbatch", mb) or "", esc(mb_text))
        end
        local parts = {}
        if type(e.send_ms) == "number" and e.send_ms > 0 then parts[#parts + 1] = "send " .. M.pretty(e.send_ms) .. " ms" end
        if type(e.comm_ms) == "number" and e.comm_ms > 0 then
          parts[#parts + 1] = "tp/ep collectives " .. M.pretty(e.comm_ms) .. " ms among its kernels"
        end
        local title = ("stage %d %s, microbatch %s%s: %s%s"):format(d - 1, e.kind, mb_text,
          (tonumber(p.virtual_stages) or 1) > 1 and (", chunk %d"):format(chunk) or "", interval(e),
          #parts > 0 and " (" .. table.concat(parts, ", ") .. ")" or "")
        -- a box wide enough to show it has a white edge, so that one microbatch's box ends where the next begins
        out[#out + 1] = ('<g class="tl-op" data-stage="%d" data-kind="%s" %s><title>%s</title><rect x="%.2f" y="%d" '
          .. 'width="%.2f" height="%d" fill="%s" %s/>%s%s</g>'):format(d - 1, esc(e.kind), attrs(key .. "start_ms", e.start_ms),
          esc(title), x0, y, math.max(0, x1 - x0), box_h, fill or "#999", attrs(key .. "end_ms", e.end_ms),
          table.concat(inner), x1 - x0 >= 4 and ('<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="none" '
            .. 'stroke="#fff" stroke-width="1"/>'):format(x0, y, x1 - x0, box_h) or "")
      end
    end
    for _, i in ipairs(row.tail) do
      local e = tl[i]
      span(i, "tl-tail", TL[e.kind] or "#999",
        ("stage %d %s: %s"):format(d - 1, TL_NAMES[e.kind] or tostring(e.kind), interval(e)), { y = y })
    end
    if dev and type(dev.bubble_ms) == "number" then
      out[#out + 1] = ('<text x="%d" y="%d" %s>bubble %s ms</text>'):format(label_w + plot_w + 6, y + 13,
        attrs(("parallel.devices[%d].bubble_ms"):format(d - 1), dev.bubble_ms), esc(M.pretty(dev.bubble_ms)))
    end
    out[#out + 1] = "</g>"
  end
  local xe = x_of(total)
  out[#out + 1] = ('<line x1="%.2f" x2="%.2f" y1="14" y2="%d" stroke="#000" stroke-dasharray="4 3"/>'):format(xe, xe,
    top + stages * row_h)
  out[#out + 1] = ('<text x="%.2f" y="11" text-anchor="end" %s>iteration %s ms</text>'):format(xe,
    attrs("parallel.iteration_ms", total), esc(M.pretty(total)))
  out[#out + 1] = "</svg>"
  -- the legend: what the boxes are, and the tail parts some device has
  local items = { { TL.forward, "forward" }, { TL.backward, "backward" } }
  if (tonumber(p.virtual_stages) or 1) > 1 then items[#items + 1] = { "#a7bcd3", "a later model chunk: lighter" } end
  items[#items + 1] = { TL.send, "point-to-point send (end of an op)" }
  items[#items + 1] = { TL.collectives, "tp / ep collectives (foot of an op)" }
  for _, k in ipairs { "dp_reduce", "embedding_sync", "optimizer", "param_gather" } do
    if kinds[k] then items[#items + 1] = { TL[k], TL_NAMES[k] } end
  end
  items[#items + 1] = { TL.bubble, "bubble (idle)" }
  if cut then items[#items + 1] = { "#888", "many ops drawn as one (hatched)" } end
  local legend_html = { '<div class="legend">' }
  for _, it in ipairs(items) do
    legend_html[#legend_html + 1] = ('<span><i class="sw" style="background:%s"></i>%s</span>'):format(it[1], esc(it[2]))
  end
  legend_html[#legend_html + 1] = "</div>"
  local head = ("<p>One row per pipeline stage (every dp × tp rank of a stage runs alike), time from the iteration's "
    .. "start to its end (the dashed line). A box is one microbatch through one model chunk (%s microbatches%s), its "
    .. "number in it where it fits; hover a box for its times. Gaps are bubbles.%s</p>"):format(
    type(p.microbatches) == "number" and num("parallel.microbatches", p.microbatches) or "?",
    (tonumber(p.virtual_stages) or 1) > 1 and ", " .. num("parallel.virtual_stages", p.virtual_stages) .. " chunks per device" or "",
    cut and " A stage with many ops shows its first and last ones; the ops between are one hatched box." or "")
  return "<h2>Pipeline timeline</h2>\n" .. head .. "\n" .. table.concat(legend_html) .. "\n<div class=\"scroll\">"
    .. table.concat(out, "\n") .. "</div>"
end

local HEADER_TEXT = { "model", "gpu", "mode", "dtype", "precision", "predictor", "optimizer", "source" }
local HEADER_NUMS = { { "batch", "" }, { "seq", "" }, { "context", "" }, { "forward_ms", " ms" }, { "backward_ms", " ms" },
  { "grad_accumulate_ms", " ms" }, { "optimizer_ms", " ms" }, { "params", "" }, { "active_params", "" }, { "flops", "" } }

-- The report's warnings as a list (nothing without any).
local function warnings_section(w)
  if type(w) ~= "table" or #w == 0 then return "" end
  local out = { "<h2>Warnings</h2><ul>" }
  for _, s in ipairs(w) do out[#out + 1] = '<li class="warn">' .. esc(s) .. "</li>" end
  out[#out + 1] = "</ul>"
  return table.concat(out)
end

-- The page of one forecast: `r` is its JSON report as a table.
function M.render(r)
  local out = {}
  out[#out + 1] = ("<h1>neusight forecast: %s on %s</h1>"):format(esc(r.model or "?"), esc(r.gpu or "?"))
  if type(r.latency_ms) == "number" then
    out[#out + 1] = '<p>Latency <span class="big">' .. num("latency_ms", r.latency_ms, " ms") .. "</span></p>"
  end
  if type(r.latency_ms_p10) == "number" and type(r.latency_ms_p90) == "number" then
    -- what the band is made of: the predictors' leave-one-GPU-out errors, and where the untrained roofline fallback
    -- prices kernels (figures.band_fallback_share, neusight.uncertainty) that fallback's own spread for them
    local share = (r.figures or {}).band_fallback_share
    local made_of = type(share) == "number" and share > 0
      and ("leave-one-GPU-out errors; %.0f %% of the kernel time priced by the roofline fallback, with its own spread")
        :format(100 * share)
      or "leave-one-GPU-out errors"
    out[#out + 1] = "<p>Uncertainty band (" .. esc(made_of) .. "): p10 " .. num("latency_ms_p10", r.latency_ms_p10, " ms")
      .. ", p90 " .. num("latency_ms_p90", r.latency_ms_p90, " ms")
      .. ((r.figures or {}).out_of_distribution and " — out of distribution, see the warnings" or "") .. "</p>"
  end
  local t = { "<table>" }
  for _, k in ipairs(HEADER_TEXT) do
    if r[k] ~= nil and type(r[k]) ~= "table" then t[#t + 1] = ("<tr><th>%s</th><td>%s</td></tr>"):format(esc(k), esc(r[k])) end
  end
  for _, kv in ipairs(HEADER_NUMS) do
    if type(r[kv[1]]) == "number" then
      -- what a parallel run's params and flops count (params_scope, flops_scope: one rank's share, one microbatch)
      local scope = r[kv[1] .. "_scope"]
      t[#t + 1] = ('<tr><th>%s</th><td class="n">%s</td>%s</tr>'):format(esc(kv[1]), num(kv[1], r[kv[1]], kv[2]),
        type(scope) == "string" and ('<td class="scope">%s</td>'):format(esc(scope)) or "")
      if kv[1] == "flops" and type(r.figures) == "table" and type(r.figures.model_flops) == "number" then
        t[#t + 1] = ('<tr><th>model_flops</th><td class="n">%s</td><td class="scope">%s</td></tr>'):format(
          num("figures.model_flops", r.figures.model_flops), "the model's, in one latency_ms over all GPUs (MFU's numerator)")
      end
    end
  end
  t[#t + 1] = "</table>"
  out[#out + 1] = table.concat(t, "\n")
  if type(r.figures) == "table" then
    local f = { "<h2>Figures</h2><table>" }
    for _, k in ipairs(sorted_keys(r.figures)) do
      local v = r.figures[k]
      if type(v) ~= "table" then
        local cell = type(v) == "number" and num("figures." .. k, v) or esc(tostring(v))
        f[#f + 1] = ('<tr><th>%s</th><td class="n">%s</td></tr>'):format(esc(k), cell)
      end
    end
    f[#f + 1] = "</table>"
    out[#out + 1] = table.concat(f, "\n")
  end
  out[#out + 1] = ops_section(r)
  out[#out + 1] = memory_section(r)
  out[#out + 1] = parallel_section(r)
  out[#out + 1] = M.timeline_section(r)
  local w = warnings_section(r.warnings)
  if w ~= "" then out[#out + 1] = w end
  return page("neusight: " .. tostring(r.model or "forecast"), table.concat(out, "\n"))
end

-- The notes of a table: long texts (a figure's note, an error) and warnings shown once each below it, numbered in the
-- order met; a cell holds their numbers, each with its text as a tooltip, so a row stays one line high.
local NOTE_CHARS = 40

local function notes_new() return { list = {}, index = {}, rows = {} } end

-- The cell markers of `texts` (a list of strings) in `notes`: "[1][3]" with each text in a title; `label` (nil: none)
-- names the row, which the list says each note is of.
local function note_refs(notes, texts, label)
  local out = {}
  for _, text in ipairs(texts) do
    text = tostring(text)
    local n = notes.index[text]
    if not n then
      notes.list[#notes.list + 1] = text
      n = #notes.list
      notes.index[text] = n
      notes.rows[n] = {}
    end
    local of = notes.rows[n]
    if label and of[#of] ~= label then of[#of + 1] = label end
    out[#out + 1] = ('<a class="note" href="#note-%d" title="%s">[%d]</a>'):format(n, esc(text), n)
  end
  return table.concat(out)
end

-- The list of `notes`, each with the rows it is of ("every row" when `rows` rows have it).
local function notes_section(notes, title, rows)
  if #notes.list == 0 then return "" end
  local out = { "<h2>" .. esc(title) .. "</h2><ol>" }
  for i, text in ipairs(notes.list) do
    local of = notes.rows[i]
    local who = #of == 0 and "" or "<b>" .. esc(rows and #of == rows and "every row" or table.concat(of, "; ")) .. ":</b> "
    out[#out + 1] = ('<li id="note-%d">%s%s</li>'):format(i, who, esc(text))
  end
  out[#out + 1] = "</ol>"
  return table.concat(out, "\n")
end

-- A table cell of value `v` at JSON path `key`: numbers with their path, short text (and any text when `as_is`: an
-- input, a file) as is, long text (and lists: a row's warnings) as note markers.
local function cell_of(key, v, notes, label, as_is)
  if type(v) == "number" then return '<td class="n">' .. num(key, v) .. "</td>" end
  if v == nil then return "<td></td>" end
  if type(v) == "table" then return "<td>" .. note_refs(notes, v, label) .. "</td>" end
  local text = tostring(v)
  if not as_is and (utf8.len(text) or #text) > NOTE_CHARS then return "<td>" .. note_refs(notes, { text }, label) .. "</td>" end
  return "<td>" .. esc(text) .. "</td>"
end

-- A table of list rows under `title`: one column per scalar key any row has (`first` first, in its order, then the
-- others sorted; `omit` none), numbers keyed "rows[i].key"; `notes` collects the long texts but those of the keys in
-- `as_is`. A row with an `error` shows it across the columns after `first`'s inputs (`inputs`: how many of `first`
-- are inputs); `labels[i]` names row i in the notes.
local function rows_table(title, rows, notes, first, omit, inputs, labels, as_is)
  as_is = as_is or {}
  local keys, seen = {}, {}
  for _, k in ipairs(first or {}) do
    if not seen[k] then seen[k], keys[#keys + 1] = true, k end
  end
  for k in pairs(omit or {}) do seen[k] = true end
  for _, row in ipairs(rows) do
    for _, k in ipairs(sorted_keys(row)) do
      if not seen[k] and (type(row[k]) ~= "table" or k == "warnings") then
        seen[k] = true
        keys[#keys + 1] = k
      end
    end
  end
  -- a table wider than the page scrolls in its own box; a comparison's inputs (the first `inputs` columns) are a table
  -- of their own beside it that does not scroll, so each row stays named (the rows are one line each: table.rows
  -- td / th nowrap, so the two tables' rows line up)
  local split = inputs and inputs > 0 and inputs < #keys and inputs or 0
  local function part(from, to, class)
    local t = { ('<table class="rows%s"><tr>'):format(class) }
    for c = from, to do t[#t + 1] = "<th>" .. esc(keys[c]) .. "</th>" end
    t[#t + 1] = "</tr>"
    for i, row in ipairs(rows) do
      t[#t + 1] = "<tr>"
      for c = from, to do
        local k = keys[c]
        if inputs and row.error ~= nil and c > inputs then
          t[#t + 1] = ('<td class="warn" colspan="%d">error: %s</td>'):format(to - c + 1, esc(row.error))
          break
        end
        t[#t + 1] = cell_of(("rows[%d].%s"):format(i - 1, k), row[k], notes, labels and labels[i], as_is[k])
      end
      t[#t + 1] = "</tr>"
    end
    t[#t + 1] = "</table>"
    return table.concat(t, "\n")
  end
  local head = "<h2>" .. esc(title) .. "</h2>"
  if split == 0 then return head .. '<div class="scroll">' .. part(1, #keys, "") .. "</div>" end
  return head .. '<div class="split">' .. part(1, split, " keys") .. '<div class="scroll">' .. part(split + 1, #keys, "")
    .. "</div></div>"
end

-- How a varying input reads in a bar's label: the value of those that name themselves, else "key value".
local NAMED_BY_VALUE = { model = true, gpu = true, mode = true, dtype = true }

-- The page of a comparison: `r` is neusight.compare page's { rows, inputs, varying, fixed, settings, columns,
-- warnings }. A bar's label is its varying inputs and settings; the fixed ones are said once above the chart (the
-- shared settings on a line of their own, the comparison's warnings under it); the table's columns start as the terminal
-- table's (the varying inputs, latency and the figures with a column), then the rest; notes and warnings below it.
function M.render_compare(r)
  local rows = r.rows or {}
  local varying = r.varying or r.inputs or {}
  local bars, labels = {}, {}
  for i, row in ipairs(rows) do
    local label = {}
    for _, k in ipairs(varying) do
      local v = row[k]
      if v ~= nil then
        v = type(v) == "number" and M.pretty(v) or tostring(v)
        label[#label + 1] = NAMED_BY_VALUE[k] and v or k .. " " .. v
      end
    end
    if #label == 0 then label[1] = ("row %d"):format(i - 1) end
    local text = label_text(label)
    labels[i] = text
    if type(row.latency_ms) == "number" then
      local key = ("rows[%d].latency_ms"):format(i - 1)
      bars[#bars + 1] = { label = label, key = key, total = row.latency_ms,
                          segments = { { name = "latency", key = key, value = row.latency_ms } } }
    elseif row.error ~= nil then
      bars[#bars + 1] = { label = label, total = 0, segments = {}, note = "could not be forecast (see the table)" }
    end
  end
  local out = { ("<h1>neusight comparison (%d rows)</h1>"):format(#rows) }
  local fixed, omit = {}, {}
  for _, f in ipairs(r.fixed or {}) do
    local v = rows[f.row + 1] and rows[f.row + 1][f.key]
    if v ~= nil then
      omit[f.key] = true
      fixed[#fixed + 1] = esc(f.key) .. " " .. (type(v) == "number" and num(("rows[%d].%s"):format(f.row, f.key), v)
        or esc(v))
    end
  end
  if #fixed > 0 then out[#out + 1] = '<p class="fixed">Every row: ' .. table.concat(fixed, ", ") .. "</p>" end
  local settings = {} -- the settings the rows share (neusight.compare settings_of: each where it applies)
  for _, f in ipairs(r.settings or {}) do
    local v = rows[f.row + 1] and rows[f.row + 1][f.key]
    if v ~= nil then
      omit[f.key] = true
      settings[#settings + 1] = esc(f.key) .. " " .. (type(v) == "number"
        and num(("rows[%d].%s"):format(f.row, f.key), v) or esc(tostring(v)))
    end
  end
  if #settings > 0 then
    out[#out + 1] = '<p class="fixed">Settings (where they apply): ' .. table.concat(settings, ", ") .. "</p>"
  end
  for _, w in ipairs(r.warnings or {}) do -- the comparison's own (neusight.compare notes: rows of different kernels)
    out[#out + 1] = '<p class="warn">Warning: ' .. esc(w) .. "</p>"
  end
  if #bars > 0 then
    out[#out + 1] = "<h2>Latency</h2>\n" .. bar_chart(bars, { "latency" }, "ms", { class = "row-bar" })
  end
  local first = {}
  for _, k in ipairs(r.columns or varying) do first[#first + 1] = k end
  for _, row in ipairs(rows) do  -- markers, after the terminal table's columns: the texts are listed below the table
    if type(row.warnings) == "table" and #row.warnings > 0 then
      first[#first + 1] = "warnings"
      break
    end
  end
  local n_inputs = 0
  for _, k in ipairs(first) do
    for _, v in ipairs(varying) do
      if v == k then n_inputs = n_inputs + 1 end
    end
  end
  omit.error = true
  local notes = notes_new()
  local as_is = { gpu_file = true }
  for _, k in ipairs(r.inputs or varying) do as_is[k] = true end
  out[#out + 1] = rows_table("Rows", rows, notes, first, omit, n_inputs, labels, as_is)
  local ok = 0
  for _, row in ipairs(rows) do
    if row.error == nil then ok = ok + 1 end
  end
  out[#out + 1] = notes_section(notes, "Notes and warnings (the [n] of the table)", ok)
  return page("neusight comparison", table.concat(out, "\n"))
end

-- Every scalar of a decoded JSON value with its path ("phases.decode.latency_ms", "rows[0].tp": the JSON's keys in
-- sorted order, array indices from 0): { { path, value } }.
local function flatten(v, path, out)
  if type(v) ~= "table" then
    out[#out + 1] = { path, v }
  elseif #v > 0 then
    for i, x in ipairs(v) do flatten(x, ("%s[%d]"):format(path, i - 1), out) end
  else
    for _, k in ipairs(sorted_keys(v)) do flatten(v[k], path == "" and k or path .. "." .. k, out) end
  end
  return out
end

local SERVE_METRICS = { { "ttft_ms", "time to first token", " ms" }, { "tpot_ms", "time per output token", " ms" },
  { "e2e_ms", "end to end", " ms" } }
local SERVE_QUANTILES = { "mean", "p50", "p90", "p99" }
local RESOURCES = { "compute", "weights", "kv_cache", "activations", "communication" }

-- Latency per request: one number each (a static batch, with its band) or the percentiles over the simulated
-- requests (--rate), with the band runs' p90 when there is a band.
local function serve_latency_section(r)
  local t = { "<h2>Latency</h2><table>" }
  for _, m in ipairs(SERVE_METRICS) do
    local key, v = m[1], r[m[1]]
    if type(v) == "number" then
      local band = ""
      if type(r[key .. "_p10"]) == "number" and type(r[key .. "_p90"]) == "number" then
        band = " (band " .. num(key .. "_p10", r[key .. "_p10"]) .. " – " .. num(key .. "_p90", r[key .. "_p90"], m[3]) .. ")"
      end
      t[#t + 1] = ('<tr><th>%s</th><td class="n">%s%s</td></tr>'):format(esc(m[2]), num(key, v, m[3]), band)
    elseif type(v) == "table" then
      local cells = {}
      for _, q in ipairs(SERVE_QUANTILES) do
        if type(v[q]) == "number" then cells[#cells + 1] = esc(q) .. " " .. num(key .. "." .. q, v[q], m[3]) end
      end
      local band = r.band
      if type(band) == "table" and type(band.p10) == "table" and type(band.p90) == "table"
          and type(band.p10[key]) == "table" and type(band.p90[key]) == "table"
          and type(band.p10[key].p90) == "number" and type(band.p90[key].p90) == "number" then
        cells[#cells + 1] = "band of p90 " .. num("band.p10." .. key .. ".p90", band.p10[key].p90) .. " – "
          .. num("band.p90." .. key .. ".p90", band.p90[key].p90, m[3])
      end
      t[#t + 1] = ('<tr><th>%s</th><td class="n">%s</td></tr>'):format(esc(m[2]), table.concat(cells, ", "))
    end
  end
  t[#t + 1] = "</table>"
  return table.concat(t, "\n")
end

-- Each phase's step time split by the resource that bounds its kernels (serve.lua phases[].predicted_ms).
local function serve_phases_section(r)
  if type(r.phases) ~= "table" then return "" end
  local rows = {}
  for _, name in ipairs(sorted_keys(r.phases)) do
    local ph = r.phases[name]
    if type(ph) == "table" and type(ph.predicted_ms) == "table" then
      local segs, total = {}, 0
      for _, res in ipairs(RESOURCES) do
        local v = ph.predicted_ms[res]
        if type(v) == "number" and v > 0 then
          segs[#segs + 1] = { name = res, key = ("phases.%s.predicted_ms.%s"):format(name, res), value = v }
          total = total + v
        end
      end
      local label = name .. (type(ph.bound) == "string" and (" (bound: " .. ph.bound .. ")") or "")
      local key = type(ph.latency_ms) == "number" and ("phases.%s.latency_ms"):format(name) or nil
      rows[#rows + 1] = { label = label, key = key, total = key and ph.latency_ms or total, segments = segs }
    end
  end
  if #rows == 0 then return "" end
  return "<h2>One step of each phase, by the resource its kernels are bound by</h2>\n" .. legend(RESOURCES) .. "\n"
    .. bar_chart(rows, RESOURCES, "ms", { class = "phase-bar" })
end

local MISSED, MISSED_COLOR = "✗", "#bab0ac"

-- A sweep's rows: the ranking figure of each combination (the chosen one marked *, those that miss the targets ✗ and
-- grey), then the table.
local function serve_sweep_section(r)
  local rows = r.rows
  if type(rows) ~= "table" or #rows == 0 then return "" end
  local out = {}
  local by = type(r.rank_by) == "string" and r.rank_by or nil
  local bars, missing, labels = {}, false, {}
  for i, row in ipairs(rows) do
    if by and type(row[by]) == "number" then
      local label = {} -- compact: the chart's label column is narrow ("H100-SXM5-80GB tp1 b16 *" for the chosen)
      for _, k in ipairs { { "gpu", "" }, { "tp", "tp" }, { "batch", "b" }, { "rate", "r" } } do
        if row[k[1]] ~= nil then label[#label + 1] = k[2] .. tostring(row[k[1]]) end
      end
      local key = ("rows[%d].%s"):format(i - 1, by)
      local text = table.concat(label, " ")
      labels[i] = text
      -- a row that misses the targets (sweep.lua meets) is marked and grey, its misses in the label's tooltip
      local missed = row.meets == false
      missing = missing or missed
      bars[#bars + 1] = { label = text .. (row.chosen == true and " *" or "") .. (missed and " " .. MISSED or ""),
                          key = key, total = row[by], segments = { { name = by, key = key, value = row[by] } },
                          color = missed and MISSED_COLOR or nil,
                          title = missed and ("%s: misses the targets%s"):format(text,
                            type(row.misses) == "string" and ": " .. row.misses
                            or row.fits == false and ": does not fit" or "") or nil }
    end
  end
  if #bars > 0 then
    out[#out + 1] = "<h2>" .. esc(by) .. " (* the chosen setting" .. (missing
      and ("; %s and a grey bar: misses the targets, hover its label for why"):format(MISSED) or "")
      .. ")</h2>\n" .. bar_chart(bars, { by }, "", { class = "sweep-bar" })
  end
  local notes = notes_new()
  out[#out + 1] = rows_table("Combinations", rows, notes, nil, nil, nil, labels, { gpu = true, gpu_file = true })
  out[#out + 1] = notes_section(notes, "Notes (the [n] of the table)")
  return table.concat(out, "\n")
end

-- The page of `neusight serve` (a static batch, a simulated request rate or a --sweep): `r` is its JSON report.
-- The sections show the numbers people look at; the last one lists every number of the JSON with its path.
function M.render_serve(r)
  local out = {}
  if r.kind == "sweep" then
    out[#out + 1] = ("<h1>neusight serve sweep: %s, %s combinations</h1>"):format(esc(r.model or "?"),
      esc(r.combinations or #(r.rows or {})))
    if type(r.verdict) == "string" then out[#out + 1] = "<p>" .. esc(r.verdict) .. "</p>" end
    out[#out + 1] = serve_sweep_section(r)
  else
    out[#out + 1] = ("<h1>neusight serve: %s on %s%s</h1>"):format(esc(r.model or "?"), esc(r.gpu or "?"),
      type(r.tp) == "number" and r.tp > 1 and (" × " .. esc(r.tp) .. " (tensor parallel)") or "")
    -- how the requests came: a static batch, a rate (with its burstiness when not Poisson) or a trace file
    local arrivals
    if r.kind == "static" then arrivals = "a static batch of " .. tostring(r.batch)
    elseif type(r.trace) == "table" then
      arrivals = ("%s request%s from %s over %.1f s%s%s"):format(tostring(r.trace.requests),
        r.trace.requests == 1 and "" or "s", tostring(r.trace.file), tonumber(r.trace.duration_s) or 0,
        r.trace.time_scale and (" (its times × %g)"):format(r.trace.time_scale) or "",
        r.rate and (", mean %.3g requests/s"):format(r.rate) or ", all at once")
    else
      arrivals = ("%s requests/s"):format(tostring(r.rate))
        .. (r.burstiness and (", burstiness %s"):format(tostring(r.burstiness)) or "")
    end
    out[#out + 1] = ("<p>%s, %s, launch %s%s, input %s tokens, output %s tokens</p>"):format(
      esc(arrivals), esc(r.dtype or "?"), esc(r.launch or "?"),
      r.kernels and ", kernels " .. esc(r.kernels) or "", esc(r.input_len or "?"), esc(r.output_len or "?"))
    out[#out + 1] = serve_latency_section(r)
    local tput = r.output_tokens_per_s_per_gpu or (type(r.throughput) == "table" and r.throughput.output_tokens_per_s_per_gpu)
    if type(tput) == "number" then
      local key = r.output_tokens_per_s_per_gpu and "output_tokens_per_s_per_gpu" or "throughput.output_tokens_per_s_per_gpu"
      out[#out + 1] = '<p>Throughput <span class="big">' .. num(key, tput, " output tokens/s per GPU") .. "</span></p>"
    end
    out[#out + 1] = serve_phases_section(r)
  end
  local all = flatten(r, "", {})
  local t = { "<h2>Every number of the report</h2><table>" }
  for _, kv in ipairs(all) do
    if type(kv[2]) == "number" then
      t[#t + 1] = ('<tr><th>%s</th><td class="n">%s</td></tr>'):format(esc(kv[1]), num(kv[1], kv[2]))
    elseif type(kv[2]) == "string" or type(kv[2]) == "boolean" then
      t[#t + 1] = ("<tr><th>%s</th><td>%s</td></tr>"):format(esc(kv[1]), esc(tostring(kv[2])))
    end
  end
  t[#t + 1] = "</table>"
  out[#out + 1] = table.concat(t, "\n")
  out[#out + 1] = warnings_section(r.warnings)
  return page("neusight serve: " .. tostring(r.model or "?"), table.concat(out, "\n"))
end

return M
