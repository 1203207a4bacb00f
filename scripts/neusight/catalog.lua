-- scripts/neusight/catalog.lua — `neusight models`: the model presets with their families, parameter counts and
-- sources, as a report (JSON), a table and CSV.
--
-- Parameters are the graph's, counted as a forecast counts them (Σ node params × count of an inference graph of
-- batch 1 × 8 tokens): tied embeddings once, biases and norms included. A preset without a line in SOURCES below is
-- listed with source "-" and the test suite fails (tests/scripts/test_catalog.lua): every preset says where its
-- shapes come from.
local ipairs, pairs, type, tostring, fmt, concat, sort = ipairs, pairs, type, tostring, string.format, table.concat, table.sort

local M = {}

--- Where each preset's shapes come from: the HuggingFace checkpoint whose config.json it copies, or the paper.
M.SOURCES = {
  gpt2_med = "openai-community/gpt2-medium", gpt2_large = "openai-community/gpt2-large",
  gpt2_xl = "openai-community/gpt2-xl",
  gpt3_xl = "NeuSight reference DLmodel_configs/gpt3_xl.json on the GPT-2 code path (24 x 3072: wider than "
    .. "Brown et al.'s 2048-wide GPT-3 XL)",
  gpt3_27 = "GPT-3 2.7B (Brown et al. 2020, table 2.1; the reference's gpt3_27.json) on the GPT-2 code path",
  gpt3_67 = "GPT-3 6.7B (Brown et al. 2020, table 2.1; the reference's gpt3_67.json) on the GPT-2 code path",
  gpt3_13 = "GPT-3 13B (Brown et al. 2020, table 2.1, with d_model 5120 as the reference's gpt3_13.json) on the "
    .. "GPT-2 code path",
  gpt3_175b = "GPT-3 175B (Brown et al. 2020, table 2.1) on the GPT-2 code path",
  bert = "google-bert/bert-base-uncased", bert_large = "google-bert/bert-large-uncased",
  opt = "NeuSight reference DLmodel_configs/opt.json (a one-layer OPT)", opt_13 = "facebook/opt-1.3b",
  switchxl4 = "NeuSight reference DLmodel_configs/switchxl4.json (Switch Transformers, 4 experts)",
  llama2_7b = "meta-llama/Llama-2-7b-hf", llama2_13b = "meta-llama/Llama-2-13b-hf",
  llama2_70b = "meta-llama/Llama-2-70b-hf",
  llama3_8b = "meta-llama/Meta-Llama-3-8B (= Llama-3.1-8B)", llama3_70b = "meta-llama/Meta-Llama-3-70B (= Llama-3.1-70B)",
  llama3_405b = "meta-llama/Llama-3.1-405B",
  llama32_1b = "meta-llama/Llama-3.2-1B", llama32_3b = "meta-llama/Llama-3.2-3B",
  mistral_7b = "mistralai/Mistral-7B-v0.1",
  qwen25_7b = "Qwen/Qwen2.5-7B", qwen25_72b = "Qwen/Qwen2.5-72B",
  qwen3_8b = "Qwen/Qwen3-8B", qwen3_32b = "Qwen/Qwen3-32B",
  phi3_mini = "microsoft/Phi-3-mini-4k-instruct", gemma_7b = "google/gemma-7b", gemma2_9b = "google/gemma-2-9b",
  mixtral_8x7b = "mistralai/Mixtral-8x7B-v0.1", mixtral_8x22b = "mistralai/Mixtral-8x22B-v0.1",
  qwen3_30b_a3b = "Qwen/Qwen3-30B-A3B", qwen15_moe_a27b = "Qwen/Qwen1.5-MoE-A2.7B",
  deepseek_v3 = "deepseek-ai/DeepSeek-V3 (without the multi-token-prediction module)",
  deepseek_v2 = "deepseek-ai/DeepSeek-V2",
  deepseek_v2_lite = "deepseek-ai/DeepSeek-V2-Lite",
}

--- The rows of `neusight models`, sorted by name: { name, arch, model_type, params, active_params (a token's: the
--- builder's active_parameters for mixtures of experts, else params), source }.
---@return table report { models = { row, … } }
function M.models()
  local presets = require("neusight.models.presets")
  local workload = require("neusight.workload")
  local names = {}
  for name in pairs(presets) do names[#names + 1] = name end
  sort(names)
  local rows = {}
  for _, name in ipairs(names) do
    local cfg = presets[name]
    -- the builder's notes collected, not said (workload.graph's `notes`): a forecast's notes on its kernels (Gemma-2's
    -- soft-capping under sdpa) are no listing's
    local w = workload.normalize { model = name, gpu = "-", mode = "inference", batch = 1, seq = 8, dtype = "fp32" }
    local _, nodes = workload.graph(w, nil, {})
    local params = 0
    for _, n in ipairs(nodes) do params = params + (n.params or 0) * (n.count or 1) end
    local builder = require("neusight.models." .. cfg.arch)
    rows[#rows + 1] = { name = name, arch = cfg.arch, model_type = cfg.model_type or cfg.arch, params = params,
                        active_params = builder.active_parameters and builder.active_parameters(cfg) or params,
                        source = M.SOURCES[name] or "-" }
  end
  return { models = rows }
end

local function billions(p)
  if p >= 1e9 then return fmt("%.2f B", p / 1e9) end
  return fmt("%.1f M", p / 1e6)
end

--- The report as a table for people.
function M.format_table(r)
  local width = { 4, 6, 10 }
  for _, m in ipairs(r.models) do
    width[1] = math.max(width[1], #m.name)
    width[2] = math.max(width[2], #m.arch)
    width[3] = math.max(width[3], #m.model_type)
  end
  local line = "%-" .. width[1] .. "s  %-" .. width[2] .. "s  %-" .. width[3] .. "s  %10s  %10s  %s"
  local out = { fmt(line, "name", "family", "model_type", "parameters", "active", "source") }
  for _, m in ipairs(r.models) do
    out[#out + 1] = fmt(line, m.name, m.arch, m.model_type, billions(m.params),
      m.active_params < m.params and billions(m.active_params) or "all", m.source)
  end
  out[#out + 1] = ""
  out[#out + 1] = "parameters: the forecast graph's (tied embeddings once); active: a token's (k of E routed experts)."
  out[#out + 1] = "--format json|csv gives both exactly. A HuggingFace config.json works as --model too"
  out[#out + 1] = "(scripts/neusight/models/hf.lua lists the model_types)."
  return concat(out, "\n") .. "\n"
end

-- A cell: numbers as neusight.report number_csv writes them, text as its csv_field quotes it.
local function csv_cell(v)
  local needs = require("neusight").needs
  if type(v) == "number" then return needs("neusight.report", "number_csv")(v) end
  return needs("neusight.report", "csv_field")(v)
end

--- The report as CSV: one row per preset.
function M.format_csv(r)
  local keys = { "name", "arch", "model_type", "params", "active_params", "source" }
  local out = { concat(keys, ",") }
  for _, m in ipairs(r.models) do
    local cells = {}
    for i, k in ipairs(keys) do cells[i] = csv_cell(m[k]) end
    out[#out + 1] = concat(cells, ",")
  end
  return concat(out, "\n") .. "\n"
end

return M
