-- tests/scripts/test_search.lua — neusight.search model_facts (engine/cli/search_cmd.cpp asks it before enumerating
-- layouts): the routed experts per MoE layer (ep must divide them) and the layers stage partition counts; choices,
-- the schedules and recomputation modes it tries, which are neusight.parallel's.
local search = require "neusight.search"
local workload = require "neusight.workload"

local function eq(got, want, what)
  if got ~= want then error(("%s:\n  expected %s\n  got      %s"):format(what, tostring(want), tostring(got)), 2) end
end

local T = {}

function T.test_experts_and_layers_of_presets()
  for _, c in ipairs {
    { "gpt2_large", 1, 36 }, { "mixtral_8x7b", 8, 32 }, { "qwen3_30b_a3b", 128, 48 }, { "deepseek_v3", 256, 61 },
    { "llama3_8b", 1, 32 },
  } do
    local w = workload.normalize { model = c[1], gpu = "-", mode = "train", batch = 8, seq = 128, dtype = "bf16" }
    local f = search.model_facts(w)
    eq(f.experts, c[2], c[1] .. " experts")
    eq(f.layers, c[3], c[1] .. " layers")
  end
end

function T.test_a_model_function_has_one_expert()
  local w = workload.normalize { gpu = "-", mode = "inference", batch = 1, seq = 8, dtype = "fp32",
    model = function() return { { op = "relu", name = "r", inputs = { { 2, 4 } }, output = { 2, 4 }, layer = "l", count = 3 } } end }
  local f = search.model_facts(w)
  eq(f.experts, 1, "experts")
  eq(f.layers, 3, "layers")
end

-- The pipeline variants search skips before forecasting: only interleaved ones, by pp and the layer count.
function T.test_pipeline_skip()
  eq(search.pipeline_skip(36, 4, "1f1b", 0), nil, "1f1b is never skipped")
  eq(search.pipeline_skip(36, 1, "gpipe", 0), nil, "nor gpipe")
  eq(search.pipeline_skip(36, 1, "interleaved", 0), "the interleaved schedule needs pp >= 2", "pp 1")
  eq(search.pipeline_skip(36, 2, "interleaved", 0), nil, "36 layers over 2 x 2 chunks")
  eq(search.pipeline_skip(36, 4, "interleaved", 0),
    "the interleaved schedule needs the model's 36 layers divisible by pp x virtual_stages", "36 over 4 x 2 (default)")
  eq(search.pipeline_skip(36, 4, "interleaved", 3), nil, "36 over 4 x 3")
  eq(search.pipeline_skip(0, 4, "interleaved", 5), nil, "unknown layers: not checked")
end

