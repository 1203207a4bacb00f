-- scripts/neusight/kernels.lua — kernel constructors: the primitive kernels op rules return, with FLOPs and DRAM bytes.
--
-- A kernel is a plain table read by the C++ engine (see neusight/types.lua, neusight.Kernel).
-- Names and dims follow the reference decomposition (NeuSight parse_ops): "Linear (T, I, O)",
-- "BMM (B, M, N, K)" with N the reduction dimension, "VEC<op> (rows, hidden)", "MEM (shapes…)".
local floor, huge, concat, math_type = math.floor, math.huge, table.concat, math.type
local ipairs, tostring, type, error = ipairs, tostring, type, error

local M = {}

-- Bytes per element of each dtype the engine knows: its one table (engine/core/graph.cpp dtype_sizes).
local DTYPE_BYTES = require("neusight").dtype_sizes()

-- The element types a KV cache is stored in (workload field kv_dtype), and the storage types of weight-only
-- quantisation (workload field weight_dtype) with their bytes per weight (int4: two per byte; scales ignored).
M.KV_DTYPES = { "fp8", "bf16", "fp16", "fp32" }
M.WEIGHT_DTYPES = { "int8", "int4", "fp8" }
M.WEIGHT_BYTES = { int8 = 1, int4 = 0.5, fp8 = 1 }

-- The names people type for them (PyTorch's, NumPy's, the fp8 formats), matched case-insensitively and without a
-- "torch." prefix: M.dtype_name("torch.bfloat16") == "bf16". fp8 covers both OCP formats (E4M3 and E5M2 run on the
-- same tensor cores at the same rate).
local DTYPE_ALIASES = {
  float64 = "fp64", double = "fp64", float32 = "fp32", float = "fp32", tfloat32 = "tf32",
  float16 = "fp16", half = "fp16", bfloat16 = "bf16",
  float8 = "fp8", float8_e4m3fn = "fp8", float8_e4m3fnuz = "fp8", float8_e5m2 = "fp8", float8_e5m2fnuz = "fp8",
  fp8_e4m3 = "fp8", fp8_e5m2 = "fp8", e4m3 = "fp8", e5m2 = "fp8",
}

