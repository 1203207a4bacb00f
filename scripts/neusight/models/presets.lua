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

-- Llama-family presets (scripts/neusight/models/llama.lua) keep the HF config.json field names and values of the
-- published checkpoints (the fields that shape the kernels; the rest take the config class's defaults).
local function llama(name, model_type, layers, hidden, heads, kv_heads, intermediate, vocab, extra)
  local cfg = {
    name = name, arch = "llama", model_type = model_type,
    num_hidden_layers = layers, hidden_size = hidden, num_attention_heads = heads, num_key_value_heads = kv_heads,
    intermediate_size = intermediate, vocab_size = vocab, tie_word_embeddings = false,
  }
  for k, v in pairs(extra or {}) do cfg[k] = v end
  return cfg
end

-- Mixture-of-Experts presets (scripts/neusight/models/moe.lua), the HF config.json values of the published checkpoints
-- (the fields that shape the kernels; omitted ones take the config class's defaults, as a config.json would).
local function moe(name, model_type, layers, hidden, heads, kv_heads, intermediate, vocab, extra)
  local cfg = llama(name, model_type, layers, hidden, heads, kv_heads, intermediate, vocab, extra)
  cfg.arch = "moe"
  return cfg
end

-- DeepSeek presets (scripts/neusight/models/deepseek.lua), the HF config.json values of the published checkpoints.
local function deepseek(name, fields, model_type)
  local cfg = { name = name, arch = "deepseek", model_type = model_type or "deepseek_v3" }
  for k, v in pairs(fields) do cfg[k] = v end
  return cfg
end

local presets = {
  -- deepseek-ai/DeepSeek-V3 (= DeepSeek-V3-0324, DeepSeek-R1): MLA (q_lora_rank 1536, kv_lora_rank 512, heads of
  -- 128 + 64 / 128), 3 dense layers then 58 MoE layers of 256 routed experts (top 8 of 4 groups out of 8) + 1 shared;
  -- HF's model has no MTP layer: 671,026,404,352 parameters (+ 58 · 256 e_score_correction_bias buffer values in the
  -- checkpoint: 671,026,419,200)
  deepseek_v3 = deepseek("deepseek_v3", {
    vocab_size = 129280, hidden_size = 7168, intermediate_size = 18432, moe_intermediate_size = 2048,
    num_hidden_layers = 61, num_attention_heads = 128, num_key_value_heads = 128, n_shared_experts = 1,
    n_routed_experts = 256, routed_scaling_factor = 2.5, kv_lora_rank = 512, q_lora_rank = 1536, qk_rope_head_dim = 64,
    v_head_dim = 128, qk_nope_head_dim = 128, n_group = 8, topk_group = 4, num_experts_per_tok = 8,
    first_k_dense_replace = 3, moe_layer_freq = 1, norm_topk_prob = true, hidden_act = "silu",
    tie_word_embeddings = false }),
  -- deepseek-ai/DeepSeek-V2-Lite: MLA without the q latent (q_proj), 1 dense layer then 26 MoE layers of 64 routed
  -- experts (softmax, greedy top 6) + 2 shared; 15.7 B parameters, 2.4 B active (DeepSeek's figures, without embeddings)
  deepseek_v2_lite = deepseek("deepseek_v2_lite", {
    vocab_size = 102400, hidden_size = 2048, intermediate_size = 10944, moe_intermediate_size = 1408,
    num_hidden_layers = 27, num_attention_heads = 16, num_key_value_heads = 16, n_shared_experts = 2,
    n_routed_experts = 64, routed_scaling_factor = 1.0, kv_lora_rank = 512, q_lora_rank = false, qk_rope_head_dim = 64,
    v_head_dim = 128, qk_nope_head_dim = 128, topk_method = "greedy", n_group = 1, topk_group = 1,
    num_experts_per_tok = 6, first_k_dense_replace = 1, moe_layer_freq = 1, norm_topk_prob = false,
    hidden_act = "silu", tie_word_embeddings = false }, "deepseek_v2"),
  -- deepseek-ai/DeepSeek-V2 (and V2-Chat): 1 dense layer then 59 MoE layers of 160 routed experts (softmax, top 6 of
  -- the best 3 of 8 groups, × 16) + 2 shared; 236 B parameters, 21 B active (DeepSeek's figures)
  deepseek_v2 = deepseek("deepseek_v2", {
    vocab_size = 102400, hidden_size = 5120, intermediate_size = 12288, moe_intermediate_size = 1536,
    num_hidden_layers = 60, num_attention_heads = 128, num_key_value_heads = 128, n_shared_experts = 2,
    n_routed_experts = 160, routed_scaling_factor = 16.0, kv_lora_rank = 512, q_lora_rank = 1536, qk_rope_head_dim = 64,
    v_head_dim = 128, qk_nope_head_dim = 128, topk_method = "group_limited_greedy", n_group = 8, topk_group = 3,
    num_experts_per_tok = 6, first_k_dense_replace = 1, moe_layer_freq = 1, norm_topk_prob = false,
    hidden_act = "silu", tie_word_embeddings = false }, "deepseek_v2"),
  -- mistralai/Mixtral-8x7B-v0.1 (sliding_window null; 8 experts of intermediate_size, top 2): 46,702,792,704 parameters
  mixtral_8x7b  = moe("mixtral_8x7b",  "mixtral", 32, 4096, 32, 8, 14336, 32000,
    { num_local_experts = 8, num_experts_per_tok = 2, sliding_window = false }),
  -- mistralai/Mixtral-8x22B-v0.1 (the v3 tokenizer: vocab_size 32768)
  mixtral_8x22b = moe("mixtral_8x22b", "mixtral", 56, 6144, 48, 8, 16384, 32768,
    { num_local_experts = 8, num_experts_per_tok = 2, sliding_window = false }),
  -- Qwen/Qwen3-30B-A3B (128 experts of 768, top 8, norm_topk_prob; head_dim 128; every layer sparse)
  qwen3_30b_a3b = moe("qwen3_30b_a3b", "qwen3_moe", 48, 2048, 32, 4, 6144, 151936,
    { head_dim = 128, attention_bias = false, num_experts = 128, num_experts_per_tok = 8, moe_intermediate_size = 768,
      norm_topk_prob = true, decoder_sparse_step = 1, mlp_only_layers = {}, use_sliding_window = false,
      max_window_layers = 48 }),
  -- Qwen/Qwen1.5-MoE-A2.7B (qwen2_moe: 60 experts of 1408, top 4, a shared expert of 5632 with its sigmoid gate)
  qwen15_moe_a27b = moe("qwen15_moe_a27b", "qwen2_moe", 24, 2048, 16, 16, 5632, 151936,
    { num_experts = 60, num_experts_per_tok = 4, moe_intermediate_size = 1408, shared_expert_intermediate_size = 5632,
      norm_topk_prob = false, decoder_sparse_step = 1, use_sliding_window = false, sliding_window = 32768,
      max_window_layers = 21 }),
  -- meta-llama/Llama-2-7b-hf, Llama-2-13b-hf, Llama-2-70b-hf
  llama2_7b   = llama("llama2_7b",   "llama", 32, 4096, 32, 32, 11008, 32000),
  llama2_13b  = llama("llama2_13b",  "llama", 40, 5120, 40, 40, 13824, 32000),
  llama2_70b  = llama("llama2_70b",  "llama", 80, 8192, 64, 8, 28672, 32000),
  -- meta-llama/Meta-Llama-3-8B (= Llama-3.1-8B), Meta-Llama-3-70B (= Llama-3.1-70B), Llama-3.1-405B
  llama3_8b   = llama("llama3_8b",   "llama", 32, 4096, 32, 8, 14336, 128256),
  llama3_70b  = llama("llama3_70b",  "llama", 80, 8192, 64, 8, 28672, 128256),
  llama3_405b = llama("llama3_405b", "llama", 126, 16384, 128, 8, 53248, 128256),
  -- meta-llama/Llama-3.2-1B, Llama-3.2-3B (lm_head tied to embed_tokens)
  llama32_1b  = llama("llama32_1b",  "llama", 16, 2048, 32, 8, 8192, 128256, { head_dim = 64, tie_word_embeddings = true }),
  llama32_3b  = llama("llama32_3b",  "llama", 28, 3072, 24, 8, 8192, 128256, { head_dim = 128, tie_word_embeddings = true }),
  -- mistralai/Mistral-7B-v0.1 (sliding_window 4096)
  mistral_7b  = llama("mistral_7b",  "mistral", 32, 4096, 32, 8, 14336, 32000, { sliding_window = 4096 }),
  -- Qwen/Qwen2.5-7B, Qwen2.5-72B (q/k/v bias; use_sliding_window false)
  qwen25_7b   = llama("qwen25_7b",   "qwen2", 28, 3584, 28, 4, 18944, 152064, { use_sliding_window = false }),
  qwen25_72b  = llama("qwen25_72b",  "qwen2", 80, 8192, 64, 8, 29568, 152064, { use_sliding_window = false }),
  -- Qwen/Qwen3-8B, Qwen3-32B (q_norm / k_norm, head_dim 128)
  qwen3_8b    = llama("qwen3_8b",    "qwen3", 36, 4096, 32, 8, 12288, 151936, { head_dim = 128, attention_bias = false }),
  qwen3_32b   = llama("qwen3_32b",   "qwen3", 64, 5120, 64, 8, 25600, 151936, { head_dim = 128, attention_bias = false }),
  -- microsoft/Phi-3-mini-4k-instruct (fused qkv_proj and gate_up_proj; sliding_window 2047): 3,821,079,552 parameters
  phi3_mini   = llama("phi3_mini",   "phi3", 32, 3072, 32, 32, 8192, 32064, { sliding_window = 2047 }),
  -- google/gemma-7b (head_dim 256 ≠ 3072 / 16, GeGLU, lm_head tied to embed_tokens): 8,537,680,896 parameters
  gemma_7b    = llama("gemma_7b",    "gemma", 28, 3072, 16, 16, 24576, 256000,
    { head_dim = 256, hidden_act = "gelu", tie_word_embeddings = true }),
  -- google/gemma-2-9b (alternating 4096-token sliding-window and global layers, sandwich norms, attention and final
  -- logit soft-capping): 9,241,705,984 parameters
  gemma2_9b   = llama("gemma2_9b",   "gemma2", 42, 3584, 16, 8, 14336, 256000,
    { head_dim = 256, hidden_activation = "gelu_pytorch_tanh", tie_word_embeddings = true, sliding_window = 4096,
      attn_logit_softcapping = 50.0, final_logit_softcapping = 30.0 }),
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

-- max_position_embeddings of the rotary presets, their config.json values (the Llama-3 presets take Llama-3.1's
-- 131072 with its RoPE scaling; Meta-Llama-3 itself says 8192). No kernel reads it: beyond it a forecast warns
-- (neusight.workload position_limit).
local POSITIONS = {
  deepseek_v3 = 163840, deepseek_v2 = 163840, deepseek_v2_lite = 163840,
  mixtral_8x7b = 32768, mixtral_8x22b = 65536, qwen3_30b_a3b = 40960, qwen15_moe_a27b = 8192,
  llama2_7b = 4096, llama2_13b = 4096, llama2_70b = 4096,
  llama3_8b = 131072, llama3_70b = 131072, llama3_405b = 131072, llama32_1b = 131072, llama32_3b = 131072,
  mistral_7b = 32768, qwen25_7b = 131072, qwen25_72b = 131072, qwen3_8b = 40960, qwen3_32b = 40960,
  phi3_mini = 4096, gemma_7b = 8192, gemma2_9b = 8192,
}
for name, n in pairs(POSITIONS) do presets[name].max_position_embeddings = n end

return presets