-- --schedule and --recompute: neusight.parallel's names (the schedule registry, config.CHOICES.recompute), in the
-- order search tries the modes, with normalize's messages.
function T.test_choices_are_the_parallel_names()
  local config = require "neusight.parallel.config"
  local c = search.choices({}, "auto")
  eq(table.concat(c.schedules, ","), config.DEFAULT_SCHEDULE, "no --schedule: the default")
  eq(table.concat(c.recompute, ","), table.concat(config.CHOICES.recompute, ","), "the modes, least first")
  eq(table.concat(search.choices({ "interleaved", "gpipe" }, "full").schedules, ","), "interleaved,gpipe", "as given")
  -- which schedules share a build (search_cmd.cpp re-times one build for them) is search.lua's SHARED_BUILD, so an
  -- override of it changes what search shares
  local function shared(choices)
    local t = {}
    for i, b in ipairs(choices.shared_build) do t[i] = tostring(b) end
    return table.concat(t, ",")
  end
  eq(shared(search.choices({ "interleaved", "gpipe", "1f1b" }, "auto")), "false,true,true", "GPipe and 1F1B share one")
  eq(shared(c), "true", "the default schedule's")
  search.SHARED_BUILD.interleaved = true
  local ok_s, c_s = pcall(search.choices, { "interleaved", "gpipe" }, "auto")
  search.SHARED_BUILD.interleaved = nil
  eq(ok_s, true, "SHARED_BUILD changed")
  eq(shared(c_s), "true,true", "the changed SHARED_BUILD is the one used")
  -- and which run model chunks (take --virtual-stages, shown as schedule/v) is neusight.parallel.config's CHUNKED
  local config = require "neusight.parallel.config"
  local c_v = search.choices({ "interleaved", "gpipe" }, "auto")
  eq(tostring(c_v.virtual_stages[1]) .. "," .. tostring(c_v.virtual_stages[2]), "true,false", "interleaved runs chunks")
  eq(table.concat(c_v.virtual_schedules, ","), "interleaved", "the schedules that do, for search's message")
  -- (changes to the shared module are made inside pcall and undone before any check: a failure leaks nothing)
  config.CHUNKED.gpipe = 3
  local ok_v, c_w = pcall(search.choices, { "gpipe" }, "auto")
  local _, skip_v = pcall(search.pipeline_skip, 12, 2, "gpipe", 0)  -- its default chunks: 12 layers over pp 2 × 3
  local _, skip_w = pcall(search.pipeline_skip, 10, 2, "gpipe", 0)
  local _, skip_1 = pcall(search.pipeline_skip, 12, 1, "gpipe", 0)
  config.CHUNKED.gpipe = nil
  -- a default that is no count of chunks (true, as search's old VIRTUAL_STAGES table had it) is said, not compared
  config.CHUNKED.gpipe = true
  local ok_t, err_t = pcall(search.pipeline_skip, 12, 2, "gpipe", 0)
  local ok_n, err_n = pcall(config.normalize, { pp = 2, microbatches = 2, schedule = "gpipe" })
  config.CHUNKED.gpipe = nil
  eq(ok_t, false, "a bad CHUNKED value")
  eq(err_t, "neusight.parallel.config CHUNKED.gpipe: the schedule's default model chunks per device, an integer >= 2, "
    .. "expected, got true", "its message")
  eq(ok_n or err_n, err_t, "normalize says the same")
  -- none chunked: the message says so (it listed no names)
  config.CHUNKED.interleaved = nil
  local ok_e, err_e = pcall(config.normalize, { pp = 2, microbatches = 2, schedule = "interleaved", virtual_stages = 2 })
  config.CHUNKED.interleaved = 2
  eq(ok_e, false, "no chunked schedule")
  eq(err_e, "parallel.virtual_stages: no schedule runs several model chunks per device (neusight.parallel.config "
    .. "CHUNKED names none; schedule is \"interleaved\")", "its message")
  eq(ok_v and c_w.virtual_stages[1], true, "CHUNKED changed")
  eq(table.concat(c_w.virtual_schedules, ","), "gpipe,interleaved", "sorted")
  eq(skip_v, nil, "12 layers divide pp x 3")
  eq(skip_w, "the gpipe schedule needs the model's 10 layers divisible by pp x virtual_stages", "10 do not")
  eq(skip_1, "the gpipe schedule needs pp >= 2", "the config's rule, without its field name")
  eq(search.pipeline_skip(10, 2, "gpipe", 0), nil, "one chunk again: never skipped here")
  eq(search.pipeline_skip(16, 2, "interleaved", 0), nil, "16 layers over pp 2 x 2")
  eq(search.pipeline_skip(16, 2, "interleaved", 3), "the interleaved schedule needs the model's 16 layers divisible by "
    .. "pp x virtual_stages", "over pp 2 x 3")
  for _, mode in ipairs { "all", "none", "selective", "full" } do search.choices({}, mode) end
  local ok, err = pcall(search.choices, { "1f1b", "gpip" }, "auto")
  eq(ok, false, "unknown schedule")
  eq(err, [[search: --schedule: one of "1f1b", "gpipe", "interleaved" expected, got "gpip" (did you mean 'gpipe'?)]],
    "its message")
  ok, err = pcall(search.choices, {}, "ful")
  eq(ok, false, "unknown mode")
  eq(err, [[search: --recompute: "auto", "all", "none", "selective" or "full" expected, got "ful" (did you mean 'full'?)]],
    "its message")
  -- a schedule a workload registers is one search may try
  local schedules = require("neusight.parallel").schedules
  schedules.test_choices = schedules.gpipe
  local ok2, c2 = pcall(search.choices, { "test_choices" }, "auto")
  schedules.test_choices = nil
  eq(ok2, true, "a registered schedule")
  eq(c2.schedules[1], "test_choices", "is accepted")
  -- no recompute modes at all: a message naming the list, not a Lua error inside the message's making
  local config = require "neusight.parallel.config"
  local kept = config.CHOICES.recompute
  config.CHOICES.recompute = {}
  local ok3, err3 = pcall(search.choices, {}, "full")
  config.CHOICES.recompute = kept
  eq(ok3, false, "no modes")
  eq(err3, "neusight.parallel.config: CHOICES.recompute is empty: search has no recomputation mode to try", "its message")
  local ok5, err5 = pcall(config.one_of, "x", {}, "lbl")  -- and one_of with nothing to choose from
  eq(ok5, false, "one_of of none")
  eq(err5, "lbl: no names to choose from (an empty list of choices)", "its message")
  -- the default schedule is checked against the registry like a given one
  local default = schedules[config.DEFAULT_SCHEDULE]
  schedules[config.DEFAULT_SCHEDULE] = nil
  local ok4, err4 = pcall(search.choices, {}, "auto")
  schedules[config.DEFAULT_SCHEDULE] = default
  eq(ok4, false, "the default unregistered")
  eq(err4:find("search: default schedule", 1, true) ~= nil, true, "names the default: " .. tostring(err4))
end

-- The ranking's document as engine/cli/search_cmd.cpp hands it over (json_push_ordered: a JSON null is a table whose
-- metatable has __json = "null"), with `layouts` and the fields `over` gives.
local function ranking(layouts, over)
  local null = setmetatable({}, { __json = "null" })
  local doc = { model = "gpt2_large", gpu = "H100-SXM5-80GB", gpu_mem_gb = 80.0, gpus = 8, batch = 64, seq = 1024,
    mode = "train", dtype = "bf16", precision = "amp", sequence_parallel = false, distributed_optimizer = false,
    cluster = null, predictor = "roofline", evaluated = 4, fitting = 2, expert_parallel = false, optimizer_step = true,
    choices = search.choices({}, "auto"), layouts = layouts, skipped = { { "heads not divisible by tp", 2 } },
    warnings = {}, figure_lines = { "tokens/s: the batch's tokens over the iteration" } }
  for k, v in pairs(over or {}) do doc[k] = v end
  return doc