-- Elementwise ops: FLOPs per output element and number of tensors read (and written, when not 1).
-- The reference counts 1 FLOP per element for every elementwise op (predictor.py ops_dict); the
-- 'u' variants take one tensor and a Python scalar. sqrt/lerp/addcmul/addcdiv are ours (optimizer
-- steps), with honest FLOP counts: lerp a+w·(b−a) = 3, addcmul/addcdiv a+v·b∘c = 3. adam/adamw are one
-- fused optimizer step per parameter (ops/adam.lua, ops/adamw.lua): the 13 FLOPs of the foreach passes,
-- + 1 for AdamW's decoupled weight decay; their bytes always come from the precision recipe. The tile predictor
-- sees every element-wise kernel with the data's 1 FLOP per element and takes the real FLOPs only as a compute
-- bound (engine/core/tile_model.h), so any FLOP count here is safe.
local VEC_OPS = {
  add  = { flops = 1, reads = 2 }, addu = { flops = 1, reads = 1 },
  sub  = { flops = 1, reads = 2 }, subu = { flops = 1, reads = 1 },
  mul  = { flops = 1, reads = 2 }, mulu = { flops = 1, reads = 1 },
  div  = { flops = 1, reads = 2 }, divu = { flops = 1, reads = 1 },
  pow  = { flops = 1, reads = 2 }, powu = { flops = 1, reads = 1 },
  tanh = { flops = 1, reads = 1 }, gelu = { flops = 1, reads = 1 }, relu = { flops = 1, reads = 1 },
  sqrt = { flops = 1, reads = 1 },
  -- SiLU x·σ(x) as PyTorch's kernel computes it, x / (1 + exp(−x)): neg, exp, add, div. Its backward
  -- dy·σ·(1 + x·(1 − σ)) reads dy and x: σ (4), then sub, mul, add, mul, mul.
  silu = { flops = 4, reads = 1 }, silu_backward = { flops = 9, reads = 2 },
  -- sigmoid 1 / (1 + exp(−x)): neg, exp, add, reciprocal; its backward dy·y·(1 − y) reads dy and y.
  sigmoid = { flops = 4, reads = 1 }, sigmoid_backward = { flops = 3, reads = 2 },
  -- torch.maximum with a one-element tensor (OPT's score clamp) and its backward's compares, select and masked fill
  -- (ops/maximum.lua passes their bytes: masks are 1 byte per element).
  maxu = { flops = 1, reads = 1 }, eq = { flops = 1, reads = 1 }, lt = { flops = 1, reads = 1 },
  where = { flops = 1, reads = 3 }, masked_fill = { flops = 1, reads = 2 },
  lerp = { flops = 3, reads = 2 }, addcmul = { flops = 3, reads = 3 }, addcdiv = { flops = 3, reads = 3 },
  adam = { flops = 13, reads = 4 }, adamw = { flops = 14, reads = 4 },
  -- Megatron-LM's fused kernels (ops/rope.lua, ops/swiglu.lua). rope: x·cos + rotate_half(x)·sin (2 mul, 1 add) in one
  -- pass; the cos/sin table (s × head_dim) is shared by every head and batch row and stays in cache: not counted.
  -- Its backward is the same pass over dy. swiglu: silu(gate) · up (4 + 1) from gate and up into one output; its
  -- backward reads dy, gate and up and writes both gradients (writes = 2): σ 4, silu 1, dy·silu 1, dy·up 1,
  -- silu' = σ·(1 + g·(1 − σ)) 4, · 1.
  rope = { flops = 3, reads = 1 }, swiglu = { flops = 5, reads = 2 }, swiglu_backward = { flops = 12, reads = 3, writes = 2 },
  -- geglu (ops/geglu.lua): gelu(gate) · up, counted as HF's gelu and mul kernels count it (gelu 1 FLOP per element, the
  -- reference's convention above, and the mul 1; backward the gelu's 1 and the mul's two operands 2), so Gemma's model
  -- FLOPs are the same under either kernel set; its backward reads dy, gate and up and writes both gradients.
  geglu = { flops = 2, reads = 2 }, geglu_backward = { flops = 3, reads = 3, writes = 2 },
}
M.vec_ops = VEC_OPS

local SOFTMAX_FLOPS = 5 -- per element: max, sub, exp, sum, div (reference ops_dict)
local LAYERNORM_FLOPS = 6 -- per element: mean, sub, square, sum, rsqrt-scale, affine (reference ops_dict)
local RMSNORM_FLOPS = 4 -- per element: square, sum, rsqrt-scale, weight (layer norm without the mean and β)

local function is_integer(v)
  return type(v) == "number" and v == floor(v) and v > -huge and v < huge -- rejects NaN and ±inf too
end

-- At most 2^48 elements in a tensor: { 4, 2^62, 64 } used to wrap to 0 elements and a 0 ms forecast. The Lua source of
-- the limit: the model builders' table sizes (neusight.models.check), a model's parameter count and its nodes' shapes
-- (neusight.workload) read it here; M.MAX_ELEMENTS_TEXT is how messages write it. The engine still holds the same
-- number for its own checks of what rules return (engine/lua/wrap_graph.cpp max_shape_elements) and of an opgraph
-- CSV's shapes (engine/ingest/opgraph.cpp max_elements): change them with it.
local MAX_LOG2 = 48
local MAX_ELEMENTS = 1 << MAX_LOG2 -- the largest tensor
local MAX_TEXT = ("2^%d"):format(MAX_LOG2)
M.MAX_ELEMENTS, M.MAX_ELEMENTS_TEXT = MAX_ELEMENTS, MAX_TEXT

--- The one rule of a tensor shape built in Lua (workload nodes, kernel constructors; engine/lua/wrap_graph.cpp checks
--- what reaches C++ again): an array of non-negative integers (4.0 counts as 4, "4" does not) of at most 2^48
--- elements, nothing else in it (an extra key such as table.pack's `n` is refused: the engine's reader refuses it
--- too). Returns its element count, or nil and what is wrong: { kind = "type" (not a table), "key" (a key
--- outside 1..#shape: `key`), "dimension" (`index`, `value`) or "size" (more than 2^48 elements) }, each caller
--- phrasing it for its own message.
---@param shape any
---@return integer|nil, table|nil
function M.shape_check(shape)
  if type(shape) ~= "table" then return nil, { kind = "type" } end
  local len = rawlen(shape)
  for k in next, shape do  -- raw: a shape's metamethods (__pairs, __len) are not run
    if math.type(k) ~= "integer" or k < 1 or k > len then return nil, { kind = "key", key = k } end
  end
  local n = 1
  for i = 1, len do
    local d = rawget(shape, i)
    if math_type(d) == "integer" then -- the builders' dimensions: is_integer's answer without its calls (floor(d) is d)
      if d < 0 then return nil, { kind = "dimension", index = i, value = d } end
    else
      if not is_integer(d) or d < 0 then return nil, { kind = "dimension", index = i, value = d } end
      d = floor(d)
    end
    if d > MAX_ELEMENTS or (d > 0 and n > MAX_ELEMENTS // d) then return nil, { kind = "size" } end
    n = n * d
  end
  return n
end

-- The elements of `shape`, an error "bad argument #1 to 'fn' (…)" at the caller of fn (level 3 from here) if it is
-- not a shape (M.shape_check); `what` prefixes the detail ("shape 2: ").
local function numel_of(shape, fn, what)
  local n, e = M.shape_check(shape)
  if n then return n end
  local detail
  if e.kind == "type" then
    detail = ("shape expected, got %s"):format(type(shape))
  elseif e.kind == "key" then
    detail = rawlen(shape) == 0 and "shape expected, got a table without an array part"
      or ("shape expected, got a table with key %s"):format(tostring(e.key))
  elseif e.kind == "dimension" then
    detail = ("dimension %d is %s, expected a non-negative integer"):format(e.index, tostring(e.value))
  else
    detail = ("more than %s elements"):format(MAX_TEXT)
  end
  error(("bad argument #1 to '%s' (%s%s)"):format(fn, what, detail), 3)
end

-- Raises "bad argument #i to 'fn' (positive integer expected, got v)" at the caller of the constructor.
local function check_count(fn, i, v, level)
  if not is_integer(v) or v < 1 then
    error(("bad argument #%d to '%s' (positive integer expected, got %s)"):format(i, fn, tostring(v)), level or 3)
  end
  return floor(v) -- normalises 4096.0 to 4096
end

local function check_dtype(fn, i, dtype, level)
  local e = DTYPE_BYTES[dtype]
  if not e then
    error(("bad argument #%d to '%s' (unknown dtype '%s')"):format(i, fn, tostring(dtype)), level or 3)
  end
  return e
end

--- Number of elements of a shape ({} is a 0-dim tensor: 1 element).
---@param shape integer[]
---@return integer
function M.numel(shape)
  local n = numel_of(shape, "numel", "") -- not a tail call: the error's level counts this frame
  return n
end

--- The reference's read_vec_shape: hidden = last dimension, rows = numel / hidden.
---@param shape integer[]
---@return integer rows, integer hidden
function M.vec_shape(shape)
  if type(shape) ~= "table" or #shape == 0 then
    error("bad argument #1 to 'vec_shape' (shape with at least one dimension expected)", 2)
  end
  local hidden = shape[#shape]
  if hidden == 0 then return 0, 0 end
  return M.numel(shape) // hidden, hidden
end

--- Bytes per element of the integer tensors of routing (torch.topk indices, one_hot masks, nonzero results): int64.
M.index_bytes = 8

--- Bytes per element of a dtype name ("fp32" → 4).
function M.dtype_bytes(dtype)
  local e = check_dtype("dtype_bytes", 1, dtype) -- not a tail call: the error's level counts this frame
  return e
end

--- The engine's name of a dtype as people write it ("BF16", "bfloat16", "torch.bfloat16" → "bf16"), or nil.
function M.dtype_name(name)
  if type(name) ~= "string" then return nil end
  local n = name:lower():gsub("^torch%.", ""):gsub("^c10::", "") -- torch.bfloat16, c10::BFloat16 (profiler traces)
  n = DTYPE_ALIASES[n] or n
  if DTYPE_BYTES[n] then return n end
  return nil
end

--- The engine's name of a compute dtype, the type kernels are priced in: dtype_name's, but nil for fp64, a tensor type
--- the engine sizes (profiler traces hold such tensors) and never prices (no fp64 peaks in the GPU files, no fp64
--- measurement trained anything).
function M.compute_dtype(name)
  local n = M.dtype_name(name)
  if n ~= "fp64" then return n end
  return nil
end

-- a × b for counts: the exact integer while it stays under 2^62, a float beyond (no wrap-around: an absurd kernel
-- costs an absurd number, never a negative or a small one).
local function times(a, b)
  if a > 0 and b > (1 << 62) // a then return (a + 0.0) * b end
  return a * b
end

-- The elements of a GEMM operand of a × b, an error past 2^48 (the largest tensor, MAX_ELEMENTS) at the caller of fn.
local function operand(fn, a, b, name)
  local n = times(a, b)
  if n > MAX_ELEMENTS then
    error(("bad argument to '%s' (operand %s has more than %s elements)"):format(fn, name, MAX_TEXT), 3)
  end
  return n
end

--- nn.Linear on `rows` tokens: "Linear (T, I, O)" = GEMM b=1, m=T, n=I (reduction), k=O.
--- `weight_bytes` (optional): bytes per weight under weight-only quantisation (M.WEIGHT_BYTES; workload field
--- weight_dtype): W is read at that size, X and Y at dtype's; FLOPs at dtype (the kernel dequantises).
function M.linear(rows, in_f, out_f, dtype, weight_bytes)
  rows, in_f, out_f = check_count("linear", 1, rows), check_count("linear", 2, in_f), check_count("linear", 3, out_f)
  local e = check_dtype("linear", 4, dtype)
  if weight_bytes ~= nil and not (type(weight_bytes) == "number" and weight_bytes > 0) then
    error(("bad argument #5 to 'linear' (bytes per weight > 0 expected, got %s)"):format(tostring(weight_bytes)), 2)
  end
  local x, w, y = operand("linear", rows, in_f, "X"), operand("linear", in_f, out_f, "W"), operand("linear", rows, out_f, "Y")
  return {
    kind = "gemm", name = "Linear", dtype = dtype,
    b = 1, m = rows, n = in_f, k = out_f,
    flops = times(2 * x, out_f),
    bytes = e * (x + y) + (weight_bytes or e) * w, -- X, W, Y once each
    weight_bytes = weight_bytes,
  }
end

--- Batched matmul "BMM (B, M, N, K)": b products of an M×N by an N×K matrix (N is the reduction).
function M.bmm(b, m, n, k, dtype)
  b, m, n, k = check_count("bmm", 1, b), check_count("bmm", 2, m), check_count("bmm", 3, n), check_count("bmm", 4, k)
  local e = check_dtype("bmm", 5, dtype)
  local a_, b_, c_ = operand("bmm", b, times(m, n), "A"), operand("bmm", b, times(n, k), "B"), operand("bmm", b, times(m, k), "C")
  return {
    kind = "bmm", name = "BMM", dtype = dtype,
    b = b, m = m, n = n, k = k,
    flops = times(2 * a_, k),
    bytes = e * (a_ + b_ + c_),
  }
end

--- Elementwise kernel "VEC<op> (rows, hidden)". Bytes default to (tensors read + written, 1 unless the op
--- says) per element; opts.bytes_per_elem or opts.bytes (total) override it, e.g. for broadcast operands.
--- opts.flops_per_elem: the kernel's FLOPs per element, for an op M.vec_ops does not know (a user rule's own kernel,
--- e.g. a tanh-approximated GELU of 8 FLOPs; its bytes then default to one read and one write per element) or in
--- place of the table's count. An op M.vec_ops does not know without it is an error. Either way the kernel's FLOPs
--- are flops_per_elem × rows × hidden, priced as every element-wise kernel is (the roofline; the MLP sees the training
--- convention's FLOPs and takes these as the compute bound: engine/core/tile_model.h).
---@param opts? { bytes_per_elem?: number, bytes?: number, flops_per_elem?: number }
local VEC_OPTS = { bytes = true, bytes_per_elem = true, flops_per_elem = true }

function M.vec(op, rows, hidden, dtype, opts)
  if opts ~= nil then -- { bytes = B } or { bytes_per_elem = b }, { flops_per_elem = f }; another key is a typo, not a default
    if type(opts) ~= "table" then error(("bad argument #5 to 'vec' (table or nil expected, got %s)"):format(type(opts)), 2) end
    for k, v in pairs(opts) do
      if not VEC_OPTS[k] then
        error(("bad argument #5 to 'vec' (unknown field '%s'; known: bytes, bytes_per_elem, flops_per_elem)")
          :format(tostring(k)), 2)
      end
      if type(v) ~= "number" or not (v >= 0) or v == huge then
        error(("bad argument #5 to 'vec' (field '%s' must be a finite number >= 0, got %s)"):format(k, tostring(v)), 2)
      end
    end
  end
  local flops_per = opts and opts.flops_per_elem
  local spec = VEC_OPS[op] or (flops_per and type(op) == "string" and op ~= "" and { reads = 1 })
  if not spec then
    error(("bad argument #1 to 'vec' (unknown elementwise op '%s': give its FLOPs per element, "
      .. "{ flops_per_elem = F }, or name one of neusight.kernels vec_ops)"):format(tostring(op)), 2)
  end
  rows, hidden = check_count("vec", 2, rows), check_count("vec", 3, hidden)
  local e = check_dtype("vec", 4, dtype)
  local n = times(rows, hidden) -- not rows * hidden: 2^32 × 2^32 wraps to 0 elements
  if n > MAX_ELEMENTS then error(("bad argument #2 to 'vec' (rows × hidden is more than %s elements)"):format(MAX_TEXT), 2) end
  local bytes = e * (spec.reads + (spec.writes or 1)) * n
  if opts and opts.bytes then bytes = opts.bytes
  elseif opts and opts.bytes_per_elem then bytes = opts.bytes_per_elem * n end
  return {
    kind = "elementwise", name = "VEC" .. op, op = op, dtype = dtype,
    rows = rows, hidden = hidden,
    flops = (flops_per or spec.flops) * n,
    bytes = bytes,
  }
end

-- A row-wise kernel (kind, reference name, FLOPs per element) that reads and writes each element once.
-- `fn` names the public constructor in argument errors; level 4 reaches the constructor's caller.
local function row_kernel(fn, kind, name, flops_per, rows, hidden, dtype)
  rows, hidden = check_count(fn, 1, rows, 4), check_count(fn, 2, hidden, 4)
  local e = check_dtype(fn, 3, dtype, 4)
  local n = times(rows, hidden) -- not rows * hidden, which wraps (vec)
  if n > MAX_ELEMENTS then
    error(("bad argument #1 to '%s' (rows × hidden is more than %s elements)"):format(fn, MAX_TEXT), 3)
  end
  return { kind = kind, name = name, dtype = dtype, rows = rows, hidden = hidden, flops = flops_per * n, bytes = 2 * e * n }
end

--- Row softmax "VECsoftmax (rows, hidden)": reads and writes each element once.
function M.softmax(rows, hidden, dtype)
  local k = row_kernel("softmax", "softmax", "VECsoftmax", SOFTMAX_FLOPS, rows, hidden, dtype) -- no tail call (levels)
  return k
end

--- Layer norm over the last dimension "VECln (rows, hidden)" (the γ/β reads are negligible).
function M.layernorm(rows, hidden, dtype)
  local k = row_kernel("layernorm", "layernorm", "VECln", LAYERNORM_FLOPS, rows, hidden, dtype) -- no tail call (levels)
  return k
end

--- Fused RMSNorm over the last dimension "VECrmsnorm (rows, hidden)" (Megatron-Core / Transformer Engine / apex
--- FusedRMSNorm): the layer-norm family's kernel (kind "layernorm": one row-wise pass that reads x and writes y, the
--- same bytes), with RMSNorm's own FLOPs (no mean subtraction, no β). The γ reads are negligible.
function M.rms_norm(rows, hidden, dtype)
  local k = row_kernel("rms_norm", "layernorm", "VECrmsnorm", RMSNORM_FLOPS, rows, hidden, dtype) -- no tail call (levels)
  return k
end

-- Query/key pairs a causal mask leaves visible when the last query sits at the last key (prefill, and prefill
-- that continues a cache of skv − sq tokens): Σᵢ (skv − sq + i) for i = 1..sq.
local function causal_pairs(sq, skv) return sq * (skv - sq) + sq * (sq + 1) // 2 end

local ATTENTION_OPS = { causal = true, full = true, causal_bwd = true, full_bwd = true, decode = true }

-- Query/key pairs a causal sliding window of `window` keys leaves visible in a prefill of s tokens: query i (1-based)
-- sees keys i − window + 1 .. i, min(i, window) of them (Mistral's sliding_window; FlashAttention's window_size =
-- (window − 1, 0)). Σᵢ min(i, window): the causal pairs while s ≤ window.
local function window_pairs(s, window)
  if s <= window then return causal_pairs(s, s) end
  return causal_pairs(window, window) + (s - window) * window
end

--- Fused scaled-dot-product attention (FlashAttention-style): softmax(Q·Kᵀ/√d)·V without the scores in DRAM.
--- `op`: "causal" | "full" (forward), "causal_bwd" | "full_bwd" (backward), "decode" (sq new tokens per sequence
--- over a KV cache of skv tokens; causal and decode need sq <= skv, full takes any: cross-attention). heads query
--- heads share kv_heads key/value heads (MHA, GQA, MQA).
--- FLOPs count the two products over the visible query/key pairs (4·d per pair); the backward's five products
--- (Q·Kᵀ recomputed, dP = dO·Vᵀ, dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q) are 10·d per pair. Bytes: Q, K, V read and O
--- written once (forward, decode); Q, K, V, O, dO read and dQ, dK, dV written once (backward).
--- `dv` (optional, default d): the value (and output) head dim when it differs from the query/key head dim `d`
--- (DeepSeek's multi-head latent attention: d = 192, dv = 128). Q·Kᵀ and dQ, dK then count 2·d FLOPs per pair,
--- P·V, dP and dV 2·dv; Q, K, dQ, dK move d elements per row, V, O, dO, dV dv. The kernel's n (the head dim the
--- tile model sees, scripts/tiling/attention.lua, and describe() shows) is the mean ⌈(d + dv) / 2⌉: the forward's
--- FLOPs and bytes per query/key pair are those of one head dim of the mean.
--- `kv_dtype` (optional, default dtype): the KV cache's element type (an fp8 cache under bf16 compute, workload
--- field kv_dtype): K and V are read at its size, Q and O at dtype's; FLOPs unchanged (the kernel dequantises).
--- `latent` (optional, decode only): V is the first dv values of each K row of one cache (multi-head latent attention
--- with absorbed weights: K = [latent, rotary key] of kv_lora_rank + qk_rope_head_dim, V = the latent), so the cache
--- is read once: kv_heads · skv · d elements, not · (d + dv); FLOPs as above. The tile model (scripts/tiling/attention.lua)
--- derives a decode block's work from n and the query heads per kv head alone (2·n cache values and 4·group·n FLOPs per
--- cached token), so a latent kernel shows it an equivalent one: n = ⌈d / 2⌉ (the cache row of d values, read once) and
--- rows = heads · (d + dv) / d query heads, rounded to a multiple of kv_heads (4·rows·n = 2·heads·(d + dv) FLOPs per
--- cached token; Q and O bytes alike): DeepSeek-V3's 128 heads over 576 / 512 are shown as 242 heads of 288, within
--- 0.2 % of the kernel's FLOPs and exact on the cache bytes. flops and bytes here are the kernel's own.
--- kv_flops and kv_bytes: what one more key adds (the same queries over a cache one token longer; linear in skv),
--- the one source the predictor's KV-length envelope prices a kernel's longer copies from.
function M.attention(op, batch, sq, skv, d, heads, kv_heads, dtype, dv, kv_dtype, latent)
  if not ATTENTION_OPS[op] then
    error(("bad argument #1 to 'attention' (causal, full, causal_bwd, full_bwd or decode expected, got %s)"):format(tostring(op)), 2)
  end
  batch, sq, skv = check_count("attention", 2, batch), check_count("attention", 3, sq), check_count("attention", 4, skv)
  d, heads, kv_heads = check_count("attention", 5, d), check_count("attention", 6, heads), check_count("attention", 7, kv_heads)
  local e = check_dtype("attention", 8, dtype)
  if dv == nil then dv = d else dv = check_count("attention", 9, dv) end
  if heads % kv_heads ~= 0 then
    error(("bad argument #7 to 'attention' (%d query heads are not a multiple of %d kv heads)"):format(heads, kv_heads), 2)
  end
  local causal = op == "causal" or op == "causal_bwd" or op == "decode"
  -- a causal mask aligns the last query with the last key (causal_pairs), so it needs sq <= skv; full attention
  -- does not: a cross-attention's decoder may be longer than its encoder (T5: 1024 target tokens over 512 source)
  if causal and sq > skv then
    error(("bad argument #3 to 'attention' (query length %d exceeds key length %d under a causal mask)"):format(sq, skv), 2)
  end
  local pairs = causal and causal_pairs(sq, skv) or sq * skv
  local bwd = op == "causal_bwd" or op == "full_bwd"
  local ekv = e
  if kv_dtype == dtype then kv_dtype = nil end
  if kv_dtype ~= nil then
    ekv = check_dtype("attention", 10, kv_dtype)
    if bwd then error("bad argument #10 to 'attention' (a quantised KV cache has no backward)", 2) end
  end
  if latent and (op ~= "decode" or dv > d) then
    error("bad argument #11 to 'attention' (a latent cache is a decode kernel's, with dv <= d)", 2)
  end
  local kv_row = latent and kv_heads * d or kv_heads * (d + dv) -- K and V values per key (latent: V is read with K)
  local q_io, kv_io = heads * sq * (d + dv), kv_row * skv -- forward: Q read + O written, K + V read
  local n, rows = (d + dv + 1) // 2, heads
  if latent then -- the tile model's equivalent kernel (above)
    n = (d + 1) // 2
    rows = math.max(1, (heads * (d + dv) / d / kv_heads + 0.5) // 1) * kv_heads
    rows = math.tointeger(rows) or rows
  end
  local flops_per_pair = 2 * batch * heads * (bwd and 3 * d + 2 * dv or d + dv)
  return {
    kind = "attention", name = op == "decode" and "DecodeAttention" or bwd and "FlashAttentionBwd" or "FlashAttention",
    op = op, dtype = dtype, b = batch, m = sq, k = skv, n = n, rows = rows, hidden = kv_heads,
    flops = flops_per_pair * pairs,
    bytes = bwd and e * batch * 2 * (q_io + kv_io) or batch * (e * q_io + ekv * kv_io),
    -- what one more key (a longer cache, queries kept) adds: sq visible pairs (causal or not), its K and V rows;
    -- the predictor's KV-length envelope prices the kernel's longer copies with these (engine/core/neusight_predictor.cpp)
    kv_flops = flops_per_pair * sq,
    kv_bytes = bwd and e * batch * 2 * kv_row or batch * ekv * kv_row,
    kv_dtype = kv_dtype,
  }
end

--- Sliding-window causal attention as the windowed FlashAttention kernels of serving engines run it (FlashAttention-2's
--- window_size, FlashInfer's window_left: vLLM, SGLang): `op` "causal" | "causal_bwd", a prefill of s tokens per
--- sequence whose query i sees its last min(i, window) keys; the key tiles wholly outside the band are skipped, so
--- the work is the band's pairs (window_pairs), s · window − window (window − 1) / 2 once s > window, not causal s².
--- Priced as one kernel of attention()'s: FLOPs the band's (flops per pair × window_pairs), bytes the prefill's own
--- (Q, K, V read and O written once, as attention(op, batch, s, s) moves them), and the shape the tile model sees an
--- equivalent causal one: the prefill cut into n independent causal chunks of L tokens (batch × n), with n · L ≈ s
--- (the same query tiles, so the same blocks) and n · L (L + 1) / 2 ≈ the band's pairs (the same mean keys per
--- block, ≈ window − window² / 2s). The blocks of a real windowed launch differ in work (the first window's grow,
--- later ones see the window); the tile model takes the mean for causal kernels too. While s ≤ window the window
--- changes nothing: attention(op, batch, s, s, …) itself.
function M.window_attention(op, batch, s, window, d, heads, kv_heads, dtype, dv, kv_dtype)
  if op ~= "causal" and op ~= "causal_bwd" then
    error(("bad argument #1 to 'window_attention' (causal or causal_bwd expected, got %s)"):format(tostring(op)), 2)
  end
  s, window = check_count("window_attention", 3, s), check_count("window_attention", 4, window)
  local whole = M.attention(op, batch, s, s, d, heads, kv_heads, dtype, dv, kv_dtype)
  if s <= window then return whole end
  local band = window_pairs(s, window)
  local n = math.max(1, (s * s + band) // (2 * band)) -- round(s² / 2 · band): chunks of ≈ 2 · band / s tokens
  local L = math.floor((math.sqrt(1 + 8 * band / n) - 1) / 2 + 0.5) -- n · L (L + 1) / 2 ≈ band
  L = math.max(1, math.min(s, L))
  local k = M.attention(op, batch * n, L, L, d, heads, kv_heads, dtype, dv, kv_dtype)
  k.flops = whole.flops / causal_pairs(s, s) * band
  k.bytes = whole.bytes
  return k
end

--- The convention the vector families' MLPs were trained in (weights/README.md): per family, the FLOPs per element and
--- the range of DRAM bytes per element of the data collector's fp32 kernels as this module costs them (the dataset's
--- rows are costed here too, engine/ingest/dataset.cpp) — element-wise from a unary op (read + write, VECaddu) to a
--- binary one (two reads + write, VECadd), softmax and layer norm their one kernel (VECsoftmax, VECln). The tile model
--- shows every vector kernel to the MLP in this convention (engine/core/tile_model.h): the engine reads it once per
--- session (training and forecasts alike), so it has no copy of these numbers.
---@return table<string, { flops: number, bytes_min: number, bytes_max: number }>
function M.train_convention()
  local unary, binary = M.vec("addu", 1, 1, "fp32"), M.vec("add", 1, 1, "fp32") -- 1 × 1: per element
  local softmax, ln = M.softmax(1, 1, "fp32"), M.layernorm(1, 1, "fp32")
  return {
    elementwise = { flops = binary.flops, bytes_min = unary.bytes, bytes_max = binary.bytes },
    softmax = { flops = softmax.flops, bytes_min = softmax.bytes, bytes_max = softmax.bytes },
    layernorm = { flops = ln.flops, bytes_min = ln.bytes, bytes_max = ln.bytes },
  }
end

--- Pure data movement "MEM (shapes…)": every listed shape is read or written once, no FLOPs.
---@param shapes integer[][]
function M.mem(shapes, dtype)
  if type(shapes) ~= "table" or #shapes == 0 then
    error("bad argument #1 to 'mem' (non-empty array of shapes expected)", 2)
  end
  local e = check_dtype("mem", 2, dtype)
  local n = 0
  for i = 1, #shapes do n = n + numel_of(shapes[i], "mem", ("shape %d: "):format(i)) end
  return { kind = "memory", name = "MEM", dtype = dtype, shapes = shapes, flops = 0, bytes = e * n }
end

--- Inter-GPU communication (all-reduce, send/recv, …) of `bytes` bytes taking `seconds`, as priced by
--- neusight.collectives (α–β model). The engine never predicts it: the seconds are fixed.
---@param op string all_reduce | all_gather | reduce_scatter | send_recv | all_to_all | broadcast
---@param bytes number
---@param seconds number
function M.collective(op, bytes, seconds, dtype)
  if type(op) ~= "string" then error("bad argument #1 to 'collective' (string expected)", 2) end
  if type(bytes) ~= "number" or not (bytes >= 0) or bytes == huge then
    error(("bad argument #2 to 'collective' (non-negative number expected, got %s)"):format(tostring(bytes)), 2)
  end
  if type(seconds) ~= "number" or not (seconds >= 0) or seconds == huge then
    error(("bad argument #3 to 'collective' (non-negative number of seconds expected, got %s)"):format(tostring(seconds)), 2)
  end
  check_dtype("collective", 4, dtype)
  return {
    kind = "collective", name = op:gsub("_", ""):upper(), op = op, dtype = dtype,
    flops = 0, bytes = bytes, seconds = seconds,
  }
end

local function shape_str(s)
  if #s == 1 then return "(" .. s[1] .. ",)" end -- Python tuple notation, as in the reference csv
  return "(" .. concat(s, ",") .. ")"
end

--- One-line description in the reference's notation: "Linear(4096,1280,3840)", "BMM(80,1024,64,1024)",
--- "VECadd(4096,1280)", "MEM((4,1024),(4,1024,1280))". Used for listings and tests.
function M.describe(k)
  if k.kind == "gemm" then
    return ("Linear(%d,%d,%d)"):format(k.m, k.n, k.k)
  elseif k.kind == "bmm" then
    return ("BMM(%d,%d,%d,%d)"):format(k.b, k.m, k.n, k.k)
  elseif k.kind == "attention" then
    return ("%s(%s,b%d,q%d,kv%d,d%d,h%d/%d)"):format(k.name, k.op, k.b, k.m, k.k, k.n, k.rows, k.hidden)
  elseif k.kind == "collective" then
    return ("%s(%.0f B)"):format(k.name, k.bytes)
  elseif k.kind == "memory" then
    local parts = {}
    for i, s in ipairs(k.shapes or {}) do parts[i] = shape_str(s) end
    return "MEM(" .. concat(parts, ",") .. ")"
  end
  return ("%s(%d,%d)"):format(k.name, k.rows, k.hidden)
end

--- describe() of every kernel in a list, space-separated ("" for no kernels).
function M.describe_all(kernels)
  local parts = {}
  for i, k in ipairs(kernels) do parts[i] = M.describe(k) end
  return concat(parts, " ")
end

return M
