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
  eq(supported:sub(1, 123), "bert, deepseek_v2, deepseek_v3, gemma, gemma2, gpt2, llama, mistral, mixtral, opt, phi3, qwen2, "
    .. "qwen2_moe, qwen3, qwen3_moe",
    "supported list")
  raises(function() hf.from_config({ model_type = "rwkv" }, "l.json") end,
    [[l.json: has model_type "rwkv", which is not supported; supported: ]] .. supported
    .. [[ (to add it: a builder neusight/models/rwkv.lua declaring HF, under --scripts DIR; README "Writing a model ]]
    .. [[builder")]])
  raises(function() hf.from_config({}, "e.json") end, "e.json: has no 'model_type'; supported: " .. supported)
end

-- Omitted keys take the config class's defaults (GPT2Config, BertConfig, OPTConfig, SwitchTransformersConfig).
function M.test_omitted_keys_take_hf_defaults()
  local gpt = hf.from_config({ model_type = "gpt2", n_layer = 2 }, "g.json")
  eq(gpt.n_embd, 768, "gpt2 n_embd") eq(gpt.n_head, 12, "gpt2 n_head") eq(gpt.n_positions, 1024, "gpt2 n_positions")
  eq(gpt.vocab_size, 50257, "gpt2 vocab_size") eq(gpt.n_layer, 2, "given")
  eq(gpt.n_inner, nil, "n_inner None: the builder's 4 * n_embd")
  local bert = hf.from_config({ model_type = "bert" }, "b.json")
  eq(bert.intermediate_size, 3072, "bert") eq(bert.type_vocab_size, 2, "bert type_vocab_size")
  eq(hf.from_config({ model_type = "bert", id2label = { ["0"] = "a", ["1"] = "b", ["2"] = "c" } }, "b.json").num_labels,
    3, "num_labels from id2label")
  eq(hf.from_config({ model_type = "opt" }, "o.json").ffn_dim, 3072, "opt")
  local sw = hf.from_config({ model_type = "switch_transformers" }, "s.json")
  eq(sw.num_experts, 8, "switch experts") eq(sw.encoder_sparse_step, 4, "12 layers / 3 sparse")
  eq(hf.from_config({ model_type = "switch_transformers", num_layers = 24, num_sparse_encoder_layers = 12 },
    "s.json").encoder_sparse_step, 2, "derived step")
  eq(hf.from_config({ model_type = "switch_transformers", encoder_sparse_step = 6 }, "s.json").encoder_sparse_step, 6,
    "the file's step wins")
end

function M.test_unknown_keys_are_errors_and_hf_keys_are_accepted()
  raises(function() hf.from_config({ model_type = "gpt2", n_iner = 8192 }, "g.json") end,
    [[g.json: unknown key 'n_iner' for model_type "gpt2" (did you mean 'n_inner'?)]])
  raises(function() hf.from_config({ model_type = "opt", ffn_dims = 8 }, "o.json") end,
    [[o.json: unknown key 'ffn_dims' for model_type "opt" (did you mean 'ffn_dim'?)]])
  raises(function() hf.from_config({ model_type = "switch_transformers", num_expert = 8 }, "s.json") end,
    [[s.json: unknown key 'num_expert' for model_type "switch_transformers" (did you mean 'num_experts'?)]])
  raises(function() hf.from_config({ model_type = "bert", quantization_config = {} }, "b.json") end,
    [[b.json: unknown key 'quantization_config' for model_type "bert"]])
  -- HF's own keys that do not change the kernels pass (bert-base-uncased's config.json).
  local cfg = hf.from_config({ model_type = "bert", architectures = { "BertForMaskedLM" }, gradient_checkpointing = false,
    hidden_dropout_prob = 0.1, layer_norm_eps = 1e-12, position_embedding_type = "absolute", transformers_version = "4.6.0",
    use_cache = true, pad_token_id = 0 }, "b.json")
  eq(cfg.hidden_size, 768, "bert-base-uncased")
  -- ... and those that would are accepted at the modelled value only.
  raises(function() hf.from_config({ model_type = "bert", position_embedding_type = "relative_key" }, "b.json") end,
    [[b.json: position_embedding_type = "relative_key" is not modelled by the bert builder (scripts/neusight/models/bert.lua builds "absolute" only)]])
  raises(function() hf.from_config({ model_type = "llama", gradient_checkpointing = true }, "l.json") end,
    [[l.json: gradient_checkpointing = true is not modelled by the llama builder (scripts/neusight/models/llama.lua builds false only)]])
end

function M.test_user_extension()
  hf.TYPES.my_gpt = { arch = "gpt", fields = { n_layer = { "layers" } } }
  local ok, cfg = pcall(hf.from_config, { model_type = "my_gpt", layers = 3 }, "m.json")
  hf.TYPES.my_gpt = nil
  assert(ok, cfg)
  eq(cfg.n_layer, 3, "renamed field")
end

-- Keys dropped as changing no kernel are still values of the model (check.lua NEUTRAL): what real configs hold is
-- taken, what no model can have is refused naming the file and the key.
function M.test_dropped_keys_are_still_checked()
  local function llama(extra)
    local t = { model_type = "llama", hidden_size = 64, intermediate_size = 128, num_attention_heads = 4,
                num_hidden_layers = 2, vocab_size = 100 }
    for k, v in pairs(extra) do t[k] = v end
    return t
  end
  -- Llama 3.1's values
  local cfg = hf.from_config(llama { max_position_embeddings = 131072, rope_theta = 500000.0, rms_norm_eps = 1e-05,
    rope_scaling = { rope_type = "llama3", factor = 8.0 }, initializer_range = 0.02 }, "c.json")
  eq(cfg.rope_theta, nil, "dropped, not passed on")
  -- the position limit is passed on: a forecast beyond it warns (neusight.workload position_limit)
  eq(cfg.max_position_embeddings, 131072, "passed on")
  raises(function() hf.from_config(llama { max_position_embeddings = 0 }, "c.json") end,
    "c.json: key 'max_position_embeddings' must be a positive integer (got 0)")
  raises(function() hf.from_config(llama { max_position_embeddings = 2 ^ 40 }, "c.json") end,
    "c.json: key 'max_position_embeddings' must be a positive integer of at most 2^31 (got 1099511627776.0)")
  raises(function() hf.from_config(llama { rope_theta = 0 }, "c.json") end,
    "c.json: key 'rope_theta' must be a positive number (the RoPE base) (got 0)")
  raises(function() hf.from_config(llama { rms_norm_eps = -1 }, "c.json") end,
    "c.json: key 'rms_norm_eps' must be a number in [0, 1) (got -1)")
  raises(function() hf.from_config(llama { rope_scaling = "linear" }, "c.json") end,
    "c.json: key 'rope_scaling' must be a table of the RoPE scaling (or null) (got \"linear\", a string)")
  -- its contents: a type transformers builds (its legacy key `type` too) is taken; another is refused, as HF's
  -- ROPE_INIT_FUNCTIONS[rope_type] refuses it when the model is made, and so is a JSON array (HF reads an object's keys)
  for _, t in ipairs { "default", "linear", "dynamic", "yarn", "longrope", "llama3" } do
    hf.from_config(llama { rope_scaling = { rope_type = t, factor = 2.0 } }, "c.json")
    hf.from_config(llama { rope_scaling = { type = t, factor = 2.0 } }, "c.json")
  end
  raises(function() hf.from_config(llama { rope_scaling = { rope_type = "llama4", factor = 8.0 } }, "c.json") end,
    "c.json: key 'rope_scaling' gives rope_type \"llama4\", which transformers does not build (its RoPE types: default, "
    .. "dynamic, linear, llama3, longrope, yarn) (got a table)")
  raises(function() hf.from_config(llama { rope_scaling = { type = 2 } }, "c.json") end,
    "c.json: key 'rope_scaling' must give type as a string (type 2) (got a table)")
  raises(function() hf.from_config(llama { rope_scaling = { 8.0, "linear" } }, "c.json") end,
    "c.json: key 'rope_scaling' must be a table of the RoPE scaling (or null) (got a table)")
  raises(function() hf.from_config(llama { rope_parameters = { rope_type = "nope" } }, "c.json") end,
    "c.json: key 'rope_parameters' gives rope_type \"nope\", which transformers does not build (its RoPE types: default, "
    .. "dynamic, linear, llama3, longrope, yarn) (got a table)")
  -- transformers v5's rope_parameters (rope_theta and rope_scaling in one table): dropped as those two, for every rotary
  -- model_type, and checked as they are (Gemma3-style configs nest one table per layer type)
  for _, mt in ipairs { "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "mixtral", "qwen3_moe",
                        "deepseek_v3" } do
    local v5 = hf.from_config({ model_type = mt, rope_parameters = { rope_type = "default", rope_theta = 1000000 } }, "c.json")
    eq(v5.rope_parameters, nil, mt .. ": rope_parameters dropped, not passed on")
  end
  hf.from_config(llama { rope_parameters = { full_attention = { rope_type = "default", rope_theta = 1e6 },
    sliding_attention = { rope_type = "default", rope_theta = 1e4 } } }, "c.json")
  hf.from_config(llama {}, "c.json", { rope_parameters = true }) -- null
  raises(function() hf.from_config(llama { rope_parameters = { rope_type = "default", rope_theta = 0 } }, "c.json") end,
    "c.json: key 'rope_parameters' must give rope_theta as a positive number, the RoPE base (rope_theta 0) (got a table)")
  raises(function()
    hf.from_config(llama { rope_parameters = { full_attention = { rope_theta = -1 } } }, "c.json")
  end, "c.json: key 'rope_parameters' must give rope_theta as a positive number, the RoPE base (rope_theta -1) (got a table)")
  raises(function() hf.from_config(llama { rope_parameters = { rope_type = 3 } }, "c.json") end,
    "c.json: key 'rope_parameters' must give rope_type as a string (rope_type 3) (got a table)")
  raises(function() hf.from_config(llama { rope_parameters = 1e6 } , "c.json") end,
    "c.json: key 'rope_parameters' must be a table of the RoPE parameters (or null) (got 1000000.0)")
  -- gpt2: n_ctx beside n_positions is dropped, and still a position count
  raises(function()
    hf.from_config({ model_type = "gpt2", n_positions = 1024, n_ctx = 0 }, "g.json")
  end, "g.json: key 'n_ctx' must be a positive integer (got 0)")
  -- a config's boolean is a boolean (a table was truthy)
  local opt = require "neusight.models.opt"
  local ocfg = { arch = "opt", name = "o", num_hidden_layers = 1, hidden_size = 64, num_attention_heads = 4, ffn_dim = 128,
                 vocab_size = 100, max_position_embeddings = 64, do_layer_norm_before = { true } }
  raises(function() opt.build(ocfg, { batch = 1, seq = 8 }) end,
    "opt model 'o': field 'do_layer_norm_before' must be a boolean (got a table)")
end

-- A rotary model_type's max_position_embeddings (passed on: a forecast beyond it warns) takes HF's documented default
-- of its config class when omitted, and a null counts as omitted: it was passed as false, which the builder's count
-- check refused ("field 'max_position_embeddings' must be a positive integer (got false)").
function M.test_rotary_position_limit_null_or_omitted_takes_hf_default()
  local shape = { hidden_size = 64, intermediate_size = 128, num_attention_heads = 4, num_hidden_layers = 2,
                  vocab_size = 100 }
  local function config(model_type, extra)
    local t = { model_type = model_type }
    for k, v in pairs(shape) do t[k] = v end
    for k, v in pairs(extra or {}) do t[k] = v end
    return t
  end
  local nulls = { max_position_embeddings = true }
  for model_type, want in pairs { llama = 2048, mistral = 131072, qwen2 = 32768, qwen3 = 32768, mixtral = 131072,
                                  qwen2_moe = 32768, qwen3_moe = 32768 } do
    eq(hf.from_config(config(model_type), "c.json").max_position_embeddings, want, model_type .. " omitted")
    eq(hf.from_config(config(model_type), "c.json", nulls).max_position_embeddings, want, model_type .. " null")
  end
  eq(hf.from_config({ model_type = "deepseek_v3" }, "d.json", nulls).max_position_embeddings, 4096, "deepseek_v3 null")
  eq(hf.from_config({ model_type = "deepseek_v2" }, "d.json").max_position_embeddings, 2048, "deepseek_v2 omitted")
  -- a value given is the config's own; another null builder field is still HF's None
  eq(hf.from_config(config("llama", { max_position_embeddings = 4096 }), "c.json").max_position_embeddings, 4096,
    "given")
  eq(hf.from_config(config("mistral"), "c.json", { sliding_window = true }).sliding_window, false,
    "sliding_window: null is no window")
  -- the null config builds (it failed with "got false"), and the limit it takes is the one a forecast holds to
  local cfg = hf.from_config(config("llama"), "maxnull/config.json", nulls)
  require("neusight.models.llama").build(cfg, { batch = 1, seq = 8 })
  eq(require("neusight.workload").position_limit(cfg), 2048, "the forecast's limit")
end

return M
