-- ops/decode_attention.lua — attention of sq new tokens per sequence over a KV cache (serving decode): one
-- FlashDecoding-style kernel, memory-bound on reading the cache.
--
-- inputs = { Q[b, heads, sq, d], K_cache[b, kv_heads, skv, d], V_cache[b, kv_heads, skv, dv] } (skv counts the
-- new tokens too; dv = d but for DeepSeek's multi-head latent attention), output O[b, heads, sq, dv]. Inference
-- only: it has no backward.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "decode_attention",
  doc = "decode attention over a KV cache: one split-KV kernel, memory-bound on the cache bytes",
  forward = function(node)
    local q, k, v = rules.input(node, 1), rules.input(node, 2), rules.input(node, 3)
    if #q ~= 4 or #k ~= 4 or #v ~= 4 or k[1] ~= q[1] or k[4] ~= q[4] or v[1] ~= k[1] or v[2] ~= k[2] or v[3] ~= k[3] then
      error(("decode_attention node '%s': Q and the cache must be [batch, heads, tokens, head_dim]"):format(node.name), 0)
    end
    -- attrs.kv_dtype: a quantised cache (neusight.nodes.decode_attention, workload field kv_dtype)
    local kv_dtype = type(node.attrs) == "table" and node.attrs.kv_dtype or nil
    return { K.attention("decode", q[1], q[3], k[3], q[4], q[2], k[2], node.dtype, v[4], kv_dtype) }
  end,
}
