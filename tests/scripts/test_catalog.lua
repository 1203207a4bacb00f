-- tests/scripts/test_catalog.lua — `neusight models` (neusight.catalog): every preset listed once, with its source and
-- the graph's parameter count; the unknown-preset hint lists the presets a prefix names.
local catalog = require "neusight.catalog"
local presets = require "neusight.models.presets"
local workload = require "neusight.workload"

local function eq(got, want, what)
  if got ~= want then error(("%s:\n  expected %s\n  got      %s"):format(what, tostring(want), tostring(got)), 2) end
end

local T = {}

function T.test_every_preset_once_with_a_source()
  local r = catalog.models()
  local seen, n = {}, 0
  for name in pairs(presets) do n = n + 1 end
  eq(#r.models, n, "one row per preset")
  for i, m in ipairs(r.models) do
    assert(presets[m.name], m.name .. ": not a preset")
    assert(not seen[m.name], m.name .. ": listed twice")
    seen[m.name] = true
    assert(m.source ~= "-" and catalog.SOURCES[m.name], m.name .. ": no source in neusight.catalog SOURCES")
    assert(m.params > 0 and m.params == math.floor(m.params), m.name .. ": a positive whole parameter count")
    if i > 1 then assert(r.models[i - 1].name < m.name, "sorted by name") end
  end
  for name in pairs(catalog.SOURCES) do
    assert(presets[name], "SOURCES names no preset (a renamed preset leaves a stale line): " .. name)
  end
end

function T.test_parameter_counts_are_huggingface_s()
  local by = {}
  for _, m in ipairs(catalog.models().models) do by[m.name] = m end
  eq(by.llama32_1b.params, 1235814400, "meta-llama/Llama-3.2-1B (tied embeddings once)")
  eq(by.llama3_8b.params, 8030261248, "meta-llama/Llama-3.1-8B")
  eq(by.gpt2_large.params, 774030080, "gpt2-large")
  eq(by.mixtral_8x7b.params, 46702792704, "Mixtral-8x7B")
  eq(by.bert.params, 109483778, "bert-base-uncased with its 2-class pooler head")
  eq(by.mixtral_8x7b.model_type, "mixtral", "model_type")
  eq(by.gpt3_175b.arch, "gpt", "family")
end

function T.test_table_and_csv_have_a_line_per_preset()
  local r = catalog.models()
  local text = catalog.format_table(r)
  for _, m in ipairs(r.models) do
    assert(text:find("\n" .. m.name .. " ", 1, true), m.name .. " in the table")
  end
  local csv = catalog.format_csv(r)
  local lines = {}
  for line in csv:gmatch("[^\n]+") do lines[#lines + 1] = line end
  eq(#lines, #r.models + 1, "a header and a row per preset")
  eq(lines[1], "name,arch,model_type,params,source", "header")
  assert(csv:find("\nllama32_1b,llama,llama,1235814400,meta-llama/Llama-3.2-1B\n", 1, true), "exact row")
end

function T.test_unknown_preset_hints()
  local names = {}
  for name in pairs(presets) do names[#names + 1] = name end
  table.sort(names)
  local h = workload.preset_hint("gpt3", names)
  assert(h:find("gpt3_175b", 1, true) and h:find("one of", 1, true), h)
  assert(not h:find("'opt'", 1, true), "a prefix beats an edit-distance neighbour: " .. h)
  eq(workload.preset_hint("llama3-8b", names), " (did you mean 'llama3_8b'?)", "'-' typed for '_'")
  eq(workload.preset_hint("Mixtral_8x7", names), " (did you mean 'mixtral_8x7b'?)", "a single prefix match")
  eq(workload.preset_hint("zzzzzz", names), "", "nothing close")
  local ok, err = pcall(workload.normalize, { model = "gpt3", gpu = "h100", mode = "train", batch = 1, seq = 8 })
  assert(not ok and err:find("gpt3_175b", 1, true), tostring(err))
end

return T
