-- scripts/neusight/models/presets.lua — named model configs (name → cfg with `arch`), shapes from the reference's DLmodel_configs.
--
-- The reference's gpt3_* configs are HF GPT2LMHeadModel configs with GPT-3 shapes (the GPT-2 code
-- path: learned positions, dense attention, gelu_new), so they all use arch = "gpt". gpt3_175b is
-- GPT-3 "175B" (Brown et al. 2020, table 2.1) on the same code path. BERT and OPT presets keep the
-- HuggingFace config.json field names of DLmodel_configs/{bert,bert_large,opt,opt_13}.json.
local function gpt(name, n_layer, n_embd, n_head, n_positions)
  return {
    name = name, arch = "gpt",
    n_layer = n_layer, n_embd = n_embd, n_head = n_head,
    vocab_size = 50257, n_positions = n_positions,
  }
end

local function bert(name, layers, hidden, heads, intermediate)
  return {
    name = name, arch = "bert",
    num_hidden_layers = layers, hidden_size = hidden, num_attention_heads = heads,
    intermediate_size = intermediate, hidden_act = "gelu",
    vocab_size = 30522, max_position_embeddings = 512, type_vocab_size = 2,
  }
end

local function opt(name, layers, hidden, heads, ffn, word_embed_proj_dim)
  return {
    name = name, arch = "opt",
    num_hidden_layers = layers, hidden_size = hidden, num_attention_heads = heads, ffn_dim = ffn,
    word_embed_proj_dim = word_embed_proj_dim, activation_function = "relu", do_layer_norm_before = true,
    vocab_size = 50272, max_position_embeddings = 2048,
  }
end

-- Switch presets keep the HF SwitchTransformersConfig field names of DLmodel_configs/switchxl4.json.
local function switch(name, layers, d_model, d_ff, d_kv, heads, experts, capacity)
  return {
    name = name, arch = "switch",
    num_layers = layers, num_decoder_layers = layers, d_model = d_model, d_ff = d_ff, d_kv = d_kv,
    num_heads = heads, num_experts = experts, expert_capacity = capacity,
    encoder_sparse_step = 2, decoder_sparse_step = 2, vocab_size = 32128, relative_attention_num_buckets = 32,
  }
end

return {
  gpt2_med   = gpt("gpt2_med",   24, 1024, 16, 1024),
  gpt2_large = gpt("gpt2_large", 36, 1280, 20, 1024),
  gpt2_xl    = gpt("gpt2_xl",    48, 1600, 25, 1024),
  gpt3_xl    = gpt("gpt3_xl",    24, 3072, 24, 2048),
  gpt3_27    = gpt("gpt3_27",    32, 2560, 32, 2048),
  gpt3_67    = gpt("gpt3_67",    32, 4096, 32, 2048),
  gpt3_13    = gpt("gpt3_13",    40, 5120, 40, 2048),
  gpt3_175b  = gpt("gpt3_175b",  96, 12288, 96, 2048),
  bert       = bert("bert",       12, 768, 12, 3072),
  bert_large = bert("bert_large", 24, 1024, 16, 4096),
  -- "opt" is the reference's tiny config: hidden 512 with 2048-wide token embeddings (project_in/out).
  opt        = opt("opt",         1, 512, 8, 2048, 2048),
  opt_13     = opt("opt_13",      24, 2048, 32, 8192, 2048),
  switchxl4  = switch("switchxl4", 24, 1024, 16384, 128, 32, 4, 64),
}
