-- tests/scripts/test_report.lua — the single forecast's report (scripts/neusight/report.lua): one result table, its
-- JSON field order, the table and CSV renderings, the figures' inputs and the memory warnings.
local R = require "neusight.report"

local function eq(got, want, what)
  if got ~= want then error(("%s:\n  expected %s\n  got      %s"):format(what, tostring(want), tostring(got)), 2) end
end

local function near(got, want, what)
  if type(got) ~= "number" or math.abs(got - want) > 1e-12 * math.abs(want) then eq(got, want, what) end
end

local function index_of(list, x)
  for i, v in ipairs(list) do
    if v == x then return i end
  end
end

local state = { state_gb = 2, convention = "pure", line = "model state line\n",
  bytes_per_param = { weights = 4.0, gradients = 0.0, master = 0.0, optimizer_state = 0.0 } }

-- Two nodes, three kernels: a GEMM (forward, tiled), its backward, a fused element-wise node.
local function forecast()
  return {
    nodes = { { name = "fc", op = "linear", layer = "h", count = 2 },
              { name = "act", op = "gelu", layer = "", count = 1, fused = "a,,b" } },
    kernels = {
      { node = 1, phase = "forward", name = "Linear", kind = "gemm", b = 1, m = 8, n = 16, k = 32, rows = 0, hidden = 0,
        kv_dtype = "", weight_bytes = 0.0, flops = 8192.0, bytes = 100.0, tile_m = 64, tile_k = 32, tile_split = 1,
        tile_elems = 0, tile_blocks = 0.0, tile_flops = 0.0, tile_bytes = 0.0, tile_kernel = "sgemm",
        seconds_each = 1e-3, seconds = 2e-3 },
      { node = 1, phase = "backward", name = "Linear, bwd", kind = "gemm", b = 1, m = 8, n = 16, k = 32, rows = 0,
        hidden = 0, kv_dtype = "", weight_bytes = 0.0, flops = 16384.0, bytes = 200.0, tile_m = 0, tile_k = 0,
        tile_split = 1, tile_elems = 0, tile_blocks = 0.0, tile_flops = 0.0, tile_bytes = 0.0, tile_kernel = "",
        seconds_each = 2e-3, seconds = 4e-3 },
      { node = 2, phase = "forward", name = "VECgelu", kind = "elementwise", b = 0, m = 0, n = 0, k = 0, rows = 8,
        hidden = 16, kv_dtype = "", weight_bytes = 0.0, flops = 128.0, bytes = 1024.0, tile_m = 0, tile_k = 0,
        tile_split = 1, tile_elems = 256, tile_blocks = 0.0, tile_flops = 0.0, tile_bytes = 0.0, tile_kernel = "",
        seconds_each = 1e-4, seconds = 1e-4 },
    },
    total = 6.1e-3, forward = 2.1e-3, backward = 4e-3, accumulate = 0.0, optimizer = 0.0, flops = 40960.0,
    flops_forward = 16512.0, flops_backward = 32768.0, flops_accumulate = 0.0, flops_optimizer = 0.0, params = 512.0,
    model_flops_forward = 16512.0, model_flops_backward = 32768.0, model_flops_accumulate = 0.0,
  }
end

local function fields(memory)
  return R.workload({ mode = "train", batch = 4.0, seq = 8, dtype = "fp32", precision = "pure", optimizer = "none" },
    { source = "w.lua", model = "tiny", state = state, memory = memory })
end

local gpu = { name = "Tiny", file = "gpus/tiny.toml", mem_gb = 16, price_per_hour_usd = 0 }

local function result(memory)
  return R.result(fields(memory), forecast(), { gpu = gpu, predictor = "roofline", warnings = {}, figure_lines = {},
    figures = { { key = "band", value = 1.5, top = true }, { key = "mfu", top = false } } })
end

local M = {}

