-- scripts/neusight/models/hf.lua — a HuggingFace config.json (as a plain table) → a model config for neusight/models/<arch>.lua.
--
-- `neusight predict --model dir/config.json` and `model = "dir/config.json"` in a workload reach this
-- module: the engine parses the JSON (null members are left out) and calls M.from_config(t, path).
-- To support another architecture, add an entry to M.TYPES: the builder it names and, per field the
-- builder reads, the config.json keys to take it from (first present wins). No rebuild is needed.
local ipairs, pairs, type, tostring, error, pcall, require = ipairs, pairs, type, tostring, error, pcall, require

local M = {}

--- model_type → { arch = builder in neusight/models/, fields = { builder field = { config.json keys… } } },
--- or fields = "all" to pass every scalar (non-table) field through under its config.json name.
M.TYPES = {
  gpt2 = {
    arch = "gpt",
    fields = {
      n_layer = { "n_layer" }, n_embd = { "n_embd" }, n_head = { "n_head" }, vocab_size = { "vocab_size" },
      n_positions = { "n_positions", "n_ctx" }, n_inner = { "n_inner" },
      tie_word_embeddings = { "tie_word_embeddings" },
    },
  },
  bert = {
    arch = "bert",
    fields = {
      num_hidden_layers = { "num_hidden_layers" }, hidden_size = { "hidden_size" },
      num_attention_heads = { "num_attention_heads" }, intermediate_size = { "intermediate_size" },
      hidden_act = { "hidden_act" }, vocab_size = { "vocab_size" },
      max_position_embeddings = { "max_position_embeddings" }, type_vocab_size = { "type_vocab_size" },
      num_labels = { "num_labels" }, tie_word_embeddings = { "tie_word_embeddings" },
    },
  },
  opt = {
    arch = "opt",
    fields = {
      num_hidden_layers = { "num_hidden_layers" }, hidden_size = { "hidden_size" },
      num_attention_heads = { "num_attention_heads" }, ffn_dim = { "ffn_dim" },
      word_embed_proj_dim = { "word_embed_proj_dim" }, activation_function = { "activation_function" },
      do_layer_norm_before = { "do_layer_norm_before" }, enable_bias = { "enable_bias" },
      _remove_final_layer_norm = { "_remove_final_layer_norm" }, vocab_size = { "vocab_size" },
      max_position_embeddings = { "max_position_embeddings" }, tie_word_embeddings = { "tie_word_embeddings" },
    },
  },
  -- Used only where scripts/neusight/models/switch.lua exists. Its configs keep the config.json names
  -- (SwitchTransformersConfig), so every scalar field is passed through (`fields = "all"`).
  switch_transformers = { arch = "switch", fields = "all" },
}

-- Whether neusight/models/<arch>.lua can be found (errors inside an existing builder are raised).
local function builder_exists(arch)
  local ok, err = pcall(require, "neusight.models." .. arch)
  if ok then return true end
  if tostring(err):find("module 'neusight.models." .. arch .. "' not found", 1, true) then return false end
  error(err, 0)
end

--- The model_type values with a builder present, sorted.
function M.supported()
  local out = {}
  for model_type, t in pairs(M.TYPES) do
    if builder_exists(t.arch) then out[#out + 1] = model_type end
  end
  table.sort(out)
  return out
end

-- "dir/gpt2_med.json" → "gpt2_med"; "dir/gpt2-medium/config.json" → "gpt2-medium".
local function name_of(path)
  local dir, stem = path:match("^(.-)([^/\\]+)%.[jJ][sS][oO][nN]$")
  if stem == "config" and dir and dir ~= "" then
    local parent = dir:match("([^/\\]+)[/\\]+$")
    if parent and parent ~= "." and parent ~= ".." then return parent end
  end
  return stem or path
end

--- Converts a parsed config.json into { name, arch, <builder fields> }. Errors start with `path`.
---@param t table the JSON object
---@param path string the file as the user named it (messages, default name)
---@return table cfg
function M.from_config(t, path)
  local mt = t.model_type
  local entry = type(mt) == "string" and M.TYPES[mt] or nil
  if not entry or not builder_exists(entry.arch) then
    local what = mt == nil and "has no 'model_type'" or ("has model_type %s, which is not supported"):format(
      type(mt) == "string" and ("%q"):format(mt) or tostring(mt))
    error(("%s: %s; supported: %s"):format(path, what, table.concat(M.supported(), ", ")), 0)
  end
  local cfg = { name = name_of(path), arch = entry.arch }
  if entry.fields == "all" then
    for k, v in pairs(t) do
      if type(v) ~= "table" and k ~= "model_type" and k ~= "name" and k ~= "arch" then cfg[k] = v end
    end
    return cfg
  end
  for field, keys in pairs(entry.fields) do
    for _, key in ipairs(keys) do
      if t[key] ~= nil then
        cfg[field] = t[key]
        break
      end
    end
  end
  return cfg
end

return M
