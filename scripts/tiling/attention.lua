-- scripts/tiling/attention.lua — the thread-block tiling of fused attention kernels: how many blocks a
-- FlashAttention-style prefill (or its backward) and a decode kernel launch, and the FLOPs and bytes each block
-- streams. The tile model (engine/core/tile_model.cpp) turns that into waves and a roofline per wave; the
-- attention_prefill / attention_decode MLPs learn the achieved utilisation.
--
-- As for tensor-core GEMMs, the measurements (AIConfigurator's context/generation attention: FlashInfer,
-- TRT-LLM and FlashAttention kernels) carry no launch grids, so these are documented conventions of the
-- kernels' published designs, not fits:
--   prefill (FlashAttention-2/3, FlashInfer and TRT-LLM prefill): one block per (sequence, query head, tile of
--     M.q_block query rows); the block streams every key/value tile its queries can see (all of them, or under
--     a causal mask the ones up to its last query), so causal blocks differ in work: we use their mean.
--   backward (FlashAttention-2): the same blocks (its dK/dV pass is parallel over key tiles of the same size),
--     2.5× the forward's matrix work per block and twice its bytes.
--   decode (FlashDecoding / split-KV, FlashInfer and TRT-LLM decode): one block per (sequence, kv head) handling
--     that head's whole query group, the cache split into slices of at most M.max_kv_slice tokens (⌈kv / slice⌉
--     splits) while the blocks still fit the SMs once: the split is capped at ⌊SMs / pairs⌋, so a split launch is
--     one wave. At most, not at least: FlashAttention-2's split-KV kernel (head dim 128) cuts the cache in blocks of
--     128 keys and FlashInfer's decode chunks are at least 128 tokens, so neither keeps 385 tokens in one block
--     while splitting 513; ⌊kv / slice⌋ splits had made each slice saw-tooth between 256 and 511 tokens, and the
--     L40S forecast at batch 1 was 1.48× higher at 384 tokens of context than at 512 (weights/DECODE_SPLIT_RULE.md,
--     C1; the measured caches are powers of two, where the two roundings agree). FlashInfer
--     caps its split-KV grid at what the GPU holds at once, FlashAttention-2's num_splits_heuristic avoids a nearly
--     empty last wave and TRT-LLM's multi-block count divides the SMs by the pairs rounding down; rounding up had
--     put 8 × 17 = 136 blocks on the H100's 132 SMs (batch 1, 8 KV heads), a second wave of 4 blocks, and the
--     forecast jumped at that context (L40S: +69 % for +12.5 % of the cache; weights/DECODE_SPLIT_RULE.md).
local ceil, max, min, fmt = math.ceil, math.max, math.min, string.format
local kernels = require "neusight.kernels"

local M = {}

M.q_block = 128
-- the longest slice of the cache one decode block reads while the SMs allow more splits (⌈kv / it⌉ splits, capped at
-- one wave): a maximum since C1 (weights/DECODE_SPLIT_RULE.md). M.min_kv_slice, its name when it was a minimum, reads
-- this one field (an alias for scripts that read that name; a --scripts copy of this file sets its own value here).
M.max_kv_slice = 256
setmetatable(M, { __index = function(t, key) if key == "min_kv_slice" then return rawget(t, "max_kv_slice") end end })

local function check(k, name)
  local v = k[name]
  if math.type(v) ~= "integer" or v < 1 then
    error(fmt("scripts/tiling/attention.lua: select(): k.%s must be a positive integer (got %s)", name, tostring(v)), 3)
  end
  return v
end

--- Blocks, FLOPs per block and bytes per block of one attention kernel.
---@param k table { op, b, m = query length, k = key length, n = head dim, rows = heads, hidden = kv heads, dtype }
---@param gpu neusight.Gpu (num_sm is read)
---@return table { blocks, flops, bytes, kernel }
function M.select(k, gpu)
  local b, sq, skv, d = check(k, "b"), check(k, "m"), check(k, "k"), check(k, "n")
  local h, kvh = check(k, "rows"), check(k, "hidden")
  local e = kernels.dtype_bytes(k.dtype)
  local ekv = k.kv_dtype and kernels.dtype_bytes(k.kv_dtype) or e -- a quantised KV cache (workload field kv_dtype)
  if k.op == "decode" then
    local group = h // kvh
    local pairs = b * kvh
    local split = max(1, min(gpu.num_sm // pairs, ceil(skv / M.max_kv_slice)))
    local slice = ceil(skv / split)
    return {
      blocks = pairs * split,
      flops = 4 * group * sq * slice * d,
      bytes = ekv * 2 * slice * d + e * 2 * group * sq * d,
      kernel = fmt("decode_attention_%s%s_hdim%d_group%d_split%d", k.dtype,
        k.kv_dtype and k.kv_dtype ~= k.dtype and "_kv" .. k.kv_dtype or "", d, group, split),
    }
  end
  local causal = k.op == "causal" or k.op == "causal_bwd"
  local bwd = k.op == "causal_bwd" or k.op == "full_bwd"
  if not (causal or bwd or k.op == "full") then
    error(fmt("scripts/tiling/attention.lua: select(): unknown attention op '%s'", tostring(k.op)), 2)
  end
  local bq = min(M.q_block, sq)
  local tiles = ceil(sq / bq)
  local kv = skv -- keys one query tile visits, averaged over the tiles
  if causal then
    local sum = 0
    for i = 1, tiles do sum = sum + min(skv, skv - sq + i * bq) end
    kv = sum / tiles
  end
  local flops = 4 * bq * kv * d
  local bytes = e * 2 * bq * d + ekv * 2 * kv * d
  if bwd then flops, bytes = 2.5 * flops, 2 * bytes end
  return {
    blocks = b * h * tiles, flops = flops, bytes = bytes,
    kernel = fmt("flash_%s_%s_hdim%d_q%d", bwd and "bwd" or "fwd", k.dtype, d, bq),
  }
end

return M
