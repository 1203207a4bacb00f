-- scripts/neusight/models/llama.lua — Llama-family decoders (HF LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM,
-- Qwen3ForCausalLM) as an op graph: the kernels HuggingFace's modeling code launches, eager or sdpa attention.
--
-- Per decoder layer (emitted once with count = num_hidden_layers, layer "layers"):
--   input_layernorm (RMSNorm) → q_proj, k_proj, v_proj → [Qwen3: q_norm, k_norm over head_dim] → rotary embedding
--   of q and k → attention → o_proj → residual add → post_attention_layernorm → gate_proj, SiLU, up_proj, mul,
--   down_proj → residual add.
-- Around them: embed_tokens, the final norm, lm_head (tied to embed_tokens when tie_word_embeddings) and, in
-- training, HF's causal-LM loss (neusight.nodes.causal_lm_loss).
--
-- The kernels, as HF eager runs them with the model in the compute dtype (model.to(dtype)):
--   * LlamaRMSNorm: hidden.to(fp32), pow(2), mean(-1), + eps, rsqrt, mul, .to(dtype), weight mul. The casts (op
--     cast) exist only for 16-bit and fp8 dtypes; pow … mul then run in fp32 (their nodes carry dtype fp32).
--   * apply_rotary_pos_emb, per q and k: q·cos, rotate_half(q) = cat(−q2, q1) (a neg, written as VECmulu — the
--     same bytes and FLOPs — and the cat copy, op contiguous), ·sin, + .
--   * eager attention (eager_attention_forward): repeat_kv copies K and V to all query heads when
--     num_key_value_heads < num_attention_heads (expand + reshape), QKᵀ (matmul), × scaling (VECmulu),
--     + causal mask (VECadd of the (b, 1, s, s) mask), softmax (HF upcasts to fp32 and back: counted as the one
--     softmax kernel), dropout only when attention_dropout > 0 (F.dropout with p = 0 launches nothing), ·V
--     (matmul), transpose(1, 2).contiguous() (a copy).
--   * sdpa attention (sdpa_attention_forward): one `sdpa` node, Q at num_attention_heads and K, V at
--     num_key_value_heads (torch ≥ 2.5 enable_gqa: no repeat_kv copies); is_causal when HF builds no mask. Its
--     output is already (b, s, heads, d) in memory (FlashAttention's layout), so transpose(1, 2).contiguous()
--     copies nothing.
--   * MLP: down_proj(silu(gate_proj(x)) · up_proj(x)); SiLU is ops/silu.lua (one kernel each way).
-- Variants (config fields, HF's defaults when omitted; M.DEFAULTS, by model_type):
--   * model_type "mistral": sliding_window (default 4096; false = None); "qwen2" / "qwen3": sliding_window applies
--     only with use_sliding_window, to layers ≥ max_window_layers (or those layer_types marks "sliding_attention").
--     Eager attention is unchanged by a window (HF computes the full scores and masks them). With sdpa, HF passes
--     the sliding-window mask to scaled_dot_product_attention once s ≥ sliding_window (below that the mask is the
--     causal one and is skipped); PyTorch then runs the memory-efficient kernel with an explicit mask over every
--     query/key block: such layers get the non-causal `sdpa` kernel (attrs.causal = false) over s × s (the read
--     of the mask is left out). A serving prefill (opts.phase "prefill": predict --mode prefill, serve) is priced as
--     the serving engines run it (vLLM, SGLang: FlashAttention-2's / FlashInfer's windowed kernel, which skips the
--     key tiles outside the band): the causal `sdpa` kernel with attrs.window, the min(i, w) keys of each query
--     (neusight.kernels.window_attention); with eager attention the prefill keeps HF's masked eager chain. Windowed
--     and full layers are two layer groups ("layers", then "sliding_layers") when their kernels differ.
--   * "phi3": qkv_proj and gate_up_proj, one GEMM each (q, k, v and gate, up are views of their outputs; what every
--     model_type runs under opts.megatron, below), Mistral's sliding_window rule. "gemma" / "gemma2": embeddings · sqrt(hidden_size) (one mul), GemmaRMSNorm (the weight
--     applied as 1 + weight.float() in fp32, then the cast back), GeGLU (gelu / gelu_pytorch_tanh: one gelu kernel),
--     head_dim, tied lm_head; "gemma2" also: post_attention_layernorm on the attention output before the residual
--     add, pre_ and post_feedforward_layernorm around the MLP, every other layer windowed from the first (or
--     layer_types), attn_logit_softcapping (eager: ÷ cap, tanh, · cap over the scores; HF's sdpa path does not apply
--     it: the plain sdpa kernel, with a warning; decode kernels fuse it) and final_logit_softcapping (÷, tanh, · over
--     the logits). query_pre_attn_scalar only sets the scale's value.
--   * "qwen2": q/k/v projections with bias (o_proj without); "llama" / "qwen3": attention_bias on q/k/v/o;
--     "llama": mlp_bias on gate/up/down; "qwen3": q_norm / k_norm RMSNorms over head_dim before the rotary
--     embedding; head_dim (llama, mistral, qwen3) may differ from hidden_size / num_attention_heads.
-- Serving phases (opts.phase, workload mode "prefill" / "decode"; the shared pieces are in neusight.nodes):
--   * prefill: the inference graph over S prompt tokens, plus each layer's KV-cache write (kv_cache_write, a copy
--     of K and V after the rotary embedding) and the LM head on each prompt's last token (lm_head.last_token).
--   * decode: one token per sequence (s = 1: every linear, norm and rotary kernel on b rows), the new K/V appended
--     to the cache (kv_cache_write), then one decode_attention node over C + 1 cached tokens with the kv heads
--     (this rank's under tp; no repeat_kv, QKᵀ, softmax or PV kernels: serving engines run FlashDecoding /
--     paged attention whatever opts.attention says), LM head on b rows. Sliding-window layers (mistral, qwen with
--     use_sliding_window) attend to and cache min(C + 1, sliding_window) tokens (a "sliding_layers" group); a prefill
--     leaves min(S, sliding_window) of them cached (neusight.nodes.kv_cache_tokens, one rule for both phases).
-- Left out: the rotary cos/sin tables (LlamaRotaryEmbedding: an outer product, cat, cos, sin over b·s·head_dim
-- elements, once per forward and under no_grad) and the causal-mask construction (once per forward): neither is
-- per layer, and our graphs have no no-grad nodes; the labels' shift in the loss (integers). HF ≥ 4.46 upcasts
-- the logits with .float() and pads the labels instead of shifting the logits: the loss keeps
-- neusight.nodes.causal_lm_loss's one (b, s−1, V) copy.
-- Tensor parallelism (opts.tp > 1, opts.parallel = neusight.parallel.plan), Megatron-LM style as in gpt.lua:
-- q/k/v column-parallel (query heads split; key/value heads split when tp divides num_key_value_heads, else, when
-- tp is a multiple of it, one key/value head per rank — each replicated on tp / num_key_value_heads ranks, as
-- Megatron-Core, vLLM and TensorRT-LLM lay GQA out beyond tp = kv heads), gate/up column-parallel
-- (intermediate_size split), o_proj/down_proj row-parallel, embed_tokens and lm_head vocab-parallel; f (g.tp_in)
-- before q/k/v, gate/up and lm_head, g (g.tp_out) after o_proj, down_proj and the embedding; the vocab-parallel
-- cross-entropy all-reduces 3 values per token. RMSNorms and residual adds are replicated, or run on s/tp tokens
-- with opts.sequence_parallel. Not modelled: the all-reduce of replicated k/v weight gradients among their
-- replicas (2·hidden·head_dim values per layer and kv head, next to the activations' all-reduces).
-- opts.megatron (parallel runs with kernels = "megatron", the default; neusight.nodes): Megatron-Core's fused kernels
-- in place of HF's eager chains, one kernel each way for each RMSNorm (ops/rms_norm.lua; Qwen3's q/k norms and Gemma's
-- (1 + weight) norms too), each rotary embedding of q and of k (ops/rope.lua) and the gated activation act(gate) · up
-- (ops/swiglu.lua for SiLU, ops/geglu.lua for Gemma's GELU: bias_swiglu / bias_geglu), and in fp16/bf16 eager
-- attention the fused scale + causal mask + softmax as in gpt.lua (not under Gemma2's soft-capping); and Megatron-Core's
-- GEMMs: linear_qkv, one column-parallel GEMM for q, k and v of (nh + 2 · kvh) · head_dim outputs per rank (the
-- rank's query heads and its key/value heads: one replicated head when tp is a multiple of num_key_value_heads,
-- whose fused node then carries attrs.model_flops_copies = tp · (nh + 2) / (num_attention_heads + 2 ·
-- num_key_value_heads), fractional: neusight.nodes qkv), and linear_fc1, one GEMM for gate and up of 2 ·
-- intermediate_size / tp outputs — Phi-3's qkv_proj and gate_up_proj path (q, k, v and gate, up as views of one
-- output), with the same parameters, FLOPs and saved input; forward one GEMM, backward one dgrad and one wgrad GEMM
-- each, where HF's graph runs three and two of each.
local ipairs, pairs, type, tostring, error = ipairs, pairs, type, tostring, error

local checks = require "neusight.models.check"

local M = {}

M.tensor_parallel = true -- build() shards itself when opts.tp > 1 (neusight/workload.lua checks this)
M.sequence_parallel = true -- and honours opts.sequence_parallel
M.attention = { eager = true, sdpa = true } -- opts.attention (neusight/workload.lua)
-- HF's attn_implementation default for this family is sdpa at every dtype, fp32 included (the fp32 NeuSight traces
-- that keep other builders eager in fp32 are GPT-2, BERT and OPT): neusight/workload.lua defaults sdpa for it
M.sdpa_any_dtype = true
M.serving = { prefill = true, decode = true } -- opts.phase (neusight/workload.lua; neusight.nodes.serving)
-- Rotary positions: no table bounds the sequence, and RoPE scaling runs a model beyond its max_position_embeddings, so
-- a longer one is a warning (neusight/workload.lua position_limit), not the error of a learned table (gpt.lua).
M.rotary_positions = true

