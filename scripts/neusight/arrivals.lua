-- scripts/neusight/arrivals.lua — the requests `neusight serve` simulates: when each arrives, its prompt and output
-- lengths (neusight.serve run_simulation takes them from here).
--
-- Generated (`--rate R`, `--burstiness B`): inter-arrival gaps drawn as vLLM's benchmark_serving draws them — gamma
-- with shape B and mean 1 / R (scale 1 / (R B)); B = 1 (the default) is the exponential, a Poisson process, B < 1
-- burstier (coefficient of variation 1 / sqrt(B)), B > 1 more regular. Lengths fixed or uniform:LO:HI. Every draw
-- comes from one uniform stream (neusight.serve rng, seeded by --seed), in the order: the gap, the input length, the
-- output length, request after request. With B = 1 a gap takes one uniform, -ln(1 - u) / R, as it always has (the
-- same seed gives the same requests as before --burstiness existed).
--
-- Read (`--requests-file FILE`): a trace of real arrivals, one request a row (parse below), replacing --rate,
-- --input-len and --output-len.
local type, tostring, tonumber, error, ipairs, pairs = type, tostring, tonumber, error, ipairs, pairs
local floor, log, sqrt, cos, pi, huge = math.floor, math.log, math.sqrt, math.cos, math.pi, math.huge
local fmt, concat = string.format, table.concat

local M = {}

---------------------------------------------------------------------------------------------------
-- Generated arrivals

-- A standard normal variate from two uniforms of `u` (Box–Muller, the cosine branch only: one normal per two draws).
local function normal(u)
  local r = sqrt(-2 * log(1 - u()))
  return r * cos(2 * pi * u())
end

--- A gamma variate of shape `a` > 0 and scale 1 from the uniform stream `u` (Marsaglia and Tsang 2000; a < 1 by
--- boosting: Gamma(a + 1) · U^(1/a)).
function M.gamma(a, u)
  if a < 1 then
    local g = M.gamma(a + 1, u)
    return g * (1 - u()) ^ (1 / a)
  end
  local d = a - 1 / 3
  local c = 1 / sqrt(9 * d)
  while true do
    local x, v
    repeat
      x = normal(u)
      v = 1 + c * x
    until v > 0
    v = v * v * v
    local w = 1 - u()  -- (0, 1]
    if w < 1 - 0.0331 * x * x * x * x or log(w) < 0.5 * x * x + d * (1 - v + log(v)) then return d * v end
  end
end

--- A function returning the next inter-arrival gap (s) at `rate` requests/s with `burstiness` (gamma shape; 1:
--- exponential, exactly -ln(1 - u) / rate) from the uniform stream `u`.
function M.gaps(rate, burstiness, u)
  if burstiness == 1 then return function() return -log(1 - u()) / rate end end
  local scale = 1 / (rate * burstiness)
  return function() return M.gamma(burstiness, u) * scale end
end

local function draw(spec, u)
  if spec.kind == "fixed" then return spec.lo end
  return spec.lo + floor(u() * (spec.hi - spec.lo + 1))
end

--- `n` requests { arrival (s), input, output } at `rate` with `burstiness`, lengths drawn from the length specs
--- `input` and `output` (neusight.serve length_spec), all from the uniform stream `u` (see the header for the order).
function M.generate(n, rate, burstiness, input, output, u)
  local gap, reqs, t = M.gaps(rate, burstiness, u), {}, 0
  for i = 1, n do
    t = t + gap()
    local I = draw(input, u)
    reqs[i] = { arrival = t, input = I, output = draw(output, u) }
  end
  return reqs
end

---------------------------------------------------------------------------------------------------
-- Requests files

