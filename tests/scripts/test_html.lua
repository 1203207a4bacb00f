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

-- The band's headline says what it is made of: where the roofline fallback prices kernels, its own spread (tester10 #11).
function M.test_band_headline_names_the_fallback_share()
  local r = report()
  r.latency_ms_p10, r.latency_ms_p90 = 10, 15
  assert(H.render(r):find("Uncertainty band (leave-one-GPU-out errors): p10", 1, true), "NVIDIA: the errors alone")
  r.figures.band_fallback_share = 0.7508
  local html = H.render(r)
  assert(html:find("Uncertainty band (leave-one-GPU-out errors; 75 % of the kernel time priced by the roofline "
    .. "fallback, with its own spread): p10", 1, true), "the fallback's share is said")
end

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
  eq(html:find("(busiest)", 1, true), nil, "no critical_stage: no stage marked")
  -- the report's critical_stage marked (its bar's label, the layout line) with its imbalance_ms
  r.parallel.critical_stage, r.parallel.imbalance_ms = 1, 0.25
  local marked = H.render(r)
  local labels = {}
  for label in marked:gmatch(">(stage %d[^<]*)<") do labels[#labels + 1] = label end
  eq(table.concat(labels, "|"), "stage 0|stage 1 (busiest)|stage 2", "the busiest bar's label")
  eq(pairs_of(marked)["parallel.critical_stage"], "1", "busiest stage")
  eq(pairs_of(marked)["parallel.imbalance_ms"], "0.25", "imbalance")
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

-- A comparison page (neusight.compare page's shape): a bar's label is the row's varying inputs only, the fixed ones
-- are said once above the chart, a label too long for the label column is cut (in the middle of its widest part) with
-- its whole text in a <title>; the
-- table starts with the terminal table's columns, and long texts and warnings are markers listed below it.
function M.test_compare_labels_columns_and_notes()
  local long = "H100-SXM5-80GB (/a/very/long/path/to/a/what-if/copy/of/the/h100/file.toml)"
  local html = H.render_compare({
    inputs = { "model", "gpu", "batch", "seq" }, varying = { "gpu", "batch" },
    fixed = { { key = "model", row = 0 }, { key = "seq", row = 1 } },
    columns = { "gpu", "batch", "latency_ms", "tokens_per_s" },
    rows = {
      { model = "llama3_8b", gpu = "H100-SXM5-80GB", batch = 4, seq = 2048, latency_ms = 952.25, tokens_per_s = 8603.5,
        achieved_tflops = 403.8, warnings = { "w1 <x>", "w2" } },
      { model = "llama3_8b", gpu = long, batch = 8, seq = 2048, latency_ms = 1662.5, tokens_per_s = 9857.0,
        band_note = ("a long note "):rep(8), warnings = { "w2" } },
      { model = "llama3_8b", gpu = "L4", batch = 4, error = "not divisible" },
    } })
  local labels = {}
  for title, text in html:gmatch('<text class="label"[^>]*>(.-)</title>([^<]*)</text>') do labels[#labels + 1] = text end
  local plain = {}
  for text in html:gmatch('<text class="label"[^>]*>([^<]*)</text>') do plain[#plain + 1] = text end
  eq(plain[1], "H100-SXM5-80GB, batch 4", "the varying inputs, the fixed ones left out")
  eq(plain[2], "L4, batch 4", "an error row has its label too")
  eq(#labels, 1, "one label cut")
  -- cut in the middle of its widest part: the GPU's name, its file's and the batch stay
  assert(labels[1]:find("^H100%-SXM5%-80GB %(/a/.*….*file%.toml%), batch 8$"), "cut in the middle: " .. labels[1])
  assert(html:find("<title>" .. H.escape(long .. ", batch 8") .. "</title>", 1, true), "the whole label in a title")
  local label_w = tonumber(html:match('<text class="label" x="(%d+)"')) + 6
  for _, text in ipairs { plain[1], plain[2], labels[1] } do
    assert(H.text_width(text) <= label_w - 6, text .. " is wider than its column")
  end
  assert(html:find('<p class="fixed">Every row: model llama3_8b, seq <span class="num" data-key="rows[1].seq" '
    .. 'data-value="2048">2048</span></p>', 1, true), "the fixed inputs once, above the chart")
  local heads = {}
  for th in html:gmatch("<th>([^<]*)</th>") do heads[#heads + 1] = th end
  eq(table.concat(heads, ",", 1, 5), "gpu,batch,latency_ms,tokens_per_s,warnings", "the terminal table's columns first")
  for _, k in ipairs(heads) do assert(k ~= "model" and k ~= "seq", "a fixed input is no column: " .. k) end
  for cell in html:gmatch("<td[^>]*>(.-)</td>") do  -- inputs as they are, long texts as markers
    local text = cell:gsub("<[^>]*>", "")
    if not cell:find("^error: ") and text ~= H.escape(long) then assert(#text <= 40, "a cell of one line: " .. text) end
  end
  assert(html:find("<td>" .. H.escape(long) .. "</td>", 1, true), "a long input is no note")
  assert(html:find('<td class="warn" colspan="%d+">error: not divisible</td>'), "the error across the row")
  -- every warning and the long note listed once below the table, with the rows it is of
  local items = {}
  for item in html:gmatch('<li id="note%-%d+">(.-)</li>') do items[#items + 1] = item end
  eq(#items, 3, "w1, w2 and the note")
  eq(items[1], "<b>H100-SXM5-80GB, batch 4:</b> w1 &lt;x&gt;", "a warning of one row")
  eq(items[2], "<b>every row:</b> w2", "a warning of every forecast row")
  assert(items[3]:find("a long note", 1, true), "the long note")
end

-- A sweep's chart marks the rows that miss the targets (meets false): ✗ and grey, why in the label's title, and the
-- heading says what the mark means.
-- fit_label: a label that fits is as it is; else its widest part loses characters from its middle until it fits.
function M.test_fit_label()
  eq(select(2, H.fit_label({ "H100", "batch 4" }, 200)), false, "fits")
  eq(H.fit_label({ "H100", "batch 4" }, 200), "H100, batch 4", "as it is")
  local text, cut = H.fit_label({ ("x"):rep(100), "batch 4", ("y"):rep(20) }, 300)
  eq(cut, true, "cut")
  assert(H.text_width(text) <= 300, "fits: " .. text)
  -- the widest part loses characters first, then the widest again: the long parts end alike, the short one whole
  assert(text:find("^x+…x+, batch 4, y+…y+$"), "the widest parts cut in their middle: " .. text)
  local x, y = #text:match("^(x+…x+)"), #text:match("(y+…y+)$")
  assert(math.abs(x - y) <= 1, "as wide as each other: " .. text)
  assert(H.text_width(text) > 300 - H.text_width("xx"), "no more than needed: " .. text)
end

function M.test_sweep_marks_missed_rows()
  local html = H.render_serve({ kind = "sweep", model = "m", rank_by = "cost", rows = {
    { gpu = "A", tp = 1, rate = 1.0, cost = 2.0, meets = true, chosen = true },
    { gpu = "B", tp = 2, rate = 16.0, cost = 0.5, meets = false, misses = "TTFT p90 900.0 > 500 ms" },
  } })
  local plain = {}
  for text in html:gmatch('<text class="label"[^>]*>([^<]*)</text>') do plain[#plain + 1] = text end
  eq(plain[1], "A tp1 r1.0 *", "chosen")
  assert(html:find('<title>B tp2 r16.0: misses the targets: TTFT p90 900.0 &gt; 500 ms</title>B tp2 r16.0 ✗</text>', 1,
    true), "the missed row: marked, why in its title")
  assert(html:find("✗ and a grey bar: misses the targets", 1, true), "the heading says what ✗ means")
  local fills = {}
  for fill in html:gmatch('<g class="sweep%-bar">.-fill="([^"]*)"') do fills[#fills + 1] = fill end
  assert(fills[1] ~= fills[2], "the missed row's bar has its own colour")
end

-- A parallel run's params and flops are one rank's: the page says params_scope and flops_scope beside them, and
-- shows the model's FLOPs (figures.model_flops) next to the graph's.
function M.test_params_and_flops_scope()
  local r = report()
  r.params, r.params_scope = 1000, "one tensor-parallel rank, all pipeline stages"
  r.flops, r.flops_scope = 5e14, "one microbatch of 3 through all pipeline stages, one tensor-parallel rank"
  r.figures.model_flops = 3.25e18
  local html = H.render(r)
  assert(html:find('data%-key="params" data%-value="1000">1000</span></td><td class="scope">one tensor%-parallel rank, '
    .. "all pipeline stages</td>"), "params_scope beside params")
  assert(html:find('data%-key="flops" data%-value="500000000000000">[^<]*</span></td><td class="scope">one microbatch of 3 '
    .. "through all pipeline stages, one tensor%-parallel rank</td>"), "flops_scope beside flops")
  assert(html:find('<tr><th>model_flops</th><td class="n"><span class="num" data-key="figures.model_flops" '
    .. 'data-value="3.25e+18">', 1, true), "the model's FLOPs beside the graph's")
  local one = H.render(report())
  eq(one:find('class="scope"', 1, true), nil, "a one-GPU run: no scope")
end

-- The comparison's rows table scrolls in its own box when wider than the page, its input columns a table of their own
-- beside it that stays; the settings the rows share are said once, the comparison's own warnings under them.
function M.test_compare_rows_scroll_with_inputs_kept()
  local row = { gpu = "H100", batch = 4, kernels = "eager", optimizer = "adam", latency_ms = 2.5 }
  for i = 1, 20 do row[("figure_%02d"):format(i)] = i + 0.5 end
  local html = H.render_compare({ inputs = { "gpu", "batch", "kernels", "optimizer" }, varying = { "batch", "kernels" },
    fixed = { { key = "gpu", row = 0 } }, settings = { { key = "optimizer", row = 0 } },
    columns = { "batch", "kernels", "latency_ms" }, warnings = { "the rows ran different <kernels>" },
    rows = { row, { gpu = "H100", batch = 8, kernels = "megatron", optimizer = "adam", error = "no fit" } } })
  assert(html:find('<p class="fixed">Settings (where they apply): optimizer adam</p>', 1, true), "the shared settings")
  assert(html:find('<p class="warn">Warning: the rows ran different &lt;kernels&gt;</p>', 1, true), "the warning")
  local keys, rest = html:match('<div class="split"><table class="rows keys">(.-)</table><div class="scroll">'
    .. '<table class="rows">(.-)</table></div></div>')
  assert(keys, "the inputs beside the scrolling figures")
  local heads = {}
  for th in keys:gmatch("<th>([^<]*)</th>") do heads[#heads + 1] = th end
  eq(table.concat(heads, ","), "batch,kernels", "the varying inputs and settings stay")
  assert(rest:find("<th>latency_ms</th>", 1, true) and rest:find("<th>figure_20</th>", 1, true), "the figures scroll")
  assert(rest:find('<td class="warn" colspan="21">error: no fit</td>', 1, true), "the error across the figures")
  eq(html:find("<th>optimizer</th>", 1, true), nil, "a shared setting is no column")
  assert(html:find(".scroll{overflow-x:auto", 1, true), "the box scrolls")
end

-- A pipeline run's page: the memory bar is its fullest GPU's, labelled by its stage; the op kinds' optimizer phase is
-- one GPU's step (the longest of the devices' optimizer_ms), not the tp shard's whole step.
function M.test_pipeline_memory_stage_and_per_gpu_step()
  local r = report()
  r.memory.stage = 2
  r.optimizer_ms = 0.7
  r.parallel = { pp = 3, dp = 1, tp = 1, devices = {
    { stage = 0, compute_ms = 3, exposed_comm_ms = 0.5, optimizer_ms = 0.25, bubble_ms = 1 },
    { stage = 1, compute_ms = 3, exposed_comm_ms = 0.5, optimizer_ms = 0.125, bubble_ms = 1.5 },
    { stage = 2, compute_ms = 3, exposed_comm_ms = 0.25, optimizer_ms = 0.25, bubble_ms = 2 },
  } }
  local html = H.render(r)
  assert(html:find("<h2>Memory per GPU (the fullest: a GPU of stage 2)</h2>", 1, true), "the memory heading")
  local memory = html:match('<g class="memory%-bar">(.-)</g>')
  assert(memory and memory:find(">stage 2<", 1, true), "the memory bar's label: " .. tostring(memory))
  local kv = pairs_of(html)
  eq(kv["ops[op=adam,phase=optimizer].ms"], nil, "not the shard's whole step")
  eq(kv["parallel.devices[0].optimizer_ms"], "0.25", "one GPU's step: the first of the longest")
  assert(html:find(">optimizer step, one GPU of stage 0<", 1, true), "its bar says whose")
  assert(html:find("the optimizer step is one GPU's: stage 0's", 1, true), "the caption says whose")
  eq(tonumber(kv["ops[op=linear].ms"]), 5.25, "the other kinds as before")
end

-- A synthetic parallel.timeline as neusight.parallel.report timeline_json writes it: `P` stages, `Mb` microbatches,
-- `v` chunks, GPipe-like (forwards then backwards), 1 ms each op, then each device's step.
local function timeline_of(P, Mb, v)
  local tl, t_end = {}, 0
  for d = 0, P - 1 do
    local t = d
    for _, kind in ipairs { "forward", "backward" } do
      for c = 0, v - 1 do
        for m = 0, Mb - 1 do
          tl[#tl + 1] = { device = d, kind = kind, microbatch = m, chunk = c, start_ms = t + 0.0, end_ms = t + 1.0,
            comm_ms = 0.125, send_ms = d < P - 1 and 0.25 or 0.0 }
          t = t + 1
        end
      end
    end
    tl[#tl + 1] = { device = d, kind = "optimizer", start_ms = t + 0.0, end_ms = t + 0.5 }
    t_end = math.max(t_end, t + 0.5)
  end
  local devices = {}
  for d = 0, P - 1 do devices[d + 1] = { stage = d, bubble_ms = (P - 1 - d) + 0.0 } end
  return { pp = P, microbatches = Mb, virtual_stages = v, iteration_ms = t_end, devices = devices, timeline = tl }
end

-- The pipeline timeline (tester's issue 16 item 2): one row per stage, one box per op (forward and backward apart, the
-- microbatch in the box or its tooltip, the chunk of an interleaved schedule), the tail after the ops, the iteration's
-- end; every number with its JSON path.
function M.test_timeline_draws_one_box_per_op()
  local r = report()
  r.parallel = timeline_of(3, 4, 2)
  local html = H.render(r)
  assert(html:find("<h2>Pipeline timeline</h2>", 1, true), "the section")
  local per_stage, kinds = {}, {}
  for stage, kind in html:gmatch('<g class="tl%-op" data%-stage="(%d+)" data%-kind="(%a+)"') do
    per_stage[stage] = (per_stage[stage] or 0) + 1
    kinds[kind] = (kinds[kind] or 0) + 1
  end
  for d = 0, 2 do eq(per_stage[tostring(d)], 2 * 4 * 2, "boxes of stage " .. d .. ": 2 x microbatches x chunks") end
  eq(kinds.forward, 3 * 8, "forward boxes") eq(kinds.backward, 3 * 8, "backward boxes")
  local kv = pairs_of(html)
  eq(kv["parallel.timeline[0].start_ms"], "0", "the first op's start")
  eq(kv["parallel.timeline[0].end_ms"], "1", "its end")
  eq(kv["parallel.timeline[0].send_ms"], "0.25", "its send")
  eq(kv["parallel.timeline[0].comm_ms"], "0.125", "its collectives")
  eq(kv["parallel.timeline[16].end_ms"], "16.5", "the tail: the optimizer step")
  eq(kv["parallel.iteration_ms"], "18.5", "the iteration's end")
  eq(kv["parallel.devices[2].bubble_ms"], "0", "a stage's bubble")
  -- the microbatch: in the box where it fits, always in the tooltip; the chunk in the tooltip
  assert(html:find('data%-key="parallel.timeline%[5%].microbatch" data%-value="1">1</text>'), "the microbatch in its box")
  assert(html:find("<title>stage 0 forward, microbatch 1, chunk 1: 5 – 6 ms (send 0.25 ms, tp/ep collectives 0.125 ms "
    .. "among its kernels)</title>", 1, true), "the tooltip")
  assert(html:find("stage 2 optimizer step: 18 – 18.5 ms", 1, true), "the tail's tooltip")
  assert(html:find("a later model chunk: lighter", 1, true), "chunks told apart in the legend")
  assert(not html:find("tl-run", 1, true), "every op drawn")
  -- no timeline, no section
  r.parallel.timeline = nil
  assert(not H.render(r):find("Pipeline timeline", 1, true), "no timeline: no section")
end

-- A deep pipeline's page stays small: a stage of more ops than its share of the boxes drawn at most (2,400 on the
-- page) draws its first and last ones and the ops between as one hatched box spanning them.
function M.test_timeline_of_a_deep_pipeline_is_bounded()
  local r = report()
  r.parallel = timeline_of(2, 100, 1)
  assert(not H.render(r):find("tl-run", 1, true), "400 ops: drawn one by one on the page")
  local html = H.timeline_section(r, 40) -- 20 a stage
  local per_stage, runs = {}, 0
  for stage in html:gmatch('<g class="tl%-op" data%-stage="(%d+)"') do per_stage[stage] = (per_stage[stage] or 0) + 1 end
  for _ in html:gmatch('<g class="tl%-run"') do runs = runs + 1 end
  eq(per_stage["0"], 20, "stage 0: its first and last 10 ops") eq(per_stage["1"], 20, "stage 1")
  eq(runs, 2, "one hatched box a stage")
  local kv = pairs_of(html)
  -- stage 0's ops 11 to 190 (entries 10 to 189): from the first one's start to the last one's end
  eq(kv["parallel.timeline[10].start_ms"], "10", "the run's start") eq(kv["parallel.timeline[189].end_ms"], "190", "its end")
  assert(html:find("stage 0: 180 ops drawn as one (90 forward, 90 backward", 1, true), "its tooltip")
  assert(html:find("the ops between are one hatched box", 1, true), "the caption says so")
end

return M