--- HuggingFace's config-class defaults (transformers LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config) for the
--- fields that shape the kernels; num_key_value_heads defaults to num_attention_heads, head_dim to
--- hidden_size / num_attention_heads where these tables have none. max_position_embeddings shapes no kernel: it is the
--- limit a forecast warns beyond, neusight/models/hf.lua's value for a config.json that omits it (MistralConfig: 4096 * 32).
M.DEFAULTS = {
  llama = { vocab_size = 32000, hidden_size = 4096, intermediate_size = 11008, num_hidden_layers = 32,
            num_attention_heads = 32, hidden_act = "silu", tie_word_embeddings = false, attention_bias = false,
            mlp_bias = false, attention_dropout = 0.0, max_position_embeddings = 2048 },
  mistral = { vocab_size = 32000, hidden_size = 4096, intermediate_size = 14336, num_hidden_layers = 32,
              num_attention_heads = 32, num_key_value_heads = 8, hidden_act = "silu", tie_word_embeddings = false,
              sliding_window = 4096, attention_dropout = 0.0, max_position_embeddings = 131072 },
  qwen2 = { vocab_size = 151936, hidden_size = 4096, intermediate_size = 22016, num_hidden_layers = 32,
            num_attention_heads = 32, num_key_value_heads = 32, hidden_act = "silu", tie_word_embeddings = false,
            use_sliding_window = false, sliding_window = 4096, max_window_layers = 28, attention_dropout = 0.0,
            max_position_embeddings = 32768 },
  qwen3 = { vocab_size = 151936, hidden_size = 4096, intermediate_size = 22016, num_hidden_layers = 32,
            num_attention_heads = 32, num_key_value_heads = 32, head_dim = 128, hidden_act = "silu",
            tie_word_embeddings = false, attention_bias = false, use_sliding_window = false, sliding_window = 4096,
            max_window_layers = 28, attention_dropout = 0.0, max_position_embeddings = 32768 },
  -- Phi3Config (num_key_value_heads None: num_attention_heads; sliding_window None)
  phi3 = { vocab_size = 32064, hidden_size = 3072, intermediate_size = 8192, num_hidden_layers = 32,
           num_attention_heads = 32, hidden_act = "silu", tie_word_embeddings = false, attention_dropout = 0.0,
           sliding_window = false, max_position_embeddings = 4096 },
  -- GemmaConfig, Gemma2Config (hidden_activation None: hidden_act; Gemma2's layer_types None: alternating)
  gemma = { vocab_size = 256000, hidden_size = 3072, intermediate_size = 24576, num_hidden_layers = 28,
            num_attention_heads = 16, num_key_value_heads = 16, head_dim = 256, hidden_act = "gelu_pytorch_tanh",
            hidden_activation = false, tie_word_embeddings = true, attention_bias = false, attention_dropout = 0.0,
            max_position_embeddings = 8192 },
  gemma2 = { vocab_size = 256000, hidden_size = 2304, intermediate_size = 9216, num_hidden_layers = 26,
             num_attention_heads = 8, num_key_value_heads = 4, head_dim = 256, hidden_act = "gelu_pytorch_tanh",
             hidden_activation = "gelu_pytorch_tanh", tie_word_embeddings = true, attention_bias = false,
             attention_dropout = 0.0, sliding_window = 4096, attn_logit_softcapping = 50.0,
             final_logit_softcapping = 30.0, max_position_embeddings = 8192 },
}

-- The fields of every model_type, then each one's own; the config keys that do not change the kernels and that a
-- config table may carry anyway (scripts/neusight/models/hf.lua ignores many more of a config.json's keys).
local COMMON = { "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
  "num_key_value_heads", "hidden_act", "tie_word_embeddings", "attention_dropout" }
local OWN = {
  llama = { "head_dim", "attention_bias", "mlp_bias" },
  mistral = { "head_dim", "sliding_window" },
  qwen2 = { "use_sliding_window", "sliding_window", "max_window_layers", "layer_types" },
  qwen3 = { "head_dim", "attention_bias", "use_sliding_window", "sliding_window", "max_window_layers", "layer_types" },
  phi3 = { "sliding_window" },
  gemma = { "head_dim", "attention_bias", "hidden_activation" },
  gemma2 = { "head_dim", "attention_bias", "hidden_activation", "sliding_window", "layer_types",
             "attn_logit_softcapping", "final_logit_softcapping" },
}
local NEUTRAL = { "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters" }

--- The builder fields of a model_type (what scripts/neusight/models/hf.lua takes from a config.json).
function M.fields(model_type) return M.family_fields(M.FAMILY, model_type) end

-- The Llama family as M.resolve sees it: its model types, their defaults and own fields, and how each one windows
-- attention ("mistral": every layer when sliding_window is set; "qwen": use_sliding_window, max_window_layers,
-- layer_types; "alternate": layer_types, else every other layer from the first, Gemma2's default). Optional per-type
-- sets: fused (Phi-3's qkv_proj and gate_up_proj), gemma (Gemma's scaled embedding, (1 + weight) RMSNorm and GELU MLP:
-- hidden_act / hidden_activation "gelu" or "gelu_pytorch_tanh"), sandwich (Gemma2's post-attention and
-- post-feedforward norms). Derived families (neusight/models/moe.lua) pass their own table of the same shape.
M.FAMILY = {
  name = "llama", defaults = M.DEFAULTS, own = OWN, neutral = NEUTRAL,
  supported = "\"llama\", \"mistral\", \"qwen2\", \"qwen3\", \"phi3\", \"gemma\" or \"gemma2\"",
  window = { mistral = "mistral", qwen2 = "qwen", qwen3 = "qwen", phi3 = "mistral", gemma2 = "alternate" },
  qkv_bias = { qwen2 = true }, qk_norm = { qwen3 = true },
  fused = { phi3 = true }, gemma = { gemma = true, gemma2 = true }, sandwich = { gemma2 = true },
}

-- The activations one kernel computes (F.gelu, exact or tanh-approximated: ops/gelu.lua), Gemma's MLP.
local GELU = { gelu = true, gelu_pytorch_tanh = true }

--- The builder fields of a model_type of `family` (default M.FAMILY): its common fields, then its own.
function M.family_fields(family, model_type)
  local out = {}
  for _, list in ipairs { COMMON, family.own[model_type] or {} } do
    for _, k in ipairs(list) do out[#out + 1] = k end
  end
  return out
end

--- Resolves a config of `family` (HF field names, any of them omitted) into the numbers the graph needs; errors
--- name the model. false stands for HF's None (sliding_window, head_dim, num_key_value_heads, layer_types).
--- r.c holds every builder field with its default applied (derived families read their own fields there);
--- r.windowed_at[i] (1-based layer) whether layer i - 1 uses the sliding window.
---@return table r { who, model_type, c, V, h, I, L, nh, kvh, hd, tied, qkv_bias, o_bias, mlp_bias, qk_norm, p_drop, window?, windowed, windowed_at, fused, gemma, act, sandwich, attn_softcap?, final_softcap? }
function M.resolve(cfg, family)
  local who = ("%s model '%s'"):format(family.name, tostring(cfg.name or "?"))
  local mt = cfg.model_type or family.default_type or "llama"
  if not family.defaults[mt] then
    checks.fail(cfg, "model_type", ("%s: model_type %s is not supported (%s)")
      :format(who, type(mt) == "string" and ("%q"):format(mt) or tostring(mt), family.supported))
  end
  local known = M.family_fields(family, mt)
  for _, k in ipairs { "name", "arch", "model_type" } do known[#known + 1] = k end
  for _, k in ipairs(family.neutral) do known[#known + 1] = k end
  checks.known(who, cfg, known)
  checks.neutral(who, cfg, family.neutral) -- no kernel reads them, but 0 positions or a RoPE base of 0 is no model
  local d = family.defaults[mt]
  local c = {}
  for _, k in ipairs(M.family_fields(family, mt)) do
    local v = cfg[k]
    if v == nil then v = d[k] end
    if v == false and (k == "num_key_value_heads" or k == "head_dim" or k == "layer_types"
        or k == "hidden_activation") then v = nil end
    c[k] = v
  end
  checks.counts(who, c, { "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads" },
    { "num_key_value_heads", "head_dim" }, cfg)
  checks.booleans(who, c, { "tie_word_embeddings", "attention_bias", "mlp_bias", "use_sliding_window" }, cfg)
  local gemma = family.gemma ~= nil and family.gemma[mt] == true
  local act = c.hidden_act
  if gemma then -- HF reads hidden_activation (Gemma2; Gemma before 4.4x) or hidden_act (Gemma): both must be a GELU
    for _, k in ipairs { "hidden_act", "hidden_activation" } do
      if c[k] ~= nil and not GELU[c[k]] then
        checks.fail(cfg, k, ("%s: %s %s is not supported (Gemma's MLP is GeGLU with one GELU kernel: \"gelu\" or "
          .. "\"gelu_pytorch_tanh\")"):format(who, k, type(c[k]) == "string" and ("%q"):format(c[k]) or tostring(c[k])))
      end
    end
  elseif act ~= "silu" and act ~= "swish" then -- HF's ACT2FN maps "swish" to the same nn.SiLU
    checks.fail(cfg, "hidden_act", ("%s: hidden_act %s is not supported (the Llama-family MLP is SwiGLU: \"silu\", "
      .. "or \"swish\", HF's other name for it)")
      :format(who, type(act) == "string" and ("%q"):format(act) or tostring(act)))
  end
  -- Gemma2's logit soft-capping (x / cap, tanh, · cap): a positive cap, or false (None) for none
  local softcap = {}
  for _, k in ipairs { "attn_logit_softcapping", "final_logit_softcapping" } do
    local v = c[k]
    if v ~= nil and v ~= false and not (type(v) == "number" and v > 0 and v < math.huge) then
      checks.fail(cfg, k, ("%s: field '%s' must be a positive number or null (got %s)"):format(who, k, checks.shown(v)))
    end
    softcap[k] = v or nil
  end
  local p = c.attention_dropout
  if type(p) ~= "number" or not (p >= 0 and p < 1) then
    checks.fail(cfg, "attention_dropout", ("%s: field 'attention_dropout' must be a number in [0, 1) (got %s)")
      :format(who, checks.shown(p)))
  end
  local nh = c.num_attention_heads
  local kvh = c.num_key_value_heads or nh
  checks.divisible(who, cfg, "num_attention_heads", nh, "num_key_value_heads", kvh)
  local hd = c.head_dim
  if not hd then
    checks.divisible(who, cfg, "hidden_size", c.hidden_size, "num_attention_heads", nh, ", or head_dim be given")
    hd = c.hidden_size // nh
  end
  if hd % 2 ~= 0 then
    checks.fail(cfg, c.head_dim and "head_dim" or { "num_attention_heads", "hidden_size" },
      ("%s: head_dim (%d) must be even (rotate_half splits it in two)"):format(who, hd))
  end

  -- Sliding-window attention: the window and which layers use it.
  local L, window, windowed_at = c.num_hidden_layers, nil, {}
  -- a whole float (a config.json's 4096.0: refused; a Lua config's: the integer) reached a decode step's shapes as one
  checks.integer_in_file(who, c, "sliding_window", cfg)
  local sw = c.sliding_window
  if sw ~= nil and sw ~= false and not checks.is_count(sw) then
    checks.fail(cfg, "sliding_window", ("%s: field 'sliding_window' must be a positive integer or false (got %s)")
      :format(who, checks.shown(sw)))
  end
  if sw then sw = math.tointeger(sw); c.sliding_window = sw end
  local style = family.window[mt]
  if style == "mistral" then
    if sw then
      window = sw
      for i = 1, L do windowed_at[i] = true end
    end
  elseif style == "qwen" or style == "alternate" then
    if style == "qwen" then checks.integer_in_file(who, c, "max_window_layers", cfg) end
    local mwl = style == "qwen" and c.max_window_layers or 0
    if type(mwl) ~= "number" or mwl < 0 or mwl ~= math.floor(mwl) then
      checks.fail(cfg, "max_window_layers", ("%s: field 'max_window_layers' must be a non-negative integer (got %s)")
        :format(who, checks.shown(mwl)))
    end
    if (style == "alternate" or c.use_sliding_window) and sw then window = sw end
    if c.layer_types ~= nil then
      local lt = c.layer_types
      if type(lt) ~= "table" or #lt ~= L then
        checks.fail(cfg, "layer_types", ("%s: field 'layer_types' must list num_hidden_layers (%d) entries"):format(who, L))
      end
      for i, v in ipairs(lt) do
        if v ~= "full_attention" and v ~= "sliding_attention" then
          checks.fail(cfg, "layer_types", ("%s: layer_types[%d] must be \"full_attention\" or \"sliding_attention\" "
            .. "(got %s)"):format(who, i, tostring(v)))
        end
        windowed_at[i] = window ~= nil and v == "sliding_attention"
      end
    elseif window and style == "alternate" then
      for i = 1, L do windowed_at[i] = (i - 1) % 2 == 0 end -- Gemma2Config: layer i sliding when (i + 1) % 2
    elseif window then
      for i = 1, L do windowed_at[i] = i - 1 >= mwl end
    end
  end
  local windowed = 0
  for i = 1, L do
    windowed_at[i] = windowed_at[i] == true
    if windowed_at[i] then windowed = windowed + 1 end
  end

  return {
    who = who, model_type = mt, c = c, V = c.vocab_size, h = c.hidden_size, I = c.intermediate_size, L = L,
    nh = nh, kvh = kvh, hd = hd, tied = c.tie_word_embeddings == true,
    qkv_bias = family.qkv_bias[mt] == true or c.attention_bias == true, o_bias = c.attention_bias == true,
    mlp_bias = c.mlp_bias == true, qk_norm = family.qk_norm[mt] == true, p_drop = p,
    window = window, windowed = windowed, windowed_at = windowed_at,
    fused = family.fused ~= nil and family.fused[mt] == true, gemma = gemma, act = gemma and "gelu" or "silu",
    sandwich = family.sandwich ~= nil and family.sandwich[mt] == true,
    attn_softcap = softcap.attn_logit_softcapping, final_softcap = softcap.final_logit_softcapping,
  }
end

--- Resolves a Llama-family config (M.resolve with M.FAMILY).
function M.config(cfg) return M.resolve(cfg, M.FAMILY) end

--- Builds the op graph of one forward pass (the engine derives backward/accumulate from the op rules).
---@param cfg table HF config fields (M.DEFAULTS for what may be omitted), plus name and model_type
---@param opts { batch: integer, seq: integer, training?: boolean, dtype?: string, loss?: boolean, attention?: string, tp?: integer, parallel?: table, sequence_parallel?: boolean }
---@return neusight.Node[]
function M.build(cfg, opts) return M.graph(M.config(cfg), opts) end

-- Gemma2's attn_logit_softcapping under sdpa: HF's sdpa_attention_forward drops the softcap (only eager and
-- flash_attention_2 apply it), so the model HF runs there has no soft-capping and its kernel is the plain sdpa one.
-- Said once per model name (search builds a graph per layout).
-- A build given opts.notes (a table: neusight.workload graph's `notes`, a listing's build) gets each note appended
-- there, unsaid and not used up; else each is said once.
local function note(opts, seen, key, text)
  if type(opts.notes) == "table" then
    opts.notes[#opts.notes + 1] = text
  elseif not seen[key] then
    seen[key] = true
    require("neusight").warn(text)
  end
end
local softcap_warned = {}
local function softcap_note(who, opts)
  note(opts, softcap_warned, who, ("%s: attn_logit_softcapping under sdpa attention: HF's sdpa path does not apply it (eager and "
    .. "flash_attention_2 do), so the forecast prices the sdpa kernel alone; give --attention eager (workload field "
    .. "attention) for the kernels of the soft-capped scores"):format(who))
end

-- Which kernel a sliding-window model's windowed layers were priced as (sdpa attention, the window reached), said
-- once per model name and kernel: a serving prefill's windowed FlashAttention kernel, or HF's masked one.
local window_warned = {}
local function window_note(who, window, band, opts)
  note(opts, window_warned, who .. (band and "|band" or "|mask"), band
    and ("%s: sliding window %d: the windowed layers' prefill attention is priced as the serving engines' windowed "
      .. "FlashAttention kernel (vLLM, SGLang), the causal pairs within the window (about s × %d)"):format(who, window, window)
    or ("%s: sliding window %d: the windowed layers' attention is priced as HF's sdpa path runs it, a masked "
      .. "memory-efficient kernel over all s × s pairs (PyTorch skips none of them; a serving prefill, --mode prefill "
      .. "or serve, is priced as the windowed FlashAttention kernel)"):format(who, window))
end

--- The graph of a resolved config `r` (M.resolve). `moe` (neusight/models/moe.lua) swaps the MLP of some layers:
--- moe.sparse(i) tells whether layer i (0-based) is sparse, moe.block(ctx, p) emits the MLP of layer prefix p (ctx: the graph
--- `g`, `r`, the options, this rank's shapes — `sp`: sequence parallelism on, `sl`: the rank's tokens of the sequence
--- `s` — and `ctx.swiglu`, the dense MLP as emitted here), and moe.epilogue(ctx,
--- sparse_layers) appends nodes after the loss (the router's auxiliary loss). Sparse and dense layers are separate
--- layer groups: "dense_layers" and "layers" (windowed: "sliding_dense_layers", "sliding_layers"), in that order.
---@return neusight.Node[]
function M.graph(r, opts, moe)
  local who = r.who
  local N = require "neusight.nodes"
  local serve = N.serving(opts, who)
  local decode = serve ~= nil and serve.phase == "decode"
  checks.batch_seq(who, decode and { batch = opts.batch, seq = 1 } or opts)
  local b, s, h, hd = opts.batch, serve and serve.s or opts.seq, r.h, r.hd
  local dtype = opts.dtype or "fp32"
  local shard = (opts.tp or 1) > 1 and require("neusight.parallel").tensor_shard(opts, who) or nil
  local tp = shard and shard.tp or 1
  local nh, kvh, V = r.nh, r.kvh, r.V
  -- this rank's intermediate_size: now for Llama, at the first dense layer for MoE models (whose experts have their own)
  -- (each names the other: the degrees its error lists divide both)
  local I = moe == nil and (shard and shard.split(r.I, "intermediate_size",
    { { n = r.nh, what = "num_attention_heads" } }) or r.I) or nil
  if shard then
    nh = shard.split(nh, "num_attention_heads", moe == nil and { { n = r.I, what = "intermediate_size" } } or nil)
    if kvh % tp == 0 then
      kvh = kvh // tp
    elseif tp % kvh == 0 then
      kvh = 1 -- this rank's query heads share one key/value head (replicated on tp / num_key_value_heads ranks)
    else
      require("neusight").infeasible(("%s: num_key_value_heads = %d and tp = %d: tp must divide num_key_value_heads "
        .. "or be a multiple of it"):format(who, r.kvh, tp)) -- the setting's (neusight.infeasible), not the model's
    end
    V = shard.vocab(V)
  end
  -- a fused q/k/v GEMM's model-FLOPs copies (neusight.nodes qkv): tp · its (nh + 2 · kvh) heads / the model's, 1 unless
  -- the rank's one key/value head is replicated
  local qkv_copies = tp * (nh + 2 * kvh) / (r.nh + 2 * r.kvh)
  local sp = tp > 1 and opts.sequence_parallel == true
  local sl = sp and shard.split(s, "the sequence length") or s -- tokens of the residual stream per rank
  local sdpa = opts.attention == "sdpa"
  if sdpa and not decode and r.attn_softcap then softcap_note(who, opts) end
  local g = N.new(dtype, shard, sp)
  g.megatron = opts.megatron == true -- Megatron-LM's fused RMSNorm, RoPE and SwiGLU (neusight.nodes)
  -- torch.autocast over fp32 modules (opts.autocast: neusight.workload, precision amp with eager kernels): the dtype
  -- flow of HF's eager modules under it (neusight.nodes autocast_cast, stream_dtype); a MoE layer's router and expert
  -- dispatch retype themselves (neusight/models/moe.lua block)
  -- `stream`: the residual stream's dtype (fp32 under autocast)
  local stream, add_as = N.autocast_setup(g, opts)
  -- HF's RMSNorm computes in fp32: casts around it unless the model already is fp32.
  local upcast = N.upcasts(g)
  g.kv_dtype = serve and serve.kv_dtype or nil -- a quantised KV cache (neusight.nodes.kv_dtype)
  local nodes, add, tp_in, tp_out = g.nodes, g.add, g.tp_in, g.tp_out

  -- Shapes are shared between nodes: nodes are read-only for op rules and the engine.
  local x = { b, s, h }                   -- a full activation
  local xs = sp and { b, sl, h } or x     -- residual stream (this rank's sequence shard when sequence parallel)
  local q_flat, kv_flat = { b, s, nh * hd }, { b, s, kvh * hd }
  local q_heads, kv_heads = { b, nh, s, hd }, { b, kvh, s, hd }
  local q_half, kv_half = { b, nh, s, hd // 2 }, { b, kvh, s, hd // 2 }
  local rope_table = { b, 1, s, hd }      -- cos / sin, broadcast over the heads
  local scores = { b, nh, s, s }
  local act = I and { b, s, I } -- the dense MLP's activations

  -- The HF pieces (neusight.nodes): LlamaRMSNorm (Qwen3RMSNorm), apply_rotary_pos_emb, the q/k/v projections, the SwiGLU MLP under
  -- prefix `m` with `width` = this rank's intermediate size (`names`: Mixtral's experts' w1, w3, w2; `attrs`: experts').
  -- `in_dtype`: the norm's input dtype (nil: the graph's; stream: the residual stream's, fp32 under autocast)
  local function rms_norm(p, shape, width, in_dtype) N.rms_norm(g, p, shape, width, r.gemma, in_dtype) end
  -- q / k enter RoPE in the projection's dtype, or fp32 after Qwen3's q_norm / k_norm under autocast (fp32 weight ·
  -- x; Gemma's (1 + w) norm returns x's dtype)
  local rope_in = (r.qk_norm and g.autocast and not r.gemma) and "fp32" or nil
  local function rope(p, heads, half) N.rope(g, p, heads, half, rope_table, nil, rope_in) end
  -- an op on autocast's fp32 list (softmax) or fed an fp32 operand (the mask add: HF's causal mask is in the fp32
  -- inputs_embeds' dtype) under autocast runs in fp32; `add_as(attn32, ...)`
  local attn32 = g.autocast and "fp32" or dtype
  local function swiglu(m, input, mid, width, bias, names, attrs) N.swiglu(g, m, input, mid, h, width, bias, names, attrs) end

  local ctx -- what moe.block sees (set below)

  -- One decoder layer under prefix `p`; `win` = how its sdpa kernel treats the sliding window: nil none (causal),
  -- "mask" HF's mask (a non-causal kernel over every query/key pair), a number the windowed kernel of that window;
  -- `kv` = the KV-cache tokens per sequence it writes and attends to in a serving phase; `window` = { tokens, layers }:
  -- how many of the group's layers keep at most the sliding window cached (neusight.nodes.kv_cache_write), or nil.
  local function layer(p, win, kv, sparse, window)
    rms_norm(p .. ".input_layernorm", xs, h, stream)
    local a = p .. ".self_attn"
    local attn_in = tp_in(a .. ".tp_in", x, "f: input gradient of the column-parallel q_proj / k_proj / v_proj",
      nil, a .. ".qkv_proj") -- Megatron's linear_qkv (neusight.nodes qkv)
    -- Phi-3's qkv_proj and Megatron's linear_qkv: one GEMM, then q, k, v are slices (views) of its output
    N.qkv(g, a, attn_in, h, nh, kvh, hd, q_flat, kv_flat, r.qkv_bias, r.fused, qkv_copies)
    if r.qk_norm then -- Qwen3: RMSNorm over head_dim of (b, s, heads, head_dim), before the transpose
      rms_norm(a .. ".q_norm", { b, s, nh, hd }, hd)
      rms_norm(a .. ".k_norm", { b, s, kvh, hd }, hd)
    end
    rope(a .. ".rotary.q", q_heads, q_half)
    rope(a .. ".rotary.k", kv_heads, kv_half)
    -- the rotated K (fp32 under autocast) and V (v_proj's output) in HF's past_key_values
    N.hf_cache(opts, nodes[#nodes], b, kvh, s, hd, nil, nh, dtype)
    -- attrs.core_attention: the nodes Megatron's selective recomputation re-runs (parallel.recompute = "selective")
    local core = { core_attention = true }
    if serve then N.kv_cache_write(g, a .. ".kv_cache_write", b, kvh, s, hd, kv, window) end
    if decode then
      N.decode_attention(g, a .. ".decode_attention", b, nh, kvh, hd, kv)
    elseif sdpa then
      local band = math.type(win) == "integer"
      -- scaled_dot_product_attention is on autocast's lower-precision list: the fp32 rotated q and k cast first
      N.autocast_cast(g, a .. ".sdpa.q_cast", q_heads)
      N.autocast_cast(g, a .. ".sdpa.k_cast", kv_heads)
      add("sdpa", a .. ".sdpa", { q_heads, kv_heads, kv_heads }, q_heads, 0, {
        core_attention = true, causal = win ~= "mask", window = band and win or nil,
        dropout = r.p_drop > 0 and r.p_drop or nil, core_inputs = "1,2,3",
        output_shared = true, -- o_proj saves O itself (a view: ops/sdpa.lua)
        note = win == "mask" and "sliding-window mask: memory-efficient kernel over all s × s pairs"
          or band and ("sliding window %d: FlashAttention's windowed kernel, the causal pairs within the window"):format(win)
          or nil })
    else
      if kvh < nh then -- repeat_kv: expand + reshape, a copy to all query heads (of the fp32 rotated k under autocast)
        add_as(g.autocast and "fp32" or dtype, "contiguous", a .. ".repeat_kv.k", { kv_heads }, q_heads, 0,
          { core_attention = true, core_inputs = "1" })
        add("contiguous", a .. ".repeat_kv.v", { kv_heads }, q_heads, 0, { core_attention = true, core_inputs = "1" })
      end
      -- core_inputs: what the region keeps under selective recomputation (Q, K, V; K and V before repeat_kv)
      local gqa = kvh < nh
      -- matmul is on autocast's lower-precision list: the fp32 rotated q and (repeated) k cast first, the casts saved
      N.autocast_cast(g, a .. ".qk.q_cast", q_heads)
      N.autocast_cast(g, a .. ".qk.k_cast", gqa and q_heads or kv_heads)
      add("matmul", a .. ".qk", { q_heads, { b, nh, hd, s } }, scores, 0,
        { core_attention = true, core_inputs = gqa and "1" or "1,2" })
      if opts.megatron and not r.attn_softcap and (dtype == "fp16" or dtype == "bf16") then
        -- Megatron-LM's FusedScaleMaskSoftmax, as in gpt.lua (fp16/bf16 only): scale, causal mask and softmax in one
        -- kernel each way. Gemma2's soft-capping has no such kernel: its scores keep the chain below.
        add("softmax", a .. ".softmax", { scores }, scores, 0,
          { core_attention = true, note = "Megatron fused scale + causal mask + softmax" })
      else
        add("mul", a .. ".scale", { scores }, scores, 0, core)                  -- × head_dim^-0.5   VECmulu
        if r.attn_softcap then -- Gemma2: scores / cap, tanh, · cap
          add("div", a .. ".softcap.div", { scores }, scores, 0, core)           --                   VECdivu
          add("tanh", a .. ".softcap.tanh", { scores }, scores, 0, core)
          add("mul", a .. ".softcap.mul", { scores }, scores, 0, core)           --                   VECmulu
        end
        add_as(attn32, "add", a .. ".mask", { scores, { b, 1, s, s } }, scores, 0,
          { core_attention = true, input_dtypes = N.mixed(g, "dtype", "fp32") })   -- + causal mask  VECadd
        add_as(attn32, "softmax", a .. ".softmax", { scores }, scores, 0, core) -- softmax(dtype=fp32).to(q's dtype)
      end
      if r.p_drop > 0 then add_as(attn32, "dropout", a .. ".dropout", { scores }, scores, 0, core) end
      -- autocast: the fp32 probabilities cast for the P·V matmul (which saves that copy)
      N.autocast_cast(g, a .. ".pv.p_cast", scores)
      add("matmul", a .. ".pv", { scores, q_heads }, q_heads, 0, { core_attention = true, core_inputs = gqa and "" or "2" })
      add("contiguous", a .. ".contiguous", { q_heads }, { b, s, nh, hd })    -- transpose(1, 2).contiguous()
    end
    -- Row-parallel o_proj: its bias (attention_bias) is added once, after the all-reduce (replicated).
    add("linear", a .. ".o_proj", { q_flat }, x, nh * hd * h + (r.o_bias and h or 0), { bias = r.o_bias })
    tp_out(a .. ".tp_out", x, "g: sum of the row-parallel o_proj partial outputs")
    -- the residual adds: fp32 under autocast (add takes its widest input, the fp32 stream)
    if r.sandwich then -- Gemma2: the attention output normed before the residual add, the MLP's input after it
      rms_norm(p .. ".post_attention_layernorm", xs, h)
      add_as(stream, "add", p .. ".attn_residual", { xs, xs }, xs, 0, N.residual_attrs(g))
      rms_norm(p .. ".pre_feedforward_layernorm", xs, h, stream)
    else
      add_as(stream, "add", p .. ".attn_residual", { xs, xs }, xs, 0, N.residual_attrs(g))
      rms_norm(p .. ".post_attention_layernorm", xs, h, stream)
    end
    local m = p .. ".mlp"
    local branch -- the MLP branch's dtype under autocast (nil: the compute dtype; moe.block says its own)
    if sparse then
      branch = moe.block(ctx, p)
    else
      local mlp_in = tp_in(m .. ".tp_in", x, "f: input gradient of the column-parallel gate_proj / up_proj",
        nil, m .. ".gate_up_proj") -- Megatron's linear_fc1 (neusight.nodes swiglu)
      if not I then I = shard and shard.split(r.I, "intermediate_size") or r.I end
      act = act or { b, s, I }
      N.swiglu(g, m, mlp_in, act, h, I, r.mlp_bias, nil, nil, { act = r.act, fused = r.fused })
      tp_out(m .. ".tp_out", x, "g: sum of the row-parallel down_proj partial outputs")
    end
    if r.sandwich then rms_norm(p .. ".post_feedforward_layernorm", xs, h) end
    add_as(stream, "add", p .. ".mlp_residual", { xs, xs }, xs, 0, N.residual_attrs(g, branch))
  end

  N.embed_tokens(g, x, V)
  -- Gemma: inputs_embeds · sqrt(hidden_size) (a tensor in the dtype: one VECmulu)
  if r.gemma then
    add_as(N.stream_dtype(g), "mul", "embed_scale", { xs }, xs, 0, { note = "Gemma: embeddings · sqrt(hidden_size)" })
  end

  -- Sliding-window layers change the sdpa kernel once the sequence reaches the window: HF then passes a mask (a
  -- non-causal kernel over all pairs); a serving prefill (vLLM, SGLang) runs the windowed FlashAttention kernel over
  -- the band's pairs (ops/sdpa.lua attrs.window), which differs from the causal one once s > window (capped, below).
  -- In both serving phases they cache the last `sliding_window` tokens once the sequence outgrows the window
  -- (neusight.nodes.kv_cache_tokens: the prefill leaves min(S, W) of them cached, a decode step min(C + 1, W)); in
  -- decode they attend to only those.
  local kv = serve and serve.kv
  local kv_window = kv and N.kv_cache_tokens(kv, r.window)
  local capped = kv ~= nil and kv_window < kv -- the window caps a windowed layer's cache
  local masked = not serve and sdpa and r.window ~= nil and s >= r.window -- the sdpa kernel with a window mask
  local sliding = (capped or masked) and r.windowed or 0
  if sliding > 0 and sdpa and not decode then window_note(who, r.window, serve ~= nil, opts) end
  -- Layer groups: (windowed?, sparse?) per layer; without a window every layer is a full one.
  -- windowed_of[name]: the group's layers that use the window (in a group of their own once the window caps the cache;
  -- among the full ones while it does not), what the KV-cache writes say (serve's paged blocks: vLLM frees a windowed
  -- layer's blocks once they slide out of the window)
  local counts = { dense_layers = 0, layers = 0, sliding_dense_layers = 0, sliding_layers = 0 }
  local windowed_of = { dense_layers = 0, layers = 0, sliding_dense_layers = 0, sliding_layers = 0 }
  local sparse_layers = 0
  for i = 1, r.L do
    local sparse = moe == nil or moe.sparse(i - 1)
    local name = (sliding > 0 and r.windowed_at[i] and "sliding_" or "") .. ((moe and not sparse) and "dense_" or "")
      .. "layers"
    counts[name] = counts[name] + 1
    if r.window and r.windowed_at[i] then windowed_of[name] = windowed_of[name] + 1 end
    if moe and sparse then sparse_layers = sparse_layers + 1 end
  end
  ctx = { g = g, r = r, opts = opts, shard = shard, tp = tp, b = b, s = s, sp = sp, sl = sl, x = x, dtype = dtype,
          upcast = upcast, add_as = add_as, swiglu = swiglu }
  for _, grp in ipairs { { "dense_layers", false, false }, { "layers", false, true },
                         { "sliding_dense_layers", true, false }, { "sliding_layers", true, true } } do
    local name, windowed, sparse = grp[1], grp[2], grp[3]
    if counts[name] > 0 then
      g.layer, g.count = name, counts[name]
      local window = windowed_of[name] > 0 and { tokens = r.window, layers = windowed_of[name] } or nil
      if windowed then layer(name, serve and math.tointeger(r.window) or "mask", kv_window, moe ~= nil and sparse, window)
      else layer(name, nil, kv, moe ~= nil and sparse, window) end
    end
  end

  N.causal_lm_head(g, serve, x, xs, V, r.tied, opts, { one_plus = r.gemma, softcap = r.final_softcap })
  if moe and moe.epilogue then moe.epilogue(ctx, sparse_layers) end
  return nodes
end

return M
