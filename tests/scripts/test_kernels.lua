-- tests/scripts/test_kernels.lua — kernel constructors: FLOPs, bytes, dims and argument errors against hand-computed values.
local K = require "neusight.kernels"

local function eq(got, want, what)
  if got ~= want then error(("%s: expected %s, got %s"):format(what, tostring(want), tostring(got)), 2) end
end

-- Asserts that fn(...) raises an error whose message contains `fragment` (plain text).
local function raises(fragment, fn, ...)
  local ok, err = pcall(fn, ...)
  if ok then error("expected an error containing '" .. fragment .. "'", 2) end
  if not tostring(err):find(fragment, 1, true) then
    error(("expected an error containing '%s', got '%s'"):format(fragment, tostring(err)), 2)
  end
  return tostring(err)
end

local T = {}

-- An element-wise kernel M.vec_ops does not know: the FLOPs per element its caller declares (a user rule's own op),
-- bytes one read and one write per element unless given; without a declared count it is an error.
function T.test_vec_declared_flops()
  local k = K.vec("gelu_tanh", 4, 100, "fp32", { flops_per_elem = 8 })
  eq(k.flops, 8 * 400, "declared flops")
  eq(k.bytes, 2 * 4 * 400, "one read, one write")
  eq(k.name, "VECgelu_tanh", "name")
  eq(K.vec("gelu_tanh", 4, 100, "fp32", { flops_per_elem = 8, bytes_per_elem = 2 }).bytes, 800, "declared bytes")
  eq(K.vec("add", 4, 100, "fp32", { flops_per_elem = 3 }).flops, 1200, "a known op's count replaced")
  eq(K.vec("add", 4, 100, "fp32").flops, 400, "the table's count")
  raises("unknown elementwise op 'gelu_tanh': give its FLOPs per element", K.vec, "gelu_tanh", 4, 100, "fp32")
  raises("field 'flops_per_elem' must be a finite number >= 0", K.vec, "gelu_tanh", 4, 100, "fp32", { flops_per_elem = -1 })
  raises("unknown field 'flops'", K.vec, "gelu_tanh", 4, 100, "fp32", { flops = 8 })
end

-- One rule for a Lua-built shape (K.shape_check): the kernel constructors and the workload's node check phrase its
-- answer, neither keeps its own copy.
function T.test_shape_check_one_rule()
  eq(K.shape_check({ 4, 1024.0, 0 }), 0, "a 0 dimension, a whole float")
  eq(K.shape_check({}), 1, "0-dim")
  local cases = {
    { "x", "type" }, { { 4, "128" }, "dimension" }, { { 4, 1.5 }, "dimension" }, { { 4, -1 }, "dimension" },
    { { 4, 0 / 0 }, "dimension" }, { { 4, math.huge }, "dimension" }, { { 4, 5, name = "x" }, "key" },
    { { x = 1 }, "key" }, { { 4, 2 ^ 62, 64 }, "size" }, { { 1 << 24, 1 << 24, 2 }, "size" },
  }
  for i, c in ipairs(cases) do
    local n, e = K.shape_check(c[1])
    eq(n, nil, "case " .. i .. " count")
    eq(e.kind, c[2], "case " .. i .. " kind")
  end
  eq(K.shape_check({ 1 << 24, 1 << 24 }), 1 << 48, "exactly 2^48")
  -- raw: a shape's metamethods are not run
  eq(K.shape_check(setmetatable({ 4, 5 }, { __pairs = function() error("__pairs ran", 0) end,
                                           __len = function() error("__len ran", 0) end })), 20, "metamethods")
  raises("bad argument #1 to 'numel' (shape expected, got a table with key name)", K.numel, { 4, name = "x" })
  raises("bad argument #1 to 'numel' (shape expected, got a table without an array part)", K.numel, { x = 1 })
  raises("bad argument #1 to 'numel' (shape expected, got string)", K.numel, "4")
  raises("bad argument #1 to 'numel' (dimension 2 is 128, expected a non-negative integer)", K.numel, { 4, "128" })
  raises("bad argument #1 to 'numel' (more than 2^48 elements)", K.numel, { 1 << 40, 1 << 9 })
end

function T.test_numel_and_vec_shape()
  eq(K.numel({ 4, 1024, 1280 }), 5242880, "numel")
  eq(K.numel({}), 1, "numel of a 0-dim shape")
  eq(K.numel({ 1 }), 1, "numel of a scalar")
  local rows, hidden = K.vec_shape({ 4, 20, 1024, 1024 })
  eq(rows, 81920, "rows")
  eq(hidden, 1024, "hidden")
  rows, hidden = K.vec_shape({ 50257 })
  eq(rows, 1, "rows of a vector")
  eq(hidden, 50257, "hidden of a vector")
end

function T.test_dtype_bytes()
  eq(K.dtype_bytes("fp32"), 4, "fp32")
  eq(K.dtype_bytes("bf16"), 2, "bf16")
  eq(K.dtype_bytes("fp16"), 2, "fp16")
  eq(K.dtype_bytes("fp8"), 1, "fp8")
  raises("unknown dtype 'fp31'", K.dtype_bytes, "fp31")
end

function T.test_dtype_names_people_type()
  for name, want in pairs { bf16 = "bf16", BF16 = "bf16", bfloat16 = "bf16", ["torch.bfloat16"] = "bf16",
                            float16 = "fp16", half = "fp16", ["torch.float32"] = "fp32", float = "fp32",
                            fp8_e4m3 = "fp8", ["torch.float8_e4m3fn"] = "fp8", E5M2 = "fp8", tf32 = "tf32" } do
    eq(K.dtype_name(name), want, name)
  end
  eq(K.dtype_name("bf61"), nil, "unknown")
  eq(K.dtype_name("torch.int8"), nil, "not a compute dtype")
  eq(K.dtype_name(16), nil, "not a string")
end

function T.test_linear()
  local k = K.linear(4096, 1280, 3840, "fp32")
  eq(k.kind, "gemm", "kind")
  eq(k.name, "Linear", "name")
  eq(k.b, 1, "b"); eq(k.m, 4096, "m"); eq(k.n, 1280, "n (reduction)"); eq(k.k, 3840, "k")
  eq(k.flops, 2 * 4096 * 1280 * 3840, "flops")
  eq(k.bytes, 4 * (4096 * 1280 + 1280 * 3840 + 4096 * 3840), "bytes")
  eq(K.linear(4096, 1280, 3840, "bf16").bytes, 2 * (4096 * 1280 + 1280 * 3840 + 4096 * 3840), "bf16 bytes")
  eq(K.describe(k), "Linear(4096,1280,3840)", "describe")
end

function T.test_bmm()
  local k = K.bmm(80, 1024, 64, 1024, "fp32")
  eq(k.kind, "bmm", "kind")
  eq(k.flops, 2 * 80 * 1024 * 64 * 1024, "flops")
  eq(k.bytes, 4 * 80 * (1024 * 64 + 64 * 1024 + 1024 * 1024), "bytes")
  eq(K.describe(k), "BMM(80,1024,64,1024)", "describe")
end

-- GEMM FLOPs never wrap around: past 2^62 they are a float (huge, positive); an operand past 2^48 elements is refused.
function T.test_gemm_counts_do_not_wrap()
  local k = K.linear(1 << 24, 1 << 24, 1 << 24, "fp32") -- operands 2^48 each, FLOPs 2^73
  assert(k.flops > 0 and k.flops == 2.0 ^ 73, "linear flops 2^73, got " .. tostring(k.flops))
  eq(K.linear(4096, 1280, 3840, "fp32").flops, 2 * 4096 * 1280 * 3840, "an integer below 2^62")
  eq(math.type(K.linear(4096, 1280, 3840, "fp32").flops), "integer", "still an integer")
  raises("operand X has more than 2^48 elements", K.linear, 1 << 32, 1 << 32, 4, "fp32")
  raises("operand W has more than 2^48 elements", K.linear, 4, 1 << 32, 1 << 32, "fp32")
  local b = K.bmm(1 << 16, 1 << 16, 1 << 16, 1 << 16, "fp32") -- operands 2^48, FLOPs 2^65
  assert(b.flops == 2.0 ^ 65, "bmm flops 2^65, got " .. tostring(b.flops))
  raises("operand A has more than 2^48 elements", K.bmm, 1 << 20, 1 << 20, 1 << 20, 1, "fp32")
end

-- A vector kernel's rows × hidden never wraps either: 2^32 × 2^32 is 2^64 elements (it wrapped to 0, a kernel of no
-- FLOPs and no bytes), 2^40 × 2^40 too; both are refused as more than 2^48 (the opgraph reader relies on it).
function T.test_vector_counts_do_not_wrap()
  raises("bad argument #2 to 'vec' (rows × hidden is more than 2^48 elements)", K.vec, "add", 1 << 32, 1 << 32, "fp32")
  raises("bad argument #1 to 'softmax' (rows × hidden is more than 2^48 elements)", K.softmax, 1 << 32, 1 << 32, "fp32")
  raises("bad argument #1 to 'layernorm' (rows × hidden", K.layernorm, 1 << 40, 1 << 40, "fp32")
  raises("bad argument #1 to 'rms_norm' (rows × hidden", K.rms_norm, 1 << 32, 1 << 32, "fp32")
  eq(K.vec("add", 1 << 24, 1 << 24, "fp32").flops, 1 << 48, "exactly 2^48 elements")