end

local function layout(over)
  local l = { dp = 2, tp = 4, pp = 1, ep = 1, microbatches = 1, schedule = "1f1b", virtual_stages = 1,
    recompute = "none", iteration_ms = 12.29, compute_ms = 10.0, exposed_comm_ms = 1.5, bubble_ms = 0.0,
    optimizer_ms = 0.79, imbalance_ms = 0.0, memory_gb = 60.25, fits = true,
    figures = { { key = "tokens_per_s", value = 5.0e6, column = "tokens/s", cell = "5.0M" },
                { key = "mfu", value = setmetatable({}, { __json = "null" }), column = "", cell = "" } } }
  for k, v in pairs(over or {}) do l[k] = v end
  return l
end

-- search's CSV (format_csv): the JSON's rows (layout_fields) in the first row's columns, numbers as every CSV writes
-- them (neusight.report number_csv: 12.29, not fmt's or %.17g's digits; 1e15 as %g writes it), names quoted as
-- csv_field, a null figure empty
function T.test_format_csv_writes_numbers_as_number_csv()
  local number_csv = require("neusight.report").number_csv
  local csv = search.format_csv(ranking { layout { memory_gb = 1e15 },
    layout { dp = 8, tp = 1, recompute = "a,b", iteration_ms = 0.1 + 0.2, memory_gb = 3.0, fits = false } })
  -- (a row that does not fit, as under --all: the no_fit column says why, empty for the row that fits)
  eq(csv, "dp,tp,pp,microbatches,recompute,iteration_ms,compute_ms,exposed_comm_ms,bubble_ms,optimizer_ms,"
    .. "imbalance_ms,memory_gb,fits,no_fit,tokens_per_s,mfu\n"
    .. "2,4,1,1,none,12.29,10,1.5,0,0.79,0,1e+15,true,,5000000,\n"
    .. "8,1,1,1,\"a,b\"," .. number_csv(0.1 + 0.2) .. ",10,1.5,0,0.79,0,3,false,"
    .. "\"needs 3.0 GB per GPU, more than the 80 GB of H100-SXM5-80GB\",5000000,\n", "csv")
  eq(number_csv(1e15), "1e+15", "fmt's {} writes 1000000000000000")
  eq(search.format_csv(ranking({}, { optimizer_step = false })),
    "dp,tp,pp,microbatches,recompute,iteration_ms,compute_ms,exposed_comm_ms,bubble_ms,imbalance_ms,memory_gb,fits\n",
    "no layout shown: the header")
