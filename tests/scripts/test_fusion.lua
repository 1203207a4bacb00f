-- tests/scripts/test_fusion.lua — scripts/neusight/fusion.lua (graph pass) and the fused op rules against closed forms.
local K = require "neusight.kernels"
local fusion = require "neusight.fusion"
local workload = require "neusight.workload"

local function eq(got, want, what)
  if got ~= want then error(("%s:\n  expected %s\n  got      %s"):format(what, tostring(want), tostring(got)), 2) end
end

-- Forward kernels of a node produced by the pass, through its op rule (inference).
local function forward(n)
  local node = make_node(n)
  node.training = false
  return load_op(n.op).forward(node, {})
end

local function ew(op, name, inputs, output)
  return { op = op, name = name, layer = "h", count = 36, dtype = "fp32", inputs = inputs, output = output,
           params = 0, attrs = {} }
end

local act = { 4, 1024, 5120 }

-- GPT-2's gelu_new as the builder emits it (models/gpt.lua).
local function gelu_new()
  return {
    ew("mul", "act.half", { act }, act), ew("pow", "act.cube", { act }, act), ew("mul", "act.coef", { act }, act),
    ew("add", "act.inner", { act, act }, act), ew("mul", "act.scale", { act }, act), ew("tanh", "act.tanh", { act }, act),
    ew("add", "act.one_plus", { act }, act), ew("mul", "act.out", { act, act }, act),
  }
end

local T = {}

