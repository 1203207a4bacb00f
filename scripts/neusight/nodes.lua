-- scripts/neusight/nodes.lua — the node list a model builder appends to: placement (layer, count), tp collectives, the HF causal-LM loss,
-- the HF decoder modules the Llama-family and DeepSeek builders share (RMSNorm, RoPE, linear, SwiGLU, embed_tokens, the
-- norm / lm_head / loss tail), and the serving phases' pieces (prefill / decode: KV-cache writes, MLA's latent cache,
-- decode attention, the last-token LM head).
local M = {}

--- A node list under construction. `g.add(op, name, inputs, output, params?, attrs?)` appends a node at the
--- current place: `g.layer` and `g.count` (the builder sets them around replicated layers; "" and 1 outside)
--- and the graph's dtype. `g.comm(op, name, shape, direction, note)` appends a tensor-parallel collective
--- through `shard` (neusight.parallel.tensor_shard) and `g.all_reduce(name, shape, direction, note)` an
--- all-reduce — both nothing without a shard (tp = 1). `g.megatron` (a builder sets it from opts.megatron): the HF
--- pieces below emit Megatron-LM's fused kernels instead of HF's eager chains (M.rms_norm, M.rope, M.glu) and
--- Megatron-Core's single linear_qkv and linear_fc1 GEMMs instead of HF's q/k/v and gate/up projections (M.qkv,
--- M.swiglu). `g.tp_in(name, shape, note)` and `g.tp_out(…)` are
--- Megatron's f and g operators around column- and row-parallel layers (below); `shape` is the full activation. Only f's
--- backward collective may run under a GEMM (its column-parallel linear's weight gradient, tp_in `column`); g's are on
--- the critical path.
---@param dtype string
---@param shard? table neusight.parallel.tensor_shard(...)
---@param sequence_parallel? boolean Megatron sequence parallelism (needs a shard with tp > 1)
function M.new(dtype, shard, sequence_parallel)
  local g = { nodes = {}, layer = "", count = 1, dtype = dtype }
  local sp = shard ~= nil and shard.tp > 1 and sequence_parallel == true
  local nodes = g.nodes
  -- The tensors g.tp_in gathered under sequence parallelism (its returned shape tables, by identity): a GEMM reading
  -- one as its x is Megatron's column-parallel linear, which saves the sequence shard and gathers it again in backward.
  local gathered = {}
  local tp = shard and shard.tp or 1
  function g.add(op, name, inputs, output, params, attrs)
    attrs = attrs or {}
    local x = (op == "linear" and inputs[1]) or (op == "addmm" and inputs[2]) or nil
    if x ~= nil and g.autocast and ((params or 0) > 0 or attrs.tied ~= nil) then
      -- torch.autocast casts the GEMM's fp32 weight to the compute dtype once per forward (M.autocast_cast)
      local w = { x[#x], output[#output] }
      nodes[#nodes + 1] = { op = "cast", name = name .. ".weight_cast", layer = g.layer, count = g.count, dtype = dtype,
        inputs = { w }, output = w, params = 0, attrs = { from = "fp32", autocast_weight = true,
          note = "torch.autocast: the fp32 weight cast once per forward (cached; its backward casts the gradient to fp32)" } }
    end
    if x ~= nil and gathered[x] then
      local marked = { sequence_shard = tp }
      for k, v in pairs(attrs) do marked[k] = v end
      attrs = marked
    end
    nodes[#nodes + 1] = {
      op = op, name = name, layer = g.layer, count = g.count, dtype = dtype,
      inputs = inputs, output = output, params = params or 0, attrs = attrs,
    }
  end
  -- f, into a column-parallel layer: all-reduce of the input gradient in backward, or with sequence parallelism
  -- an all-gather of the sharded input forward and the reduce-scatter of its gradient in backward (Megatron's
  -- column-parallel linear keeps only its input's sequence shard and re-gathers it for the weight-gradient GEMM,
  -- overlapped with the dgrad GEMM: not priced). Returns the tensor the layer reads: `read` (the gathered activation's shape as
  -- the layer sees it; default `shape`), under sequence parallelism a copy of it that marks a linear / addmm taking
  -- it as x (g.add: attrs.sequence_shard = tp, its saved input is the 1/tp shard: neusight.memory).
  -- `column`: the name of Megatron's column-parallel linear that reads the tensor (its node, added after this one; nil:
  -- none, as in a MoE layer without sequence parallelism, whose router reads the input whole). Under Megatron's kernels (the
  -- plan's kernels = "megatron") its backward launches this input-gradient all-reduce / reduce-scatter asynchronously
  -- after its dgrad GEMM and waits for it after its weight-gradient GEMM (Megatron-Core's
  -- LinearWithGradAccumulationAndAsyncCommunication): the collective node's attrs.hidden_by names it, and the timeline
  -- charges max(0, the collective − that wgrad GEMM) (neusight.parallel.timeline; README, parallel training).
  -- PyTorch's eager tensor parallelism has no such overlap: no hidden_by.
  local overlapped = shard ~= nil and type(shard.plan) == "table" and shard.plan.kernels == "megatron"
  local function hide_under(column)
    if column == nil or not overlapped then return end
    local n = nodes[#nodes]
    if n.attrs.direction ~= "backward" then
      error(("neusight.nodes: '%s' runs %s: only a backward collective runs under a weight-gradient GEMM")
        :format(n.name, tostring(n.attrs.direction)), 3)
    end
    n.attrs.hidden_by = column
    n.attrs.note = (n.attrs.note or "") .. "; under " .. column .. "'s weight-gradient GEMM (Megatron's async overlap)"
  end
  -- `column` (a backward collective only): the column-parallel linear it runs under, as tp_in's below; `dtype`: the
  -- values' element type where it is not the graph's (default g.dtype)
  function g.comm(op, name, shape, direction, note, column, dtype)
    if not shard or shard.tp == 1 then return end
    local place = dtype and { layer = g.layer, count = g.count, dtype = dtype } or g
    shard.comm(nodes, place, op, name, shape, direction, note)
    hide_under(column)
  end
  function g.all_reduce(name, shape, direction, note, column, dtype)
    g.comm("all_reduce", name, shape, direction, note, column, dtype)
  end
  -- Under torch.autocast (g.autocast) what a tp_in carries is a norm's output on the fp32 residual stream (its values
  -- forward, its input gradient backward): fp32 (M.stream_dtype); a tp_out's `dtype` names its tensor's where it is
  -- not the graph's (a vocab-parallel embedding's fp32 rows, a MoE block's fp32 final_hidden_states).
  function g.tp_in(name, shape, note, read, column)
    read = read or shape
    if not shard or shard.tp == 1 then return read end
    local dtype = g.autocast and M.stream_dtype(g) or nil
    if not sp then
      g.comm("all_reduce", name, shape, "backward", note, column, dtype)
      return read
    end
    g.comm("all_gather", name .. ".all_gather", shape, "forward", note .. " (sequence parallel: gather the shards)",
      nil, dtype)
    -- (the backward all-gather of the kept shard for the weight gradient is not a node: Megatron issues it
    -- asynchronously and it runs under the dgrad GEMM, which needs no gathered input: README, parallel training)
    g.comm("reduce_scatter", name .. ".reduce_scatter", shape, "backward", note .. " (sequence parallel)", column, dtype)
    local copy = {}
    for i = 1, #read do copy[i] = read[i] end
    gathered[copy] = true
    return copy
  end
  -- g, out of a row-parallel layer: all-reduce of the partial sums in forward, or with sequence parallelism a
  -- reduce-scatter into sequence shards (all-gather of the gradient in backward): the same bytes on the wire.
  function g.tp_out(name, shape, note, dtype)
    if not shard or shard.tp == 1 then return end
    if not sp then return g.comm("all_reduce", name, shape, "forward", note, nil, dtype) end
    g.comm("reduce_scatter", name .. ".reduce_scatter", shape, "forward", note .. " (sequence parallel: scatter the sums)",
      nil, dtype)
    g.comm("all_gather", name .. ".all_gather", shape, "backward", note .. " (sequence parallel)", nil, dtype)
  end
  return g
end

--- HF's causal-LM loss in training (unless opts.loss == false, or s = 1): logits[..., :-1, :].contiguous()
--- (a copy), then cross-entropy over b·(s−1) tokens; the labels' shift copies b·(s−1) integers and is left
--- out. In a 16-bit or fp8 graph (M.upcasts) the loss runs in fp32, as every stack runs it: HF's ForCausalLMLoss
--- (transformers ≥ 4.46; LlamaForCausalLM's forward before) upcasts the logits with logits.float(), torch.autocast
--- has cross_entropy on its fp32 list, Megatron-LM's vocab-parallel cross-entropy calls .float(). The one copy is
--- then that upcast, a cast to fp32 (reads the logits' dtype, writes fp32; its backward the gradient's cast back:
--- ops/cast.lua), and the cross-entropy node's kernels and tensors are fp32 (attrs.from: the logits' dtype,
--- ops/cross_entropy.lua) — the copy stands for HF ≥ 4.48's .float() of (b, s, V) and 4.46's .float() then shift
--- alike. With a vocab-parallel head the cross-entropy all-reduces max, sum of exp and target logit (3 values
--- per token, fp32 where the logits were upcast) forward.
---@param g table M.new()
---@param V integer vocabulary rows of this rank
function M.causal_lm_loss(g, b, s, V, opts)
  if not (opts.training and opts.loss ~= false and s > 1) then return end
  local n = b * (s - 1)
  if M.upcasts(g) then
    -- Megatron-Core's vocab-parallel cross-entropy works in place in the upcast logits, which it saves as the softmax
    -- (ops/cross_entropy.lua inplace): the cast's output is that saved buffer (ops/cast.lua output_shared)
    local inplace = opts.megatron == true or nil
    M.add_as(g, "fp32", "cast", "loss.logits_float", { { b, s - 1, V } }, { b, s - 1, V }, 0,
      { from = g.dtype, output_shared = inplace })
    M.add_as(g, "fp32", "cross_entropy", "loss", { { n, V }, { n } }, { 1 }, 0, { from = g.dtype, inplace = inplace })
  else
    g.add("contiguous", "loss.shift_logits", { { b, s - 1, V } }, { b, s - 1, V })
    g.add("cross_entropy", "loss", { { n, V }, { n } }, { 1 })
  end
  -- three values per token of the loss's own dtype: fp32 where the logits were upcast (Megatron-LM's vocab-parallel
  -- cross-entropy reduces them after .float(); they were priced at the compute dtype's 2 bytes)
  g.all_reduce("loss.tp_all_reduce", { 3, n }, "forward", "vocab-parallel cross-entropy: max, sum of exp, target logit",
    nil, M.upcasts(g) and "fp32" or nil)
end

---------------------------------------------------------------------------------------------------
-- HuggingFace decoder pieces the Llama-family and DeepSeek builders share (scripts/neusight/models/llama.lua, moe.lua via
-- llama.lua, deepseek.lua): the kernels HF's eager modules launch, appended to a node list `g` (M.new).

--- Appends a node (g.add's arguments after `node_dtype`) whose kernels run at `node_dtype` instead of the graph's.
function M.add_as(g, node_dtype, ...)
  g.add(...)
  g.nodes[#g.nodes].dtype = node_dtype
end

--- torch.autocast (g.autocast: a builder sets it from opts.autocast, neusight.workload autocast): an op on autocast's
--- lower-precision list (linear / matmul / scaled_dot_product_attention: PyTorch 2.5 aten/src/ATen/autocast_mode.cpp,
--- KERNEL_CUDA(..., lower_precision_fp)) reading an fp32 activation casts it to the compute dtype first, per call:
--- cached_cast caches only leaf tensors that require grad (the weights: g.add's weight casts), so q_proj, k_proj and
--- v_proj each cast the same fp32 normed x and each save their own 16-bit copy. Appends that cast (reads fp32, writes
--- the graph's dtype; backward the gradient cast back, ops/cast.lua) under `name` when g.autocast; nothing otherwise.
function M.autocast_cast(g, name, shape)
  if not g.autocast then return end
  g.add("cast", name, { shape }, shape, 0, { from = "fp32", note = "torch.autocast: fp32 input cast per op call" })
end

--- The dtype of the residual stream (embedding output, residual adds, the norms' outputs): fp32 under torch.autocast
--- (fp32 embedding weights; add takes its widest input; LlamaRMSNorm's fp32 weight · x promotes), else the graph's.
function M.stream_dtype(g) return g.autocast and "fp32" or g.dtype end

--- The set-up of a builder that models torch.autocast's dtype flow (the Llama family's, DeepSeek's, GPT-2's, OPT's and
--- BERT's): sets g.autocast from opts.autocast (neusight.workload: precision amp with eager kernels), never under
--- Megatron-LM's kernels (opts.megatron: its own 16-bit parameters), and returns the residual stream's dtype
--- (M.stream_dtype) and `add_as(node_dtype, op, name, ...)`, M.add_as on g.
function M.autocast_setup(g, opts)
  g.autocast = opts.autocast == true and opts.megatron ~= true
  return M.stream_dtype(g), function(node_dtype, ...) M.add_as(g, node_dtype, ...) end
end

--- attrs.input_dtypes (neusight.rules io_bytes) of an element-wise op whose operands are `first` and `second` under
--- torch.autocast (the fp32 stream plus a 16-bit branch, the 16-bit scores plus the fp32 mask: "fp32" or "dtype" for
--- the graph's compute dtype), nil otherwise (one dtype: the node's).
function M.mixed(g, first, second)
  if not g.autocast then return nil end
  local function of(d) return d == "dtype" and g.dtype or d end
  return of(first) .. "," .. of(second)
end

--- The attrs of a residual add (HF's `residual + hidden_states`: fusion.lua's fused_external; the Llama family's,
--- DeepSeek's and OPT's layers): under torch.autocast the fp32 stream plus the branch, whose dtype is `branch` ("fp32":
--- a MoE block's fp32 sum, two fp32 operands; nil: the 16-bit output of o_proj / down_proj / out_proj / fc2, M.mixed).
function M.residual_attrs(g, branch)
  return { fused_external = 1, input_dtypes = branch ~= "fp32" and M.mixed(g, "fp32", "dtype") or nil }
end

--- Whether HF's RMSNorm / router upcast to fp32 under the graph's dtype (16-bit and fp8 models: casts around them).
function M.upcasts(g) return require("neusight.kernels").dtype_bytes(g.dtype) < 4 end

--- LlamaRMSNorm (Qwen3RMSNorm, DeepseekV3RMSNorm) under prefix `p` over the last dimension `width` of `shape`:
--- hidden.to(fp32), pow(2), mean(-1), + eps, rsqrt, mul, .to(dtype), weight mul. The casts exist only when the graph
--- upcasts (M.upcasts); pow … mul then run in fp32 (their nodes carry dtype fp32).
--- `one_plus` (GemmaRMSNorm): the weight is applied as (1 + weight.float()) before the cast back: weight.float() (when
--- upcasting) and + 1 over the `width` weights, the mul in fp32, then .type_as(x).
--- Under Megatron's kernels (g.megatron, M.megatron) the norm is one fused kernel each way instead (ops/rms_norm.lua;
--- Transformer Engine's zero-centred γ for Gemma's (1 + weight)), in the graph's dtype.
function M.rms_norm(g, p, shape, width, one_plus, in_dtype)
  if g.megatron then
    g.add("rms_norm", p, { shape }, shape, 0, { note = "Megatron-Core fused RMSNorm" })
    g.add("weight", p .. ".weight", {}, { width }, width) -- γ (ops/rms_norm.lua: its accumulation, counted once under tp)
    return
  end
  -- `in_dtype`: the input's dtype (default the graph's; the fp32 residual stream under torch.autocast, M.stream_dtype)
  local dtype = in_dtype or g.dtype
  local upcast = require("neusight.kernels").dtype_bytes(dtype) < 4
  local norm_dtype = upcast and "fp32" or dtype
  -- the weight multiply: under torch.autocast the weight is an fp32 parameter (fp32 · x promotes to fp32)
  local scale_dtype = g.autocast and "fp32" or dtype
  local col = {}
  for i = 1, #shape - 1 do col[i] = shape[i] end
  col[#shape] = 1
  if upcast then M.add_as(g, "fp32", "cast", p .. ".to_fp32", { shape }, shape, 0, { from = dtype }) end
  M.add_as(g, norm_dtype, "pow", p .. ".pow", { shape }, shape)                -- hidden ** 2          VECpowu
  M.add_as(g, norm_dtype, "mean", p .. ".mean", { shape }, col)                -- .mean(-1, keepdim)   reduction
  M.add_as(g, norm_dtype, "add", p .. ".eps", { col }, col)                    -- + variance_epsilon   VECaddu
  M.add_as(g, norm_dtype, "rsqrt", p .. ".rsqrt", { col }, col)
  -- hidden · rsqrt(…): hidden is saved once, by pow (the same tensor; saved_inputs, scripts/neusight/rules.lua)
  M.add_as(g, norm_dtype, "mul", p .. ".normalize", { shape, col }, shape, 0, { saved_inputs = "2" }) --  VECmul
  if one_plus then
    g.add("weight", p .. ".weight", {}, { width }, width)
    -- weight.float(): a cast of a 16-bit weight (none of an fp32 one: torch.autocast's parameters)
    if upcast and not g.autocast then
      M.add_as(g, "fp32", "cast", p .. ".weight_fp32", { { width } }, { width }, 0, { from = dtype })
    end
    M.add_as(g, norm_dtype, "add", p .. ".one_plus", { { width } }, { width })          -- 1.0 + weight    VECaddu
    M.add_as(g, norm_dtype, "mul", p .. ".scale", { { width }, shape }, shape, 0, { saved_inputs = "2" })
    if upcast then M.add_as(g, dtype, "cast", p .. ".to_dtype", { shape }, shape, 0, { from = "fp32" }) end -- .type_as(x)
    return
  end
  if upcast then M.add_as(g, dtype, "cast", p .. ".to_dtype", { shape }, shape, 0, { from = "fp32" }) end
  g.add("weight", p .. ".weight", {}, { width }, width)
  -- weight · hidden (the weight is state) VECmul
  M.add_as(g, scale_dtype, "mul", p .. ".scale", { { width }, shape }, shape, 0, { saved_inputs = "2" })
end

--- apply_rotary_pos_emb for one of q / k under prefix `p`: x·cos + rotate_half(x)·sin, rotate_half(x) = cat(−x2, x1);
--- `heads` the (b, heads, s, d) shape, `half` its (…, d/2), `rope_table` the (b, 1, s, d) cos / sin broadcast over the
--- heads. `interleave` (DeepSeek's rope_interleave): first view(…, d/2, 2).transpose(4, 3).reshape, a copy.
--- Under Megatron's kernels (g.megatron) one fused kernel each way (ops/rope.lua; the interleaved layout is the fused
--- kernel's own, no copy).
function M.rope(g, p, heads, half, rope_table, interleave, in_dtype)
  local add = g.add
  if g.megatron then
    add("rope", p, { heads }, heads, 0, { note = "Megatron-Core fused RoPE (apply_rope_fusion)" })
    return
  end
  -- Under torch.autocast cos / sin are fp32 (HF's rotary embedding returns them in the dtype of the fp32
  -- inputs_embeds), so x · cos, x · sin and their sum are fp32 (type promotion; mul and add are on no autocast list):
  -- those nodes run in fp32 (reading x at the node's 4 bytes, an over-count of x's 2); −x2 and the cat stay in x's
  -- dtype (`in_dtype`, default the graph's).
  local x_dtype = in_dtype or g.dtype
  local out_dtype = g.autocast and "fp32" or x_dtype
  if interleave then M.add_as(g, x_dtype, "contiguous", p .. ".interleave", { heads }, heads) end
  -- x · cos saves cos only (x's gradient needs it; cos has none), one table shared by every layer: not counted
  local mixed = g.autocast and x_dtype ~= "fp32" and (x_dtype .. ",fp32") or nil -- x in its dtype, cos / sin fp32
  M.add_as(g, out_dtype, "mul", p .. ".cos", { heads, rope_table }, heads, 0, { saved_inputs = "", input_dtypes = mixed })
  M.add_as(g, x_dtype, "mul", p .. ".neg", { half }, half)                          -- −x2: neg (as VECmulu)
  M.add_as(g, x_dtype, "contiguous", p .. ".rotate_half", { half, half }, heads)    -- torch.cat((−x2, x1), -1)
  M.add_as(g, out_dtype, "mul", p .. ".sin", { heads, rope_table }, heads, 0, { saved_inputs = "", input_dtypes = mixed })
  M.add_as(g, out_dtype, "add", p .. ".add", { heads, heads }, heads)
end

--- nn.Linear(in_f, out_f) on `input` into `out`; `shared`: the input is the one an earlier linear already saves (q/k/v
--- projections reading the same normed x): saved once. `extra`: more attributes of the node (copied).
function M.linear(g, name, input, in_f, out_f, out, bias, shared, extra)
  local attrs = { bias = bias, saved_inputs = shared and "" or nil }
  for k, v in pairs(extra or {}) do attrs[k] = v end
  g.add("linear", name, { input }, out, in_f * out_f + (bias and out_f or 0), attrs)
end

--- The q, k and v projections of `heads` query and `kv_heads` key/value heads of `head_dim` on `input` (…, h) under
--- prefix `a`, `bias` on all three: HF's q_proj, k_proj, v_proj (three GEMMs into `q_flat`, `kv_flat`; k and v read the
--- input q saves), or one GEMM qkv_proj of (heads + 2 · kv_heads) · head_dim outputs whose views q, k and v are — Phi-3's
--- qkv_proj (`fused`) and Megatron-Core's linear_qkv (g.megatron: one column-parallel GEMM each way, dgrad and wgrad,
--- whatever the model's checkpoint keeps). The same parameters and FLOPs either way. `copies` (Megatron's layout when
--- tp is a multiple of num_key_value_heads: the rank's one key/value head is every tp / num_key_value_heads ranks'):
--- the fused node's attrs.model_flops_copies, tp · its width / the model's (neusight.parallel.shard mark_replicated
--- marks the separate k_proj / v_proj by themselves; the fused node is split in q and replicated in k / v).
function M.qkv(g, a, input, h, heads, kv_heads, head_dim, q_flat, kv_flat, bias, fused, copies)
  if fused or g.megatron then
    local width = (heads + 2 * kv_heads) * head_dim
    local out = {}
    for i = 1, #q_flat - 1 do out[i] = q_flat[i] end
    out[#q_flat] = width
    M.autocast_cast(g, a .. ".qkv_proj.input_cast", input)
    M.linear(g, a .. ".qkv_proj", input, h, width, out, bias, false, {
      model_flops_copies = copies ~= nil and copies ~= 1 and copies or nil,
      note = not fused and "Megatron-Core linear_qkv: q, k and v in one GEMM" or nil })
    return
  end
  -- under torch.autocast each projection casts the fp32 normed x itself and saves its own copy (M.autocast_cast)
  local shared = not g.autocast
  M.autocast_cast(g, a .. ".q_proj.input_cast", input)
  M.linear(g, a .. ".q_proj", input, h, heads * head_dim, q_flat, bias)
  M.autocast_cast(g, a .. ".k_proj.input_cast", input)
  M.linear(g, a .. ".k_proj", input, h, kv_heads * head_dim, kv_flat, bias, shared)
  M.autocast_cast(g, a .. ".v_proj.input_cast", input)
  M.linear(g, a .. ".v_proj", input, h, kv_heads * head_dim, kv_flat, bias, shared)
end

--- The SwiGLU MLP under prefix `m`, down(silu(gate(x)) · up(x)), on `input` (…, h) with `width` = this rank's
--- intermediate size and `mid` the (…, width) shape; `names` the three projections (default gate_proj, up_proj,
--- down_proj; Mixtral's experts: w1, w3, w2) and `attrs` extra attributes of the three linears (experts).
--- `variant`: act = "gelu" (Gemma's GeGLU: one F.gelu kernel, ops/gelu.lua; default "silu"), fused = true (Phi-3's
--- gate_up_proj: one GEMM to 2 · width, gate and up its two halves, views). Under Megatron's kernels (g.megatron)
--- gate and up are always one GEMM, Megatron-Core's linear_fc1 of 2 · width outputs (gated_linear_unit: dense MLPs,
--- shared experts and SequentialMLP's experts alike), and the activation and mul one fused kernel (M.glu).
function M.swiglu(g, m, input, mid, h, width, bias, names, attrs, variant)
  local gate, up, down = "gate_proj", "up_proj", "down_proj"
  if names then gate, up, down = names[1], names[2], names[3] end
  local function lin(name, from, to, in_f, out_f, shared, note)
    local a = { bias = bias, saved_inputs = shared and "" or nil, note = note } -- up reads the input gate already saves
    for k, v in pairs(attrs or {}) do a[k] = v end
    g.add("linear", m .. "." .. name, { from }, to, in_f * out_f + (bias and out_f or 0), a)
  end
  local act = variant and variant.act or "silu"
  local fused = variant ~= nil and variant.fused == true
  if fused or g.megatron then
    local both = {}
    for i = 1, #mid - 1 do both[i] = mid[i] end
    both[#mid] = 2 * width
    M.autocast_cast(g, m .. ".gate_up_proj.input_cast", input)
    lin("gate_up_proj", input, both, h, 2 * width, false,
      not fused and "Megatron-Core linear_fc1: gate and up in one GEMM" or nil)
    M.glu(g, m, mid, act)
  else -- HF's eager order: act_fn(gate_proj(x)) · up_proj(x)
    M.autocast_cast(g, m .. "." .. gate .. ".input_cast", input)
    lin(gate, input, mid, h, width)
    g.add(act, m .. ".act_fn", { mid }, mid)
    M.autocast_cast(g, m .. "." .. up .. ".input_cast", input) -- autocast: up casts (and saves) its own copy
    lin(up, input, mid, h, width, not g.autocast)
    g.add("mul", m .. ".mul", { mid, mid }, mid)
  end
  lin(down, mid, input, width, h)
end

-- Megatron's fused gated activations (megatron/core/fusions: fused_bias_swiglu.py, fused_bias_geglu.py), by HF's
-- activation: the op rule (ops/swiglu.lua, ops/geglu.lua) and the node's note.
local FUSED_GLU = {
  silu = { op = "swiglu", note = "Megatron-LM fused SwiGLU (bias_swiglu_impl)" },
  gelu = { op = "geglu", note = "Megatron-LM fused GeGLU (bias_geglu_impl)" },
}

--- The gated activation act(gate) · up over `mid` under prefix `m`, gate and up already computed: HF's act_fn and
--- mul kernels, or under Megatron's kernels (g.megatron) one fused kernel each way: SwiGLU for SiLU (ops/swiglu.lua,
--- Megatron-LM's bias_swiglu fusion, on by default with --swiglu), GeGLU for Gemma's GELU (ops/geglu.lua,
--- bias_geglu; Megatron's MLP takes it for F.gelu with gated_linear_unit and bias_activation_fusion).
function M.glu(g, m, mid, act)
  local fused = g.megatron and FUSED_GLU[act] or nil
  if fused then
    g.add(fused.op, m .. "." .. fused.op, { mid, mid }, mid, 0, { note = fused.note })
    return
  end
  g.add(act, m .. ".act_fn", { mid }, mid)
  g.add("mul", m .. ".mul", { mid, mid }, mid)
end

--- embed_tokens (nn.Embedding(V, h), vocab-parallel under tp: the ranks' partial lookups summed) into `x` = (b, s, h);
--- `V` this rank's vocabulary rows.
function M.embed_tokens(g, x, V)
  local h = x[3]
  -- (fp32 rows under torch.autocast: the embedding's fp32 weight, embedding on no autocast list)
  M.add_as(g, M.stream_dtype(g), "embedding", "embed_tokens", { { x[1], x[2] } }, x, V * h,
    { num_embeddings = V, embedding_dim = h })
  g.tp_out("embed_tokens.tp_out", x, "vocab-parallel embedding: sum of the ranks' partial lookups", M.stream_dtype(g))
end

--- The decoder's tail, outside the layers: the final RMSNorm ("norm") on the residual stream `xs`, lm_head (tied to
--- embed_tokens when `tied`: no parameters of its own; vocab-parallel under tp, `V` this rank's rows) on `x` (prefill:
--- the last token, M.lm_head_input) and, in training, the causal-LM loss (M.causal_lm_loss). `variant`: one_plus =
--- Gemma's norm (M.rms_norm), softcap = Gemma2's final_logit_softcapping (three elementwise kernels over the logits).
function M.causal_lm_head(g, serve, x, xs, V, tied, opts, variant)
  local b, s, h = x[1], x[2], x[3]
  g.layer, g.count = "", 1
  M.rms_norm(g, "norm", xs, h, variant and variant.one_plus, M.stream_dtype(g))
  local head_in = M.lm_head_input(g, serve,
    g.tp_in("lm_head.tp_in", x, "f: input gradient of the vocab-parallel lm_head", nil, "lm_head"))
  local logits = { b, head_in[2], V }
  M.autocast_cast(g, "lm_head.input_cast", head_in)
  g.add("linear", "lm_head", { head_in }, logits, tied and 0 or h * V,
    { bias = false, tied = tied and "embed_tokens" or nil })
  if variant and variant.softcap then -- Gemma2's final_logit_softcapping: logits / cap, tanh, · cap
    g.add("div", "final_softcap.div", { logits }, logits)
    g.add("tanh", "final_softcap.tanh", { logits }, logits)
    g.add("mul", "final_softcap.mul", { logits }, logits)
  end
  M.causal_lm_loss(g, b, s, V, opts)
end

---------------------------------------------------------------------------------------------------
-- Serving phases (workload mode "prefill" / "decode", passed to builders as opts.phase and opts.context)
--
-- prefill: B prompts of S tokens through the model once (the inference graph), writing each layer's K and V into
-- the KV cache (one copy kernel per layer, vLLM's reshape_and_cache), and the LM head on the last token of each
-- prompt only (B rows, not B·S: what serving engines sample from).
-- decode: one new token for each of B sequences whose caches hold C tokens: every linear on B rows, the new
-- token's K/V appended to the cache (a small copy), one decode_attention node per layer over C + 1 cached tokens
-- (ops/decode_attention.lua) with the model's kv heads (this rank's under tensor parallelism), LM head on B rows.
-- No loss and no backward in either phase.

--- The serving phase of a build: nil for train / inference, else { phase, s = query tokens per sequence (S in
--- prefill, 1 in decode), kv = KV-cache tokens attended and held per sequence (S in prefill, C + 1 in decode),
--- kv_dtype = the cache's element type (opts.kv_dtype, workload field kv_dtype; nil = the compute dtype) }.
--- Builders set g.kv_dtype = serve.kv_dtype: kv_cache_write and decode_attention read it (M.kv_dtype).
--- Errors name the model (`who`); `max_positions` (a learned position table) bounds the cache.
---@param opts table builder options (phase, context, seq)
---@param who string
---@param max_positions? integer
---@param max_name? string
function M.serving(opts, who, max_positions, max_name)
  local phase = opts.phase
  if phase == nil then return nil end
  if phase == "prefill" then
    return { phase = phase, s = opts.seq, kv = opts.seq, kv_dtype = opts.kv_dtype }
  elseif phase ~= "decode" then
    error(("%s: option 'phase' must be \"prefill\" or \"decode\" (got %s)"):format(who, tostring(phase)), 0)
  end
  local C = opts.context
  if type(C) ~= "number" or C < 1 or C ~= math.floor(C) then
    error(("%s: decode needs option 'context', a positive integer (got %s)"):format(who, tostring(C)), 0)
  end
  if opts.seq ~= nil and opts.seq ~= 1 then
    error(("%s: decode runs one new token per sequence: option 'seq' must be 1 (got %s)"):format(who, tostring(opts.seq)), 0)
  end
  local check = require("neusight.models.check")
  local n, text = check.positions(opts.seq or 1, C)
  check.position_limit(who, n, text, max_positions, max_name)
  return { phase = phase, s = 1, kv = C + 1, kv_dtype = opts.kv_dtype }
end

--- The KV cache's element type of a graph: g.kv_dtype (the workload's kv_dtype, set by the builder from
--- M.serving) or the graph's dtype. The one place the cache's element size comes from.
function M.kv_dtype(g) return g.kv_dtype or g.dtype end

--- The tokens per sequence a layer's KV cache holds after a serving step that leaves `tokens` tokens in the sequence
--- (prefill: the prompt's S; decode: context + 1): all of them, or min(tokens, window) for a sliding-window layer
--- (`window` its sliding_window, nil for a full-attention layer). The one rule for both phases (the builders' cache
--- writes, serve's paging): a windowed layer never attends to a token older than the window again, and the servers keep
--- no more: vLLM frees (V1's sliding-window manager) or never allocates (V0's block manager, at most the window's
--- blocks per prompt) the blocks behind the window, HF's sliding-window cache layers keep the last window's tokens.
--- The prompt's other K/V are written by the prefill kernels (kv_cache_write's copy of all S tokens) and then dropped:
--- transient, not a cache the step leaves resident.
---@param tokens integer
---@param window? integer
---@return integer
function M.kv_cache_tokens(tokens, window)
  if window ~= nil and window < tokens then return window end
  return tokens
end

--- The KV-cache write of one layer: K and V of the `new` tokens ([b, kv_heads, new, head_dim] each) copied into
--- the cache (op setitem: cache[..., pos] = k), one kernel. attrs.kv_cache_bytes = the layer's cache of
--- `cache_tokens` tokens per sequence, 2 · b · kv_heads · cache_tokens · head_dim · KV dtype bytes (per rank):
--- neusight.workload sums it over the graph (× count) into the report's kv_cache_gb. (DeepSeek's MLA caches a
--- latent instead: M.latent_cache_write.)
--- `window` (sliding-window attention only): { tokens = W, layers = n }, n of the node's `count` layers keep at most W
--- tokens cached (attrs.kv_window, attrs.kv_windowed_layers; this graph's cache_tokens already is min(·, W) where
--- the builder caps it): what neusight.workload kv_cache_window reads, serve's paged KV accounting.
function M.kv_cache_write(g, name, b, kv_heads, new, head_dim, cache_tokens, window)
  local k = { b, kv_heads, new, head_dim }
  local kvd = M.kv_dtype(g)
  local bytes = 2 * b * kv_heads * cache_tokens * head_dim * require("neusight.kernels").dtype_bytes(kvd)
  g.add("setitem", name, { k, k }, { 2, b, kv_heads, new, head_dim }, 0, {
    kv_cache_bytes = bytes, kv_cache_tokens = cache_tokens, kv_dtype = kvd ~= g.dtype and kvd or nil,
    kv_window = window and window.tokens or nil, kv_windowed_layers = window and window.layers or nil,
    note = ("append K and V of %d token(s) per sequence to a KV cache of %d%s"):format(new, cache_tokens,
      kvd ~= g.dtype and " (" .. kvd .. ")" or "") })
end

--- HF's KV cache in a plain forward pass (mode "inference": model(input_ids) under no_grad, as
--- scripts/collect/hf_trace.py runs it): use_cache defaults to the config's True, so every layer's K and V of the S
--- tokens ([b, kv_heads, S, head_dim] each; `v_head_dim` for V where it differs) stay referenced by the returned
--- past_key_values (a DynamicCache; a (key, value) tuple per layer in older transformers) until the forward returns,
--- beside the LM head's logits. Set as attrs.kv_cache_bytes (at the dtype of `node`, the one that makes K) of the
--- layer's node `node`, so that neusight.workload kv_cache_bytes counts it (× the node's layers) into the report's
--- kv_cache_gb and the memory model's kv_cache part. No kernel is added: transformers 5 appends by torch.cat, a copy
--- (`aten::cat` of [0] and K in tests/fixtures/traces/hf/mixtral-bf16-inference.json), older releases keep the
--- tensors themselves. Nothing in the serving phases (their own cache writes above) or under Megatron-LM's kernels
--- (opts.megatron: no cache in a forward without inference parameters), nor for a config.json that says
--- "use_cache": false (opts.use_cache, neusight.models.hf use_cache).
--- Training (HF's LlamaModel.forward: use_cache is turned off only under gradient checkpointing, so a plain
--- `out = model(ids, labels=ids); out.loss.backward()`, scripts/collect/hf_trace.py's, keeps the DynamicCache in `out`
--- through the backward): counted where those tensors are not saved for backward anyway, i.e. eager attention with
--- grouped-query heads (`heads` > kv_heads): autograd keeps repeat_kv's copies, the cache the un-repeated rotated K and
--- V. With one kv head per query head eager attention's matmuls save K and V themselves, and sdpa saves the
--- un-repeated ones it is given (the graph's), so the cache adds nothing there. Only a plain one-GPU run (no
--- opts.parallel: a plan's recomputation is gradient checkpointing, which turns use_cache off).
--- Counted whole: a peak in an early layer (eager attention's scores) has only the earlier layers' cache beside it.
function M.hf_cache(opts, node, b, kv_heads, tokens, head_dim, v_head_dim, heads, v_dtype)
  if opts.phase ~= nil or opts.megatron or opts.use_cache == false then return end
  if opts.training and not (opts.attention == "eager" and heads and kv_heads < heads and opts.parallel == nil) then
    return
  end
  -- K in the dtype of `node` (the rotated K: fp32 under torch.autocast, neusight.nodes rope), V in `v_dtype` (default
  -- the same; the compute dtype of v_proj's output under autocast)
  local K = require "neusight.kernels"
  node.attrs.kv_cache_bytes = b * kv_heads * tokens * (head_dim * K.dtype_bytes(node.dtype)
    + (v_head_dim or head_dim) * K.dtype_bytes(v_dtype or node.dtype))
  node.attrs.kv_cache_tokens = tokens
end

--- The KV-cache write of one layer of multi-head latent attention (DeepSeek's MLA as serving engines cache it: vLLM's
--- concat_and_cache_mla, SGLang / FlashMLA): per token one compressed latent of `latent` values (kv_lora_rank, after its
--- RMSNorm) and the rotary key of `rope` values (qk_rope_head_dim, after RoPE, shared by every head) — not per-head K
--- and V. Inputs [b, new, latent] and [b, 1, new, rope], one copy kernel into [b, new, latent + rope].
--- attrs.kv_cache_bytes = b · cache_tokens · (latent + rope) · KV dtype bytes: the same on every tensor-parallel rank
--- (the latent belongs to no head: each rank caches all of it, as vLLM's MLA under tp does).
function M.latent_cache_write(g, name, b, new, latent, rope, cache_tokens)
  local width = latent + rope
  local kvd = M.kv_dtype(g)
  local bytes = b * cache_tokens * width * require("neusight.kernels").dtype_bytes(kvd)
  g.add("setitem", name, { { b, new, latent }, { b, 1, new, rope } }, { b, new, width }, 0, {
    kv_cache_bytes = bytes, kv_cache_tokens = cache_tokens, kv_dtype = kvd ~= g.dtype and kvd or nil,
    note = ("append the latent (%d) and rotary key (%d) of %d token(s) per sequence to a latent cache of %d%s")
      :format(latent, rope, new, cache_tokens, kvd ~= g.dtype and " (" .. kvd .. ")" or "") })
end

--- Decode attention of one layer: Q [b, heads, 1, d] over the cache K, V [b, kv_heads, kv, d] (ops/decode_attention.lua);
--- `v_head_dim` (default head_dim): V's and the output's head dim when it differs (DeepSeek's latent attention).
--- `latent`: V is the first v_head_dim values of each cached K row (MLA with absorbed weights: one cache read as both,
--- attrs.latent; ops/decode_attention.lua then reads the cache once).
function M.decode_attention(g, name, b, heads, kv_heads, head_dim, kv, v_head_dim, latent)
  local dv = v_head_dim or head_dim
  local cache = { b, kv_heads, kv, head_dim }
  local v = dv == head_dim and cache or { b, kv_heads, kv, dv }
  local kvd = M.kv_dtype(g)
  g.add("decode_attention", name, { { b, heads, 1, head_dim }, cache, v }, { b, heads, 1, dv }, 0,
    { note = ("%s over %d cached tokens%s"):format(latent and "MLA decode (FlashMLA-style, one latent cache)"
      or "FlashDecoding", kv, kvd ~= g.dtype and " (" .. kvd .. " cache)" or ""),
      kv_dtype = kvd ~= g.dtype and kvd or nil, latent = latent or nil })
end

--- Prefill's LM-head input: the last token of each prompt, hidden[:, -1:, :] (a [b, 1, h] copy); returns its shape.
--- Any other phase: `x` itself (every position goes through the LM head).
function M.lm_head_input(g, serve, x)
  if not serve or serve.phase ~= "prefill" or x[2] == 1 then return x end
  local last = { x[1], 1, x[3] }
  g.add("getitem", "lm_head.last_token", { last }, last, 0, { note = "prefill: the LM head runs on each prompt's last token" })
  return last
end

return M
