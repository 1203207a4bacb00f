-- ops/decode_attention.lua — attention of sq new tokens per sequence over a KV cache (serving decode): one
-- FlashDecoding-style kernel, memory-bound on reading the cache.
--
-- inputs = { Q[b, heads, sq, d], K_cache[b, kv_heads, skv, d], V_cache[b, kv_heads, skv, dv] } (skv counts the
-- new tokens too; dv = d but for DeepSeek's multi-head latent attention), output O[b, heads, sq, dv]. Inference
-- only: it has no backward. attrs.latent (MLA with absorbed weights, neusight.nodes.decode_attention): K and V are one
-- cache ([b, 1, skv, kv_lora_rank + qk_rope_head_dim], V its first kv_lora_rank values), read once.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "decode_attention",
  doc = "decode attention over a KV cache: one split-KV kernel, memory-bound on the cache bytes",
  attrs = rules.attrs { "kv_dtype", latent = "boolean: MLA's latent cache: V is the leading values of each K row, read once" },
  check = rules.check_attention,
  -- the transient is Q and O: the cache it reads is the KV cache (neusight.nodes.kv_cache_write's kv_cache_bytes, the
  -- memory report's kv_cache part), not a temporary (the split-KV partial results, heads · splits · dv fp32 values per
  -- sequence, are left out)
  temporary = function(node)
    local q, o = rules.input(node, 1), node.output
    return (K.numel(q) + K.numel(o)) * K.dtype_bytes(node.dtype)
  end,
  forward = function(node)
    local q, k, v = rules.input(node, 1), rules.input(node, 2), rules.input(node, 3)
    if #q ~= 4 or #k ~= 4 or #v ~= 4 or k[1] ~= q[1] or k[4] ~= q[4] or v[1] ~= k[1] or v[2] ~= k[2] or v[3] ~= k[3] then
      error(("decode_attention node '%s': Q and the cache must be [batch, heads, tokens, head_dim]"):format(node.name), 0)
    end
    -- attrs.kv_dtype: a quantised cache (neusight.nodes.decode_attention, workload field kv_dtype)
    local kv_dtype = type(node.attrs) == "table" and node.attrs.kv_dtype or nil
    -- attrs.latent: V is the leading dv values of each K row (MLA's latent cache, read once)
    local latent = type(node.attrs) == "table" and node.attrs.latent == true
    if latent and v[4] > k[4] then
      error(("decode_attention node '%s': a latent cache's V (%d) cannot be wider than its K (%d)"):format(node.name,
        v[4], k[4]), 0)
    end
    return { K.attention("decode", q[1], q[3], k[3], q[4], q[2], k[2], node.dtype, v[4], kv_dtype, latent or nil) }
  end,
}