function T.test_gelu_new_chain_is_one_kernel()
  local nodes = fusion.apply(gelu_new())
  eq(#nodes, 1, "one fused node")
  eq(nodes[1].op, "fused_elementwise", "op")
  eq(nodes[1].attrs.fused, "act.half,act.cube,act.coef,act.inner,act.scale,act.tanh,act.one_plus,act.out", "members")
  eq(nodes[1].count, 36, "count kept")
  local k = forward(nodes[1])
  eq(#k, 1, "one kernel")
  local n = 4096 * 5120
  eq(K.describe(k[1]), "VECmul(4096,5120)", "representative: the last primitive")
  eq(k[1].bytes, 4 * n * 2, "one input read, one output written")
  eq(k[1].flops, 8 * n, "the chain's FLOPs (8 ops, 1 per element each)")
end

function T.test_chain_broken_by_a_matmul_is_two_groups()
  local list = gelu_new()
  table.insert(list, 4, { op = "matmul", name = "mm", layer = "h", count = 36, dtype = "fp32",
                          inputs = { act, { 5120, 5120 } }, output = act, params = 0, attrs = {} })
  local nodes = fusion.apply(list)
  eq(#nodes, 3, "group, matmul, group")
  eq(nodes[1].attrs.fused, "act.half,act.cube,act.coef", "first group")
  eq(nodes[2].op, "matmul", "matmul untouched")
  eq(nodes[3].attrs.fused, "act.inner,act.scale,act.tanh,act.one_plus,act.out", "second group")
end

function T.test_different_layers_do_not_fuse_and_singles_stay()
  local a = ew("add", "a", { act, act }, act)
  local b = ew("mul", "b", { act }, act)
  b.layer, b.count = "", 1
  local nodes = fusion.apply { a, b }
  eq(#nodes, 2, "no fusion across layers")
  eq(nodes[1], a, "single node kept as is")
end

function T.test_residual_add_reads_the_residual_stream()
  local x = { 4, 1024, 1280 }
  local drop = ew("dropout", "drop", { x }, x)
  local res = ew("add", "res", { x, x }, x)
  res.attrs = { fused_external = 1 }
  local ln = ew("layernorm", "ln", { x }, x)
  local nodes = fusion.apply { drop, res, ln }
  eq(#nodes, 1, "dropout + add absorbed by the layer norm")
  eq(nodes[1].attrs.anchor, "layernorm", "anchor")
  local k = forward(nodes[1])
  eq(K.describe(k[1]), "VECln(4096,1280)", "layer-norm kernel")
  eq(k[1].bytes, 4 * 3 * 4096 * 1280, "x and residual read, output written")
  eq(k[1].flops, (1 + 6) * 4096 * 1280, "add + layer norm FLOPs")
end

-- neusight.fusion cap: a fused kernel priced above its members unfused (apply's `members`: each member's own forward
-- kernels) is priced as their sum, its run seconds scaled by sum / fused; below it, it is left as it is.
function T.test_cap_prices_a_fused_kernel_no_slower_than_its_members_summed()
  local x = { 4, 1024, 1280 }
  local res = ew("add", "res", { x, x }, x)
  res.attrs = { fused_external = 1 }
  local nodes, members = fusion.apply { ew("dropout", "drop", { x }, x), res, ew("layernorm", "ln", { x }, x) }
  local name = nodes[1].name
  local parts = {}
  for _, k in ipairs(members[name]) do parts[#parts + 1] = K.describe(k) end
  eq(table.concat(parts, " "), "VECadd(4096,1280) VECln(4096,1280)", "the members' own kernels (eval dropout: none)")
  local fused_k = forward(nodes[1])[1]
  fused_k.node, fused_k.phase, fused_k.layer, fused_k.count = name, "forward", "h", 36
  local other = { kind = "gemm", name = "Linear", node = "fc", phase = "forward" }
  local function price_with(fused_s)  -- the predictor: the fused layer-norm kernel at fused_s, add 2, layer norm 3
    return function(ks)
      local out = {}
      for i, k in ipairs(ks) do
        eq(k.node, nil, "priced without its node's fields")
        out[i] = K.describe(k) == "VECadd(4096,1280)" and 2 or k.bytes == fused_k.bytes and fused_s or 3
      end
      return out
    end
  end
  local seconds, capped = fusion.cap({ other, fused_k }, { 7, 16 }, members, price_with(8))
  eq(seconds[1], 7, "an unfused kernel untouched")
  eq(seconds[2], 16 * 5 / 8, "run seconds scaled by members / fused")
  eq(capped[name].fused_s, 8, "fused price")
  eq(capped[name].members_s, 5, "members' price")
  seconds, capped = fusion.cap({ other, fused_k }, { 7, 16 }, members, price_with(4))
  eq(seconds[2], 16, "a fused kernel below its members: as it is")
  eq(capped, nil, "none capped")
end

function T.test_attention_softmax_absorbs_scale_mask_and_dropout()
  local s, scores = 1024, { 4, 20, 1024, 1024 }
  local heads = { 4, 20, 1024, 64 }
  local function node(op, name, inputs, output, attrs)
    local n = ew(op, name, inputs, output)
    n.attrs = attrs or {}
    return n
  end
  local list = {
    node("matmul", "qk", { heads, { 4, 20, 64, s } }, scores),
    node("div", "scale", { scores, { 1 } }, scores, { tensor_inputs = 2 }),
    node("getitem", "causal_mask", { { 1, 1, s, s }, { 1 }, { 1 } }, { 1, 1, s, s }),
    node("where", "mask", { { 1, 1, s, s }, scores, { 1 } }, scores),
    node("softmax", "softmax", { scores }, scores),
    node("dropout", "attn_dropout", { scores }, scores),
    node("matmul", "pv", { scores, heads }, heads),
  }
  local nodes = fusion.apply(list)
  eq(#nodes, 3, "bmm, fused softmax, bmm")
  eq(nodes[2].attrs.fused, "scale,causal_mask,mask,softmax,attn_dropout", "members")
  local k = forward(nodes[2])
  local n = 4 * 20 * s * s
  eq(K.describe(k[1]), "VECsoftmax(81920,1024)", "softmax kernel")
  eq(k[1].bytes, 4 * (n + s * s + n), "scores and mask read once, probabilities written once")
  eq(k[1].flops, n + 5 * n, "scale + softmax FLOPs")

  -- FlashAttention: the whole block is one kernel.
  nodes = fusion.apply(list, { flash_attention = true })
  eq(#nodes, 1, "one flash_attention node")
  eq(nodes[1].op, "flash_attention", "op")
  k = forward(nodes[1])
  eq(#k, 1, "one kernel")
  local bh, d = 80, 64
  eq(k[1].flops, 4 * bh * s * s * d + 5 * bh * s * s, "4·b·h·s²·d + softmax")
  eq(k[1].bytes, 4 * 4 * bh * s * d, "Q, K, V read once, O written once")
  eq(K.describe(k[1]), "BMM(160,1024,64,1024)", "predicted as the two products")
end

function T.test_workload_fusion_field()
  local base = { model = "gpt2_large", gpu = "A100-PCIE-40GB", mode = "inference", batch = 4, seq = 1024 }
  local eager = workload.build(base).nodes
  local spec = {}
  for k, v in pairs(base) do spec[k] = v end
  spec.fusion = true
  local fused = workload.build(spec).nodes
  assert(#fused < #eager, "fusion shrinks the graph")
  local gelu
  for _, n in ipairs(fused) do
    if n.name == "h.mlp.act.half~h.mlp.act.out" then gelu = n end
  end
  assert(gelu, "the gelu_new chain is one node")
  spec.fusion = { flash_attention = true }
  local flash = workload.build(spec).nodes
  local found = false
  for _, n in ipairs(flash) do found = found or n.op == "flash_attention" end
  assert(found, "flash attention node")
  spec.mode = "train"
  local ok, err = pcall(workload.normalize, spec, nil, "w.lua")
  assert(not ok and err:find("inference only", 1, true), "training is refused: " .. tostring(err))
  spec.mode, spec.fusion = "inference", "yes"
  ok, err = pcall(workload.normalize, spec, nil, "w.lua")
  assert(not ok and err:find("field 'fusion' must be", 1, true), tostring(err))
end

function T.test_rms_norm_eps_rsqrt_normalise_is_one_kernel()
  -- LlamaRMSNorm's tail as neusight.nodes rms_norm emits it: variance + eps, rsqrt, x · rstd (Inductor: one pass)
  local x, col = { 2, 2048, 4096 }, { 2, 2048, 1 }
  local nodes = fusion.apply { ew("add", "eps", { col }, col), ew("rsqrt", "rsqrt", { col }, col),
                               ew("mul", "normalize", { x, col }, x) }
  eq(#nodes, 1, "eps, rsqrt and the normalise multiply are one fused node")
  eq(nodes[1].attrs.fused, "eps,rsqrt,normalize", "members")
  local k = forward(nodes[1])
  eq(#k, 1, "one kernel")
  eq(K.describe(k[1]), "VECmul(4096,4096)", "representative: the normalise multiply")
  eq(k[1].bytes, 4 * (2 * 2048 + 2 * 2 * 2048 * 4096), "variance and x read once, output written once")
end

return T