function M.test_result_fields_and_order()
  local r = result({ memory_gb = 3, memory = { state_gb = 2 }, lines = { "memory line" } })
  local order = getmetatable(r).__order
  eq(r.batch, 4, "batch as an integer")
  eq(math.type(r.batch), "integer", "batch's type")
  eq(index_of(order, "band"), index_of(order, "latency_ms") + 1, "a top figure follows latency_ms")
  eq(order[#order], "ops", "ops last")
  near(r.latency_ms, 6.1, "latency_ms")
  near(r.backward_ms, 4.0, "backward_ms")
  eq(r.memory_gb, 3.0, "memory_gb")
  eq(r.fits, true, "fits: 3 GB in 16")
  eq(r.figures.mfu, R.null, "a figure without a value is JSON null")
  eq(r.ops[1].tile.library_kernel, "sgemm", "GEMM tile")
  eq(r.ops[2].tile, R.null, "no tile: null")
  eq(r.ops[3].dims.rows, 8, "vector dims")
  eq(r.ops[3].fused[2], "b", "fused members, empty ones dropped")
  eq(R.format_json(r).text, nil, "the JSON leaves the table's text out")
  eq(getmetatable(R.format_json(r)).__order, order, "and keeps the order")
end

function M.test_report_hook_adds_fields_only()
  local function with_hook(hook)
    local f = fields({ memory_gb = 3, memory = { state_gb = 2 }, lines = {} })
    f.hook = hook
    return pcall(R.result, f, forecast(), { gpu = gpu, predictor = "roofline", warnings = { "w" }, figure_lines = {},
      figures = {} })
  end
  local ok, r = with_hook(function(r) r.tokens = r.batch * r.seq end)
  eq(ok, true, "a hook adding a field")
  eq(r.tokens, 32, "the added field")
  for what, hook in pairs({
    latency_ms = function(r) r.latency_ms = 1 end,
    warnings = function(r) r.warnings = {} end,
    text = function(r) r.text = nil end,
    -- inside a field too (tester5: r.ops[1].ms = 0 passed, and the JSON ops no longer summed to latency_ms)
    ["ops[1].ms"] = function(r) r.ops[1].ms = 0 end,
    ["ops[3].dims.rows"] = function(r) r.ops[3].dims.rows = 1 end,
    ["ops[4]"] = function(r) r.ops[4] = { ms = 1 } end,
  }) do
    local ok2, err = with_hook(hook)
    eq(ok2, false, "a hook replacing " .. what)
    eq(err, ("w.lua: the workload's report function changed the report's field '%s': it may only add fields")
      :format(what), "its message")
  end
  -- what it adds must be JSON, refused with the script's name in every format (was: the JSON writer's message alone,
  -- and the table accepted it)
  for hook, says in pairs({
    [function(r) r.bad = function() end end] = "w.lua: report.bad is a function, not a JSON value",
    [function(r) r.bad = { x = { 1, function() end } } end] = "w.lua: report.bad.x.2 is a function, not a JSON value",
    [function(r) r.bad = { [true] = 1 } end] = "w.lua: report.bad has a boolean key",
    [function(r) r[1] = "x" end] = "w.lua: the workload's report function added a number key",
    [function(r) local t = {}; t.self = t; r.loop = t end] = "w.lua: report.loop" .. string.rep(".self", 64)
      .. " nests deeper than 64 tables (a cycle?)",
  }) do
    local ok2, err = with_hook(hook)
    eq(ok2, false, says)
    eq(err:sub(1, #says), says, "its message")
  end
  local ok3, r3 = with_hook(function(r) r.team = { name = "x", ids = { 1, 2 }, nested = { ok = true } } end)
  eq(ok3, true, "nested JSON values are accepted")
  eq(r3.team.ids[2], 2, "as given")
end

function M.test_table_and_csv()
  local r = result({ memory_gb = 3, lines = { "memory line" } })
  local t = R.format_table(r)
  eq(t:match("^[^\n]*"), "model     tiny  (train, batch 4, seq 8, fp32, optimizer none)", "header")
  eq(t:find("fc                           linear             2       2.0000       4.0000       0.0000   98.4%", 1, true) ~= nil,
    true, "node row")
  eq(t:find("  act (gelu): a, b\n", 1, true) ~= nil, true, "fused members")
  eq(t:sub(-29), "model state line\nmemory line\n", "state and memory lines last")
  local csv = R.format_csv(r)
  eq(csv:match("^[^\n]*"), "name,op,layer,count,phase,kernel,kind,b,m,n,k,rows,hidden,flops,bytes,ms_each,ms,section,value",
    "the kernel columns as before, then section and value")
  eq(select(2, csv:gsub(",op,\n", "")), 3, "three kernel rows")
  eq(csv:find('fc,linear,h,2,backward,"Linear, bwd",gemm,1,8,16,32,0,0,16384,200,2,4,op,\n', 1, true) ~= nil, true,
    "a quoted kernel name")
  eq(csv:find("\nlatency_ms,,,0,,,,0,0,0,0,0,0,0,0,0,0,summary,6.1", 1, true) ~= nil, true, "the latency, a summary row")
  eq(csv:find("\nfits,,,0,,,,0,0,0,0,0,0,0,0,0,0,summary,true\n", 1, true) ~= nil, true, "fits")
  eq(csv:find(",iteration,", 1, true), nil, "one GPU: no iteration rows (the op rows sum to latency_ms)")
end

-- csv_field, the one text cell every script's CSV writes: a carriage return is quoted as a line feed is (a reader
-- taking CR or CRLF as a line end had split the row there).
function M.test_csv_field_quotes_a_carriage_return()
  eq(R.csv_field("plain"), "plain", "plain text as is")
  eq(R.csv_field('a,"b"'), '"a,""b"""', "comma and quotes")
  eq(R.csv_field("two\nlines"), '"two\nlines"', "a line feed")
  eq(R.csv_field("name\rx"), '"name\rx"', "a carriage return")
end

-- audit19: the table's launch note names the vendor's graph API: a hipGraph on an AMD GPU, not a CUDA graph.
function M.test_table_launch_graph_names_the_vendor_api()
  local function line(vendor)
    local f = R.workload({ mode = "decode", batch = 4.0, seq = 8, context = 8, dtype = "bf16", precision = "pure",
      optimizer = "none", launch = "graph" }, { source = "w.lua", model = "tiny", state = state, memory = { memory_gb = 3 } })
    local g = { name = "Tiny", vendor = vendor, file = "gpus/tiny.toml", mem_gb = 16, price_per_hour_usd = 0 }
    local r = R.result(f, forecast(), { gpu = g, predictor = "neusight", warnings = {}, figure_lines = {}, figures = {} })
    return R.format_table(r):match("\npredictor[^\n]*")
  end
  eq(line("amd"), "\npredictor neusight  (launch graph: HIP-graph (hipGraph) replay, scripts/neusight/launch.lua)", "AMD")
  eq(line("nvidia"), "\npredictor neusight  (launch graph: CUDA-graph replay, scripts/neusight/launch.lua)", "NVIDIA")
  -- a --scripts launch.lua written before graph_name (the engine's --overhead message allows for it): the table was
  -- cut short after the whole forecast by "attempt to call a nil value (field 'graph_name')"; vendor-neutral instead
  local ok, got = pcall(R.graph_replay, "amd", { MODES = { "eager", "graph" } })
  eq(ok, true, "no graph_name: no error (" .. tostring(got) .. ")")
  eq(got, "graph replay", "vendor-neutral")
  eq(R.graph_replay("amd"), "HIP-graph (hipGraph) replay", "the bundled launch.lua's words")
end

-- Σ of a CSV's ms column (the 17th), and its cells by `name` (first column) for section `section`.
local function csv_rows(csv)
  local sum, by = 0.0, {}
  for line in csv:gmatch("[^\n]+") do
    local cells, i, n = {}, 1, #line
    while true do  -- a quoted cell (no "" inside, here) or up to the next comma
      local j
      if line:sub(i, i) == '"' then j = line:find('"', i + 1, true) + 1 else j = line:find(",", i, true) or n + 1 end
      cells[#cells + 1] = line:sub(i, j - 1)
      if j > n then break end
      i = j + 1
      if i > n then cells[#cells + 1] = ""; break end
    end
    if cells[1] ~= "name" then
      sum = sum + tonumber(cells[17])
      by[cells[18] .. ":" .. cells[1]] = cells
    end
  end
  return sum, by
end

-- A parallel run's CSV (tester3 problem 11: the op rows alone summed to 887 ms of a 2327 ms iteration, and no row
-- said the latency, the memory or whether it fits): the iteration rows make the ms column sum to latency_ms, the
-- summary rows give every other field of the JSON by its dotted path.
function M.test_csv_of_a_parallel_run_reconciles()
  local f = fields({ memory_gb = 3, memory = { state_gb = 2 }, lines = {} })
  local dev = { stage = 0, compute_ms = 12.0, tp_comm_ms = 1.5, ep_comm_ms = 0.0, p2p_ms = 0.25, dp_exposed_ms = 0.5,
    optimizer_ms = 0.75, bubble_ms = 5.0, finish_ms = 20.0 }
  f.parallel = { iteration = 20e-3, state_gb = 2.0, optimizer_shards = 1, table = "",
    json = setmetatable({ dp = 1, tp = 2, pp = 2, ep = 1, critical_stage = 0, devices = { dev } },
      { __order = { "dp", "tp", "pp", "ep", "critical_stage", "devices" } }) }
  local r = R.result(f, forecast(), { gpu = gpu, predictor = "roofline", warnings = { "a, warning" }, figure_lines = {},
    figures = {} })
  local sum, by = csv_rows(R.format_csv(r))
  near(sum, 20.0, "the ms column sums to latency_ms")
  near(tonumber(by["iteration:ops"][17]), -6.1, "the op rows' sum taken back out")
  eq(by["iteration:parallel.devices.0.bubble_ms"][17], "5", "the critical device's bubble")
  eq(by["iteration:parallel.devices.0.tp_comm_ms"][2], "tp_comm", "its communication, by part")
  near(tonumber(by["iteration:other"][17]), 0.0, "nothing else")
  eq(by["summary:latency_ms"][19], "20", "latency_ms")
  eq(by["summary:memory_gb"][19], "3", "memory_gb")
  eq(by["summary:fits"][19], "true", "fits")
  eq(by["summary:warnings.0"][19], '"a, warning"', "a warning, quoted")
  eq(by["summary:parallel.devices.0.compute_ms"][19], "12", "the parallel report, flattened")
  eq(by["summary:ops.0.ms"], nil, "the ops are the op rows, not summary rows")
end

-- The tensor-parallel communication under weight-gradient GEMMs (parallel.devices[i].tp_comm_hidden_ms, Megatron's
-- column-parallel overlap): tp_comm_ms is the wire, so the hidden part is taken back out in a row of its own (negative)
-- and the ms column still sums to latency_ms; none where nothing is hidden.
function M.test_csv_takes_the_hidden_tp_comm_back_out()
  local f = fields({ memory_gb = 3, memory = { state_gb = 2 }, lines = {} })
  local dev = { stage = 0, compute_ms = 12.0, tp_comm_ms = 2.0, tp_comm_hidden_ms = 0.5, ep_comm_ms = 0.0,
    p2p_ms = 0.25, dp_exposed_ms = 0.5, optimizer_ms = 0.75, bubble_ms = 5.0, finish_ms = 20.0 }
  f.parallel = { iteration = 20e-3, state_gb = 2.0, optimizer_shards = 1, table = "",
    json = setmetatable({ dp = 1, tp = 2, pp = 2, ep = 1, critical_stage = 0, devices = { dev } },
      { __order = { "dp", "tp", "pp", "ep", "critical_stage", "devices" } }) }
  local r = R.result(f, forecast(), { gpu = gpu, predictor = "roofline", warnings = {}, figure_lines = {},
    figures = {} })
  local sum, by = csv_rows(R.format_csv(r))
  near(sum, 20.0, "the ms column sums to latency_ms")
  near(tonumber(by["iteration:parallel.devices.0.tp_comm_hidden_ms"][17]), -0.5, "the hidden part, taken back out")
  eq(by["iteration:parallel.devices.0.tp_comm_hidden_ms"][2], "tp_comm_hidden", "by part")
  near(tonumber(by["iteration:other"][17]), 0.0, "nothing else")
  dev.tp_comm_ms, dev.tp_comm_hidden_ms = 1.5, 0.0
  local _, none = csv_rows(R.format_csv(R.result(f, forecast(), { gpu = gpu, predictor = "roofline", warnings = {},
    figure_lines = {}, figures = {} })))
  eq(none["iteration:parallel.devices.0.tp_comm_hidden_ms"], nil, "nothing hidden: no row")
end

function M.test_memory_warnings_and_figure_inputs()
  eq(#R.memory_warnings(fields({ memory_gb = 30, warning = "does not fit" })), 1, "the memory report's warning")
  eq(#R.memory_warnings(fields({ memory_gb = 3 })), 0, "fits: none")
  local f = fields(nil)
  f.state = { state_gb = 20, warning = "state alone" }
  eq(R.memory_warnings(f)[1], "state alone", "without a memory report: the state's")
  local inputs = {}
  for _, kv in ipairs(R.figure_inputs(fields({ memory_gb = 30 }), forecast(), gpu)) do inputs[kv[1]] = kv[2] end
  near(inputs.latency_s, 6.1e-3, "latency_s")
  eq(inputs.flops_backward, 32768.0, "flops_backward")
  eq(inputs.fits, false, "30 GB do not fit in 16")
  eq(inputs.price_per_hour_usd, nil, "no price")
  -- the model's FLOPs, not the graph's: where the graph prices the busiest expert-parallel rank's rows (the engine's
  -- model_flops_<phase> count the mean rank's; neusight.models.moe), gradient accumulation the model's (a node
  -- replicated over the tp ranks once, a local expert's times ep)
  local skewed = forecast()
  skewed.flops_forward, skewed.flops_backward, skewed.flops_accumulate = 30000.0, 60000.0, 1024.0
  skewed.model_flops_forward, skewed.model_flops_backward, skewed.model_flops_accumulate = 16512.0, 32768.0, 512.0
  inputs = {}
  for _, kv in ipairs(R.figure_inputs(fields({ memory_gb = 30 }), skewed, gpu)) do inputs[kv[1]] = kv[2] end
  eq(inputs.flops_forward, 16512.0, "flops_forward: the model's")
  eq(inputs.flops_backward, 32768.0, "flops_backward: the model's")
  eq(inputs.flops_accumulate, 512.0, "flops_accumulate: the model's (neusight.figures counts it once)")
  eq(inputs.flops_optimizer, 0.0, "flops_optimizer")
  local ok, err = pcall(R.figure_inputs, fields({ memory_gb = "3" }), forecast(), gpu)
  eq(ok, false, "a memory_gb that is not a number")
  eq(err, "scripts/neusight/memory.lua report: 'memory_gb' must be a number", "its message")
end

-- params_scope: what a parallel run's params counts; a one-GPU result has no such field (params is the whole model).
function M.test_params_scope()
  eq(result({ memory_gb = 3 }).params_scope, nil, "one GPU: no params_scope")
  eq(R.params_scope { tp = 1, ep = 1 }, "whole model", "dp / pp only")
  eq(R.params_scope { tp = 2, ep = 1 }, "one tensor-parallel rank, all pipeline stages", "tp 2")
  eq(R.params_scope { tp = 1, ep = 2 }, "one expert-parallel rank, all pipeline stages", "ep 2")
  eq(R.params_scope { tp = 2, ep = 2 }, "one tensor- and expert-parallel rank, all pipeline stages", "tp and ep")
  local order = getmetatable(result({ memory_gb = 3 })).__order
  eq(index_of(order, "params_scope"), index_of(order, "params") + 1, "params_scope follows params")
end

-- flops_scope: what a parallel run's flops counts (its graph: one microbatch through all stages of one rank); a
-- one-GPU result has none (flops is the whole run).
function M.test_flops_scope()
  eq(result({ memory_gb = 3 }).flops_scope, nil, "one GPU: no flops_scope")
  eq(R.flops_scope({ tp = 8, ep = 1, micro_batch = 3 }, true),
    "one microbatch of 3 through all pipeline stages, one tensor-parallel rank, and its whole optimizer step", "tp 8")
  eq(R.flops_scope({ tp = 1, micro_batch = 2 }, false), "one microbatch of 2 through all pipeline stages, whole model",
    "pp only, no optimizer")
  local order = getmetatable(result({ memory_gb = 3 })).__order
  eq(index_of(order, "flops_scope"), index_of(order, "flops") + 1, "flops_scope follows flops")
end

-- A comparison of two inputs (the second varies) and one figure; the second row failed.
local function comparison()
  local function cell(key, column, value, text) return { key = key, column = column, value = value, cell = text } end
  return { source = "command line", inputs = { { key = "model", column = "model" },
    { key = "batch", column = "batch", integer = true } }, rows = {
    { cell("model", "model", "tiny", "tiny"), cell("batch", "batch", 1, "1"), cell("latency_ms", "latency ms", 2.5, "2.500"),
      cell("mfu", "", nil, "-"), cell("warnings", "", "a, b", "") },
    { cell("model", "model", "tiny", "tiny"), cell("batch", "batch", 16, "16"), cell("error", "error", "no fit", "no fit") },
  } }
end

function M.test_compare_table()
  local C = require "neusight.compare"
  eq(C.table(comparison()), "compare   2 combination(s) from command line, 1 could not be forecast\n"
    .. "fixed     model tiny\n\nbatch  latency ms\n    1       2.500\n   16  error: no fit\n\n"
    .. select(1, C.table(comparison()):match("\n\n(latency: .*)$")), "table")
end

-- An input not available in a forecast row (a prefill row's context beside a decode row's) is not fixed: it is a
-- column, "-" where a row has none; an error row's "-" (an input not given) still counts for nothing.
function M.test_compare_null_in_a_row_is_not_fixed()
  local C = require "neusight.compare"
  local function cell(key, column, value, text) return { key = key, column = column, value = value, cell = text } end
  local function row(mode, context, ms)
    return { cell("model", "model", "tiny", "tiny"), cell("mode", "mode", mode, mode),
      cell("context", "context", context, context and tostring(context) or "-"),
      cell("latency_ms", "latency ms", ms, ("%.3f"):format(ms)), cell("warnings", "", {}, "") }
  end
  local doc = { source = "command line", inputs = { { key = "model", column = "model" }, { key = "mode", column = "mode" },
    { key = "context", column = "context", integer = true } }, rows = { row("prefill", nil, 2.5), row("decode", 2048, 0.5) } }
  local t = C.table(doc)
  eq(t:match("fixed     [^\n]*"), "fixed     model tiny", "context is no fixed input")
  assert(t:find("mode     context  latency ms\nprefill        -       2.500\ndecode      2048       0.500\n", 1, true), t)
  local page = C.page(doc)
  eq(table.concat(page.varying, ","), "mode,context", "the page's varying inputs")
  eq(#page.fixed, 1, "one fixed input") eq(page.fixed[1].key, "model", "model") eq(page.fixed[1].row, 0, "from row 0")
  eq(table.concat(page.columns, ","), "mode,context,latency_ms", "the page's first columns: the table's")
  -- an error row without a context (not given) beside forecast rows that all have it: context stays fixed
  local err = { cell("model", "model", "tiny", "tiny"), cell("mode", "mode", "decode", "decode"),
    cell("context", "context", nil, "-"), cell("error", "error", "no fit", "no fit") }
  doc.rows = { row("decode", 2048, 0.5), row("prefill", 2048, 2.5), err }
  eq(C.table(doc):match("fixed     [^\n]*"), "fixed     model tiny, context 2048", "an error row's - is not a value")
end

function M.test_compare_csv()
  eq(require("neusight.compare").csv(comparison()), 'model,batch,latency_ms,mfu,warnings,error\ntiny,1,2.5,,"a, b",\ntiny,16,,,,no fit\n',
    "csv: the union of the keys, values exactly, nil empty")
end

function M.test_compare_error_row_json_and_page()
  local C = require "neusight.compare"
  local doc = C.new({ { key = "model", column = "model" }, { key = "batch", column = "batch", integer = true },
    { key = "context", column = "context", integer = true } }, "command line")
  C.add_error(doc, { "tiny", "16", "" }, "no fit")
  local row = doc.rows[1]
  eq(row[2].value, 16, "an integer input as given, read as an integer")
  eq(math.type(row[2].value), "integer", "not a float")
  eq(row[3].value, nil, "an empty one: not available")
  eq(row[3].cell, "-", "shown as -")
  local g = 4 + #C.SETTINGS -- the settings' cells (not known: the combination did not run) come first
  eq(row[4].key, "kernels", "then the settings")
  eq(row[4].cell, "-", "not known")
  eq(row[g].key, "gpu_file", "then the GPU file")
  eq(row[g].value, nil, "none: --gpu gave none")
  eq(row[g + 1].key, "error", "then the error")
  C.add_error(doc, { "tiny", "16", "" }, "no fit", "gpus/h100_sxm5_80gb.toml")
  eq(doc.rows[2][g].value, "gpus/h100_sxm5_80gb.toml", "the file of the GPU --gpu gave")
  local j = C.json(doc)
  eq(getmetatable(j.rows[1]).__order[3], "context", "JSON keys in the cells' order")
  eq(j.rows[1].context, require("neusight.report").null, "nil written as null")
  local page = require("neusight.html").render_compare(C.page(doc))
  assert(page:find("no fit", 1, true), "the page has the error")
  eq(C.page(doc).rows[1].context, nil, "null left out of the page's rows")
end

-- A reference graph's fields in one call (predict --graph; engine/lua/session.cpp report_graph): fp32, no optimizer,
-- the default recipe, and the model state precision.lua gives that, with a warning when the state alone does not fit.
-- A forecast's row: the inputs, then the GPU's file (JSON and CSV only: no table column), latency and the figures.
function M.test_compare_row_has_the_gpu_file()
  local C = require "neusight.compare"
  local doc = C.new({ { key = "model", column = "model" }, { key = "gpu", column = "gpu" } }, "command line")
  local fields = { model = "tiny", mode = "inference", dtype = "bf16", batch = 1, seq = 8 }
  local row = assert(C.add(doc, fields, { name = "H100", file = "gpus/h100.toml" }, 2.5, {}, {}))
  local g = 3 + #C.SETTINGS -- after the inputs and the settings (C.settings_of)
  eq(row[3].key, "kernels", "the settings after the inputs")
  eq(row[3].value, "eager", "a run without a plan: the model's own graph")
  eq(row[g].key, "gpu_file", "after the inputs")
  eq(row[g].value, "gpus/h100.toml", "the GPU's file")
  eq(row[g].column, "", "JSON and CSV only")
  eq(row[g + 1].key, "latency_ms", "then latency")
  eq(getmetatable(C.json(doc).rows[1]).__order[g], "gpu_file", "JSON: after the inputs")
  local keys = { "model", "gpu" }
  for _, st in ipairs(C.SETTINGS) do keys[#keys + 1] = st.key end
  eq(C.csv(doc):match("^[^\n]*"), table.concat(keys, ",") .. ",gpu_file,latency_ms,warnings", "CSV header")
  assert(not C.table(doc):find("gpus/h100.toml", 1, true), "not a table column")
  local _, why = C.add(doc, fields, { name = "H100", file = "gpus/h100.toml" }, 2.5,
    { { key = "gpu_file", column = "x", value = 1, cell = "1" } }, {})
  assert(why and why:find("gpu_file", 1, true), "a figure may not take its name")
end

-- A list's items by their one name: spellings of one dtype are one value (the engine refuses the list), as a GPU file
-- named twice is.
function M.test_compare_repeated_spellings()
  local C = require "neusight.compare"
  for _, pair in ipairs { { "bf16", "BF16" }, { "bfloat16", "bf16" }, { "torch.bfloat16", "bf16" } } do
    eq(C.repeated("dtype", { "fp16", pair[1], pair[2] }), ("--dtype: %s and %s name the same dtype (bf16): give each "
      .. "dtype once"):format(pair[1], pair[2]), pair[1] .. "," .. pair[2])
  end
  eq(C.repeated("dtype", { "bf16", "fp16", "fp32" }), nil, "three dtypes")
  eq(C.repeated("dtype", { "bf16", "bf17" }), nil, "a misspelling is the workload's to report")
  eq(C.repeated("batch", { "8", "16" }), nil, "no spellings")
  -- the workload's own spelling (neusight.workload spelling): fp64 names no compute dtype, so two spellings of it are
  -- the workload's error ("double precision is not modelled"), not a repeat
  eq(C.repeated("dtype", { "fp64", "float64" }), nil, "fp64: the workload's to refuse")
end

function M.test_graph_fields_and_state()
  local g = { source = "opgraph/x.csv", model = "x", mode = "train", batch = 2, seq = 8, layers = 3 }
  local f = R.graph(g, 1e9, 16)
  eq(f.dtype, "fp32", "dtype")
  eq(f.precision, "pure", "the default recipe of fp32")
  eq(f.optimizer, "none", "optimizer")
  eq(f.launch, "eager", "launch default")
  eq(f.layers, 3, "layers")
  eq(f.state.state_gb, 8.0, "train: weights 4 + gradients 4 B per parameter")
  eq(f.state.warning, nil, "8 GB fits in 16")
  local over = R.graph(g, 3e9, 16).state
  eq(over.warning, "model state 24.0 GB exceeds the GPU's 16 GB: the forecast assumes it fits (shard it, see the "
    .. "parallelism options)", "no memory report covers a graph: the state alone does not fit")
  g.mode = "inference"
  eq(R.graph(g, 3e9, 16).state.state_gb, 12.0, "inference: the weights only")
  eq(R.graph(g, 3e9, 16).state.warning, nil, "12 GB fits")
  -- held to neusight.memory's capacity, as every memory report is: an L4 (24 GB, reports 22.0 GiB) holds 22.44 GB,
  -- so 22.8 GB of state does not fit there (it was measured against the datasheet's 24 GB and said nothing)
  g.mode = "train"
  local l4 = R.graph(g, 2.85e9, 24, 22.0).state
  eq(l4.warning, "model state 22.8 GB exceeds the GPU's 22.44 GB (95 % of the 22.00 GiB it reports; its datasheet's "
    .. "24 GB is more than that): the forecast assumes it fits (shard it, see the parallelism options)",
    "the capacity, not mem_gb")
  assert(l4.line:find("exceeds the GPU's 22.44 GB", 1, true), l4.line)
  eq(R.graph(g, 2.85e9, 24).state.warning, nil, "without a reported total: mem_gb, 22.8 GB fits in 24")
end

-- A comparison's rows carry the settings that change them besides the inputs (compare.settings_of): each where it
-- applies; the ones the rows share said once on the table's settings line (a false one, off, not), the ones they
-- differ in a column. Rows that ran different kernels (tp 1: the model's own graph; tp 2: Megatron-LM's) warn once,
-- naming the rows of each, in the table, the JSON (its own warnings) and CSV (each row's warnings).
local function run_fields(tp, extra)
  local f = { model = "tiny", mode = "train", dtype = "bf16", batch = 8, seq = 16, optimizer = "adam",
    optimizer_impl = tp > 1 and "fused" or "foreach" }
  if tp > 1 or extra then
    local j = { dp = 1, tp = tp, pp = 1, ep = 1, microbatches = 1, recompute = "none", schedule = "1f1b",
      virtual_stages = 1, kernels = "megatron", sequence_parallel = false, distributed_optimizer = false,
      cluster = { file = "" } }
    for k, v in pairs(extra or {}) do j[k] = v end
    f.parallel = { json = j }
  end
  return f
end

local function compared(rows)
  local C = require "neusight.compare"
  local doc = C.new({ { key = "model", column = "model" }, { key = "tp", column = "tp", integer = true } }, "command line")
  for _, f in ipairs(rows) do assert(C.add(doc, f, { name = "H100", file = "gpus/h100.toml" }, 2.5, {}, {})) end
  return C, doc
end

function M.test_compare_rows_say_their_kernels_and_warn_when_they_differ()
  local C, doc = compared { run_fields(1), run_fields(2) }
  local t = C.table(doc)
  assert(t:find("\ntp  kernels   opt_impl  latency ms\n 1  eager     foreach        2.500\n 2  megatron  fused          "
    .. "2.500\n", 1, true), t)
  eq(t:match("settings  [^\n]*"), "settings  optimizer adam (where they apply)", "the shared settings")
  local notes = C.notes(doc)
  eq(#notes, 1, "one warning")
  assert(notes[1]:find("^the rows ran different kernels, eager in tp 1, megatron in tp 2 "), notes[1])
  assert(notes[1]:find("--kernels megatron (or --kernels eager)", 1, true), "how to compare like with like")
  assert(t:find("\nwarning   comparison: " .. notes[1], 1, true), "said once in the table")
  local j = C.json(doc)
  eq(j.warnings[1], notes[1], "JSON: the comparison's warnings")
  eq(j.rows[1].kernels, "eager", "JSON: row 1's kernels") eq(j.rows[2].kernels, "megatron", "row 2's")
  eq(j.rows[1].sequence_parallel, require("neusight.report").null, "no tp: sequence parallelism does not apply")
  eq(j.rows[2].sequence_parallel, false, "tp 2: off")
  local csv = C.csv(doc)
  local n = 0
  for _ in csv:gmatch("the rows ran different kernels") do n = n + 1 end
  eq(n, 2, "CSV: in each row's warnings")
  local page = C.page(doc)
  eq(page.warnings[1], notes[1], "the page's warnings")
  eq(table.concat(page.varying, ","), "tp,kernels,optimizer_impl", "the page's varying inputs and settings")
  -- the same kernels in every row: no warning, kernels said once
  C, doc = compared { run_fields(1, { kernels = "megatron" }), run_fields(2) }
  eq(#C.notes(doc), 0, "no warning")
  assert(C.table(doc):find("settings  kernels megatron, optimizer adam", 1, true), C.table(doc))
  eq(C.json(doc).warnings, nil, "JSON: none")
end

function M.test_compare_settings_line_tells_runs_apart()
  local A = { dp = 2, pp = 4, microbatches = 16, schedule = "interleaved", virtual_stages = 5,
    distributed_optimizer = true, cluster = { file = "gpus/clusters/dgx_h100.toml" } }
  local function line(sp)
    local extra = { sequence_parallel = sp }
    for k, v in pairs(A) do extra[k] = v end
    local C, doc = compared { run_fields(8, extra) }
    return C.table(doc):match("settings  [^\n]*"), C.json(doc).rows[1]
  end
  local off, row = line(false)
  eq(off, "settings  kernels megatron, schedule interleaved, virtual_stages 5, distributed_optimizer true, cluster "
    .. "gpus/clusters/dgx_h100.toml, optimizer adam, optimizer_impl fused (where they apply)", "without SP")
  eq(row.sequence_parallel, false, "JSON: SP off") eq(row.schedule, "interleaved", "JSON: schedule")
  eq(row.virtual_stages, 5, "JSON: virtual stages") eq(row.distributed_optimizer, true, "JSON: distributed optimizer")
  eq(row.cluster, "gpus/clusters/dgx_h100.toml", "JSON: cluster") eq(row.optimizer_impl, "fused", "JSON: impl")
  local on = line(true)
  assert(on:find("virtual_stages 5, sequence_parallel true, distributed_optimizer true", 1, true), on)
end

return M
