-- scripts/neusight/rules.lua — op-rule constructors and node helpers shared by ops/*.lua (one rule, many op files).
--
-- Each constructor returns a complete op-rule table ({ name, doc, forward [, backward] [, accumulate] });
-- an op file is then one line: `return require("neusight.rules").elementwise { name = "mul", doc = "…" }`.
-- Decompositions follow the reference's parse_ops table (method-neusight.md §1.2).
local K = require "neusight.kernels"
local ipairs, pairs, type, tostring, error, concat = ipairs, pairs, type, tostring, error, table.concat

local M = {}

---------------------------------------------------------------------------------------------------
-- Node attributes: what a node's `attrs` may hold. An op rule declares the attrs it reads (op-rule field `attrs`,
-- name → "type: what it does", type one of boolean, integer, number, string); the engine checks every node's attrs
-- against its rule's declaration and M.node_attrs (engine/lua/prelude.lua check_nodes), so a misspelled or mistyped
-- attribute is an error at the node's line, never a silently ignored setting.

--- The attrs the engine itself reads on a node of any op (neusight.memory, .fusion, .parallel, .workload, the model
--- FLOPs of engine/core/forecast.h).
M.node_attrs = {
  note = "string: a comment for the reader; nothing reads it",
  frozen = "boolean: the node's parameters take no gradient (LoRA's frozen base model, neusight.lora): no weight-"
    .. "gradient kernels, no accumulation, no gradient or optimizer state (the data gradient still flows)",
  wgrad_fused = "boolean: the weight gradient accumulates inside its GEMM (Megatron-LM's gradient-accumulation "
    .. "fusion; set by neusight.workload under Megatron kernels): the linear rules add no accumulation kernel for it",
  saved_bytes = "number: bytes the node keeps for backward, instead of its rule's saves() (neusight.memory)",
  sequence_shard = "integer: sequence parallelism (neusight.nodes tp_in): the node's saved input is kept as its 1/n "
    .. "sequence shard, gathered again in backward (Megatron's column-parallel linear; neusight.memory)",
  core_attention = "boolean: part of core attention, which selective recomputation re-runs (neusight.parallel)",
  core_inputs = "string: comma-separated input positions a recomputed core-attention node keeps (neusight.memory)",
  per_layer = "integer: times the node runs per layer, a MoE layer's experts (pipeline stages count the layer once)",
  expert = "boolean: a routed expert's weights (expert parallelism, active parameters, weight-only quantisation)",
  tied = "string: the name of the node whose weights this one shares (tied embeddings under pipeline parallelism)",
  fused_external = "integer: how many of the last operands come from outside a fused run (neusight.fusion)",
  kv_cache_bytes = "number: the KV-cache bytes this node writes (the memory report's kv_cache)",
  kv_cache_tokens = "integer: the tokens of the KV cache this node writes into (the memory report's kv_cache)",
  kv_window = "integer: the sliding window of the layers of kv_windowed_layers (tokens cached)",
  kv_windowed_layers = "integer: how many layers cache only kv_window tokens",
  model_flops_share = "number: in (0, 1], the share of the busiest expert-parallel rank counted in the model FLOPs",
  model_flops_copies = "number: ranks that run this node alike, a whole number >= 1 (counted once in the model FLOPs; "
    .. "its range: engine/core/forecast.cpp)",
  model_flops_shards = "number: ranks a local expert's weights are split over, a whole number >= 1 (model FLOPs "
    .. "of the gradients; its range: engine/core/forecast.cpp)",
  model_flops_weight_copies = "number: tensor-parallel ranks that hold this node's weights whole while its rows are "
    .. "split, a whole number >= 1 (its gradient accumulation counted once in the model FLOPs; its range: "
    .. "engine/core/forecast.cpp)",
  weight_bytes = "number: bytes per weight under weight-only quantisation (set by the workload's weight_dtype; the "
    .. "model state, and the GEMMs of the linear rules)",
  grad_dtype = "string: the dtype of the node's parameter gradients, which its accumulate() kernels add (set by "
    .. "neusight.workload in training from the precision recipe: fp32 under amp, main_grad under Megatron's; default the "
    .. "node's dtype; rules.grad_dtype)",
  grad_from = "string: the dtype of the gradient an accumulate() kernel adds into the grad_dtype buffer, where the "
    .. "two differ (set by neusight.workload gradient_dtypes: Megatron-LM's main_grad hooks add a bias's, norm's or "
    .. "embedding's 16-bit param.grad into its fp32 main_grad); default grad_dtype (rules.grad_accumulate)",
}

--- The dtype of a node's parameter gradients, which its accumulate() kernels read and write: attrs.grad_dtype (the
--- precision recipe's gradients: fp32 .grad buffers under torch.autocast, whose compute is bf16/fp16/fp8), else the
--- node's dtype (precision pure: parameters and gradients in the compute dtype).
---@param node neusight.Node
---@return string
function M.grad_dtype(node)
  return node.attrs.grad_dtype or node.dtype
end

--- The kernel that adds a parameter gradient of `elems` elements into its buffer (the accumulate() of the linear and
--- norm rules, ops/embedding.lua, ops/grouped_linear.lua, ops/weight.lua: the one source of these bytes): VECadd(1,
--- elems) in the buffer's dtype (M.grad_dtype), reading the added gradient at attrs.grad_from's element size (default:
--- the buffer's) and reading and writing the buffer — e(from) + 2·e(grad) bytes per element: 3 × 4 under torch.autocast
--- (fp32 .grad), 2 + 4 + 4 = 10 under Megatron's bf16 main_grad hooks (a 16-bit .grad into fp32 main_grad), 3 × e in pure.
---@param node neusight.Node
---@param elems integer
function M.grad_accumulate(node, elems)
  local grad, from = M.grad_dtype(node), node.attrs.grad_from
  if from == nil or from == grad then return K.vec("add", 1, elems, grad) end
  return K.vec("add", 1, elems, grad, { bytes_per_elem = K.dtype_bytes(from) + 2 * K.dtype_bytes(grad) })
end

-- The attrs several rules read, described once: rules.attrs { "no_grad", … } takes these by name.
local SHARED_ATTRS = {
  no_grad = "boolean: computed under torch.no_grad(): no backward kernels, nothing saved",
  saved_inputs = "string: comma-separated input positions saved for backward instead of the rule's (\"\" = none)",
  tensor_inputs = "integer: the number of tensor operands, for a 0-dim tensor traced as an input",
  elem_bytes = "number: bytes per element instead of the dtype's (integer tensors)",
  kv_dtype = "string: the dtype of a quantised KV cache (fp8, bf16, fp16, fp32)",
  act_quant = "string: \"dynamic_tensor\", the fp8 activation quantisation before the GEMM (set by the workload)",
  fused = "string: the comma-separated names of the nodes fused into this one (neusight.fusion)",
  input_dtypes = "string: the comma-separated dtypes of the inputs, one engine dtype name per input by position, for "
    .. "inputs that differ from the node's (\"bf16,fp32\": a mixed-dtype element-wise op under torch.autocast, whose "
    .. "output is the node's dtype; M.io_bytes)",
}
M.shared_attrs = SHARED_ATTRS

--- An op rule's `attrs` declaration: the shared attrs named in the array part (SHARED_ATTRS above) plus the
--- name = "type: what it does" entries of the hash part.
---@param list table { "no_grad", …, name = "type: doc", … }
function M.attrs(list)
  local out = {}
  for k, v in pairs(list) do
    if math.type(k) == "integer" then
      local doc = SHARED_ATTRS[v]
      if not doc then
        local ns = require "neusight"
        error(("rules.attrs: unknown shared attribute '%s'%s"):format(tostring(v), ns.did_you_mean(tostring(v),
          SHARED_ATTRS)), 2)
      end
      out[v] = doc
    else
      out[k] = v
    end
  end
  return out
end

---------------------------------------------------------------------------------------------------
-- Node helpers (also used by the written-out ops)

--- Input shape #i of a node; a clear error if the graph did not provide it.
function M.input(node, i)
  local s = node.inputs[i]
  if not s then
    error(("node '%s' (op '%s') needs input #%d, got %d input(s)"):format(node.name, node.op, i, #node.inputs), 2)
  end
  return s
end

--- Number of tensor operands: inputs with more than one element. A Python-scalar operand given as
--- shape {1} does not count, so `x * 0.5` is the reference's unary 'u' variant. attrs.tensor_inputs
--- overrides the count, for a 0-dim *tensor* operand that the reference traced as an input.
function M.tensor_inputs(node)
  local n = node.attrs.tensor_inputs
  if n then return n end
  n = 0
  for _, s in ipairs(node.inputs) do
    if K.numel(s) > 1 then n = n + 1 end
  end
  return n
end

--- Elementwise op name for a node: `op` with one tensor operand becomes the 'u' variant ("mul" → "mulu").
function M.vec_op(node, op)
  return M.tensor_inputs(node) == 1 and op .. "u" or op
end

--- (rows, hidden) of the node's output, or nil for a 1-element output: the reference drops
--- vector ops on (1,1) (Python-scalar arithmetic traced as tensor ops) as zero-cost 'misc'.
function M.vec_dims(node)
  local rows, hidden = K.vec_shape(node.output)
  if rows * hidden <= 1 then return nil end
  return rows, hidden
end

-- attrs.input_dtypes of `node` as an array by input position (empty when not given): M.io_bytes and M.saved_inputs.
-- Read strictly: a string of one engine dtype name per input ("bf16,fp32"), so that a stray comma, an empty entry (which
-- shifted the positions after it) or a misspelled name is an error naming the node and the entry, never bytes priced
-- at a neighbour's dtype. Returns nil and what is wrong instead (M.check_input_dtypes).
local function input_dtypes_parse(node, given)
  local dtypes = {}
  if given == nil then return dtypes end
  local function bad(problem)
    return nil, ("attrs.input_dtypes %s: %s"):format(
      type(given) == "string" and ("'" .. given .. "'") or ("(a " .. type(given) .. ")"), problem)
  end
  if type(given) ~= "string" then return bad("must be a string of comma-separated dtypes, one per input") end
  for d in (given .. ","):gmatch("([^,]*),") do
    dtypes[#dtypes + 1] = d
    if K.dtype_name(d) ~= d then
      return bad(("entry #%d %s (one of the engine's dtype names, such as bf16 or fp32, per input)")
        :format(#dtypes, d == "" and "is empty" or ("'" .. d .. "' is not a dtype")))
    end
  end
  if #dtypes ~= #node.inputs then
    return bad(("has %d entries for %d input(s) (one dtype per input, by position)"):format(#dtypes, #node.inputs))
  end
  return dtypes
end

-- Per node its last read (weak keys): { given, inputs (their count), dtypes, problem }, parsed again only when the
-- string or the count of inputs changed. The array is shared: its readers (M.io_bytes, M.saved_inputs) only read it.
local read_cache = setmetatable({}, { __mode = "k" })
local function input_dtypes_read(node)
  local given = type(node.attrs) == "table" and node.attrs.input_dtypes or nil
  local c = read_cache[node]
  if not (c and c.given == given and c.inputs == #node.inputs) then
    local dtypes, problem = input_dtypes_parse(node, given)
    c = { given = given, inputs = #node.inputs, dtypes = dtypes, problem = problem }
    read_cache[node] = c
  end
  return c.dtypes, c.problem
end

local function input_dtypes(node)
  local dtypes, problem = input_dtypes_read(node)
  if not dtypes then error(("node '%s' (op '%s'): %s"):format(tostring(node.name), tostring(node.op), problem), 0) end
  return dtypes
end

--- Contract of attrs.input_dtypes (the element-wise rules' `check`, so that the engine names the node's line): nil, or
--- what is wrong with it.
function M.check_input_dtypes(node)
  local _, problem = input_dtypes_read(node)
  return problem
end

--- DRAM bytes of touching every input and the output once (the reference's MemPerO · numel(out)):
--- honest for broadcast operands (wte + wpe reads the position table once per batch).
--- Inputs in another dtype than the node's (attrs.input_dtypes, by position: a mixed-dtype op under torch.autocast,
--- neusight.nodes) are read at theirs.
function M.io_bytes(node)
  local own = K.dtype_bytes(node.dtype)
  local dtypes = input_dtypes(node)
  local bytes = K.numel(node.output) * own
  for i, s in ipairs(node.inputs) do
    bytes = bytes + K.numel(s) * (dtypes[i] and K.dtype_bytes(dtypes[i]) or own)
  end
  return bytes
end

--- The node's input shapes as a fresh array, followed by its output shape when `with_output`.
function M.shapes(node, with_output)
  local list = {}
  for i, s in ipairs(node.inputs) do list[i] = s end
  if with_output then list[#list + 1] = node.output end
  return list
end

---------------------------------------------------------------------------------------------------
-- Shape contracts: `check(node)` hooks return nil, or what is wrong with the node's shapes (the engine runs them on
-- every node before pricing and names the model, the node and the rule file)

local function show(s) return "{" .. concat(s, ",") .. "}" end

-- nil when every dimension of shape `s` is an integer >= 1, else the problem. A float (64.0 from D / H, 196.0 from
-- (224 / 16) ^ 2) is said as what it is, not as "< 1": Lua's `/` and `^` give floats, `//` an integer.
local function bad_dims(s, what)
  if type(s) ~= "table" or #s == 0 then return what .. " has no dimensions" end
  for i, d in ipairs(s) do
    if math.type(d) ~= "integer" then
      return ("%s %s: dimension %d is %s, not an integer (a shape's dimensions are integers: Lua's / and ^ give "
        .. "floats, // and math.tointeger integers)"):format(what, show(s), i, type(d) == "number" and tostring(d)
        or type(d))
    end
    if d < 1 then return ("%s %s has a dimension < 1"):format(what, show(s)) end
  end
end

-- nil when `s` broadcasts to `out` (aligned from the last dimension, each dimension 1 or out's), else the problem.
local function broadcast_problem(s, out, what)
  for j = 1, #s do
    local d, o = s[#s - j + 1], out[#out - j + 1]
    if (o == nil and d ~= 1) or (o ~= nil and d ~= 1 and d ~= o) then
      return ("%s %s does not broadcast to the output %s"):format(what, show(s), show(out))
    end
  end
end

--- Element-wise contract (PyTorch broadcasting): aligned from the last dimension, each dimension of the output is
--- the inputs' (1 broadcasts; an input's extra leading dimensions must be 1), so `x + y` cannot silently price a
--- tensor of another size. Nodes without inputs are not checked.
function M.check_broadcast(node)
  local out = node.output
  local problem = bad_dims(out, "the output")
  if problem then return problem end
  if #node.inputs == 0 then return nil end
  local want = {}
  for i, s in ipairs(node.inputs) do
    problem = bad_dims(s, "input #" .. i)
    if problem then return problem end
    problem = broadcast_problem(s, out, "input #" .. i)
    if problem then return problem end
    for j = 1, #s do
      if s[#s - j + 1] > (want[j] or 1) then want[j] = s[#s - j + 1] end
    end
  end
  for j = 1, #out do
    if out[#out - j + 1] ~= (want[j] or 1) then
      return ("the output is not the broadcast of the inputs (dimension %d is %d, the inputs give %d)")
        :format(#out - j + 1, out[#out - j + 1], want[j] or 1)
    end
  end
end

--- Attention contract (ops/sdpa.lua, ops/decode_attention.lua): Q[b, heads, sq, d], K[b, kv_heads, skv, d] and
--- V[b, kv_heads, skv, dv] give O[b, heads, sq, dv], the query heads a multiple of the key/value heads (grouped-query
--- attention), so that an output of another size is not priced as the attention of these inputs.
function M.check_attention(node)
  local q, k, v, out = node.inputs[1], node.inputs[2], node.inputs[3], node.output
  if not (q and k and v) then return ("needs inputs #1, #2 and #3 (Q, K, V), got %d input(s)"):format(#node.inputs) end
  local problem = bad_dims(q, "Q") or bad_dims(k, "K") or bad_dims(v, "V") or bad_dims(out, "the output")
  if problem then return problem end
  if #q ~= 4 or #k ~= 4 or #v ~= 4 or #out ~= 4 then
    return "Q, K, V and the output must be [batch, heads, seq, head_dim]"
  end
  if k[1] ~= q[1] or k[4] ~= q[4] then return ("K %s does not match Q %s's batch and head_dim"):format(show(k), show(q)) end
  if v[1] ~= k[1] or v[2] ~= k[2] or v[3] ~= k[3] then
    return ("V %s does not match K %s's batch, heads and length"):format(show(v), show(k))
  end
  if q[2] % k[2] ~= 0 then
    return ("Q's %d heads are not a multiple of K and V's %d (grouped-query attention)"):format(q[2], k[2])
  end
  local want = { q[1], q[2], q[3], v[4] }
  for i = 1, 4 do
    if out[i] ~= want[i] then
      return ("the output %s is not %s (Q's batch, heads and length, V's head_dim)"):format(show(out), show(want))
    end
  end
end

---------------------------------------------------------------------------------------------------
-- Saved tensors: the bytes autograd keeps for a node's backward, as PyTorch eager does (op-rule field `saves`,
-- read by scripts/neusight/memory.lua; a rule without one is charged its output there). Parameters are model state,
-- never saved activations. A builder narrows the inputs a rule saves with node.attrs.saved_inputs, a comma-separated
-- list of input positions ("" = none): a constant operand (RoPE's cos table) needs no saved partner, and a tensor
-- two nodes save (the input of q/k/v_proj) is counted on one of them only (the graph has no producer links).

--- Bytes of `shape` in the node's dtype (or `elem_bytes` per element).
function M.tensor_bytes(node, shape, elem_bytes)
  return K.numel(shape) * (elem_bytes or K.dtype_bytes(node.dtype))
end

--- Bytes of the node's inputs at positions `default` (a list), or at the positions attrs.saved_inputs lists.
--- Inputs of one element (Python scalars traced as {1}) are never saved tensors.
function M.saved_inputs(node, default)
  local list = default
  local given = node.attrs.saved_inputs
  if type(given) == "string" then
    list = {}
    for i in given:gmatch("%d+") do list[#list + 1] = math.tointeger(tonumber(i)) end
  end
  -- an input in another dtype than the node's (attrs.input_dtypes, M.io_bytes) is saved at its own
  local dtypes = input_dtypes(node)
  local n = 0
  for _, i in ipairs(list) do
    local s = node.inputs[i]
    if s and K.numel(s) > 1 then n = n + M.tensor_bytes(node, s, dtypes[i] and K.dtype_bytes(dtypes[i]) or nil) end
  end
  return n
end

--- `saves` hooks shared by the rules: nothing, the output, the first input.
function M.saves_nothing() return 0 end
function M.saves_output(node) return M.tensor_bytes(node, node.output) end
function M.saves_input(node) return M.saved_inputs(node, { 1 }) end

--- Positions of the inputs with more than one element (tensor operands).
local function tensor_positions(node)
  local list = {}
  for i, s in ipairs(node.inputs) do
    if K.numel(s) > 1 then list[#list + 1] = i end
  end
  return list
end

---------------------------------------------------------------------------------------------------
-- Rule constructors

-- The op-rule field `fusion` a constructor's spec.fusion gives (nil when the spec says nothing: `default`): "elementwise"
-- (the node may join a fused element-wise run under the workload's `fusion`), "anchor" (a row-wise kernel that absorbs
-- the runs around it) or false (never fused).
local function fusion_of(ctor, spec, default)
  local v = spec.fusion
  if v == nil then return default end
  if v == false then return nil end
  if v ~= "elementwise" and v ~= "anchor" then
    error(("rules.%s: field 'fusion' must be \"elementwise\", \"anchor\" or false (got %s)"):format(ctor, tostring(v)), 3)
  end
  return v
end

-- Checks a constructor's spec table: required `name`/`doc` strings, no unknown keys.
local function check_spec(ctor, spec, allowed)
  if type(spec) ~= "table" then error(("rules.%s: spec table expected, got %s"):format(ctor, type(spec)), 3) end
  for _, key in ipairs { "name", "doc" } do
    if type(spec[key]) ~= "string" then
      error(("rules.%s: field '%s' must be a string (got %s)"):format(ctor, key, type(spec[key])), 3)
    end
  end
  for key in pairs(spec) do
    if key ~= "name" and key ~= "doc" and not allowed[key] then
      error(("rules.%s: unknown field '%s'"):format(ctor, tostring(key)), 3)
    end
  end
end

--- Elementwise op (add, sub, mul, div, gelu, relu …): forward VEC<op>(u) over the output's (rows, hidden).
--- spec.op: elementwise op (default: name); spec.unary = true: never takes the 'u' suffix (gelu, relu);
--- spec.grad: "mem"  → backward is one MEM (rows, hidden) per tensor operand (add, sub: the gradient is
---                     passed through / negated),
---            "same" → backward is the forward kernel once per tensor operand (mul, div, gelu, relu).
--- spec.flops_per_elem: the kernel's own FLOPs per output element, for an op neusight.kernels vec_ops does not know
---            (a tanh-approximated GELU: 8), priced as the bundled element-wise kernels are (K.vec's opts): the
---            kernel VEC<op> takes that count, and its bytes are the node's inputs and output once each, or
---            spec.bytes_per_elem per output element when given; backward ("same") is that kernel once per tensor
---            operand. Without it an op vec_ops does not know is an error at the rule's line.
--- node.attrs.no_grad = true: computed under torch.no_grad() (DeepSeek-V3's expert selection): no backward
--- kernels, nothing saved.
function M.elementwise(spec)
  check_spec("elementwise", spec,
    { op = true, unary = true, grad = true, fusion = true, flops_per_elem = true, bytes_per_elem = true })
  local fusion = fusion_of("elementwise", spec, "elementwise")
  local base, unary, grad = spec.op or spec.name, spec.unary, spec.grad
  if grad ~= "mem" and grad ~= "same" then
    error(("rules.elementwise: field 'grad' must be \"mem\" or \"same\" (got %s)"):format(tostring(grad)), 2)
  end
  for _, key in ipairs { "flops_per_elem", "bytes_per_elem" } do
    local v = spec[key]
    if v ~= nil and (type(v) ~= "number" or not (v >= 0) or v == math.huge) then
      error(("rules.elementwise: field '%s' must be a finite number >= 0 (got %s)"):format(key, tostring(v)), 2)
    end
  end
  if spec.bytes_per_elem ~= nil and spec.flops_per_elem == nil then
    error("rules.elementwise: field 'bytes_per_elem' goes with flops_per_elem (the rule's own kernel); a kernel of "
      .. "neusight.kernels vec_ops moves the node's inputs and output", 2)
  end
  local declared = spec.flops_per_elem
  if not declared and (not K.vec_ops[base] or not (unary or K.vec_ops[base .. "u"])) then -- fail when the op file loads
    -- the kernels an `op` can name: a binary op needs its one-tensor 'u' variant too (add/addu), a unary one not
    local valid = {}
    for k in pairs(K.vec_ops) do
      if unary or K.vec_ops[k .. "u"] then valid[#valid + 1] = k end
    end
    table.sort(valid)
    local ns = require "neusight"
    error(("rules.elementwise: unknown elementwise op '%s'%s: field 'op' picks the element-wise kernel the rule "
      .. "prices (default: the name), one of %s%s; e.g. op = \"mul\" prices a new op '%s' as a multiply, or "
      .. "flops_per_elem = F declares a kernel of its own (F FLOPs per element; bytes_per_elem optional)")
      :format(tostring(base), ns.did_you_mean(tostring(base), valid), concat(valid, ", "),
        unary and "" or " (unary = true allows the one-operand kernels as well)", tostring(spec.name)), 2)
  end

  local function op_of(node) return (unary or declared) and base or M.vec_op(node, base) end
  -- the kernel's options: a declared kernel's FLOPs, and bytes (its own per element, else the node's inputs and output)
  local function vec_opts(node, rows, hidden)
    if not declared then return { bytes = M.io_bytes(node) } end
    return { flops_per_elem = declared,
             bytes = spec.bytes_per_elem and spec.bytes_per_elem * rows * hidden or M.io_bytes(node) }
  end

  -- Saved for backward: add/sub ("mem" gradients) nothing; a unary op (gelu, relu) its input; mul its tensor
  -- operands (each one's gradient needs the other; a Python-scalar factor saves nothing); div the divisor, and the
  -- dividend too when the divisor is a tensor with a gradient (x / scalar-tensor saves nothing of size).
  local saves
  if grad == "mem" then
    saves = M.saves_nothing
  elseif unary then
    saves = M.saves_input
  else
    saves = function(node)
      local list = tensor_positions(node)
      return #list >= 2 and M.saved_inputs(node, list) or M.saved_inputs(node, {})
    end
  end

  local grad_saves = saves
  saves = function(node)
    if node.attrs.no_grad then return 0 end
    return grad_saves(node)
  end

  return {
    name = spec.name,
    doc = spec.doc,
    attrs = M.attrs { "no_grad", "saved_inputs", "tensor_inputs", "input_dtypes" },
    fusion = fusion,
    saves = saves,
    check = function(node) return M.check_broadcast(node) or M.check_input_dtypes(node) end,
    forward = function(node)
      local rows, hidden = M.vec_dims(node)
      if not rows then return {} end
      return { K.vec(op_of(node), rows, hidden, node.dtype, vec_opts(node, rows, hidden)) }
    end,
    backward = function(node)
      local rows, hidden = M.vec_dims(node)
      if not rows or node.attrs.no_grad then return {} end
      local n = unary and 1 or M.tensor_inputs(node)
      local out = {}
      for i = 1, n do
        out[i] = grad == "mem" and K.mem({ { rows, hidden } }, node.dtype)
          or K.vec(op_of(node), rows, hidden, node.dtype, declared and vec_opts(node, rows, hidden) or nil)
      end
      return out
    end,
  }
end

--- Activation with a backward kernel of its own (silu, sigmoid): forward VEC<spec.op>(rows, hidden) reading x and
--- writing y; backward VEC<spec.grad>(rows, hidden) with that op's bytes (it reads dy and x or y, writes dx).
--- spec.saves = "input" (default: SiLU's backward reads x), "output" (sigmoid's reads y), "inputs" (every tensor
--- operand: the fused SwiGLU's gate and up) or "nothing" (the fused RoPE's backward needs only the cos/sin table).
local ACTIVATION_SAVES = { input = M.saves_input, output = M.saves_output, nothing = M.saves_nothing,
  inputs = function(node) return M.saved_inputs(node, tensor_positions(node)) end }
function M.activation(spec)
  check_spec("activation", spec, { op = true, grad = true, saves = true, fusion = true })
  local fusion = fusion_of("activation", spec, nil)
  local op, grad = spec.op or spec.name, spec.grad
  if not K.vec_ops[op] or not K.vec_ops[grad] then
    error(("rules.activation: unknown elementwise op '%s' or '%s'"):format(tostring(op), tostring(grad)), 2)
  end
  local saves = ACTIVATION_SAVES[spec.saves or "input"]
  if not saves then
    error(("rules.activation: field 'saves' must be \"input\", \"output\", \"inputs\" or \"nothing\" (got %s)")
      :format(tostring(spec.saves)), 2)
  end
  return {
    name = spec.name,
    doc = spec.doc,
    attrs = M.attrs { "saved_inputs" },
    fusion = fusion,
    saves = saves,
    check = function(node) return M.check_broadcast(node) end,
    forward = function(node)
      local rows, hidden = M.vec_dims(node)
      if not rows then return {} end
      return { K.vec(op, rows, hidden, node.dtype, { bytes = M.io_bytes(node) }) }
    end,
    backward = function(node)
      local rows, hidden = M.vec_dims(node)
      if not rows then return {} end
      return { K.vec(grad, rows, hidden, node.dtype) }
    end,
  }
end

--- Normalisation over the last dimension (ops/layernorm.lua, ops/rms_norm.lua): forward one row-wise kernel,
--- spec.kernel = "layernorm" (VECln) or "rms_norm" (VECrmsnorm: the layer-norm family, RMSNorm's FLOPs); backward one
--- VECmul over the same (rows, hidden) (the reference's model of the input gradient: it reads dy and x and writes dx,
--- the bytes of a fused LayerNorm or RMSNorm backward); accumulate one VECadd(1, H) per affine vector (spec.affine:
--- 2 for LayerNorm's γ and β; 0 for RMSNorm, whose γ is a `weight` node of its own, as in HF's eager graph). Saved for
--- backward: the input and spec.stats fp32 values per row (mean and rstd; RMSNorm's rstd); the affine vectors are
--- model state.
function M.norm(spec)
  check_spec("norm", spec, { kernel = true, stats = true, affine = true, fusion = true })
  local fusion = fusion_of("norm", spec, nil)
  local kernel = K[spec.kernel]
  if (spec.kernel ~= "layernorm" and spec.kernel ~= "rms_norm") or type(kernel) ~= "function" then
    error(("rules.norm: field 'kernel' must be \"layernorm\" or \"rms_norm\" (got %s)"):format(tostring(spec.kernel)), 2)
  end
  local stats, affine = spec.stats, spec.affine
  if math.type(stats) ~= "integer" or stats < 1 then
    error(("rules.norm: field 'stats' must be a positive integer (got %s)"):format(tostring(stats)), 2)
  end
  if math.type(affine) ~= "integer" or affine < 0 then
    error(("rules.norm: field 'affine' must be a non-negative integer (got %s)"):format(tostring(affine)), 2)
  end
  return {
    name = spec.name,
    doc = spec.doc,
    attrs = M.attrs { "saved_inputs" },
    fusion = fusion,
    saves = function(node)
      local rows = K.vec_shape(node.output)
      return M.saved_inputs(node, { 1 }) + stats * 4 * rows
    end,
    forward = function(node)
      local rows, hidden = K.vec_shape(node.output)
      return { kernel(rows, hidden, node.dtype) }
    end,
    backward = function(node)
      local rows, hidden = K.vec_shape(node.output)
      return { K.vec("mul", rows, hidden, node.dtype) }
    end,
    accumulate = affine > 0 and function(node)
      if node.attrs.frozen then return {} end
      local hidden = node.output[#node.output]
      local out = {}
      for i = 1, affine do out[i] = M.grad_accumulate(node, hidden) end
      return out
    end or nil,
  }
end

--- Memory-bound op (contiguous, getitem …): forward MEM(inputs…, out); backward MEM(inputs…) ×2
--- (the reference's pattern: zero-fill of the input gradient, then the copy/scatter into it).
--- node.attrs.elem_bytes, when set, is the element size instead of the dtype's (integer tensors: an int64 mask);
--- node.attrs.no_grad = true: no backward kernels (a reduction of an integer mask, which has no gradient).
function M.memory(spec)
  check_spec("memory", spec, { fusion = true })
  local fusion = fusion_of("memory", spec, nil)
  local function mem(node, shapes, with_output)
    local k = K.mem(shapes, node.dtype)
    local e = node.attrs.elem_bytes
    if e then
      local n = 0
      for _, s in ipairs(shapes) do n = n + K.numel(s) end
      k.bytes = e * n
    elseif with_output and node.attrs.kv_dtype then -- a KV-cache write into a quantised cache: the output at its size
      local out = K.numel(shapes[#shapes])
      k.bytes = k.bytes - out * K.dtype_bytes(node.dtype) + out * K.dtype_bytes(node.attrs.kv_dtype)
    end
    return k
  end
  return {
    name = spec.name,
    doc = spec.doc,
    attrs = M.attrs { "elem_bytes", "kv_dtype", "no_grad", "saved_inputs" },
    fusion = fusion,
    -- copies, slices and reductions keep no tensor for backward (only shapes); attrs.saved_inputs may say otherwise
    saves = function(node) return node.attrs.no_grad and 0 or M.saved_inputs(node, {}) end,
    forward = function(node) return { mem(node, M.shapes(node, true), true) } end,
    backward = function(node)
      local shapes = M.shapes(node, false)
      -- no inputs, no input gradient (K.mem({}) used to fail inside this file: found by tests/fuzz/mutate.py)
      if node.attrs.no_grad or #shapes == 0 then return {} end
      return { mem(node, shapes), mem(node, shapes) }
    end,
  }
end

--- Metadata-only op (view, reshape, permute, transpose, split, size): no kernels in any phase.
function M.view(spec)
  check_spec("view", spec, {})
  return {
    name = spec.name,
    doc = spec.doc,
    saves = M.saves_nothing,
    forward = function() return {} end,
    backward = false, -- the gradient is a view too
  }
end

--- Linear layer y = x·Wᵀ + b with x = inputs[spec.x_input] (default 1), T = numel(x)/I, I = x[-1], O = out[-1]:
---   forward    Linear(T, I, O)
---   backward   Linear(T, O, I) (dX = dY·W, the dgrad GEMM)  and  Linear(O, T, I) (dW = dYᵀ·X, the wgrad GEMM: its
---              kernel's wgrad = true, what neusight.parallel.timeline hides a column-parallel linear's input-gradient
---              collective under)
---   accumulate VECadd(1, O·I) into W.grad (none with attrs.wgrad_fused: the dW GEMM accumulated it) and, unless
---              attrs.bias == false, VECadd(1, O) into b.grad.
--- (The reference always accumulates a bias-sized gradient, even for the bias-free lm_head.)
function M.linear(spec)
  check_spec("linear", spec, { x_input = true })
  local x_input = spec.x_input or 1

  local function dims(node)
    local x = M.input(node, x_input)
    local in_f = x[#x]
    return K.numel(x) // in_f, in_f, node.output[#node.output]
  end

  return {
    name = spec.name,
    doc = spec.doc,
    attrs = M.attrs { "saved_inputs", "act_quant",
      bias = "boolean: false for a layer without bias (no bias-gradient accumulation; default true)" },
    -- dW = dYᵀ·X needs x; dX = dY·W needs W, which is model state, not a saved activation
    saves = function(node) return M.saved_inputs(node, { x_input }) end,
    -- x[…, I] → out[…, O]: the same rows (the leading dimensions' product) on both sides; a weight input after x
    -- (addmm's W) holds I·O elements.
    check = function(node)
      local x = node.inputs[x_input]
      if not x then return ("needs input #%d (x), got %d input(s)"):format(x_input, #node.inputs) end
      local problem = bad_dims(x, "x") or bad_dims(node.output, "the output")
      if problem then return problem end
      local I, O, out = x[#x], node.output[#node.output], node.output
      local rows_x, rows_out = K.numel(x) // I, K.numel(out) // O
      if rows_x ~= rows_out then
        return ("x %s has %d rows of %d features but the output %s has %d rows of %d"):format(
          show(x), rows_x, I, show(out), rows_out, O)
      end
      local w = node.inputs[x_input + 1]
      if w and K.numel(w) ~= I * O then
        return ("the weight %s does not hold %d x %d elements"):format(show(w), I, O)
      end
    end,
    forward = function(node)
      local T, I, O = dims(node)
      -- attrs.weight_bytes: weight-only quantisation (neusight.workload, field weight_dtype); inference only.
      -- attrs.act_quant: the activation quantisation before the GEMM (neusight.workload.quantise_activations:
      -- fp8 inference), forward only: the backward GEMMs quantise nothing of the kind.
      local k = K.linear(T, I, O, node.dtype, node.attrs.weight_bytes)
      k.act_quant = node.attrs.act_quant
      return { k }
    end,
    backward = function(node)
      local T, I, O = dims(node)
      -- a frozen weight (LoRA's base, attrs.frozen): the dgrad GEMM alone, its input gradient still flows
      if node.attrs.frozen then return { K.linear(T, O, I, node.dtype) } end
      local wgrad = K.linear(O, T, I, node.dtype)
      wgrad.wgrad = true
      return { K.linear(T, O, I, node.dtype), wgrad }
    end,
    accumulate = function(node)
      if node.attrs.frozen then return {} end
      local _, I, O = dims(node)
      local out = {}
      -- attrs.wgrad_fused: the dW GEMM accumulated W's gradient itself (Megatron's gradient-accumulation fusion)
      if not node.attrs.wgrad_fused then out[1] = M.grad_accumulate(node, O * I) end
      if node.attrs.bias ~= false then out[#out + 1] = M.grad_accumulate(node, O) end
      return out
    end,
  }
end

--- Batched matmul of A = inputs[a] = […, M, N] by B = inputs[a+1] = […, N, K] (a = spec.a_input, default 1),
--- batch = numel(A)/(M·N) (B may broadcast):
---   forward  BMM(batch, M, N, K), plus VECadd(batch, M·K) when spec.add_input (baddbmm's C + A·B)
---   backward BMM(batch, M, K, N) (dA = dC·Bᵀ)  and  BMM(batch, N, M, K) (dB = Aᵀ·dC)
function M.bmm(spec)
  check_spec("bmm", spec, { a_input = true, add_input = true })
  local a_input, add_input = spec.a_input or 1, spec.add_input

  local function dims(node)
    local a, b = M.input(node, a_input), M.input(node, a_input + 1)
    local m, n, k = a[#a - 1], a[#a], b[#b]
    if not m or #b < 2 or b[#b - 1] ~= n then
      error(("node '%s' (op '%s'): shapes do not multiply: [%s] x [%s]"):format(
        node.name, node.op, concat(a, ","), concat(b, ",")), 3)
    end
    return K.numel(a) // (m * n), m, n, k
  end

  return {
    name = spec.name,
    doc = spec.doc,
    attrs = M.attrs { "saved_inputs" },
    -- dA = dC·Bᵀ needs B, dB = Aᵀ·dC needs A (baddbmm's C: nothing)
    saves = function(node) return M.saved_inputs(node, { a_input, a_input + 1 }) end,
    -- A[…, M, N] · B[…, N, K] → out[…, M, K] with A's batch (B's batch divides it: broadcast); baddbmm's C
    -- broadcasts to the output.
    check = function(node)
      local a, b, out = node.inputs[a_input], node.inputs[a_input + 1], node.output
      if not a or not b then
        return ("needs inputs #%d and #%d (A, B), got %d input(s)"):format(a_input, a_input + 1, #node.inputs)
      end
      local problem = bad_dims(a, "A") or bad_dims(b, "B") or bad_dims(out, "the output")
      if problem then return problem end
      if #a < 2 or #b < 2 or #out < 2 then return "A, B and the output need at least two dimensions" end
      local m, n, k = a[#a - 1], a[#a], b[#b]
      if b[#b - 1] ~= n then return ("A %s and B %s do not multiply"):format(show(a), show(b)) end
      local batch, batch_b = K.numel(a) // (m * n), K.numel(b) // (n * k)
      if out[#out - 1] ~= m or out[#out] ~= k or K.numel(out) ~= batch * m * k then
        return ("A %s · B %s is %d x {%d,%d}, not the output %s"):format(show(a), show(b), batch, m, k, show(out))
      end
      if batch % batch_b ~= 0 then
        return ("B %s has %d matrices, which do not broadcast over A's %d"):format(show(b), batch_b, batch)
      end
      if add_input then
        local c = node.inputs[1]
        problem = bad_dims(c, "C") or broadcast_problem(c, out, "C")
        if problem then return problem end
      end
    end,
    forward = function(node)
      local batch, m, n, k = dims(node)
      local out = { K.bmm(batch, m, n, k, node.dtype) }
      if add_input then out[2] = K.vec("add", batch, m * k, node.dtype) end
      return out
    end,
    backward = function(node)
      local batch, m, n, k = dims(node)
      return { K.bmm(batch, m, k, n, node.dtype), K.bmm(batch, n, m, k, node.dtype) }
    end,
  }
end

---------------------------------------------------------------------------------------------------
-- Optimizer steps (ops/sgd.lua, adam.lua, adamw.lua)

--- The attrs an optimizer node carries (neusight.precision.optimizer_attrs), for the optimizer rules' `attrs`.
M.optimizer_attrs = {
  impl = "string: \"fused\" or \"foreach\" (the rule's default without it)",
  precision = "string: the precision recipe's name (for the reader)",
  convention = "string: the recipe's convention (for the reader)",
  param_bytes = "number: bytes per model parameter",
  grad_bytes = "number: bytes per gradient",
  main_grad_bytes = "number: bytes per fp32 main gradient (0: none)",
  master_bytes = "number: bytes per master parameter (0: none)",
  moment_bytes = "number: bytes per moment element",
  loss_scale = "boolean: fp16 loss scaling (an unscale and inf-check pass)",
}

--- The roles of an optimizer node { op, inputs = {{P}}, attrs from neusight.precision.optimizer_attrs }:
--- bytes per element of what the step touches, and its implementation. A node without the attrs (built by
--- hand) is "pure" in node.dtype.
---   w       the parameters the step updates: the fp32 master copy when the recipe has one, else the model's
---   g       the gradients it reads: fp32 main gradients when the recipe copies them, else the gradient buffer
---   m       one moment element (exp_avg, exp_avg_sq; also the sqrt/denominator temporary of foreach Adam)
---   copy    the 16-bit model parameters written back from the master (0 without a master)
---   grad16  fp16 gradients cast into the fp32 main gradients before the step (0 without main gradients)
---@return { rows: integer, P: integer, w: number, g: number, m: number, copy: number, grad16: number, loss_scale: boolean, impl?: string }
function M.optimizer_roles(node)
  local a = node.attrs
  local e = K.dtype_bytes(node.dtype)
  local rows, P = K.vec_shape(M.input(node, 1))
  local param, grad = a.param_bytes or e, a.grad_bytes or e
  local master, main_grad = a.master_bytes or 0, a.main_grad_bytes or 0
  return {
    rows = rows, P = P,
    w = master > 0 and master or param,
    g = main_grad > 0 and main_grad or grad,
    m = a.moment_bytes or e,
    copy = master > 0 and param or 0,
    grad16 = main_grad > 0 and grad or 0,
    loss_scale = a.loss_scale == true,
    impl = a.impl,
  }
end

--- The implementation of an optimizer node: attrs.impl, else `default`; "fused" or "foreach".
function M.optimizer_impl(node, default)
  local impl = node.attrs.impl or default
  if impl ~= "fused" and impl ~= "foreach" then
    error(("node '%s' (op '%s'): attrs.impl must be \"fused\" or \"foreach\" (got %s)")
      :format(node.name, node.op, tostring(impl)), 2)
  end
  return impl
end

--- Passes a mixed-precision recipe runs before the step (bytes per parameter in brackets):
---   MEM   fp16 gradients → fp32 main gradients            [grad16 + g]  (Megatron fp16)
---   VECmulu unscale and inf-check of the step's gradients [2·g]         (fp16 loss scaling: GradScaler.unscale_,
---         Megatron's _unscale_main_grads_and_check_for_nan)
function M.optimizer_prologue(r, dtype)
  local out = {}
  if r.grad16 > 0 then
    local k = K.mem({ { r.rows, r.P }, { r.rows, r.P } }, dtype)
    k.bytes = (r.grad16 + r.g) * r.rows * r.P
    out[#out + 1] = k
  end
  if r.loss_scale then out[#out + 1] = K.vec("mulu", r.rows, r.P, dtype, { bytes_per_elem = 2 * r.g }) end
  return out
end

--- The pass after a multi-tensor (foreach) step of a recipe with a master copy: master → 16-bit model
--- parameters [w + copy] (Megatron's _copy_main_params_to_model_params). A fused step writes the copy itself.
function M.optimizer_copy(r, dtype)
  if r.copy == 0 then return nil end
  local k = K.mem({ { r.rows, r.P }, { r.rows, r.P } }, dtype)
  k.bytes = (r.w + r.copy) * r.rows * r.P
  return k
end

--- The kernels of an Adam-family step (ops/adam.lua, ops/adamw.lua) over the optimizer node's P parameters, with
--- the element sizes of its precision recipe (rules.optimizer_roles): the recipe's fp16 prologue, then either one
--- fused kernel `name` (2w + g + 4m + copy bytes per parameter) or PyTorch's foreach passes — AdamW's decoupled
--- weight decay `mul_` on the parameters first when `decoupled` — and, with a master copy, the copy pass.
---@param node table the optimizer node
---@param name string fused kernel name: "adam" | "adamw" (neusight.kernels VEC_OPS)
---@param default_impl string "fused" | "foreach" when the node does not say
---@param decoupled boolean AdamW's weight decay pass
function M.adam_step(node, name, default_impl, decoupled)
  local r = M.optimizer_roles(node)
  local impl = M.optimizer_impl(node, default_impl)
  local rows, P, dtype, w, g, m = r.rows, r.P, node.dtype, r.w, r.g, r.m
  local out = M.optimizer_prologue(r, dtype)
  if impl == "fused" then
    out[#out + 1] = K.vec(name, rows, P, dtype, { bytes_per_elem = 2 * w + g + 4 * m + r.copy })
    return out
  end
  if decoupled then out[#out + 1] = K.vec("mulu", rows, P, dtype, { bytes_per_elem = 2 * w }) end
  for _, k in ipairs {
    K.vec("lerp", rows, P, dtype, { bytes_per_elem = 2 * m + g }),
    K.vec("mulu", rows, P, dtype, { bytes_per_elem = 2 * m }),
    K.vec("addcmul", rows, P, dtype, { bytes_per_elem = 2 * m + g }),
    K.vec("sqrt", rows, P, dtype, { bytes_per_elem = 2 * m }),
    K.vec("divu", rows, P, dtype, { bytes_per_elem = 2 * m }),
    K.vec("addu", rows, P, dtype, { bytes_per_elem = 2 * m }),
    K.vec("addcdiv", rows, P, dtype, { bytes_per_elem = 2 * w + 2 * m }),
    M.optimizer_copy(r, dtype),
  } do out[#out + 1] = k end
  return out
end

return M
