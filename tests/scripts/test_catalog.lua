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
  eq(by.deepseek_v3.active_params, 37552282624, "DeepSeek-V3: 8 of 256 routed experts")
  eq(by.llama3_8b.active_params, by.llama3_8b.params, "a dense model: every parameter")
  -- switchxl4: 12 + 12 sparse layers of 4 experts (wi, wo: 1024 × 16384 each), top-1: 3 of 4 experts unused
  eq(by.switchxl4.active_params, by.switchxl4.params - 24 * 3 * 2 * 1024 * 16384, "Switch: one of 4 experts")
  assert(by.mixtral_8x7b.active_params < by.mixtral_8x7b.params / 3, "Mixtral: 2 of 8 experts")
  eq(by.gpt3_175b.arch, "gpt", "family")
end

-- A build given a notes table (workload.graph's third argument: the listing's, neusight.catalog) gets the builder's
-- notes on its kernels appended there, not said (Gemma-2's soft-capping under sdpa), every time
-- (a collected note is not used up by the once-per-model rule). Before, the listing built every preset with eager
-- attention to keep the note out of `neusight models`.
function T.test_a_build_collects_its_notes_when_asked()
  local cfg = {}  -- a name of its own: a note said is said once per model name in a Lua state
  for k, v in pairs(presets.gemma2_9b) do cfg[k] = v end
  cfg.name = "gemma2_listing_probe"
  local w = workload.normalize { model = cfg, gpu = "-", mode = "inference", batch = 1, seq = 8, dtype = "fp32",
                                 attention = "sdpa" }
  for round = 1, 2 do
    local notes = {}
    local _, nodes = workload.graph(w, nil, notes)
    assert(#nodes > 0, "a graph")
    eq(#notes, 1, "round " .. round .. ": the soft-capping note, collected (8 tokens: the window is not reached)")
    assert(notes[1]:find("'gemma2_listing_probe': attn_logit_softcapping under sdpa attention", 1, true), notes[1])
  end
  -- the listing's rows are those of the eager build it made before (the parameters do not depend on the kernel)
  local by = {}
  for _, m in ipairs(catalog.models().models) do by[m.name] = m end
  local _, eager = workload.graph(workload.normalize { model = "gemma2_9b", gpu = "-", mode = "inference", batch = 1,
                                                       seq = 8, dtype = "fp32", attention = "eager" }, nil, {})
  local params = 0
  for _, n in ipairs(eager) do params = params + (n.params or 0) * (n.count or 1) end
  eq(by.gemma2_9b.params, params, "gemma2_9b: the same parameters")
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
  eq(lines[1], "name,arch,model_type,params,active_params,source", "header")
  assert(csv:find("\nllama32_1b,llama,llama,1235814400,1235814400,meta-llama/Llama-3.2-1B\n", 1, true), "exact row")
  -- a name with a carriage return is quoted, as neusight.report csv_field quotes every CSV's text (catalog had its own
  -- quoting, which left \r bare)
  local one = catalog.format_csv({ models = { { name = "odd\rname", arch = "llama", model_type = "llama", params = 1,
    active_params = 1, source = "a,b" } } })
  eq(one, 'name,arch,model_type,params,active_params,source\n"odd\rname",llama,llama,1,1,"a,b"\n', "quoted cells")
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

-- A HuggingFace id that `neusight models` prints as a preset's source suggests that preset (not taken silently).
function T.test_unknown_preset_hf_id_suggests_its_preset()
  local want = " (did you mean the preset 'llama3_8b'? meta-llama/Meta-Llama-3-8B is its source; to read the "
    .. "checkpoint's own shapes give its config.json or snapshot directory)"
  eq(workload.source_hint("meta-llama/Meta-Llama-3-8B"), want, "the id")
  eq(workload.source_hint("Qwen/Qwen2.5-7B"):match("'([^']+)'"), "qwen25_7b", "Qwen")
  eq(workload.source_hint("phi-3-mini-4k-instruct"):match("'([^']+)'"), "phi3_mini", "the name after the '/'")
  eq(workload.source_hint("meta-llama/Nope"), nil, "no such source")
  local ok, err = pcall(workload.normalize, { model = "meta-llama/Meta-Llama-3-8B", gpu = "h100", mode = "train",
    batch = 1, seq = 8 })
  assert(not ok and err:find(want, 1, true), tostring(err))
end

return T
