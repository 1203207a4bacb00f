-- tests/scripts/test_hf.lua — HuggingFace config.json tables → builder configs (scripts/neusight/models/hf.lua).
local hf = require "neusight.models.hf"
local presets = require "neusight.models.presets"

local function eq(got, want, what)
  if got ~= want then error(("%s:\n  expected %s\n  got      %s"):format(what, tostring(want), tostring(got)), 2) end
end

local function raises(fn, want)
  local ok, err = pcall(fn)
  if ok then error("expected an error: " .. want, 2) end
  eq(err, want, "error message")
end

local M = {}

function M.test_gpt2_fields_and_name()
  local cfg = hf.from_config({
    model_type = "gpt2", n_layer = 24, n_embd = 1024, n_head = 16, vocab_size = 50257, n_positions = 1024,
    n_ctx = 1024, activation_function = "gelu_new", architectures = { "GPT2LMHeadModel" },
  }, "configs/gpt2_med.json")
  local want = presets.gpt2_med
  for k, v in pairs(want) do eq(cfg[k], v, "field " .. k) end
  for k in pairs(cfg) do
    if want[k] == nil then error("unexpected field " .. k) end
  end
end

function M.test_name_from_folder_of_config_json()
  eq(hf.from_config({ model_type = "bert" }, "models/bert-base-uncased/config.json").name, "bert-base-uncased", "name")
  eq(hf.from_config({ model_type = "bert" }, "config.json").name, "config", "bare config.json")
  eq(hf.from_config({ model_type = "opt" }, "x/opt_13.JSON").name, "opt_13", "upper-case extension")
end

function M.test_n_ctx_fallback_and_renames()
  local cfg = hf.from_config({ model_type = "gpt2", n_ctx = 512 }, "a.json")
  eq(cfg.arch, "gpt", "arch")
  eq(cfg.n_positions, 512, "n_positions from n_ctx")
end

function M.test_unknown_and_missing_model_type()
  local supported = table.concat(hf.supported(), ", ")
  eq(supported:sub(1, 76), "bert, gpt2, llama, mistral, mixtral, opt, qwen2, qwen2_moe, qwen3, qwen3_moe", "supported list")
  raises(function() hf.from_config({ model_type = "rwkv" }, "l.json") end,
    [[l.json: has model_type "rwkv", which is not supported; supported: ]] .. supported)
  raises(function() hf.from_config({}, "e.json") end, "e.json: has no 'model_type'; supported: " .. supported)
end

function M.test_user_extension()
  hf.TYPES.my_gpt = { arch = "gpt", fields = { n_layer = { "layers" } } }
  local ok, cfg = pcall(hf.from_config, { model_type = "my_gpt", layers = 3 }, "m.json")
  hf.TYPES.my_gpt = nil
  assert(ok, cfg)
  eq(cfg.n_layer, 3, "renamed field")
end

return M
