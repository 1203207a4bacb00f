-- tests/scripts/test_switch.lua — Switch Transformer builder: closed-form FLOPs of a tiny config, parameter count vs HF.
local switch = require "neusight.models.switch"
local presets = require "neusight.models.presets"

local t = require("neusight.testing").bind(load_op, make_node)
local eq, total_params = t.eq, t.params

-- Σ count · forward flops of the given kernel kind (all kinds when nil).
local function fw_flops(nodes, training, kind) return t.flops(nodes, training, "fw", kind) end

local TINY = {
  name = "tiny", arch = "switch", num_layers = 4, num_decoder_layers = 4, d_model = 64, d_ff = 256, d_kv = 16,
  num_heads = 4, num_experts = 2, expert_capacity = 4, encoder_sparse_step = 2, decoder_sparse_step = 2,
  vocab_size = 100, relative_attention_num_buckets = 8,
}

local T = {}

function T.test_tiny_forward_gemm_and_bmm_flops_closed_form()
  local b, s, d, F, inner, E, V = 2, 16, 64, 256, 64, 2, 100
  local cap, tok = b * 4, b * s
  local attn = 2 * tok * 4 * d * inner                       -- q, k, v, o
  local dense_ffn = 2 * tok * 2 * d * F
  local sparse_ffn = 2 * tok * d * E + E * 2 * cap * 2 * d * F -- router; every expert on its full capacity buffer
  local enc = 2 * (attn + dense_ffn) + 2 * (attn + sparse_ffn)
  local dec = 2 * (2 * attn + dense_ffn) + 2 * (2 * attn + sparse_ffn)
  local nodes = switch.build(TINY, { batch = b, seq = s, training = false })
  eq(fw_flops(nodes, false, "gemm"), enc + dec + 2 * tok * d * V, "GEMM forward flops")
  local bmm = 2 * 2 * b * 4 * s * s * 16                      -- QKᵀ and PV per attention
  eq(fw_flops(nodes, false, "bmm"), (4 + 2 * 4) * bmm, "BMM forward flops (4 encoder + 8 decoder attentions)")
end

function T.test_parameter_count_matches_hf()
  local c = presets.switchxl4
  local d, F, inner, E, V = c.d_model, c.d_ff, c.num_heads * c.d_kv, c.num_experts, c.vocab_size
  local bias = c.relative_attention_num_buckets * c.num_heads
  local attn, dense, sparse = 4 * d * inner + d, 2 * d * F + d, d * E + E * 2 * d * F + d
  local half = c.num_layers // 2
  -- SwitchTransformersForConditionalGeneration: shared embedding (lm_head tied), encoder, decoder, final norms.
  local hf = V * d + half * (2 * attn + dense + sparse) + bias + d
    + half * (4 * attn + dense + sparse) + bias + d
  local nodes = switch.build(c, { batch = 1, seq = 512, training = false })
  eq(total_params(nodes), hf, "switchxl4 parameters")
end

function T.test_layers_are_grouped_by_count()
  local nodes = switch.build(presets.switchxl4, { batch = 1, seq = 512, training = true })
  local counts = {}
  for _, n in ipairs(nodes) do counts[n.layer] = n.count end
  eq(counts["encoder.dense"], 12, "dense encoder blocks")
  eq(counts["encoder.sparse"], 12, "sparse encoder blocks")
  eq(counts["decoder.dense"], 12, "dense decoder blocks")
  eq(counts["decoder.sparse"], 12, "sparse decoder blocks")
  eq(counts[""], 1, "prologue/epilogue")
end

function T.test_config_errors()
  local bad = {}
  for k, v in pairs(TINY) do bad[k] = v end
  bad.num_experts = 0
  local ok, err = pcall(switch.build, bad, { batch = 1, seq = 8 })
  assert(not ok and err:find("switch model 'tiny': field 'num_experts' must be a positive integer (got 0)", 1, true),
    tostring(err))
end

return T