end

-- search's JSON (format_json): the workload, its report fields (json_fields), the parallel flags, the layouts in their
-- fields' order, the reasons as an object in the order given; a null stays null
function T.test_format_json_orders_the_document()
  local doc = search.format_json(ranking { layout() }, { optimizer = "adamw", optimizer_impl = "" })
  local keys = getmetatable(doc).__order
  eq(table.concat(keys, ","), "model,gpu,gpus,batch,seq,mode,dtype,precision,optimizer,optimizer_impl,parallel,"
    .. "predictor,evaluated,fitting,layouts,skipped,warnings", "top-level fields")
  eq(doc.optimizer, "adamw", "json_fields' optimizer")
  eq(getmetatable(doc.parallel.cluster).__json, "null", "no cluster: null")
  local row = doc.layouts[1]
  eq(table.concat(getmetatable(row).__order, ","), "dp,tp,pp,microbatches,recompute,iteration_ms,compute_ms,"
    .. "exposed_comm_ms,bubble_ms,optimizer_ms,imbalance_ms,memory_gb,fits,tokens_per_s,mfu", "a layout's fields")
  eq(getmetatable(row.mfu).__json, "null", "a figure not available: null")
  eq(doc.skipped["heads not divisible by tp"], 2, "the reasons")
  -- a mixture of experts: how its experts ran (--experts), after the optimizer, as predict's JSON says it
  local moe = search.format_json(ranking { layout() }, { optimizer = "adamw", optimizer_impl = "", experts = "grouped" })
  eq(table.concat(getmetatable(moe).__order, ","), "model,gpu,gpus,batch,seq,mode,dtype,precision,optimizer,"
    .. "optimizer_impl,experts,parallel,predictor,evaluated,fitting,layouts,skipped,warnings", "experts named")
  eq(moe.experts, "grouped", "json_fields' experts")
end

-- search's table (format_table): the search in a line, the header and one row per layout, the figures' column as wide
-- as its widest cell, the reasons and the legend
function T.test_format_table_rows()
  local text = search.format_table(ranking { layout(), layout { dp = 8, tp = 1, iteration_ms = 20.04, fits = false } })
  local head = "search    gpt2_large on 8 x H100-SXM5-80GB (80 GB), train, bf16 amp, global batch 64, seq "
    .. "1024: 4 forecasts\n\n"
  eq(text:sub(1, #head), head, "the search in a line")
  eq(text:find("rank   dp   tp   pp   mb recompute   iteration ms tokens/s  compute ms", 1, true) ~= nil, true, text)
  eq(text:find("\n   1    2    4    1    1 none                12.3     5.0M        10.0", 1, true) ~= nil, true, text)
  eq(text:find("20.0     5.0M        10.0          1.5        0.0          0.8       60.2  (does not fit)\n", 1, true)
    ~= nil, true, text)
  eq(text:find("\nskipped\n  2 layout(s): heads not divisible by tp\n", 1, true) ~= nil, true, "the reasons")
  eq(text:sub(-48), "tokens/s: the batch's tokens over the iteration\n", "the figures' lines last")
end

return T
