-- scripts/neusight/models/hf.lua — a HuggingFace config.json (as a plain table) → a model config for neusight/models/<arch>.lua.
--
-- `neusight predict --model dir/config.json` and `model = "dir/config.json"` in a workload reach this
-- module: the engine parses the JSON (null members are left out of the table and listed in a second one) and
-- calls M.from_config(t, path, nulls). To support another architecture, add an entry to M.TYPES: the builder it
-- names and, per field the builder reads, the config.json keys to take it from (first present wins). No rebuild
-- is needed; without editing this file, a builder of the model_type's name on the script search path that declares
-- `HF`, such an entry without arch, adds it (user_entry below; README "Writing a model builder").
--
-- Every bundled entry is strict (it has `ignore`): each key of the file must be a builder field, a key of the
-- `ignore` lists (HF's own keys that do not change the kernels: accepted and dropped) or a key of `fixed` (HF keys
-- that would change the kernels, accepted only at the value the builder models); any other key is an error with a
-- did-you-mean — a misspelt n_inner or num_key_value_heads must not silently become the default. An omitted
-- builder field takes the config class's documented default: `defaults` here (gpt2, bert, opt, switch; only the
-- fields whose builder default differs from HF's or that the builder requires), M.DEFAULTS in
-- neusight/models/llama.lua and moe.lua for the Llama family and its MoE types (mixtral, qwen2_moe, qwen3_moe), in
-- neusight/models/deepseek.lua for deepseek_v3 and deepseek_v2 (these tables hold their max_position_embeddings too,
-- which no kernel reads: `rotary` below takes it from there). A null member is HF's None: for the Llama family it is
-- passed as false ("sliding_window": null is no window; "max_position_embeddings": null counts as omitted); elsewhere
-- it counts as omitted without taking `defaults` (gpt2's "n_inner": null is 4 · n_embd, the builder's own default).
-- An entry without `ignore` (a user's extension) takes the fields it knows and passes over every other key.
local ipairs, pairs, type, tostring, error, pcall, require, setmetatable =
  ipairs, pairs, type, tostring, error, pcall, require, setmetatable

local M = {}

-- config.json keys of HF's PretrainedConfig (any model_type) that do not change the kernels: bookkeeping,
-- tokenizer ids, generation defaults, task heads and serialization. `attn_implementation` is left to
-- neusight's own `attention` field. `auto_map` (a remote-code checkpoint's pointer to its own configuration and
-- modeling classes, e.g. Phi-3's before transformers 4.40) names Python classes, never a shape: the model_type's
-- builder is the one priced, whatever auto_map names.
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
  "_attn_implementation_autoset", "auto_map",
}

-- Keys some configs carry that HF itself reads only at the value we model; gradient checkpointing (a legacy
-- config key HF still honours) recomputes the forward in training: use the workload's parallel.recompute.
local COMMON_FIXED = { gradient_checkpointing = { false } }

-- GPT2Config keys that do not change the kernels (dropout probabilities keep their kernels; the summary_* keys
-- belong to the sequence-summary head of GPT2DoubleHeadsModel), and padded_vocab_size, a Megatron field the
-- NeuSight reference's gpt3_* configs carry (HF ignores it).
local GPT2_KEYS = {
  "attn_pdrop", "embd_pdrop", "resid_pdrop", "layer_norm_epsilon", "initializer_range", "summary_type",
  "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout", "padded_vocab_size",
}

-- BertConfig keys that do not change the kernels.
local BERT_KEYS = {
  "hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range", "layer_norm_eps", "classifier_dropout",
}

-- OPTConfig keys that do not change the kernels.
local OPT_KEYS = {
  "dropout", "attention_dropout", "activation_dropout", "layerdrop", "init_std",
}

-- SwitchTransformersConfig keys that do not change the kernels (num_sparse_*_layers only derive the sparse steps
-- when those are omitted, see `derive` below).
local SWITCH_KEYS = {
  "num_sparse_encoder_layers", "num_sparse_decoder_layers", "relative_attention_max_distance", "dropout_rate",
  "layer_norm_epsilon", "initializer_factor", "router_aux_loss_coef", "router_z_loss_coef", "router_jitter_noise",
  "router_dtype", "router_ignore_padding_tokens", "router_type", "router_bias", "add_router_probs",
}

