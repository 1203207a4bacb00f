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

-- search's CSV (format_csv): the JSON's rows in the columns given, numbers as every CSV writes them
-- (neusight.report number_csv: 12.29, not fmt's or %.17g's digits; 1e15 as %g writes it), names quoted as csv_field
function T.test_format_csv_writes_numbers_as_number_csv()
  local number_csv = require("neusight.report").number_csv
  local csv = search.format_csv {
    columns = { "dp", "tp", "schedule", "iteration_ms", "memory_gb", "fits" },
    rows = { { dp = 2, tp = 4, schedule = "1f1b", iteration_ms = 12.29, memory_gb = 1e15, fits = true },
             { dp = 8, tp = 1, schedule = "a,b", iteration_ms = 0.1 + 0.2, memory_gb = 3.0, fits = false } },
  }
  eq(csv, "dp,tp,schedule,iteration_ms,memory_gb,fits\n"
    .. "2,4,1f1b,12.29," .. number_csv(1e15) .. ",true\n"
    .. "8,1,\"a,b\"," .. number_csv(0.1 + 0.2) .. ",3,false\n", "csv")
  eq(number_csv(1e15), "1e+15", "fmt's {} writes 1000000000000000")
  eq(search.format_csv { columns = { "dp", "fits" }, rows = {} }, "dp,fits\n", "no layout shown: the header")
end

return T