end

function T.test_vec_binary_unary_and_override()
  local add = K.vec("add", 4096, 1280, "fp32")
  eq(add.kind, "elementwise", "kind")
  eq(add.name, "VECadd", "name")
  eq(add.op, "add", "op")
  eq(add.flops, 4096 * 1280, "flops: 1 per element")
  eq(add.bytes, 12 * 4096 * 1280, "binary: read 2 + write 1")
  local mulu = K.vec("mulu", 4096, 5120, "fp32")
  eq(mulu.bytes, 8 * 4096 * 5120, "unary: read 1 + write 1")
  eq(K.vec("tanh", 2, 3, "fp16").bytes, 2 * 2 * 6, "fp16 unary bytes")
  eq(K.vec("add", 10, 10, "fp32", { bytes_per_elem = 10 }).bytes, 1000, "bytes_per_elem override")
  eq(K.vec("add", 10, 10, "fp32", { bytes = 123 }).bytes, 123, "bytes override")
  eq(K.vec("addcdiv", 1, 100, "fp32").bytes, 1600, "addcdiv reads 3")
  eq(K.vec("lerp", 1, 100, "fp32").flops, 300, "lerp flops")
end

function T.test_softmax_layernorm_mem()
  local s = K.softmax(81920, 1024, "fp32")
  eq(s.kind, "softmax", "softmax kind"); eq(s.name, "VECsoftmax", "softmax name")
  eq(s.flops, 5 * 81920 * 1024, "softmax flops"); eq(s.bytes, 8 * 81920 * 1024, "softmax bytes")
  local ln = K.layernorm(4096, 1280, "fp32")
  eq(ln.kind, "layernorm", "ln kind"); eq(ln.name, "VECln", "ln name")
  eq(ln.flops, 6 * 4096 * 1280, "ln flops"); eq(ln.bytes, 8 * 4096 * 1280, "ln bytes")
  local m = K.mem({ { 4, 1024 }, { 4, 1024, 1280 } }, "fp32")
  eq(m.kind, "memory", "mem kind"); eq(m.name, "MEM", "mem name")
  eq(m.flops, 0, "mem flops"); eq(m.bytes, 4 * (4096 + 4096 * 1280), "mem bytes")
  eq(K.describe(m), "MEM((4,1024),(4,1024,1280))", "describe mem")
  eq(K.describe(K.mem({ { 1 } }, "fp32")), "MEM((1,))", "describe 1-d shape like Python")