-- Llama-family keys that do not change the kernels: the position limit and the RoPE frequencies (the
-- rotary kernels are the same whatever rope_theta / rope_scaling say; the cos/sin tables are not modelled;
-- rope_parameters is transformers v5's one table for both, validated as they are: check.lua NEUTRAL),
-- the norm epsilon, initialisation, pretraining_tp (modern HF ignores it; HF < 4.45 split the projections in
-- slices when it was > 1), Qwen's multimodal-RoPE switch and its name for the sliding-window sizes of
-- generation.
local LLAMA_KEYS = {
  "max_position_embeddings", "rope_theta", "rope_scaling", "rope_parameters", "rms_norm_eps", "initializer_range",
  "pretraining_tp", "use_mrope",
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

-- DeepSeek-V3 config.json keys that do not change the kernels of HF's DeepseekV3ForCausalLM: the remote code's
-- training-only aux-loss knobs (aux_loss_alpha, seq_aux), ep_size, the MTP depth (HF builds no MTP
-- module) and head_dim (the config class sets it to qk_rope_head_dim for the rotary tables). Its fp8
-- quantization_config is read as every rotary model's (QUANTIZATION).
local DEEPSEEK_KEYS = { "aux_loss_alpha", "seq_aux", "ep_size", "num_nextn_predict_layers", "head_dim" }

-- A checkpoint's quantization_config (FP8, AWQ, GPTQ repos of Llama-family and DeepSeek models) describes how its
-- weights are stored, not the model's shapes: every kernel keeps its shape, and what the weights cost is the
-- workload's (--dtype, --weight-dtype). Accepted with a warning rather than refused, so that such a config forecasts
-- at all, and never read silently: the warning says that the storage is not taken from it and which flag sets it.
local function quantization_note(path, q)
  local method = type(q) == "table" and type(q.quant_method) == "string" and (" (quant_method %q)"):format(q.quant_method)
    or ""
  return ("%s: quantization_config%s is not read: the weights are priced in the workload's dtype; give --weight-dtype "
    .. "fp8|int8|int4 (workload field weight_dtype) for weight-only quantisation, or --dtype fp8 for fp8 weights and "
    .. "activations"):format(path, method)
end
M.quantization_note = quantization_note

-- What each config table M.from_config made does not read of its file (quantization_note), by table (weak keys).
local CONFIG_WARNINGS = setmetatable({}, { __mode = "k" })
-- Where each config table M.from_config made came from, by table (weak keys): { path, key = { field → the file's key
-- it was taken from }, null = { field → the file's key that was null }, lines = { key → line } } (M.config_key,
-- M.config_null).
local CONFIG_SOURCE = setmetatable({}, { __mode = "k" })

-- Config tables M.from_config made of a config.json that says "use_cache": false (weak keys; M.use_cache).
local NO_CACHE = setmetatable({}, { __mode = "k" })
-- The dtype each config table M.from_config made names for its checkpoint: { path, key, line, value } of its torch_dtype
-- (or transformers v5's dtype), by table (weak keys; M.config_dtype).
local CONFIG_DTYPE = setmetatable({}, { __mode = "k" })

--- The dtype the config.json of `cfg` names for its checkpoint: the file (as the user named it), the key (torch_dtype,
--- or transformers v5's dtype), its line (nil where the text gives none) and its value as the file writes it
--- ("bfloat16"); nil for a table M.from_config did not make or a file without either key. No kernel reads it: the
--- forecast's dtype is the workload's (neusight.workload warns when that is the default and this names another).
---@return string? path
---@return string? key
---@return integer? line
---@return string? value
function M.config_dtype(cfg)
  local d = CONFIG_DTYPE[cfg]
  if d then return d.path, d.key, d.line, d.value end
end

--- Whether HF's forward of the model `cfg` keeps its past_key_values: false when its config.json says
--- "use_cache": false (PretrainedConfig's key, no kernel reads it), true otherwise (HF's default, and every preset's).
--- neusight.workload passes it on as opts.use_cache; neusight.nodes hf_cache counts the cache of an inference forward.
---@param cfg table
---@return boolean
function M.use_cache(cfg) return not NO_CACHE[cfg] end

--- Where builder field `field` of config table `cfg` stands in its config.json: the file (as the user named it), the
--- key it was read from (nil: the file does not hold it, the default applies) and that key's line (nil where the text
--- gives none). nil for a table M.from_config did not make (a preset, a config table in a script). A builder's error
--- about the field names the key and its line by it (neusight.models.check divisible).
---@return string? path
---@return string? key
---@return integer? line
function M.config_key(cfg, field)
  local src = CONFIG_SOURCE[cfg]
  if not src then return nil end
  local key = src.key[field]
  return src.path, key, key and src.lines[key] or nil
end

--- Where builder field `field` of config table `cfg` was null in its config.json (HF's None, read as false or as
--- omitted: the top of this file): the file, the null key and its line (nil where the text gives none); nil when the
--- field was not null there, or for a table M.from_config did not make. A builder's message then says null, not the
--- false or nil it reads (neusight.models.check counts).
---@return string? path
---@return string? key
---@return integer? line
function M.config_null(cfg, field)
  local src = CONFIG_SOURCE[cfg]
  local key = src and src.null[field]
  if not key then return nil end
  return src.path, key, src.lines[key]
end

--- The warnings of a config table M.from_config made (its quantization_config: quantization_note), in a new array;
--- none for any other table. neusight.workload model_warnings reads them: a workload's warnings, which every command
--- says and writes into its JSON `warnings` (each forecast that reads the file has them: search and serve say them
--- once, a comparison in the rows that read it).
---@param cfg table
---@return string[]
function M.config_warnings(cfg)
  local out = {}
  for i, w in ipairs(CONFIG_WARNINGS[cfg] or {}) do out[i] = w end
  return out
end

-- A strict entry of a rotary model_type (llama.lua, moe.lua, deepseek.lua) completed: its builder fields and
-- max_position_embeddings, which no kernel reads (LLAMA_KEYS) but which a forecast beyond it warns of
-- (neusight.workload position_limit), HF's default when omitted: the builder's M.DEFAULTS[model_type] (LlamaConfig
-- 2048, MistralConfig and MixtralConfig 4096 * 32, Qwen2/Qwen3(Moe)Config 32768, DeepseekV3Config 4096,
-- DeepseekV2Config 2048); "max_position_embeddings": null counts as omitted (not false, which the builders' count check
-- refuses). Both are read when the type is used (the builder is loaded then).
local function rotary(entry, model_type)
  local function builder() return require("neusight.models." .. entry.arch) end
  entry.fields = function()
    local fields = same_names(builder().fields(model_type))
    fields.max_position_embeddings = { "max_position_embeddings" }
    return fields
  end
  entry.defaults = function()
    return { max_position_embeddings = builder().DEFAULTS[model_type].max_position_embeddings }
  end
  entry.null_is_omitted = { max_position_embeddings = true }
  entry.quantization = true -- quantization_config: accepted with quantization_note's warning
  return entry
end

-- Strict entry for one Llama-family model_type (neusight/models/<arch>.lua lists its fields): arch "llama", or "moe"
-- for the Mixture-of-Experts types; `own` = { ignore = the type's own keys that change no kernel, fixed = its keys
-- accepted at the modelled value only } (Phi-3, Gemma2).
local function llama_family(model_type, arch, own)
  arch = arch or "llama"
  return rotary({
    arch = arch, model_type = true,
    ignore = { PRETRAINED_KEYS, LLAMA_KEYS, arch == "moe" and MOE_KEYS or own and own.ignore or nil },
    fixed = own and own.fixed, null_is_false = true,
  }, model_type)
end

-- attention_bias of a model_type whose builder has no attention bias at all (Phi-3's qkv_proj and o_proj, Mistral's,
-- Mixtral's: HF's modeling code builds them bias-free and ignores the key): accepted at false, the value modelled; true
-- stays an error (a bias the builder cannot add). Types with q/k/v biases of their own (qwen2, qwen2_moe) do not take it.
local NO_ATTENTION_BIAS = { attention_bias = { false } }

-- Phi3Config keys: original_max_position_embeddings only scales LongRoPE's frequencies (no kernel reads it);
-- resid_pdrop and embd_pdrop are nn.Dropout probabilities, modelled at 0 only (p = 0 launches no kernel: the
-- shipped value; a positive one adds dropout kernels in training that the builder does not emit);
-- partial_rotary_factor (Phi-4-mini's 0.75 rotates part of each head) changes the rotary kernels' shapes: 1 only.
local PHI3 = {
  ignore = { "original_max_position_embeddings" },
  fixed = { resid_pdrop = { 0 }, embd_pdrop = { 0 }, partial_rotary_factor = { 1 },
            attention_bias = NO_ATTENTION_BIAS.attention_bias },
}

-- Gemma2Config keys that change no kernel: query_pre_attn_scalar (the attention's scale is its ^-0.5: the same mul
-- kernel), the generation cache's class, and sliding_window_size (an older name the config class does not read).
local GEMMA2 = { ignore = { "query_pre_attn_scalar", "cache_implementation", "sliding_window_size" } }

--- model_type → { arch = builder in neusight/models/, fields = { builder field = { config.json keys… } } },
--- or fields = "all" to pass every scalar (non-table) field through under its config.json name. Optional:
--- fields may be a function returning the table (read when the type is used); model_type = true passes the
--- model_type on; ignore = { lists of keys } makes the entry strict, fixed = { key = { accepted values… } },
--- defaults = { builder field = HF's default } (or a function returning it, as fields), derive = function(t, cfg)
--- filling fields HF computes from others, null_is_false = true passes a null builder field as false (see the top of
--- this file), null_is_omitted = { builder field = true } takes a null one as omitted (its `defaults` value; the rotary
--- types' max_position_embeddings).
M.TYPES = {
  -- GPT2Config: GPT-2's gelu_new MLP and scaled attention, as neusight/models/gpt.lua builds it.
  gpt2 = {
    arch = "gpt",
    fields = {
      n_layer = { "n_layer" }, n_embd = { "n_embd" }, n_head = { "n_head" }, vocab_size = { "vocab_size" },
      n_positions = { "n_positions", "n_ctx" }, n_inner = { "n_inner" },
      tie_word_embeddings = { "tie_word_embeddings" },
    },
    defaults = { n_layer = 12, n_embd = 768, n_head = 12, vocab_size = 50257, n_positions = 1024 },
    ignore = { PRETRAINED_KEYS, GPT2_KEYS, { "n_ctx" } },
    fixed = { activation_function = { "gelu_new" }, scale_attn_weights = { true },
              scale_attn_by_inverse_layer_idx = { false }, reorder_and_upcast_attn = { false } },
  },
  -- BertConfig (absolute position embeddings, the only kind neusight/models/bert.lua builds).
  bert = {
    arch = "bert",
    fields = {
      num_hidden_layers = { "num_hidden_layers" }, hidden_size = { "hidden_size" },
      num_attention_heads = { "num_attention_heads" }, intermediate_size = { "intermediate_size" },
      hidden_act = { "hidden_act" }, vocab_size = { "vocab_size" },
      max_position_embeddings = { "max_position_embeddings" }, type_vocab_size = { "type_vocab_size" },
      num_labels = { "num_labels" }, tie_word_embeddings = { "tie_word_embeddings" },
    },
    defaults = { num_hidden_layers = 12, hidden_size = 768, num_attention_heads = 12, intermediate_size = 3072,
                 vocab_size = 30522, max_position_embeddings = 512, type_vocab_size = 2 },
    -- PretrainedConfig: without num_labels, an id2label table sets it (its size).
    derive = function(t, cfg)
      if cfg.num_labels == nil and type(t.id2label) == "table" then
        local n = 0
        for _ in pairs(t.id2label) do n = n + 1 end
        if n > 0 then cfg.num_labels = n end
      end
    end,
    ignore = { PRETRAINED_KEYS, BERT_KEYS },
    fixed = { position_embedding_type = { "absolute" } },
  },
  -- OPTConfig (word_embed_proj_dim None is hidden_size, the builder's own default).
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
    defaults = { num_hidden_layers = 12, hidden_size = 768, num_attention_heads = 12, ffn_dim = 3072,
                 vocab_size = 50272, max_position_embeddings = 2048 },
    ignore = { PRETRAINED_KEYS, OPT_KEYS },
    fixed = { layer_norm_elementwise_affine = { true } },
  },
  -- SwitchTransformersConfig, used only where scripts/neusight/models/switch.lua exists: a dense ReLU FFN
  -- (is_gated_act false) in every expert.
  switch_transformers = {
    arch = "switch",
    fields = same_names { "num_layers", "num_decoder_layers", "d_model", "d_ff", "d_kv", "num_heads", "num_experts",
                          "expert_capacity", "encoder_sparse_step", "decoder_sparse_step", "vocab_size",
                          "relative_attention_num_buckets" },
    defaults = { vocab_size = 32128, d_model = 768, d_kv = 64, d_ff = 2048, expert_capacity = 64, num_layers = 12,
                 num_decoder_layers = 12, num_heads = 12, num_experts = 8, relative_attention_num_buckets = 32 },
    -- HF computes the sparse steps from num_sparse_*_layers (default 3) unless the file sets them.
    derive = function(t, cfg)
      for _, side in ipairs { { "encoder", "num_layers" }, { "decoder", "num_decoder_layers" } } do
        local step, layers = side[1] .. "_sparse_step", cfg[side[2]]
        if cfg[step] == nil and type(layers) == "number" then
          local sparse = t["num_sparse_" .. side[1] .. "_layers"]
          if sparse == nil then sparse = 3 end
          cfg[step] = (type(sparse) == "number" and sparse > 0) and layers // sparse or layers
        end
      end
    end,
    ignore = { PRETRAINED_KEYS, SWITCH_KEYS },
    fixed = { dense_act_fn = { "relu" }, feed_forward_proj = { "relu" }, is_gated_act = { false } },
  },
  -- LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM: one builder, strict keys.
  llama = llama_family("llama"),
  mistral = llama_family("mistral", nil, { fixed = NO_ATTENTION_BIAS }),
  qwen2 = llama_family("qwen2"),
  qwen3 = llama_family("qwen3"),
  -- Phi3ForCausalLM (fused qkv_proj and gate_up_proj), GemmaForCausalLM, Gemma2ForCausalLM (GeGLU, (1 + w) norms,
  -- scaled embeddings; Gemma2: sandwich norms, alternating sliding-window layers, logit soft-capping): llama.lua.
  phi3 = llama_family("phi3", nil, PHI3),
  gemma = llama_family("gemma"),
  gemma2 = llama_family("gemma2", nil, GEMMA2),
  -- MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM: the Llama decoder with MoE blocks, strict keys.
  mixtral = llama_family("mixtral", "moe", { fixed = NO_ATTENTION_BIAS }),
  qwen2_moe = llama_family("qwen2_moe", "moe"),
  qwen3_moe = llama_family("qwen3_moe", "moe"),
  -- DeepseekV3ForCausalLM: multi-head latent attention and DeepSeekMoE (sigmoid, group-limited, aux-loss-free routing).
  deepseek_v3 = rotary({
    arch = "deepseek", model_type = true, ignore = { PRETRAINED_KEYS, LLAMA_KEYS, DEEPSEEK_KEYS }, null_is_false = true,
    fixed = { scoring_func = { "sigmoid" }, topk_method = { "noaux_tc" } },
  }, "deepseek_v3"),
  -- DeepseekV2ForCausalLM (DeepSeek-V2, V2-Lite): the same MLA and DeepSeekMoE, softmax routing (greedy or
  -- group-limited by each group's best expert), no correction bias.
  deepseek_v2 = rotary({
    arch = "deepseek", model_type = true, ignore = { PRETRAINED_KEYS, LLAMA_KEYS, DEEPSEEK_KEYS }, null_is_false = true,
    fixed = { scoring_func = { "softmax" } },
  }, "deepseek_v2"),
}

-- Whether neusight/models/<arch>.lua can be found (errors inside an existing builder are raised).
local function builder_exists(arch)
  local ok, err = pcall(require, "neusight.models." .. arch)
  if ok then return true end
  if tostring(err):find("module 'neusight.models." .. arch .. "' not found", 1, true) then return false end
  error(err, 0)
end

-- The keys a builder's own HF entry may have (README "Writing a model builder"): M.TYPES's, less arch (the module's name).
local USER_ENTRY_KEYS = { fields = true, defaults = true, ignore = true, fixed = true, derive = true,
                          null_is_false = true, null_is_omitted = true, model_type = true, quantization = true }

--- The entry of a model_type no bundled entry names, from a builder of that name on the script search path
--- (--scripts DIR with DIR/neusight/models/<model_type>.lua) that declares `HF`, an entry as M.TYPES's without arch
--- (the builder is the module itself). Its `ignore` is required: the entry is strict, as the bundled ones are (a key
--- of the file that is no field, ignored or fixed key is an error). nil when there is no such builder, or it declares
--- no HF; an HF that is malformed is an error naming the builder.
---@param model_type string
---@return table|nil entry
local function user_entry(model_type)
  if not model_type:match("^[%a_][%w_]*$") then return nil end
  local name = "neusight.models." .. model_type
  local ok, builder = pcall(require, name)
  if not ok then
    if tostring(builder):find("module '" .. name .. "' not found", 1, true) then return nil end
    error(builder, 0)
  end
  if type(builder) ~= "table" or type(builder.build) ~= "function" or builder.HF == nil then return nil end
  local who = ("neusight/models/%s.lua: HF"):format(model_type)
  local hf = builder.HF
  if type(hf) ~= "table" then error(("%s must be a table (got %s)"):format(who, type(hf)), 0) end
  -- (a model_type no bundled builder has: its file on the script search path, neusight.workload builder_file)
  local entry = { arch = model_type, file = require("neusight.workload").builder_file(model_type) }
  for k, v in pairs(hf) do
    if not USER_ENTRY_KEYS[k] then
      local keys = {}
      for key in pairs(USER_ENTRY_KEYS) do keys[#keys + 1] = key end
      table.sort(keys)
      error(("%s: unknown field '%s'; an entry has %s"):format(who, tostring(k), table.concat(keys, ", ")), 0)
    end
    entry[k] = v
  end
  if type(entry.fields) ~= "table" and type(entry.fields) ~= "function" then
    error(("%s.fields must be a table { builder field = { config.json keys… } } (got %s)"):format(who,
      type(entry.fields)), 0)
  end
  if type(entry.ignore) ~= "table" then
    error(("%s.ignore must be a list of key lists (the config.json keys that change no kernel: { "
      .. "require(\"neusight.models.hf\").PRETRAINED_KEYS, { … } }), so that any other key is an error (got %s)")
      :format(who, type(entry.ignore)), 0)
  end
  for i, list in ipairs(entry.ignore) do
    if type(list) ~= "table" then -- a flat list of keys ({ "alibi" }) would fail later, inside from_config
      error(("%s.ignore[%d] must be a list of config.json keys (got %s %s): ignore holds lists, { { \"%s\" } }")
        :format(who, i, type(list), tostring(list), tostring(list)), 0)
    end
  end
  return entry
end
M.PRETRAINED_KEYS = PRETRAINED_KEYS -- for a builder's HF.ignore

--- The model_type values with a builder present, sorted.
function M.supported()
  local out = {}
  for model_type, t in pairs(M.TYPES) do
    if builder_exists(t.arch) then out[#out + 1] = model_type end
  end
  table.sort(out)
  return out
end

-- A supported model_type whose name is `s` with case, "_" and "-" aside ("Qwen3Moe" → "qwen3_moe"), or nil.
local function supported_like(s)
  local key = s:lower():gsub("[_%-]", "")
  for _, model_type in ipairs(M.supported()) do
    if model_type:gsub("_", "") == key then return model_type end
  end
end

--- What a config.json that names no supported model_type says of one (the error's hint, "" when nothing): the
--- model_type its `architectures` class implies ("LlamaForCausalLM": "llama"; HF's AutoConfig needs the key too), or
--- a nested text_config of a supported model_type (a multimodal config: Mistral-Small-3.1's mistral3 holds a "mistral"
--- language model) — which neusight does not unwrap: the vision tower and projector are not modelled.
---@param t table the JSON object
---@return string
function M.type_hint(t)
  if t.model_type == nil and type(t.architectures) == "table" and type(t.architectures[1]) == "string" then
    local class = t.architectures[1]
    local stem = class:match("^(.-)For%u%w*$") or class:match("^(.-)LMHeadModel$") or class:match("^(.-)Model$")
    local found = stem and stem ~= "" and supported_like(stem)
    if found then
      return (" (architectures names %s: add \"model_type\": %q)"):format(class, found)
    end
  end
  local text = t.text_config
  if type(t.model_type) == "string" and type(text) == "table" and type(text.model_type) == "string"
      and M.TYPES[text.model_type] and builder_exists(M.TYPES[text.model_type].arch) then
    return (" (its text_config is a %q language model: saved as a config.json of its own, it forecasts that model "
      .. "alone, without the vision tower and projector)"):format(text.model_type)
  end
  return ""
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

--- Converts a parsed config.json into { name, arch, <builder fields> }. Errors start with `path`, and `path:<line>`
--- for a key the file holds on a line `lines` gives.
---@param t table the JSON object
---@param path string the file as the user named it (messages, default name)
---@param nulls? table { key = true } for the members that were null in the file
---@param lines? table { key = line } of the top-level members (engine/core/text.h text_json_key_line)
---@return table cfg
function M.from_config(t, path, nulls, lines)
  local function at(k)
    local line = type(lines) == "table" and math.type(lines[k]) == "integer" and lines[k]
    return line and ("%s:%d"):format(path, line) or path
  end
  local mt = t.model_type
  local entry = type(mt) == "string" and M.TYPES[mt] or nil
  if not entry and type(mt) == "string" then entry = user_entry(mt) end
  if not entry or not builder_exists(entry.arch) then
    local what = mt == nil and "has no 'model_type'"
      or type(mt) == "table" and "has a model_type that is not a string (a JSON object or array)"
      or ("has model_type %s, which is not supported"):format(type(mt) == "string" and ("%q"):format(mt) or tostring(mt))
    local add = type(mt) == "string" and mt:match("^[%a_][%w_]*$") and not M.TYPES[mt]
      and (" (to add it: a builder neusight/models/%s.lua declaring HF, under --scripts DIR; README \"Writing a model "
        .. "builder\")"):format(mt) or ""
    error(("%s: %s%s; supported: %s%s"):format(path, what, M.type_hint(t), table.concat(M.supported(), ", "), add), 0)
  end
  local cfg = { name = name_of(path), arch = entry.arch }
  if t.use_cache == false then NO_CACHE[cfg] = true end -- M.use_cache
  for _, key in ipairs { "torch_dtype", "dtype" } do -- M.config_dtype
    if type(t[key]) == "string" then
      local line = type(lines) == "table" and math.type(lines[key]) == "integer" and lines[key] or nil
      CONFIG_DTYPE[cfg] = { path = path, key = key, line = line, value = t[key] }
      break
    end
  end
  local source = { path = path, key = {}, null = {}, lines = type(lines) == "table" and lines or {} }
  CONFIG_SOURCE[cfg] = source -- M.config_key
  if entry.model_type then cfg.model_type, source.key.model_type = mt, "model_type" end
  if entry.fields == "all" then
    for k, v in pairs(t) do
      if type(v) ~= "table" and k ~= "model_type" and k ~= "name" and k ~= "arch" then cfg[k], source.key[k] = v, k end
    end
    return cfg
  end
  local fields = type(entry.fields) == "function" and entry.fields() or entry.fields
  local defaults = type(entry.defaults) == "function" and entry.defaults() or entry.defaults
  local fixed = entry.ignore and {} or nil
  if fixed then
    for k, v in pairs(COMMON_FIXED) do fixed[k] = v end
    for k, v in pairs(entry.fixed or {}) do fixed[k] = v end
  end
  if entry.ignore then
    local known, ignored = { "model_type" }, {}
    for field in pairs(fields) do known[#known + 1] = field end
    for _, list in ipairs(entry.ignore) do
      for _, k in ipairs(list) do
        ignored[k] = true
        known[#known + 1] = k
      end
    end
    for k in pairs(fixed or {}) do known[#known + 1] = k end
    if entry.quantization then
      ignored.quantization_config = true
      known[#known + 1] = "quantization_config"
    end
    table.sort(known)
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = k end
    for k in pairs(nulls or {}) do
      if t[k] == nil then keys[#keys + 1] = k end
    end
    table.sort(keys)
    local unknown = {}
    for _, k in ipairs(keys) do
      if k ~= "model_type" and not fields[k] and not ignored[k] and not (fixed and fixed[k]) then
        unknown[#unknown + 1] = k
      end
    end
    if #unknown == 1 then
      local k = unknown[1]
      error(("%s: unknown key '%s' for model_type %q%s"):format(at(k), k, mt, hint(k, known)), 0)
    elseif #unknown > 1 then -- all of them at once, each with its line and did-you-mean: not one per run
      local shown = {}
      for i, k in ipairs(unknown) do
        local line = type(lines) == "table" and math.type(lines[k]) == "integer" and lines[k]
        local h = require("neusight.workload").did_you_mean(k, known)
        local notes = {}
        if line then notes[#notes + 1] = ("line %d"):format(line) end
        if h then notes[#notes + 1] = ("did you mean '%s'?"):format(h) end
        shown[i] = ("'%s'%s"):format(k, #notes > 0 and (" (%s)"):format(table.concat(notes, ", ")) or "")
      end
      error(("%s: %d unknown keys for model_type %q: %s"):format(path, #unknown, mt, table.concat(shown, ", ")), 0)
    end
    if entry.quantization and t.quantization_config ~= nil then
      CONFIG_WARNINGS[cfg] = { quantization_note(path, t.quantization_config) } -- M.config_warnings
    end
  end
  for k, accepted in pairs(fixed or {}) do
    local v = t[k]
    if v ~= nil then
      local ok = false
      for _, a in ipairs(accepted) do ok = ok or v == a end
      if not ok then
        local shown = {}
        for i, a in ipairs(accepted) do shown[i] = type(a) == "string" and ("%q"):format(a) or tostring(a) end
        error(("%s: %s = %s is not modelled by the %s builder (%s builds %s only)")
          :format(at(k), k, type(v) == "string" and ("%q"):format(v) or tostring(v), entry.arch,
                  entry.file or require("neusight.workload").builder_file(entry.arch), table.concat(shown, " or ")), 0)
      end
    end
  end
  -- keys changing no kernel that still describe the model (check.lua NEUTRAL: "max_position_embeddings": 0,
  -- "rope_theta": 0, a negative norm epsilon), dropped or passed on (a rotary model's max_position_embeddings): a value
  -- no model can have is a broken config, not a key to drop
  if entry.ignore then
    local neutral = {}
    for _, list in ipairs(entry.ignore) do
      for _, k in ipairs(list) do neutral[#neutral + 1] = k end
    end
    -- the JSON object is its own config here (each key its own field), so that check.fail names the key's line
    local own = { path = path, key = {}, null = {}, lines = source.lines }
    for k in pairs(t) do own.key[k] = k end
    for k in pairs(nulls or {}) do own.null[k] = k end
    CONFIG_SOURCE[t] = own
    require("neusight.models.check").neutral(nil, t, neutral, "key")
  end
  for field, keys in pairs(fields) do
    local null = false
    for _, key in ipairs(keys) do
      if t[key] ~= nil then
        cfg[field], source.key[field] = t[key], key
        break
      elseif nulls and nulls[key] then
        source.null[field] = key -- M.config_null
        if entry.null_is_omitted and entry.null_is_omitted[field] then break end -- as omitted: `defaults` below
        null = true
        if entry.null_is_false then cfg[field] = false end -- HF's None
        break
      end
    end
    if cfg[field] == nil and not null and defaults then cfg[field] = defaults[field] end
  end
  if entry.derive then entry.derive(t, cfg) end
  return cfg
end

return M