--- The columns a requests file may name (case ignored), by what they give. A row's arrival is `arrival_s`, seconds
--- from the start of the trace (the first request may come later than 0), or `timestamp`, an absolute time —
--- "YYYY-MM-DD HH:MM:SS[.fraction]" (or a 'T' between date and time, optionally "Z" or "+HH:MM" after it: the Azure
--- LLM inference traces' TIMESTAMP) or a number of seconds (a Unix time) — from which the first row's is subtracted
--- (the first request arrives at 0). The prompt is `input_len` or `ContextTokens`, the output `output_len` or
--- `GeneratedTokens` (the first output token comes from the prefill, as with --output-len). Other columns are ignored
--- (a warning names them).
M.COLUMNS = {
  arrival = { "arrival_s", "timestamp" },
  input = { "input_len", "contexttokens" },
  output = { "output_len", "generatedtokens" },
}
local WHAT = { arrival = "arrival time", input = "prompt length", output = "output length" }

local function where(source, line) return fmt("%s:%d", source, line) end

-- Days from 1970-01-01 to the civil date y-m-d (Howard Hinnant's days_from_civil).
local function days_from_civil(y, m, d)
  y = m <= 2 and y - 1 or y
  local era = (y >= 0 and y or y - 399) // 400
  local yoe = y - era * 400
  local doy = (153 * (m + (m > 2 and -3 or 9)) + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  return era * 146097 + doe - 719468
end

local function days_in_month(y, m)
  if m == 2 then return (y % 4 == 0 and (y % 100 ~= 0 or y % 400 == 0)) and 29 or 28 end
  return ({ 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 })[m]
end

--- An absolute timestamp as { whole seconds since 1970 (an integer), fraction of a second, zoned }, or nil and why: a
--- date and time "YYYY-MM-DD HH:MM:SS[.fraction]" ('T' for the blank, optionally "Z" or "+HH:MM" / "-HH:MM" after it),
--- or a non-negative number of seconds. `zoned` (the third field): false for a date and time without a zone (read as
--- UTC), true for one with a zone or a number of (Unix) seconds.
function M.timestamp(text)
  local s = text:match("^%s*(.-)%s*$")
  if s:match("^%d+%.?%d*$") or s:match("^%d*%.%d+$") then
    local x = tonumber(s)
    if x and x < huge then
      local whole = floor(x)
      return { math.tointeger(whole) or whole, x - whole, true }
    end
  end
  local y, mo, d, h, mi, sec, frac, zone = s:match("^(%d%d%d%d)%-(%d%d)%-(%d%d)[T ](%d%d):(%d%d):(%d%d)(%.?%d*)(.*)$")
  if not y then return nil, "not a date and time YYYY-MM-DD HH:MM:SS[.fraction] nor a number of seconds" end
  if frac == "." then return nil, "a '.' without digits after the seconds" end
  y, mo, d, h, mi, sec = tonumber(y), tonumber(mo), tonumber(d), tonumber(h), tonumber(mi), tonumber(sec)
  if mo < 1 or mo > 12 or d < 1 or d > days_in_month(y, mo) then return nil, "no such date" end
  if h > 23 or mi > 59 or sec > 60 then return nil, "no such time of day" end
  local offset = 0
  if zone ~= "" and zone ~= "Z" then
    local sign, zh, zm = zone:match("^([+-])(%d%d):?(%d%d)$")
    if not sign then return nil, fmt("'%s' after the time is not a zone (Z, +HH:MM or -HH:MM)", zone) end
    offset = (tonumber(zh) * 3600 + tonumber(zm) * 60) * (sign == "+" and 1 or -1)
  end
  local whole = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - offset
  return { whole, frac ~= "" and tonumber("0" .. frac) or 0, zone ~= "" }
end

-- One CSV line's fields (RFC 4180 quoting within the line: a quoted field may hold commas and doubled quotes, not a
-- line break), or nil and why.
local function csv_fields(line)
  local out, i, n = {}, 1, #line
  while true do
    if line:sub(i, i) == '"' then
      local buf, j = {}, i + 1
      while true do
        local q = line:find('"', j, true)
        if not q then return nil, "a quoted field is not closed on its line" end
        buf[#buf + 1] = line:sub(j, q - 1)
        if line:sub(q + 1, q + 1) == '"' then
          buf[#buf + 1] = '"'
          j = q + 2
        else
          i = q + 1
          break
        end
      end
      out[#out + 1] = concat(buf)
      local c = line:sub(i, i)
      if c == "" then return out end
      if c ~= "," then return nil, "text after a quoted field's closing quote" end
      i = i + 1
    else
      local comma = line:find(",", i, true)
      out[#out + 1] = line:sub(i, (comma or n + 1) - 1)
      if not comma then return out end
      i = comma + 1
    end
  end
end

-- One JSON object of flat values on a line: { key = { text = raw text, kind = "number" | "string" | "bool" |
-- "null" } }, or nil and why. Nested objects and arrays are refused (no column takes them).
local function json_object(line)
  local i, out = 1, {}
  local function ws() i = line:find("[^ \t\r]", i) or #line + 1 end
  local function str()
    -- at the opening quote
    local buf, j = {}, i + 1
    while true do
      local c = line:sub(j, j)
      if c == "" then return nil, "a string is not closed" end
      if c == '"' then i = j + 1; return concat(buf) end
      if c == "\\" then
        local e = line:sub(j + 1, j + 1)
        local map = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }
        if map[e] then buf[#buf + 1] = map[e]; j = j + 2
        elseif e == "u" and line:sub(j + 2, j + 5):match("^%x%x%x%x$") then
          buf[#buf + 1] = utf8.char(tonumber(line:sub(j + 2, j + 5), 16)); j = j + 6
        else return nil, "a bad escape in a string" end
      else
        buf[#buf + 1] = c
        j = j + 1
      end
    end
  end
  ws()
  if line:sub(i, i) ~= "{" then return nil, "a line of a JSON Lines file must be one JSON object {…}" end
  i = i + 1
  ws()
  if line:sub(i, i) == "}" then i = i + 1
  else
    while true do
      ws()
      if line:sub(i, i) ~= '"' then return nil, "a JSON object's key must be a string" end
      local k, why = str()
      if not k then return nil, why end
      ws()
      if line:sub(i, i) ~= ":" then return nil, fmt("':' expected after the key \"%s\"", k) end
      i = i + 1
      ws()
      local c, v = line:sub(i, i), nil
      if c == '"' then
        local s, why2 = str()
        if not s then return nil, why2 end
        v = { text = s, kind = "string" }
      elseif c == "{" or c == "[" then
        return nil, fmt("\"%s\" holds a nested %s: the values must be numbers or strings", k, c == "{" and "object" or "array")
      else
        local tok = line:match("^[%w%.%+%-]+", i)
        if not tok then return nil, fmt("no value after \"%s\":", k) end
        i = i + #tok
        if tok == "true" or tok == "false" then v = { text = tok, kind = "bool" }
        elseif tok == "null" then v = { text = tok, kind = "null" }
        elseif tok:match("^%-?%d+%.?%d*[eE]?[%+%-]?%d*$") and tonumber(tok) then v = { text = tok, kind = "number" }
        else return nil, fmt("\"%s\": '%s' is not a JSON value", k, tok) end
      end
      if out[k] then return nil, fmt("the key \"%s\" is given twice", k) end
      out[k] = v
      ws()
      local d = line:sub(i, i)
      i = i + 1
      if d == "}" then break end
      if d ~= "," then return nil, "',' or '}' expected after a value" end
    end
  end
  ws()
  if i <= #line then return nil, "text after the JSON object" end
  return out
end

-- The column of each kind among `names` (lower-cased), or an error naming the file and what is missing or twice.
local function pick_columns(names, source, line, as_keys)
  local picked, used = {}, {}
  for _, kind in ipairs { "arrival", "input", "output" } do
    for _, c in ipairs(M.COLUMNS[kind]) do
      if names[c] then
        if picked[kind] then
          error(fmt("%s: both '%s' and '%s' give the %s: keep one", where(source, line), names[picked[kind]], names[c],
            WHAT[kind]), 0)
        end
        picked[kind], used[c] = c, true
      end
    end
    if not picked[kind] then
      local all = {}
      for _, c in ipairs(M.COLUMNS[kind]) do all[#all + 1] = c end
      local given = {}
      for c in pairs(names) do given[#given + 1] = c end
      local near = require("neusight").closest
      local close
      for _, want in ipairs(M.COLUMNS[kind]) do close = close or (near and near(want, given)) end
      error(fmt("%s: no %s %s: one of %s (case ignored)%s", where(source, line), WHAT[kind],
        as_keys and "key" or "column", concat(all, ", "),
        close and fmt("; '%s' is not one of them", names[close]) or ""), 0)
    end
  end
  local ignored = {}
  for c, name in pairs(names) do
    if not used[c] then ignored[#ignored + 1] = name end
  end
  table.sort(ignored)
  return picked, ignored
end

local function count_of(v, source, line, column, max_size)
  local text = v.text:match("^%s*(.-)%s*$")
  if (v.kind ~= "text" and v.kind ~= "number") or not text:match("^%d+$") then
    error(fmt("%s: %s must be a positive integer number of tokens (got %s%s)", where(source, line), column,
      v.kind == "string" and "the string " or "", text == "" and "an empty value" or "'" .. text .. "'"), 0)
  end
  local n = math.tointeger(tonumber(text))
  if not n or n < 1 then
    error(fmt("%s: %s must be a positive integer number of tokens (got %s)", where(source, line), column, text), 0)
  end
  if n > max_size then
    error(fmt("%s: %s must be at most %d tokens (got %s)", where(source, line), column, max_size, text), 0)
  end
  return n
end

--- The requests of a requests file's `text` (`source`, its name in messages): CSV with a header row, or JSON Lines
--- (one object a line) when its first non-blank character is '{'; blank lines are skipped (a UTF-8 byte-order mark and
--- CR line ends are read). Columns: M.COLUMNS. Returns { requests = { { arrival, input, output, line }, … } in file
--- order, format = "csv" | "jsonl", columns = { arrival, input, output } (the names as the file writes them),
--- absolute (the arrival column is a timestamp), ignored = { names } }. Every error names source:line and what is
--- wrong: a syntax error, a missing or doubled column, an arrival that is not a number, negative or before the
--- previous row's, a length that is not a positive integer (or beyond `max_size`, neusight.workload MAX_SIZE), no
--- rows at all.
function M.parse(text, source, max_size)
  source = source or "requests"
  max_size = max_size or require("neusight.workload").MAX_SIZE
  if type(text) ~= "string" then error(fmt("%s: no text to read", source), 0) end
  text = text:gsub("^\239\187\191", "")
  local lines, ln = {}, 0
  for l in (text .. "\n"):gmatch("([^\n]*)\n") do
    ln = ln + 1
    l = l:gsub("\r$", "")
    if l:find("%S") then lines[#lines + 1] = { text = l, line = ln } end
  end
  if #lines == 0 then error(fmt("%s: empty: no requests (a CSV header and one row per request, or JSON Lines)", source), 0) end
  -- a JSON array of objects (pandas to_json(orient="records"), a list dumped whole) is not JSON Lines: said, not read
  -- as a CSV header (tester10 #9)
  if lines[1].text:match("^%s*%[") then
    error(fmt("%s:%d: a JSON array; give JSON Lines, one request object per line (pandas: to_json(orient=\"records\", "
      .. "lines=True); jq -c '.[]')", source, lines[1].line), 0)
  end
  local jsonl = lines[1].text:match("^%s*{") ~= nil
  local rows = {}  -- { line, values = { lower-cased name = { text, kind } } }
  local names      -- lower-cased column → as the file writes it (CSV: the header's; JSON Lines: the first row's)
  local unnamed    -- CSV: what the ignored unnamed first column is called in the ignored list
  if jsonl then
    for _, l in ipairs(lines) do
      local obj, why = json_object(l.text)
      if not obj then error(fmt("%s: %s", where(source, l.line), why), 0) end
      local values, seen = {}, {}
      for k, v in pairs(obj) do
        local lk = k:lower()
        if seen[lk] then error(fmt("%s: the keys \"%s\" and \"%s\" differ only in case", where(source, l.line), seen[lk], k), 0) end
        seen[lk], values[lk] = k, v
      end
      rows[#rows + 1] = { line = l.line, values = values, keys = seen }
    end
    names = rows[1].keys
  else
    local header, why = csv_fields(lines[1].text)
    if not header then error(fmt("%s: %s", where(source, lines[1].line), why), 0) end
    names = {}
    local index = {}
    for i, h in ipairs(header) do
      local name = h:match("^%s*(.-)%s*$")
      if name == "" and i == 1 and #header > 1 then
        -- an unnamed first column is a row index (pandas to_csv() without index=False; tester10 #12): ignored, named
        unnamed = "the unnamed first column (a row index)"
      else
        if name == "" then error(fmt("%s: column %d of the header has no name", where(source, lines[1].line), i), 0) end
        local lk = name:lower()
        if names[lk] then
          error(fmt("%s: the header names '%s' twice (as '%s' and '%s')", where(source, lines[1].line), lk, names[lk], name), 0)
        end
        names[lk], index[i] = name, lk
      end
    end
    if #lines == 1 then
      error(fmt("%s: no requests: the header is the only line", where(source, lines[1].line)), 0)
    end
    for r = 2, #lines do
      local l = lines[r]
      local cells, why2 = csv_fields(l.text)
      if not cells then error(fmt("%s: %s", where(source, l.line), why2), 0) end
      if #cells ~= #header then
        error(fmt("%s: %d fields, but the header (line %d) names %d columns", where(source, l.line), #cells,
          lines[1].line, #header), 0)
      end
      local values = {}
      for i, c in ipairs(cells) do
        if index[i] then values[index[i]] = { text = c, kind = "text" } end
      end
      rows[#rows + 1] = { line = l.line, values = values }
    end
  end
  local picked, ignored = pick_columns(names, source, jsonl and rows[1].line or lines[1].line, jsonl)
  if unnamed then ignored[#ignored + 1] = unnamed end
  if jsonl then
    -- keys only later rows have are ignored too, and named like the first row's (tester10 #9: they went unsaid)
    local known, later = {}, {}
    for lk in pairs(names) do known[lk] = true end
    for _, row in ipairs(rows) do
      for lk, k in pairs(row.keys) do
        if not known[lk] then known[lk], later[#later + 1] = true, k end
      end
    end
    table.sort(later)
    for _, k in ipairs(later) do ignored[#ignored + 1] = k end
  end
  local absolute = picked.arrival == "timestamp"
  local out, first, prev = {}, nil, nil
  for i, row in ipairs(rows) do
    local at = where(source, row.line)
    local values = row.values
    local function get(kind)
      local v = values[picked[kind]]
      if not v then
        error(fmt("%s: no \"%s\" (the %s; the first row has it)", at, names[picked[kind]], WHAT[kind]), 0)
      end
      return v
    end
    local a = get("arrival")
    local name = names[picked.arrival]
    local t
    if a.kind ~= "text" and a.kind ~= "number" and not (absolute and a.kind == "string") then
      error(fmt("%s: %s must be %s (got %s%s)", at, name, absolute and "a date and time or a number of seconds"
        or "a number of seconds", a.kind == "string" and "the string " or "",
        a.kind == "string" and "'" .. a.text .. "'" or a.text), 0)
    end
    if absolute then
      local ts, why = M.timestamp(a.text)
      if not ts then error(fmt("%s: %s '%s': %s", at, name, a.text, why), 0) end
      first = first or ts
      -- a time without a zone is read as UTC: beside times with one (or Unix seconds) that guess moves it by the zone's
      -- offset, hours in a trace of seconds (tester10 #9): refused, naming both rows
      if ts[3] ~= first[3] then
        error(fmt("%s: %s '%s' %s, but the first row's (line %d) %s: a time without a zone would be read as UTC; give "
          .. "every row a zone (Z, +HH:MM) or none", at, name, a.text:match("^%s*(.-)%s*$"),
          ts[3] and "has a zone (or is Unix seconds)" or "has no zone", rows[1].line,
          first[3] and "has one (or is Unix seconds)" or "has none"), 0)
      end
      t = (ts[1] - first[1]) + (ts[2] - first[2])
      if t < 0 then
        error(fmt("%s: %s %s is %.6g s before the first row's (line %d): the requests must be in arrival order", at,
          name, a.text, -t, rows[1].line), 0)
      end
    else
      local s = a.text:match("^%s*(.-)%s*$")
      t = s:match("^[%d%.eE%+%-]+$") and tonumber(s) or nil
      if not t or t ~= t or t == huge or t == -huge then
        error(fmt("%s: %s must be a number of seconds (got %s)", at, name, s == "" and "an empty value" or "'" .. s .. "'"), 0)
      end
      if t < 0 then error(fmt("%s: %s must not be negative (got %s): seconds from the start of the trace", at, name, s), 0) end
    end
    if prev and t < prev.arrival then
      error(fmt("%s: %s %s comes %.6g s before the previous row's (line %d): the requests must be in arrival order "
        .. "(sort the file by it)", at, name, a.text:match("^%s*(.-)%s*$"), prev.arrival - t, prev.line), 0)
    end
    local r = { arrival = t, line = row.line,
                input = count_of(get("input"), source, row.line, names[picked.input], max_size),
                output = count_of(get("output"), source, row.line, names[picked.output], max_size) }
    out[i], prev = r, r
  end
  return { requests = out, format = jsonl and "jsonl" or "csv", absolute = absolute, ignored = ignored,
           columns = { arrival = names[picked.arrival], input = names[picked.input], output = names[picked.output] } }
end

--- What a trace is (the report's `trace`): its requests, the span of its arrivals (first to last, s), their mean rate
--- ((requests − 1) / span: nil when they all arrive at once), and the mean prompt and output lengths.
function M.describe(reqs)
  local n, si, so = #reqs, 0, 0
  for _, r in ipairs(reqs) do si, so = si + r.input, so + r.output end
  local span = reqs[n].arrival - reqs[1].arrival
  return { requests = n, duration_s = span, mean_rate_per_s = span > 0 and (n - 1) / span or nil,
           first_arrival_s = reqs[1].arrival, input_len_mean = si / n, output_len_mean = so / n }
end

return M