end

function T.test_argument_errors_name_the_caller()
  raises("bad argument #2 to 'linear' (positive integer expected, got 0)", K.linear, 4, 0, 4, "fp32")
  raises("bad argument #4 to 'bmm' (positive integer expected, got 1.5)", K.bmm, 1, 2, 3, 1.5, "fp32")
  raises("bad argument #1 to 'vec' (unknown elementwise op 'ad': give its FLOPs per element", K.vec, "ad", 1, 1, "fp32")
  raises("bad argument #3 to 'softmax' (unknown dtype 'nil')", K.softmax, 1, 1)
  raises("bad argument #1 to 'mem' (non-empty array of shapes expected)", K.mem, {}, "fp32")
  raises("positive integer expected, got inf", K.layernorm, math.huge, 1, "fp32")
  -- Errors are raised at level 2: the position is the caller's line, not a line of kernels.lua.
  local ok, msg = pcall(function()
    local k = K.linear(1, -1, 1, "fp32") -- not a tail call, so this frame is the reported position
    return k
  end)
  assert(not ok and msg:find("^[^:]*test_kernels%.lua:%d+: bad argument #2 to 'linear'"),
    "error position should be this file: " .. tostring(msg))
end

function T.test_attention_flops_and_bytes()
  -- Causal prefill, MHA: 4·d per visible pair, s(s+1)/2 pairs per head; Q, K, V read and O written once.
  local a = K.attention("causal", 2, 1024, 1024, 64, 16, 16, "bf16")
  eq(a.kind, "attention", "kind")
  eq(a.flops, 4 * 64 * 2 * 16 * (1024 * 1025 // 2), "causal flops")
  eq(a.bytes, 2 * 2 * (2 * 16 * 1024 * 64 + 2 * 16 * 1024 * 64), "causal bytes")
  -- The AIConfigurator README's closed form 2·b·s²·heads·d is this up to the diagonal (s(s+1)/2 vs s²/2).
  eq(math.abs(a.flops - 2 * 2 * 1024 ^ 2 * 16 * 64) / a.flops < 1e-3, true, "matches 2·b·s²·h·d")
  -- Full (non-causal) attention sees every pair; the backward does 2.5× the work and moves twice the bytes.
  eq(K.attention("full", 2, 1024, 1024, 64, 16, 16, "bf16").flops, 4 * 64 * 2 * 16 * 1024 * 1024, "full flops")
  local bwd = K.attention("causal_bwd", 2, 1024, 1024, 64, 16, 16, "bf16")
  eq(bwd.flops, 2.5 * a.flops, "backward flops")
  eq(bwd.bytes, 2 * a.bytes, "backward bytes")
  -- GQA reads each kv head once: 32 query heads over 8 kv heads move a quarter of MHA's K/V bytes.
  local gqa = K.attention("causal", 1, 4096, 4096, 128, 32, 8, "bf16")
  eq(gqa.bytes, 2 * (2 * 32 * 4096 * 128 + 2 * 8 * 4096 * 128), "gqa bytes")
  -- Decode: one token over a 4096-token cache is memory-bound on the cache, 2·b·kv·skv·d·e bytes.
  local dec = K.attention("decode", 8, 1, 4096, 128, 32, 8, "bf16")
  eq(dec.flops, 4 * 8 * 32 * 128 * 4096, "decode flops")
  eq(dec.bytes, 2 * 8 * (2 * 32 * 128 + 2 * 8 * 4096 * 128), "decode bytes")
  raises("bad argument #1 to 'attention' (causal, full, causal_bwd, full_bwd or decode expected, got sliding)",
    K.attention, "sliding", 1, 1, 1, 1, 1, 1, "bf16")
  raises("bad argument #7 to 'attention' (32 query heads are not a multiple of 5 kv heads)",
    K.attention, "causal", 1, 8, 8, 64, 32, 5, "bf16")
  raises("bad argument #3 to 'attention' (query length 9 exceeds key length 8 under a causal mask)", K.attention, "decode",
    1, 9, 8, 64, 4, 4, "bf16")
  raises("bad argument #3 to 'attention' (query length 9 exceeds key length 8 under a causal mask)", K.attention, "causal",
    1, 9, 8, 64, 4, 4, "bf16")
  -- cross-attention (full, no mask): a decoder of 1024 queries over an encoder of 512 keys, sq · skv pairs (T5)
  local cross = K.attention("full", 2, 1024, 512, 64, 12, 12, "bf16")
  eq(cross.flops, 4 * 64 * 2 * 12 * 1024 * 512, "cross-attention flops, sq > skv")
  eq(K.attention("full_bwd", 2, 1024, 512, 64, 12, 12, "bf16").flops, 2.5 * cross.flops, "cross-attention backward flops")
end

function T.test_attention_cost_per_key()
  -- kv_flops / kv_bytes (what the predictor's KV-length envelope grows a kernel's copies by) are exactly what one
  -- more key adds to flops / bytes, for every op and cache form: the derivative and the formula cannot drift apart.
  local cases = {
    { "causal", 2, 100, 300, 64, 16, 16, "bf16" }, { "full", 2, 100, 300, 64, 16, 4, "fp16" },
    { "causal_bwd", 1, 64, 64, 128, 32, 8, "bf16" }, { "full_bwd", 3, 7, 9, 192, 16, 16, "bf16", 128 },
    { "decode", 8, 1, 4096, 128, 32, 8, "bf16" }, { "decode", 4, 3, 1000, 128, 32, 8, "bf16", nil, "fp8" },
    { "decode", 2, 1, 777, 576, 128, 1, "bf16", 512, nil, true }, -- DeepSeek's latent cache
    { "causal", 1, 5, 5, 192, 16, 16, "bf16", 128 },
  }
  for i, c in ipairs(cases) do
    local a = K.attention(table.unpack(c, 1, 11))
    local longer = { table.unpack(c, 1, 11) }
    longer[4] = c[4] + 1
    local b = K.attention(table.unpack(longer, 1, 11))
    eq(a.kv_flops, b.flops - a.flops, "case " .. i .. " (" .. c[1] .. ") kv_flops")
    eq(a.kv_bytes, b.bytes - a.bytes, "case " .. i .. " (" .. c[1] .. ") kv_bytes")
    eq(a.kv_flops > 0 and a.kv_bytes > 0, true, "case " .. i .. " positive")
  end
end

function T.test_attention_tiles()
  local tiling = require "tiling.attention"
  local H100 = { num_sm = 132 }
  -- Prefill: one block per (sequence, head, 128-query tile); a causal block streams on average about half the keys.
  local k = K.attention("causal", 2, 4096, 4096, 128, 32, 8, "bf16")
  local t = tiling.select(k, H100)
  eq(t.blocks, 2 * 32 * (4096 // 128), "prefill blocks")
  -- Summed over blocks, the tile FLOPs cover the kernel's FLOPs (the diagonal tiles are counted whole).
  local ratio = t.blocks * t.flops / k.flops
  eq(ratio >= 1 and ratio < 1.05, true, "causal tiles cover the kernel's work, ratio " .. ratio)
  local full = K.attention("full", 2, 4096, 4096, 128, 32, 8, "bf16")
  eq(tiling.select(full, H100).blocks * tiling.select(full, H100).flops, full.flops, "full tiles = kernel flops")
  -- Decode: (sequence, kv head) blocks split over the cache until the SMs are filled, slices <= max_kv_slice while
  -- the SMs allow (weights/DECODE_SPLIT_RULE.md, C1).
  local d = tiling.select(K.attention("decode", 1, 1, 32768, 128, 32, 8, "bf16"), H100)
  local split = d.blocks // 8
  eq(split > 1 and d.blocks <= 132, true, "decode splits the cache to fill the SMs once: " .. d.blocks .. " blocks")
  eq(32768 / split >= tiling.max_kv_slice, true, "decode slice length")
  eq(tiling.select(K.attention("decode", 64, 1, 32768, 128, 32, 8, "bf16"), H100).blocks, 64 * 8, "more (sequence, kv head) pairs than SMs: no split")
  -- A split-KV launch is one wave: the split rounds down (weights/DECODE_SPLIT_RULE.md). Rounding up had put
  -- 8 x 17 = 136 blocks on 132 SMs (batch 1, 8 KV heads), 8 x 18 = 144 on the L40S's 142, 64 x 3 = 192 on 132.
  for _, sms in ipairs { 108, 132, 142, 148, 160, 170, 188 } do
    for _, b in ipairs { 1, 2, 3, 5, 8, 16, 32, 64 } do
      for _, kvh in ipairs { 1, 2, 4, 8 } do
        for _, c in ipairs { 256, 511, 512, 4096, 4352, 32768, 131072 } do
          local t = tiling.select(K.attention("decode", b, 1, c, 128, 32, kvh, "bf16"), { num_sm = sms })
          local sp = t.blocks // (b * kvh)
          if sp > 1 then
            eq(t.blocks <= sms, true, ("%d SMs, batch %d, %d KV heads, %d tokens: %d blocks in split %d"):format(sms, b, kvh, c, t.blocks, sp))
            -- slices of at most max_kv_slice, or as many splits as the wave holds
            eq(-(-c // sp) <= tiling.max_kv_slice or sp == sms // (b * kvh), true,
              ("%d SMs, batch %d, %d KV heads, %d tokens: slices of at most max_kv_slice until the SMs are full"):format(sms, b, kvh, c))
            -- and no more splits than slices of a key or more (ceil(c / max_kv_slice))
            eq(sp <= -(-c // tiling.max_kv_slice), true, ("%d SMs, batch %d, %d KV heads, %d tokens: split %d"):format(sms, b, kvh, c, sp))
          end
          if b * kvh * 2 > sms then eq(sp, 1, ("%d SMs, batch %d, %d KV heads: no room for a second split"):format(sms, b, kvh)) end
        end
      end
    end
  end
  -- C1: a cache between two multiples of max_kv_slice is split like the longer one, not kept in fewer, longer slices
  -- (rounding the split down had put 385 tokens in 1 slice per KV head and 513 in 2 on the L40S at batch 1, and the
  -- forecast at 384 tokens of context was 1.48x the one at 512).
  for _, c in ipairs { 257, 385, 511 } do
    local t = tiling.select(K.attention("decode", 1, 1, c, 128, 32, 8, "bf16"), { num_sm = 142 })
    eq(t.blocks, 16, c .. " tokens, batch 1, 8 KV heads, 142 SMs: two slices of at most max_kv_slice")
  end
end

-- tiling.attention max_kv_slice, once named min_kv_slice (it is a maximum since weights/DECODE_SPLIT_RULE.md C1): the
-- old name reads the same field, and the decode split follows it.
function T.test_min_kv_slice_is_an_alias_of_max_kv_slice()
  local tiling = require "tiling.attention"
  eq(tiling.max_kv_slice, 256, "the field") eq(tiling.min_kv_slice, tiling.max_kv_slice, "the old name reads it")
  local t = tiling.select(K.attention("decode", 1, 1, 4096, 128, 32, 8, "bf16"), { num_sm = 132 })
  eq(t.blocks, 8 * 4096 // tiling.max_kv_slice, "4096 tokens in slices of at most max_kv_slice: 16 splits")
end

-- A causal sliding window (serving engines' windowed FlashAttention kernel): FLOPs of the band's pairs, counted here
-- query by query (query i sees min(i, w) keys); bytes of the whole prefill; the tile model's equivalent shape (causal
-- chunks) launches about the prefill's blocks, each with the band's mean work. While s ≤ w: the causal kernel itself.
function T.test_window_attention()
  local tiling = require "tiling.attention"
  local H100 = { num_sm = 132 }
  local d, h, kvh, w = 128, 32, 8, 4096
  for _, s in ipairs { 100, 4096, 4097, 5000, 6000, 8192, 12288, 32768, 65536, 131072 } do
    local pairs = 0
    for i = 1, s do pairs = pairs + math.min(i, w) end
    local k = K.window_attention("causal", 2, s, w, d, h, kvh, "bf16")
    local whole = K.attention("causal", 2, s, s, d, h, kvh, "bf16")
    eq(math.abs(k.flops - 4 * d * 2 * h * pairs) <= 1e-9 * k.flops, true, ("s = %d: flops %.17g = 4·d·b·h·%d"):format(s, k.flops, pairs))
    eq(k.bytes, whole.bytes, "s = " .. s .. ": bytes of Q, K, V, O once")
    eq(k.flops <= whole.flops, true, "s = " .. s .. ": never more than causal")
    if s <= w then
      for key, v in next, whole do eq(k[key], v, "s = " .. s .. " ≤ window: causal kernel's " .. key) end
    else
      local t, tw = tiling.select(k, H100), tiling.select(whole, H100)
      local blocks = t.blocks / tw.blocks
      eq(blocks > 0.85 and blocks < 1.2, true, ("s = %d: blocks %d vs the prefill's %d"):format(s, t.blocks, tw.blocks))
      local work = t.blocks * t.flops / k.flops
      eq(work >= 0.97 and work < 1.1, true, ("s = %d: the tiles' work / the band's %.3f"):format(s, work))
    end
  end
  local bwd = K.window_attention("causal_bwd", 1, 8192, 4096, 128, 32, 8, "bf16")
  eq(bwd.flops, 2.5 * K.window_attention("causal", 1, 8192, 4096, 128, 32, 8, "bf16").flops, "backward 2.5×")
  raises("bad argument #1 to 'window_attention' (causal or causal_bwd expected, got full)",
    K.window_attention, "full", 1, 8, 4, 64, 4, 4, "bf16")
  raises("bad argument #4 to 'window_attention' (positive integer expected, got 0)",
    K.window_attention, "causal", 1, 8, 0, 64, 4, 4, "bf16")
end

-- The vector families' training convention (engine/core/tile_model.h reads it through the session): the data
-- collector's fp32 kernels as the constructors cost them — the reference's 1 / 5 / 6 FLOPs per element, 8 (unary) to
-- 12 (binary) bytes per element element-wise, 8 for softmax and layer norm — and nothing but those three families.
function T.test_train_convention()
  local c = K.train_convention()
  local n = 0
  for _ in pairs(c) do n = n + 1 end
  eq(n, 3, "families")
  local per = function(k) return k.flops / (k.rows * k.hidden), k.bytes / (k.rows * k.hidden) end
  local f, b = per(K.vec("add", 8, 64, "fp32"))
  eq(c.elementwise.flops, f, "element-wise flops")
  eq(c.elementwise.bytes_max, b, "binary bytes")
  eq(c.elementwise.flops, 1, "the reference's count")
  eq(c.elementwise.bytes_min, select(2, per(K.vec("relu", 8, 64, "fp32"))), "unary bytes")
  eq(c.elementwise.bytes_min, 8, "unary: read + write")
  eq(c.elementwise.bytes_max, 12, "binary: two reads + write")
  for fam, k in pairs { softmax = K.softmax(8, 64, "fp32"), layernorm = K.layernorm(8, 64, "fp32") } do
    local fl, by = per(k)
    eq(c[fam].flops, fl, fam .. " flops")
    eq(c[fam].bytes_min, by, fam .. " bytes")
    eq(c[fam].bytes_max, by, fam .. " bytes")
  end
  eq(c.softmax.flops, 5, "softmax")
  eq(c.layernorm.flops, 6, "layer norm")
end

return T
