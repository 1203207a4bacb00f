-- tests/scripts/test_arrivals.lua — scripts/neusight/arrivals.lua: generated arrivals (Poisson, gamma with
-- --burstiness) and requests files (CSV, JSON Lines; every error at file:line).
local A = require "neusight.arrivals"
local S = require "neusight.serve"

local testing = require "neusight.testing"
local eq = testing.eq
local function near(got, want, rel, what) return testing.near(got, want, what, rel) end
-- the error of f(...), which must fail, and that it holds `want` (plain text)
local function fails(want, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error holding: " .. want)
  err = tostring(err)
  if not err:find(want, 1, true) then error(("error:\n  expected to hold %s\n  got %s"):format(want, err), 2) end
  return err
end

local M = {}

-- Burstiness 1 is the stream serve drew before --burstiness existed: the gap -ln(1 - u) / rate, then the input
-- length, then the output length, one uniform each (a uniform length), from one splitmix64 stream.
function M.test_burstiness_one_is_the_former_poisson_stream()
  local input, output = S.length_spec("uniform:16:256", "i"), S.length_spec("uniform:1:64", "o")
  for _, seed in ipairs { 0, 3, -7 } do
    -- the former run_simulation loop, as it was
    local u, t, former = S.rng(seed), 0, {}
    for i = 1, 500 do
      t = t - math.log(1 - u()) / 12.5
      local I = input.lo + math.floor(u() * (input.hi - input.lo + 1))
      local O = output.lo + math.floor(u() * (output.hi - output.lo + 1))
      former[i] = { t, I, O }
    end
    local now = A.generate(500, 12.5, 1, input, output, S.rng(seed))
    for i = 1, 500 do
      eq(now[i].arrival, former[i][1], "arrival " .. i .. " (seed " .. seed .. ")")
      eq(now[i].input, former[i][2], "input " .. i)
      eq(now[i].output, former[i][3], "output " .. i)
    end
  end
end

local function gap_stats(b, n)
  local gap, sum, sq = A.gaps(4, b, S.rng(11)), 0, 0
  for _ = 1, n do
    local g = gap()
    assert(g >= 0, "a gap is never negative")
    sum, sq = sum + g, sq + g * g
  end
  local mean = sum / n
  return mean, math.sqrt(sq / n - mean * mean) / mean
end

-- vLLM's --burstiness: gamma gaps of shape B, mean 1 / rate, coefficient of variation 1 / sqrt(B).
function M.test_burstiness_keeps_the_mean_and_sets_the_spread()
  local n = 40000
  local m1, cv1 = gap_stats(1, n)
  local mb, cvb = gap_stats(0.25, n)
  local mr, cvr = gap_stats(4, n)
  near(m1, 0.25, 0.03, "Poisson: mean gap 1 / rate")
  near(mb, 0.25, 0.05, "burstiness 0.25: the same mean gap")
  near(mr, 0.25, 0.03, "burstiness 4: the same mean gap")
  near(cv1, 1, 0.05, "Poisson: CV 1")
  near(cvb, 2, 0.08, "burstiness 0.25: CV 1 / sqrt(0.25) = 2")
  near(cvr, 0.5, 0.05, "burstiness 4: CV 0.5")
  assert(cvb > cv1 and cv1 > cvr, "burstier below 1, more regular above")
  -- the same seed, the same gaps
  local a, b = A.gaps(4, 0.5, S.rng(5)), A.gaps(4, 0.5, S.rng(5))
  for _ = 1, 100 do eq(a(), b(), "seeded") end
end

function M.test_a_three_request_csv_gives_exactly_its_rows()
  local t = A.parse("arrival_s,input_len,output_len\n0,128,16\n0.5,256,1\n\n2.25,64,300\n", "t.csv")
  eq(t.format, "csv", "format")
  eq(#t.requests, 3, "three requests")
  local want = { { 0, 128, 16, 2 }, { 0.5, 256, 1, 3 }, { 2.25, 64, 300, 5 } }
  for i, w in ipairs(want) do
    local r = t.requests[i]
    eq(r.arrival, w[1], "arrival " .. i)
    eq(r.input, w[2], "input " .. i)
    eq(r.output, w[3], "output " .. i)
    eq(r.line, w[4], "line " .. i)
  end
  eq(t.absolute, false, "seconds from the start")
  local d = A.describe(t.requests)
  eq(d.requests, 3, "described")
  eq(d.duration_s, 2.25, "span of the arrivals")
  eq(d.mean_rate_per_s, 2 / 2.25, "(n - 1) / span")
end

-- The Azure LLM inference traces' header and timestamps (7 fraction digits), a CRLF file with a byte-order mark.
function M.test_azure_trace_header_and_timestamps()
  local text = "\239\187\191TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
    .. "2023-11-16 18:15:46.6805900,4808,10\r\n"
    .. "2023-11-16 18:15:50.9951690,3180,8\r\n"
    .. "2023-11-16 18:16:00.0000000,110,27\r\n"
    .. "2023-11-17 00:00:00,7,1\r\n"
  local t = A.parse(text, "azure.csv")
  eq(t.absolute, true, "timestamps")
  eq(t.columns.arrival, "TIMESTAMP", "as the file writes it")
  eq(t.columns.input, "ContextTokens", "prompt column")
  eq(t.requests[1].arrival, 0, "the first row arrives at 0")
  near(t.requests[2].arrival, 4.314579, 1e-12, "seconds between the first two")
  near(t.requests[3].arrival, 13.31941, 1e-12, "third")
  near(t.requests[4].arrival, 5 * 3600 + 44 * 60 + 13.31941, 1e-12, "across midnight")
  eq(t.requests[1].input, 4808, "ContextTokens")
  eq(t.requests[4].output, 1, "GeneratedTokens")
  -- a 'T', a zone and a number of seconds are times too
  local z = A.parse("timestamp,input_len,output_len\n2024-02-29T23:59:59Z,1,1\n2024-03-01T01:00:00+01:00,1,1\n", "z.csv")
  eq(z.requests[2].arrival, 1, "a leap day, a zone offset")
  local e = A.parse("Timestamp,input_len,output_len\n1700000000.5,1,1\n1700000003,1,1\n", "e.csv")
  eq(e.requests[2].arrival, 2.5, "Unix seconds")
end

function M.test_json_lines_and_ignored_columns()
  local t = A.parse('{"arrival_s": 0.25, "input_len": 10, "output_len": 3, "id": "a"}\n'
    .. '\n{"output_len":4,"input_len":20,"arrival_s":1e0}\n', "r.jsonl")
  eq(t.format, "jsonl", "JSON Lines")
  eq(#t.requests, 2, "blank lines skipped")
  eq(t.requests[2].arrival, 1, "1e0 s")
  eq(t.requests[2].input, 20, "input")
  eq(t.requests[2].line, 3, "its line")
  eq(t.ignored[1], "id", "other keys ignored, named")
  local c = A.parse('arrival_s,"input_len",output_len,note\n0,1,1,"a, ""quoted"" note"\n', "q.csv")
  eq(c.requests[1].input, 1, "quoted header and fields")
  eq(c.ignored[1], "note", "the extra column named")
end

function M.test_bad_files_name_file_and_line()
  local h = "arrival_s,input_len,output_len\n"
  fails("e.csv: empty: no requests", A.parse, "\n  \n", "e.csv")
  fails("h.csv:1: no requests: the header is the only line", A.parse, h, "h.csv")
  fails("m.csv:1: no output length column: one of output_len, generatedtokens", A.parse,
    "arrival_s,input_len\n0,1\n", "m.csv")
  fails("'output_lne' is not one of them", A.parse, "arrival_s,input_len,output_lne\n0,1,1\n", "m.csv")
  fails("d.csv:1: both 'input_len' and 'ContextTokens' give the prompt length", A.parse,
    "arrival_s,input_len,ContextTokens,output_len\n0,1,1,1\n", "d.csv")
  fails("u.csv:4: arrival_s 1 comes 1 s before the previous row's (line 3)", A.parse, h .. "0,1,1\n2,1,1\n1,1,1\n", "u.csv")
  fails("n.csv:2: arrival_s must not be negative (got -1)", A.parse, h .. "-1,1,1\n", "n.csv")
  fails("x.csv:3: arrival_s must be a number of seconds (got 'soon')", A.parse, h .. "0,1,1\nsoon,1,1\n", "x.csv")
  fails("f.csv:2: input_len must be a positive integer number of tokens (got '12.5')", A.parse, h .. "0,12.5,1\n", "f.csv")
  fails("z.csv:2: output_len must be a positive integer number of tokens (got 0)", A.parse, h .. "0,1,0\n", "z.csv")
  fails("b.csv:2: output_len must be a positive integer number of tokens (got an empty value)", A.parse, h .. "0,1,\n", "b.csv")
  fails("w.csv:3: 2 fields, but the header (line 1) names 3 columns", A.parse, h .. "0,1,1\n0,1\n", "w.csv")
  fails("l.csv:2: input_len must be at most 16777216 tokens", A.parse, h .. "0,99999999999,1\n", "l.csv")
  fails("t.csv:2: TIMESTAMP '2023-02-30 00:00:00': no such date", A.parse,
    "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-02-30 00:00:00,1,1\n", "t.csv")
  fails("t.csv:3: TIMESTAMP 2023-01-01 00:00:00 is 1 s before the first row's (line 2)", A.parse,
    "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-01-01 00:00:01,1,1\n2023-01-01 00:00:00,1,1\n", "t.csv")
  fails("a.json:1: a JSON array; give JSON Lines, one request object per line", A.parse,
    '[{"arrival_s": 0, "input_len": 1, "output_len": 1}]\n', "a.json")
  fails("j.jsonl:2: ',' or '}' expected after a value", A.parse,
    '{"arrival_s": 0, "input_len": 1, "output_len": 1}\n{"arrival_s": 1 "input_len": 1}\n', "j.jsonl")
  fails("j.jsonl:2: no \"input_len\" (the prompt length; the first row has it)", A.parse,
    '{"arrival_s": 0, "input_len": 1, "output_len": 1}\n{"arrival_s": 1, "output_len": 1}\n', "j.jsonl")
  fails("j.jsonl:1: input_len must be a positive integer number of tokens (got the string '5')", A.parse,
    '{"arrival_s": 0, "input_len": "5", "output_len": 1}\n', "j.jsonl")
  fails("j.jsonl:1: input_len must be a positive integer number of tokens (got '5.0')", A.parse,
    '{"arrival_s": 0, "input_len": 5.0, "output_len": 1}\n', "j.jsonl")
  fails('j.jsonl:1: "input_len" holds a nested array', A.parse, '{"arrival_s": 0, "input_len": [5], "output_len": 1}\n',
    "j.jsonl")
end

-- tester10 #9 and #12: a trace mixing times with and without a zone is refused (the unzoned ones would be read as UTC,
-- hours off); a string where seconds are wanted says it is a string; keys only later JSON Lines rows have are named
-- ignored like the first row's; pandas' unnamed index column is ignored, not refused.
function M.test_mixed_zones_strings_later_keys_and_an_index_column()
  local ts = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
  fails("tz.csv:3: TIMESTAMP '2023-11-16 18:15:48' has no zone, but the first row's (line 2) has one", A.parse,
    ts .. "2023-11-16 18:15:47+05:00,100,10\n2023-11-16 18:15:48,100,10\n", "tz.csv")
  fails("tz.csv:3: TIMESTAMP '1700000001' has a zone (or is Unix seconds), but the first row's (line 2) has none",
    A.parse, ts .. "2023-11-16 18:15:47,100,10\n1700000001,100,10\n", "tz.csv")
  eq(A.parse(ts .. "2023-11-16 18:15:47Z,1,1\n1700158548,1,1\n", "z.csv").requests[2].arrival, 1,
    "a zone and Unix seconds are both fixed instants")
  fails("s.jsonl:1: arrival_s must be a number of seconds (got the string '1')", A.parse,
    '{"arrival_s": "1", "input_len": 1, "output_len": 1}\n', "s.jsonl")
  local later = A.parse('{"arrival_s": 0, "input_len": 1, "output_len": 1}\n'
    .. '{"arrival_s": 1, "input_len": 1, "output_len": 1, "zz": 2, "id": "b"}\n'
    .. '{"arrival_s": 2, "input_len": 1, "output_len": 1, "ID": "c"}\n', "l.jsonl")
  eq(table.concat(later.ignored, ","), "id,zz", "later rows' keys named once each")
  local p = A.parse(",arrival_s,input_len,output_len\n0,0,1,1\n1,0.5,2,3\n", "p.csv")
  eq(p.requests[2].arrival, 0.5, "the index column is not read")
  eq(p.requests[2].output, 3, "the columns after it keep their places")
  eq(p.ignored[1], "the unnamed first column (a row index)", "and is named ignored")
  fails("c.csv:1: column 2 of the header has no name", A.parse, "arrival_s,,input_len,output_len\n0,0,1,1\n", "c.csv")
end

return M
