-- scripts/neusight/models/hf.lua — a HuggingFace config.json (as a plain table) → a model config for neusight/models/<arch>.lua.
--
-- `neusight predict --model dir/config.json` and `model = "dir/config.json"` in a workload reach this
-- module: the engine parses the JSON (null members are left out of the table and listed in a second one) and
-- calls M.from_config(t, path, nulls). To support another architecture, add an entry to M.TYPES: the builder it
-- names and, per field the builder reads, the config.json keys to take it from (first present wins). No rebuild
-- is needed.
--
-- Two kinds of entries. gpt2, bert, opt and switch_transformers take the fields they know and pass over every
-- other key. Strict entries (those with `ignore`, the Llama family and its MoE types) check every key: a builder field is passed
-- under its name (a null one as false, HF's None: "sliding_window": null is no window, while an omitted key
-- takes the config class's default, which the builder applies — M.DEFAULTS in neusight/models/llama.lua and moe.lua),
-- `model_type` is passed too, a key of the `ignore` list is accepted and dropped (it does not change the
-- kernels), and any other key is an error with a did-you-mean — a misspelt num_key_value_heads must not
-- silently become multi-head attention.
local ipairs, pairs, type, tostring, error, pcall, require = ipairs, pairs, type, tostring, error, pcall, require

local M = {}

-- config.json keys of HF's PretrainedConfig (any model_type) that do not change the kernels: bookkeeping,
-- tokenizer ids, generation defaults, task heads and serialization. `attn_implementation` is left to
-- neusight's own `attention` field.
local PRETRAINED_KEYS = {
  "_name_or_path", "architectures", "transformers_version", "torch_dtype", "dtype", "use_bfloat16",
  "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id", "tokenizer_class",
  "prefix", "use_cache", "return_dict", "output_hidden_states", "output_attentions", "torchscript",
  "tf_legacy_loss", "pruned_heads", "tie_encoder_decoder", "is_decoder", "is_encoder_decoder",
  "add_cross_attention", "cross_attention_hidden_size", "chunk_size_feed_forward", "finetuning_task",
  "id2label", "label2id", "num_labels", "problem_type", "task_specific_params", "max_length", "min_length",
  "do_sample", "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty", "temperature", "top_k",
  "top_p", "typical_p", "repetition_penalty", "length_penalty", "no_repeat_ngram_size",
  "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences", "output_scores",
  "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
  "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens", "attn_implementation",
  "_attn_implementation_autoset",
}

-- Llama-family keys that do not change the kernels: the position limit and the RoPE frequencies (the
-- rotary kernels are the same whatever rope_theta / rope_scaling say; the cos/sin tables are not modelled),
-- the norm epsilon, initialisation, pretraining_tp (modern HF ignores it; HF < 4.45 split the projections in
-- slices when it was > 1), Qwen's multimodal-RoPE switch and its name for the sliding-window sizes of
-- generation.
local LLAMA_KEYS = {
  "max_position_embeddings", "rope_theta", "rope_scaling", "rms_norm_eps", "initializer_range", "pretraining_tp",
  "use_mrope",
}

-- { builder field = { the same key } } for a list of fields.
local function same_names(list)
  local out = {}
  for _, k in ipairs(list) do out[k] = { k } end
  return out
end

-- MoE keys that do not change the kernels: whether HF returns the router logits and the aux loss's weight
-- (neusight/models/moe.lua always includes the aux loss in training).
local MOE_KEYS = { "output_router_logits", "router_aux_loss_coef" }

-- Strict entry for one Llama-family model_type (neusight/models/<arch>.lua lists its fields): arch "llama", or "moe"
-- for the Mixture-of-Experts types.
local function llama_family(model_type, arch)
  arch = arch or "llama"
  return {
    arch = arch, model_type = true, ignore = { PRETRAINED_KEYS, LLAMA_KEYS, arch == "moe" and MOE_KEYS or nil },
    fields = function() return same_names(require("neusight.models." .. arch).fields(model_type)) end,
  }
end

--- model_type → { arch = builder in neusight/models/, fields = { builder field = { config.json keys… } } },
--- or fields = "all" to pass every scalar (non-table) field through under its config.json name. Optional:
--- fields may be a function returning the table (read when the type is used); model_type = true passes the
--- model_type on; ignore = { lists of keys } makes the entry strict (see the top of this file).
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
  -- LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM: one builder, strict keys.
  llama = llama_family("llama"),
  mistral = llama_family("mistral"),
  qwen2 = llama_family("qwen2"),
  qwen3 = llama_family("qwen3"),
  -- MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM: the Llama decoder with MoE blocks, strict keys.
  mixtral = llama_family("mixtral", "moe"),
  qwen2_moe = llama_family("qwen2_moe", "moe"),
  qwen3_moe = llama_family("qwen3_moe", "moe"),
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

-- The did-you-mean hint for an unknown key among the known ones.
local function hint(key, known)
  local best = require("neusight.workload").did_you_mean(key, known)
  return best and (" (did you mean '%s'?)"):format(best) or ""
end

--- Converts a parsed config.json into { name, arch, <builder fields> }. Errors start with `path`.
---@param t table the JSON object
---@param path string the file as the user named it (messages, default name)
---@param nulls? table { key = true } for the members that were null in the file
---@return table cfg
function M.from_config(t, path, nulls)
  local mt = t.model_type
  local entry = type(mt) == "string" and M.TYPES[mt] or nil
  if not entry or not builder_exists(entry.arch) then
    local what = mt == nil and "has no 'model_type'" or ("has model_type %s, which is not supported"):format(
      type(mt) == "string" and ("%q"):format(mt) or tostring(mt))
    error(("%s: %s; supported: %s"):format(path, what, table.concat(M.supported(), ", ")), 0)
  end
  local cfg = { name = name_of(path), arch = entry.arch }
  if entry.model_type then cfg.model_type = mt end
  if entry.fields == "all" then
    for k, v in pairs(t) do
      if type(v) ~= "table" and k ~= "model_type" and k ~= "name" and k ~= "arch" then cfg[k] = v end
    end
    return cfg
  end
  local fields = type(entry.fields) == "function" and entry.fields() or entry.fields
  if entry.ignore then
    local known, ignored = { "model_type" }, {}
    for field in pairs(fields) do known[#known + 1] = field end
    for _, list in ipairs(entry.ignore) do
      for _, k in ipairs(list) do
        ignored[k] = true
        known[#known + 1] = k
      end
    end
    table.sort(known)
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = k end
    for k in pairs(nulls or {}) do
      if t[k] == nil then keys[#keys + 1] = k end
    end
    table.sort(keys)
    for _, k in ipairs(keys) do
      if k ~= "model_type" and not fields[k] and not ignored[k] then
        error(("%s: unknown key '%s' for model_type %q%s"):format(path, k, mt, hint(k, known)), 0)
      end
    end
  end
  for field, keys in pairs(fields) do
    for _, key in ipairs(keys) do
      if t[key] ~= nil then
        cfg[field] = t[key]
        break
      elseif entry.ignore and nulls and nulls[key] then
        cfg[field] = false -- HF's None
        break
      end
    end
  end
  return cfg
end

return M
