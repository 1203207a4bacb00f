-- tests/scripts/test_html.lua — the HTML report page (scripts/neusight/html.lua): escaping, exact data-value numbers,
-- op-kind sums by phase, one stage bar per pipeline stage, no external references.
local H = require "neusight.html"

local function eq(got, want, what)
  if got ~= want then error(("%s:\n  expected %s\n  got      %s"):format(what, tostring(want), tostring(got)), 2) end
end

local function report()
  return {
    model = '<&">', gpu = "A100", mode = "train", dtype = "fp32", batch = 4, seq = 1024,
    latency_ms = 12.345678901234567,
    figures = { tokens_per_s = 1234.5, mfu = 0.4, mfu_convention = "x<y" },
    ops = {
      { name = "a<b>", op = "linear", phase = "forward", ms = 1.5 },
      { name = "b", op = "linear", phase = "backward", ms = 3.25 },
      { name = "c", op = "linear", phase = "forward", ms = 0.5 },
      { name = "d", op = "softmax", phase = "forward", ms = 0.1 },
      { name = "e", op = "adam", phase = "optimizer", ms = 0.7 },
    },
    memory = { activations_gb = 10.5, state_gb = 6.25, capacity_gb = 40.0 },
    memory_gb = 16.75,
    warnings = { "w <1>" },
  }
end

-- data-key → data-value of the page.
local function pairs_of(html)
  local out = {}
  for k, v in html:gmatch('data%-key="([^"]*)" data%-value="([^"]*)"') do out[k] = v end
  return out
end

local M = {}

function M.test_escape()
  eq(H.escape([[<&">']]), "&lt;&amp;&quot;&gt;&#39;", "entities")
  local html = H.render(report())
  eq(html:find('<&">', 1, true), nil, "raw model name absent")
  assert(html:find("&lt;&amp;&quot;&gt;", 1, true), "escaped model name present")
  eq(html:find("w <1>", 1, true), nil, "raw warning absent")
  eq(html:find("x<y", 1, true), nil, "raw figure text absent")
end

function M.test_numbers_exact()
  local kv = pairs_of(H.render(report()))
  eq(kv["latency_ms"], "12.345678901234567", "latency")
  eq(tonumber(kv["latency_ms"]), 12.345678901234567, "latency round-trips")
  eq(kv["batch"], "4", "integer")
  eq(kv["figures.mfu"], "0.40000000000000002", "figure")
  eq(tonumber(kv["memory.activations_gb"]), 10.5, "memory part")
  eq(tonumber(kv["memory.capacity_gb"]), 40.0, "capacity")
end

function M.test_op_sums()
  local kv = pairs_of(H.render(report()))
  eq(tonumber(kv["ops[op=linear,phase=forward].ms"]), 2.0, "linear forward")
  eq(tonumber(kv["ops[op=linear,phase=backward].ms"]), 3.25, "linear backward")
  eq(tonumber(kv["ops[op=linear].ms"]), 5.25, "linear total")
  eq(tonumber(kv["ops[op=adam,phase=optimizer].ms"]), 0.7, "optimizer")
  local s = H.op_sums(report().ops)
  eq(s.kinds[1], "linear", "largest first")
  eq(table.concat(s.phases, ","), "forward,backward,optimizer", "phase order")
end

function M.test_stage_bars_and_no_external()
  local r = report()
  r.parallel = { pp = 3, dp = 1, tp = 1, iteration_ms = 9.5, devices = {
    { stage = 0, compute_ms = 3, exposed_comm_ms = 0.5, bubble_ms = 1 },
    { stage = 1, compute_ms = 3, exposed_comm_ms = 0.5, bubble_ms = 1.5 },
    { stage = 2, compute_ms = 3, exposed_comm_ms = 0.25, bubble_ms = 2 },
  } }
  local html = H.render(r)
  local n = 0
  for _ in html:gmatch('<g class="stage%-bar">') do n = n + 1 end
  eq(n, 3, "one bar per stage")
  eq(pairs_of(html)["parallel.devices[2].bubble_ms"], "2", "stage value")
  eq(html:find("http://", 1, true), nil, "no http://")
  eq(html:find("https://", 1, true), nil, "no https://")
  eq(html:find("<script", 1, true), nil, "no script")
end

function M.test_compare()
  local html = H.render_compare({ rows = {
    { model = "m<1>", gpu = "g", latency_ms = 2.5 },
    { model = "m2", gpu = "g", error = "bad & worse" },
  } })
  eq(pairs_of(html)["rows[0].latency_ms"], "2.5", "row latency")
  eq(html:find("m<1>", 1, true), nil, "escaped row text")
  assert(html:find("bad &amp; worse", 1, true), "escaped error")
end

return M
