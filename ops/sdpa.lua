-- ops/sdpa.lua — torch.nn.functional.scaled_dot_product_attention as frameworks run it for training and
-- prefill: one fused FlashAttention-style kernel each way (the scores never reach DRAM).
--
-- inputs = { Q[b, heads, sq, d], K[b, kv_heads, skv, d], V[b, kv_heads, skv, dv] }, output O[b, heads, sq, dv]
-- (dv = d but for DeepSeek's multi-head latent attention, whose values are narrower: neusight.kernels.attention's dv);
-- attrs.causal (default true: decoder self-attention, is_causal=True), attrs.dropout (dropout inside the kernel:
-- it changes no DRAM traffic and is ignored), attrs.window (a causal sliding window of that many keys, run as serving
-- engines' windowed FlashAttention kernel, which skips the key tiles outside the band: kernels.window_attention;
-- HF's sdpa path passes a mask instead, a non-causal kernel over every pair: causal = false). Forward: kernels.attention("causal"|"full"); backward: the same
-- with "_bwd" (FlashAttention-2's dQ/dK/dV kernel, 2.5× the forward's matrix work). Grouped-query and
-- multi-query attention (kv_heads < heads) read each key/value head once for its whole query group.
-- For a query-by-query decode over a KV cache use ops/decode_attention.lua.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

local function dims(node)
  local q, k, v = rules.input(node, 1), rules.input(node, 2), rules.input(node, 3)
  if #q ~= 4 or #k ~= 4 or #v ~= 4 then
    error(("sdpa node '%s': Q, K and V must be [batch, heads, seq, head_dim]"):format(node.name), 0)
  end
  if k[1] ~= q[1] or v[1] ~= q[1] or k[4] ~= q[4] or v[2] ~= k[2] or v[3] ~= k[3] then
    error(("sdpa node '%s': K must match Q's batch and head_dim, V K's batch, heads and length"):format(node.name), 0)
  end
  local causal = true
  if node.attrs and node.attrs.causal ~= nil then causal = node.attrs.causal end
  local window = node.attrs and node.attrs.window
  if window ~= nil then window = math.tointeger(window) or false end -- attrs come back as numbers (4096.0)
  if window ~= nil and (not window or window < 1 or not causal or q[3] ~= k[3]) then
    error(("sdpa node '%s': attrs.window must be a positive integer on causal self-attention (as many queries as keys)")
      :format(node.name), 0)
  end
  return q[1], q[3], k[3], q[4], q[2], k[2], causal, v[4], window
end

-- The forward ("") or backward ("_bwd") kernel of a node.
local function kernel(node, bwd)
  local b, sq, skv, d, h, kvh, causal, dv, window = dims(node)
  if window then return K.window_attention("causal" .. bwd, b, sq, window, d, h, kvh, node.dtype, dv) end
  return K.attention((causal and "causal" or "full") .. bwd, b, sq, skv, d, h, kvh, node.dtype, dv)
end

---@type neusight.OpRule
return {
  name = "sdpa",
  doc = "scaled_dot_product_attention: one FlashAttention kernel forward (causal/full/sliding window), one backward; GQA/MQA",
  attrs = rules.attrs { "saved_inputs",
    causal = "boolean: true when absent (decoder self-attention, is_causal=True); false for full attention (an "
      .. "encoder: BERT, ViT, T5's encoder; cross-attention)",
    dropout = "number: dropout probability inside the kernel (no DRAM traffic: ignored)",
    window = "integer: a causal sliding window of this many keys per query, run as FlashAttention's windowed kernel "
      .. "(the key tiles outside the band skipped: neusight.kernels.window_attention)",
    output_shared = "boolean: the output O reaches the next linear as a view (no copy), which saves it as its input: "
      .. "not counted again here (neusight.memory)" },
  check = rules.check_attention,
  -- The FlashAttention kernels keep Q, K, V, the output O and the per-row logsumexp (b·h·sq fp32) for backward, never
  -- the s × s scores (the backward kernel recomputes them). PyTorch's flash, memory-efficient and cuDNN kernels write
  -- O in (b, sq, heads, dv) order and return a transposed view of it, so HF's `transpose(1, 2).contiguous()` and
  -- reshape, and Megatron-Core's view, copy nothing: the output projection saves the very storage O is (the
  -- profiler traces in tests/fixtures/traces/hf show transpose → reshape → view → linear, no copy). A builder says so
  -- with attrs.output_shared, and O is counted once, on the projection (which keeps it under selective recomputation
  -- too, where this node keeps only Q, K and V).
  saves = function(node)
    local b, sq, _, _, h = dims(node)
    local out = node.attrs.output_shared and 0 or rules.tensor_bytes(node, node.output)
    return rules.saved_inputs(node, { 1, 2, 3 }) + out + 4 * b * h * sq
  end,
  forward = function(node) return { kernel(node, "") } end,
  backward = function(node) return { kernel(node, "_bwd") } end,
}
