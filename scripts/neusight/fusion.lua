-- scripts/neusight/fusion.lua — torch.compile-style fusion: a graph pass over the node list, run before expansion.
--
-- Inference only (workload.lua refuses `fusion` in training: torch.compile's backward fusion is not modelled).
-- The pass walks the nodes in the order the model builders emit them; our graphs carry no edges, so "node i's
-- output feeds node i+1" is read from the order (consecutive nodes of the same layer and count):
--
--   * metadata nodes (view, permute, …; no kernel) are transparent;
--   * a maximal run of element-wise nodes (ops whose rule says fusion = "elementwise": rules.elementwise's, getitem,
--     where, dropout, pow, tanh, rsqrt; a user's rule too) becomes ONE node, op "fused_elementwise": one kernel that
--     reads the run's external inputs once and writes its final output once (intermediates stay on chip);
--   * row-wise kernels whose rule says fusion = "anchor" (softmax and layernorm) stay one kernel each (they already are in eager mode) but absorb the element-wise
--     run just before them (Inductor fuses the attention scale + causal-mask select into the softmax, and the
--     residual add into the layer norm) and the element-wise run just after them (eval-mode dropout). The
--     fused node keeps op "fused_elementwise" with attrs.anchor = "softmax" | "layernorm"; the kernel is that
--     family's with the group's bytes and FLOPs. One anchor per group; GEMMs/BMMs are never fused.
--   * with `fusion = { flash_attention = true }` (CLI --flash-attention) every matmul → {EW, softmax}* → matmul
--     attention block becomes one "flash_attention" node (Q, Kᵀ, V inputs, O output). Plain `fusion = true`
--     keeps the two BMMs: torch.compile of HF's eager attention does not emit a FlashAttention kernel.
--
-- External inputs of a run: every tensor operand (more than one element) of its first node; for later nodes,
-- operands whose shape matches no value already in the run (the run's inputs and outputs so far), or, when a
-- builder knows better, the `attrs.fused_external` last operands (a residual add: the second x is the
-- residual stream, not the running value). Single-node runs are left as they are.
-- A fused kernel is never priced above its members priced unfused and summed (M.cap, which neusight.pipeline runs on
-- the run's latencies with M.apply's `members`; weights/FUSION_CAP_RULE.md).
-- What a member adds to the fused kernel comes from its op's rule in force (an --ops override included): the FLOPs of
-- its forward kernels and, for the kernel's name, the element-wise op of the last one that computes.
local K = require "neusight.kernels"
local ipairs, type, concat, min, tostring = ipairs, type, table.concat, math.min, tostring

local M = {}

-- Metadata ops (no kernel) are transparent: they are kept in place and neither join nor break a run.
local META = { view = true, reshape = true, permute = true, transpose = true, split = true, size = true }

-- The rule of op `name` in force, or nil for an op without one (a rule file that fails to load raises).
local function rule_of(name)
  return require("neusight").op_rule_or_nil(name)
end

-- How op `name` fuses: "elementwise", "anchor" (its rule's field `fusion`) or nil (it does not).
local function fusion_of(name)
  local rule = rule_of(name)
  return rule and rule.fusion or nil
end

-- The inference forward kernels of node `n` by its op's rule, as the engine would expand them (neusight.Node fields).
local function forward_kernels(n)
  local node = {}
  for k, v in pairs(n) do node[k] = v end
  node.training, node.phase, node.attrs = false, "forward", n.attrs or {}
  node.dtype_bytes = K.dtype_bytes(n.dtype)
  local rule = rule_of(n.op)
  local ok, kernels = pcall(rule.forward, node)
  if not ok then error(tostring(kernels) .. "\n    while fusing node '" .. tostring(n.name) .. "' (op '" .. n.op .. "')", 0) end
  return kernels
end

-- A member's FLOPs and representative element-wise op (nil when no kernel of it computes): the sum of its forward
-- kernels' FLOPs and the op of the last one that computes, a one-tensor variant under its binary name (mulu → mul: the
-- fused kernel reads the run's inputs, whatever a member's operands). An element-wise member whose rule returns a
-- GEMM or attention kernel cannot be one pass over the elements: an error naming the rule.
local function member_work(n, anchor)
  local flops, rep = 0, nil
  local kernels = forward_kernels(n)
  for _, k in ipairs(kernels) do
    local kind = k.kind
    local ok = kind == "elementwise" or kind == "memory" or (anchor and (kind == "softmax" or kind == "layernorm"))
    if not ok then
      error(("op '%s': its rule says fusion = \"%s\" but its forward returns a %s kernel (%s): fusion makes one "
        .. "pass over the elements of a run"):format(n.op, anchor and "anchor" or "elementwise", tostring(kind),
        tostring(k.name)), 0)
    end
    flops = flops + (k.flops or 0)
    if kind == "elementwise" and (k.flops or 0) > 0 then
      local op = k.op
      local base = type(op) == "string" and op:match("^(.-)u$")
      if base and K.vec_ops[base] then op = base end
      rep = op
    end
  end
  return flops, rep, kernels
end

local function key(shape) return concat(shape, "x") end

local function same_place(a, b) return a.layer == b.layer and a.count == b.count and a.dtype == b.dtype end

-- Folds the nodes group[1..n] into one fused_elementwise node.
-- The KV cache a group's members hold (attrs.kv_cache_bytes: neusight.nodes hf_cache, HF's past_key_values of an
-- inference forward, on the node that makes K), summed: the fused node keeps it for the memory model (nil: none).
local function cache_of(group)
  local kv
  for _, n in ipairs(group) do
    local b = n.attrs and n.attrs.kv_cache_bytes
    if type(b) == "number" then kv = (kv or 0) + b end
  end
  return kv
end

-- Also returns the members' forward kernels, unfused (M.apply's `members`).
local function fuse_group(group)
  local first, last = group[1], group[#group]
  local seen, inputs, names, flops, params, kernels = {}, {}, {}, 0, 0, {}
  local anchor, rep, out = nil, nil, last.output
  for i, n in ipairs(group) do
    names[i] = n.name
    params = params + (n.params or 0)
    local tensors = {}
    for _, s in ipairs(n.inputs) do
      if K.numel(s) > 1 then tensors[#tensors + 1] = s end
    end
    local forced = i > 1 and n.attrs and n.attrs.fused_external
    for j, s in ipairs(tensors) do
      local external
      if i == 1 then external = true
      elseif forced then external = j > #tensors - min(forced, #tensors)
      else external = not seen[key(s)] end
      if external then
        inputs[#inputs + 1] = s
        seen[key(s)] = true
      end
    end
    seen[key(n.output)] = true
    local is_anchor = fusion_of(n.op) == "anchor"
    local f, r, ks = member_work(n, is_anchor)
    for _, k in ipairs(ks) do kernels[#kernels + 1] = k end
    flops = flops + f
    if is_anchor then anchor, out = n.op, n.output
    elseif r then rep = r end
  end
  local attrs = { fused = concat(names, ","), flops = flops }
  if anchor then attrs.anchor = anchor end
  if rep then attrs.rep = rep end
  -- the model FLOPs' attributes (engine/core/forecast.h phase_model_flops) where every member has the same: a group of
  -- nodes every tp rank runs whole stays one the model FLOPs count once. Members that differ (none today: an
  -- element-wise chain does not cross a split) leave the group's unset, counted as a split node's
  for _, k in ipairs { "model_flops_copies", "model_flops_share", "model_flops_shards", "model_flops_weight_copies" } do
    local v = first.attrs and first.attrs[k]
    for _, n in ipairs(group) do
      if not (n.attrs and n.attrs[k] == v) then v = nil end
    end
    attrs[k] = v
  end
  attrs.kv_cache_bytes = cache_of(group)
  return {
    op = "fused_elementwise", name = first.name .. "~" .. last.name, layer = first.layer, count = first.count,
    dtype = first.dtype, inputs = inputs, output = out, params = params, attrs = attrs,
  }, kernels
end

-- The attention block starting at nodes[i] (a matmul): returns the index of the closing matmul or nil.
local function attention_end(nodes, i)
  local qk = nodes[i]
  if qk.op ~= "matmul" or #qk.inputs ~= 2 or #qk.inputs[1] < 3 then return nil end
  local softmax = false
  for j = i + 1, #nodes do
    local n = nodes[j]
    if not same_place(qk, n) then return nil end
    if n.op == "matmul" then return softmax and j or nil end
    if n.op == "softmax" then softmax = true
    elseif fusion_of(n.op) ~= "elementwise" then return nil end
  end
  return nil
end

-- The FlashAttention node of the block nodes[i..j], and its members' forward kernels, unfused (M.apply's `members`).
local function flash_node(nodes, i, j)
  local qk, pv = nodes[i], nodes[j]
  local names, params, kernels = {}, 0, {}
  for t = i, j do
    names[#names + 1] = nodes[t].name
    params = params + (nodes[t].params or 0)
    for _, k in ipairs(forward_kernels(nodes[t])) do kernels[#kernels + 1] = k end
  end
  return {
    op = "flash_attention", name = qk.name .. "~" .. pv.name, layer = qk.layer, count = qk.count, dtype = qk.dtype,
    inputs = { qk.inputs[1], qk.inputs[2], pv.inputs[2] }, output = pv.output, params = params,
    attrs = { fused = concat(names, ","), kv_cache_bytes = cache_of({ table.unpack(nodes, i, j) }) },
  }, kernels
end

--- Normalises a workload's `fusion` value: nil/false → nil, true → {}, "flash_attention" → { flash_attention = true }.
function M.options(v)
  if v == nil or v == false then return nil end
  if v == true then return { flash_attention = false } end
  if v == "flash_attention" then return { flash_attention = true } end
  return { flash_attention = v.flash_attention == true }
end

--- Returns a new node list with the fusion rules applied (the input nodes are not modified) and `members`: for each
--- fused node, by name, the forward kernels its members run unfused (each as its op rule expands it): what
--- neusight.pipeline prices beside the fused kernel, which is never priced above their sum (M.cap).
---@param nodes neusight.Node[]
---@param opts? { flash_attention?: boolean }
---@return neusight.Node[] nodes
---@return table<string, neusight.Kernel[]> members
function M.apply(nodes, opts)
  opts = opts or {}
  local out, group, members = {}, {}, {}
  local function put(node, kernels)
    out[#out + 1] = node
    members[node.name] = kernels
  end
  local function flush()
    if #group == 1 then out[#out + 1] = group[1]
    elseif #group > 1 then put(fuse_group(group)) end
    group = {}
  end
  local function has_anchor()
    for _, n in ipairs(group) do if fusion_of(n.op) == "anchor" then return true end end
    return false
  end
  local i = 1
  while i <= #nodes do
    local n = nodes[i]
    local j = opts.flash_attention and attention_end(nodes, i)
    if j then
      flush()
      put(flash_node(nodes, i, j))
      i = j + 1
    elseif META[n.op] then
      out[#out + 1] = n
      i = i + 1
    else
      local how = fusion_of(n.op)
      local fusable = how ~= nil and not n.optimizer and n.phase == nil
      if not fusable or (#group > 0 and not same_place(group[1], n)) or (how == "anchor" and has_anchor()) then
        flush()
      end
      if fusable then group[#group + 1] = n else out[#out + 1] = n end
      i = i + 1
    end
  end
  flush()
  return out, members
end

-- The fields of a run's kernel (neusight.pipeline run.kernels()) a predictor prices: all but its node's.
local NODE_FIELDS = { node = true, layer = true, count = true, phase = true }

--- The bound on a fused kernel: one launch doing its members' work, reading and writing less, is priced no slower than
--- the members priced unfused and summed (torch.compile would not emit a fusion slower than the kernels it replaces;
--- weights/FUSION_CAP_RULE.md). `kernels`, `seconds`: a run's kernels and per-launch seconds (run.kernels(),
--- run.latencies()); `members`: M.apply's; `price(kernels)` → the predictor's seconds of each (ns.predict with the
--- run's GPU and predictor). A fused node whose forward kernels the predictor prices above its members' sum has its
--- seconds scaled by sum / fused (what the run put on top of the predictor's price — launch mode, calibration — carries
--- over). Returns the seconds (a new array; `seconds` itself when no kernel is a fused node's) and, by fused node name,
--- { fused_s, members_s } of the ones capped (the predictor's per-launch seconds), nil when none is.
function M.cap(kernels, seconds, members, price)
  local order, at = {}, {}  -- fused nodes in kernel order; at[name] = { kernel indices }
  for i, k in ipairs(kernels) do
    if k.phase == "forward" and members[k.node] then
      if not at[k.node] then
        at[k.node] = {}
        order[#order + 1] = k.node
      end
      local list = at[k.node]
      list[#list + 1] = i
    end
  end
  if #order == 0 then return seconds, nil end
  local batch, span = {}, {}  -- span[name] = { first fused, last fused, first member, last member } in `batch`
  for _, name in ipairs(order) do
    local sp = { #batch + 1 }
    for _, i in ipairs(at[name]) do
      local k = {}
      for f, v in pairs(kernels[i]) do
        if not NODE_FIELDS[f] then k[f] = v end
      end
      batch[#batch + 1] = k
    end
    sp[2], sp[3] = #batch, #batch + 1
    for _, k in ipairs(members[name]) do batch[#batch + 1] = k end
    sp[4] = #batch
    span[name] = sp
  end
  local priced = price(batch)
  local function sum(a, b)
    local s = 0
    for i = a, b do s = s + priced[i] end
    return s
  end
  local out, capped = {}, nil
  for i, s in ipairs(seconds) do out[i] = s end
  for _, name in ipairs(order) do
    local sp = span[name]
    local fused, parts = sum(sp[1], sp[2]), sum(sp[3], sp[4])
    if fused > parts and fused > 0 then
      for _, i in ipairs(at[name]) do out[i] = out[i] * (parts / fused) end
      capped = capped or {}
      capped[name] = { fused_s = fused, members_s = parts }
    end
  end
  return out, capped
end

--- Summary of the fused nodes: array of { name, op, members = { names… } }.
function M.groups(nodes)
  local list = {}
  for _, n in ipairs(nodes) do
    if n.attrs and type(n.attrs.fused) == "string" then
      local members = {}
      for m in n.attrs.fused:gmatch("[^,]+") do members[#members + 1] = m end
      list[#list + 1] = { name = n.name, op = n.op, members = members }
    end
  end
  return list
end

return M
