-- tests/scripts/test_ops.lua — every op rule on a canonical node against the reference decomposition (opgraph csv rows).
--
-- Expected strings use kernels.describe() notation. Unless noted, nodes are rows of the reference's
-- opgraph/gpt2_large-train-1024-4.csv (batch 4, seq 1024, hidden 1280, 20 heads, vocab 50257).
local K = require "neusight.kernels"

local GPU = { name = "test", vendor = "nvidia", num_sm = 100, mem_bw_gbps = 1000, peak_fp32_tflops = 10, l2_mb = 40 }

-- Kernels of each phase as describe strings ("" when the phase has no kernels or no hook).
local function expand(op, node_fields)
  local rule, node = load_op(op), make_node(node_fields)
  node.op = op
  local function phase(hook)
    if not hook or (hook ~= rule.forward and not node.training) then return "", {} end
    local kernels = hook(node, GPU)
    return K.describe_all(kernels), kernels
  end
  local fw, fw_k = phase(rule.forward)
  local bw, bw_k = phase(rule.backward)
  local acc, acc_k = phase(rule.accumulate)
  return fw, bw, acc, { fw = fw_k, bw = bw_k, acc = acc_k }
end

local function eq(got, want, what)
  if got ~= want then error(("%s:\n  expected %s\n  got      %s"):format(what, tostring(want), tostring(got)), 2) end
end

local x = { 4, 1024, 1280 }
local scores = { 4, 20, 1024, 1024 }
local act = { 4, 1024, 5120 }

-- { op, node fields, forward, backward, accumulate }
local CASES = {
  addmm = { "addmm", { inputs = { { 3840 }, { 4096, 1280 }, { 1280, 3840 } }, output = { 4096, 3840 } },
    "Linear(4096,1280,3840)", "Linear(4096,3840,1280) Linear(3840,4096,1280)", "VECadd(1,4915200) VECadd(1,3840)" },
  linear_bias = { "linear", { inputs = { x }, output = { 4, 1024, 3840 } },
    "Linear(4096,1280,3840)", "Linear(4096,3840,1280) Linear(3840,4096,1280)", "VECadd(1,4915200) VECadd(1,3840)" },
  -- lm_head: no bias, so no bias-sized accumulation (the reference adds VECadd(1,50257) regardless).
  linear_no_bias = { "linear", { inputs = { x }, output = { 4, 1024, 50257 }, attrs = { bias = false } },
    "Linear(4096,1280,50257)", "Linear(4096,50257,1280) Linear(50257,4096,1280)", "VECadd(1,64328960)" },
  matmul_qk = { "matmul", { inputs = { { 4, 20, 1024, 64 }, { 4, 20, 64, 1024 } }, output = scores },
    "BMM(80,1024,64,1024)", "BMM(80,1024,1024,64) BMM(80,64,1024,1024)", "" },
  matmul_pv = { "matmul", { inputs = { scores, { 4, 20, 1024, 64 } }, output = { 4, 20, 1024, 64 } },
    "BMM(80,1024,1024,64)", "BMM(80,1024,64,1024) BMM(80,1024,1024,64)", "" },
  bmm = { "bmm", { inputs = { { 80, 1024, 64 }, { 80, 64, 1024 } }, output = { 80, 1024, 1024 } },
    "BMM(80,1024,64,1024)", "BMM(80,1024,1024,64) BMM(80,64,1024,1024)", "" },
  baddbmm = { "baddbmm", { inputs = { { 80, 1024, 1024 }, { 80, 1024, 64 }, { 80, 64, 1024 } }, output = { 80, 1024, 1024 } },
    "BMM(80,1024,64,1024) VECadd(80,1048576)", "BMM(80,1024,1024,64) BMM(80,64,1024,1024)", "" },
  embedding = { "embedding", { inputs = { { 4, 1024 } }, output = x, attrs = { num_embeddings = 50257, embedding_dim = 1280 } },
    "MEM((4,1024),(4,1024,1280))", "MEM((50257,1280)) MEM((50257,1280))", "VECadd(1,64328960)" },
  layernorm = { "layernorm", { inputs = { x }, output = x },
    "VECln(4096,1280)", "VECmul(4096,1280)", "VECadd(1,1280) VECadd(1,1280)" },
  softmax = { "softmax", { inputs = { scores }, output = scores },
    "VECsoftmax(81920,1024)", "VECmul(81920,1024) VECsoftmax(81920,1024)", "" },
  add_binary = { "add", { inputs = { x, x }, output = x },
    "VECadd(4096,1280)", "MEM((4096,1280)) MEM((4096,1280))", "" },
  add_broadcast = { "add", { inputs = { x, { 1, 1024, 1280 } }, output = x },
    "VECadd(4096,1280)", "MEM((4096,1280)) MEM((4096,1280))", "" },
  add_unary = { "add", { inputs = { act }, output = act }, "VECaddu(4096,5120)", "MEM((4096,5120))", "" },
  add_scalar_operand = { "add", { inputs = { act, { 1 } }, output = act }, "VECaddu(4096,5120)", "MEM((4096,5120))", "" },
  add_of_scalars = { "add", { inputs = { { 1 }, { 1 } }, output = { 1 } }, "", "", "" }, -- reference: 'misc'
  sub_binary = { "sub", { inputs = { x, x }, output = x }, "VECsub(4096,1280)", "MEM((4096,1280)) MEM((4096,1280))", "" },
  sub_unary = { "sub", { inputs = { x }, output = x }, "VECsubu(4096,1280)", "MEM((4096,1280))", "" },
  mul_binary = { "mul", { inputs = { act, act }, output = act }, "VECmul(4096,5120)", "VECmul(4096,5120) VECmul(4096,5120)", "" },
  mul_unary = { "mul", { inputs = { act }, output = act }, "VECmulu(4096,5120)", "VECmulu(4096,5120)", "" },
  -- truediv divides by a 0-dim tensor, which the reference counts as an operand.
  div_tensor_scalar = { "div", { inputs = { scores, { 1 } }, output = scores, attrs = { tensor_inputs = 2 } },
    "VECdiv(81920,1024)", "VECdiv(81920,1024) VECdiv(81920,1024)", "" },
  div_python_scalar = { "div", { inputs = { scores, { 1 } }, output = scores }, "VECdivu(81920,1024)", "VECdivu(81920,1024)", "" },
  pow = { "pow", { inputs = { act }, output = act },
    "VECpowu(4096,5120)", "VECpowu(4096,5120) VECmul(4096,5120) VECmulu(4096,5120)", "" },
  tanh = { "tanh", { inputs = { act }, output = act }, "VECtanh(4096,5120)", "VECmulu(4096,5120) VECaddu(4096,5120)", "" },
  gelu = { "gelu", { inputs = { act }, output = act }, "VECgelu(4096,5120)", "VECgelu(4096,5120)", "" },
  relu = { "relu", { inputs = { act }, output = act }, "VECrelu(4096,5120)", "VECrelu(4096,5120)", "" },
  -- OPT's attention-score clamp torch.max(scores, torch.tensor(finfo.min)): not a reference row (traced 'misc');
  -- backward of maximum for the scores (ops/maximum.lua).
  maximum = { "maximum", { inputs = { scores, { 1 } }, output = scores }, "VECmaxu(81920,1024)",
    "VECeq(81920,1024) VECdivu(81920,1024) VECwhere(81920,1024) VEClt(81920,1024) VECmasked_fill(81920,1024)", "" },
  where = { "where", { inputs = { { 1, 1, 1024, 1024 }, scores, { 1 } }, output = scores },
    "MEM((1,1,1024,1024),(4,20,1024,1024),(1,),(4,20,1024,1024))",
    "MEM((1,1,1024,1024),(4,20,1024,1024),(1,)) MEM((1,1,1024,1024),(4,20,1024,1024),(1,))", "" },
  dropout_training = { "dropout", { inputs = { x }, output = x },
    "MEM((4,1024,1280),(4,1024,1280))", "MEM((4,1024,1280)) MEM((4,1024,1280))", "" },
  dropout_inference = { "dropout", { inputs = { x }, output = x, training = false }, "", "", "" },
  contiguous = { "contiguous", { inputs = { { 4, 1024, 20, 64 } }, output = { 4, 1024, 20, 64 } },
    "MEM((4,1024,20,64),(4,1024,20,64))", "MEM((4,1024,20,64)) MEM((4,1024,20,64))", "" },
  -- a memory op without inputs (a hand-made node): its output written, no input gradient to pass back
  contiguous_no_inputs = { "contiguous", { inputs = {}, output = { 4, 1024 } }, "MEM((4,1024))", "", "" },
  getitem_mask = { "getitem", { inputs = { { 1, 1, 1024, 1024 }, { 1 }, { 1 } }, output = { 1, 1, 1024, 1024 } },
    "MEM((1,1,1024,1024),(1,),(1,),(1,1,1024,1024))",
    "MEM((1,1,1024,1024),(1,),(1,)) MEM((1,1,1024,1024),(1,),(1,))", "" },
  -- opgraph/opt_13-train-2048-2.csv: OPT's position ids, cumsum(attention_mask, dim=1) over (batch 2, seq 2048).
  cumsum = { "cumsum", { inputs = { { 2, 2048 } }, output = { 2, 2048 } },
    "MEM((2,2048),(2,2048))", "MEM((2,2048)) MEM((2,2048))", "" },
  -- opgraph/switchxl4-train-512-1.csv: T5 RMSNorm (mean_1, rsqrt_1, the layer_norm_weight leaf) and MoE dispatch.
  mean = { "mean", { inputs = { { 1, 512, 1024 } }, output = { 1, 512, 1 } },
    "MEM((1,512,1024),(1,512,1))", "MEM((1,512,1024)) MEM((1,512,1024))", "" },
  rsqrt = { "rsqrt", { inputs = { { 1, 512, 1 } }, output = { 1, 512, 1 } },
    "MEM((1,512,1),(1,512,1))", "MEM((1,512,1),(1,512,1))", "" },
  weight = { "weight", { inputs = {}, output = { 1024 } }, "", "", "VECadd(1,1024)" },
  count_nonzero = { "count_nonzero", { inputs = { { 1, 512 } }, output = { 1 } },
    "MEM((1,512),(1,))", "MEM((1,512)) MEM((1,512))", "" },
  setitem = { "setitem", { inputs = { { 64, 1024 }, { 1 }, { 64, 1024 } }, output = { 1 } },
    "MEM((64,1024),(1,),(64,1024),(1,))", "MEM((64,1024),(1,),(64,1024)) MEM((64,1024),(1,),(64,1024))", "" },
  -- Not in the reference: our loss and optimizer rules (see the op files for the derivation).
  cross_entropy = { "cross_entropy", { inputs = { { 4096, 50257 }, { 4096 } }, output = { 1 } },
    "VECsoftmax(4096,50257) MEM((4096,),(4096,))", "MEM((4096,50257)) VECsub(4096,50257)", "" },
  sgd = { "sgd", { inputs = { { 1000 } }, output = { 1000 } }, "VECadd(1,1000)", "", "" },
  adam = { "adam", { inputs = { { 1000 } }, output = { 1000 } },
    "VEClerp(1,1000) VECmulu(1,1000) VECaddcmul(1,1000) VECsqrt(1,1000) VECdivu(1,1000) VECaddu(1,1000) VECaddcdiv(1,1000)",
    "", "" },
  -- Fused kernels (scripts/neusight/fusion.lua; inference only, no backward): GPT-2's gelu_new chain and FlashAttention.
  fused_elementwise = { "fused_elementwise", { inputs = { act }, output = act, training = false,
      attrs = { fused = "h.mlp.act.half,h.mlp.act.out", flops = 8 * 4096 * 5120, rep = "mul" } },
    "VECmul(4096,5120)", "", "" },
  fused_softmax = { "fused_elementwise", { inputs = { scores, { 1, 1, 1024, 1024 } }, output = scores, training = false,
      attrs = { fused = "h.attn.scale,h.attn.softmax", flops = 6 * 81920 * 1024, anchor = "softmax" } },
    "VECsoftmax(81920,1024)", "", "" },
  flash_attention = { "flash_attention", { inputs = { { 4, 20, 1024, 64 }, { 4, 20, 64, 1024 }, { 4, 20, 1024, 64 } },
      output = { 4, 20, 1024, 64 }, training = false, attrs = { fused = "h.attn.qk,h.attn.pv" } },
    "BMM(160,1024,64,1024)", "", "" },
  -- Fused scaled-dot-product attention (HF sdpa / FlashAttention) with GQA, and decode over a KV cache.
  sdpa = { "sdpa", { inputs = { { 2, 32, 2048, 128 }, { 2, 8, 2048, 128 }, { 2, 8, 2048, 128 } },
      output = { 2, 32, 2048, 128 }, dtype = "bf16", attrs = { causal = true } },
    "FlashAttention(causal,b2,q2048,kv2048,d128,h32/8)", "FlashAttentionBwd(causal_bwd,b2,q2048,kv2048,d128,h32/8)", "" },
  sdpa_full = { "sdpa", { inputs = { { 2, 16, 512, 64 }, { 2, 16, 512, 64 }, { 2, 16, 512, 64 } },
      output = { 2, 16, 512, 64 }, dtype = "bf16", attrs = { causal = false } },
    "FlashAttention(full,b2,q512,kv512,d64,h16/16)", "FlashAttentionBwd(full_bwd,b2,q512,kv512,d64,h16/16)", "" },
  decode_attention = { "decode_attention", { inputs = { { 8, 32, 1, 128 }, { 8, 8, 4096, 128 }, { 8, 8, 4096, 128 } },
      output = { 8, 32, 1, 128 }, dtype = "bf16", training = false },
    "DecodeAttention(decode,b8,q1,kv4096,d128,h32/8)", "", "" },
  -- Megatron-LM's fused kernels (kernels = "megatron": neusight.nodes rms_norm, rope, glu): one kernel each way.
  rms_norm = { "rms_norm", { inputs = { x }, output = x, dtype = "bf16" },
    "VECrmsnorm(4096,1280)", "VECmul(4096,1280)", "" },
  rope = { "rope", { inputs = { { 4, 20, 1024, 64 } }, output = { 4, 20, 1024, 64 }, dtype = "bf16" },
    "VECrope(81920,64)", "VECrope(81920,64)", "" },
  swiglu = { "swiglu", { inputs = { act, act }, output = act, dtype = "bf16" },
    "VECswiglu(4096,5120)", "VECswiglu_backward(4096,5120)", "" },
  geglu = { "geglu", { inputs = { act, act }, output = act, dtype = "bf16" },
    "VECgeglu(4096,5120)", "VECgeglu_backward(4096,5120)", "" },
  -- metadata-only ops launch no kernels
  view = { "view", { inputs = { x }, output = { 4096, 1280 } }, "", "", "" },
  reshape = { "reshape", { inputs = { x }, output = { 4096, 1280 } }, "", "", "" },
  permute = { "permute", { inputs = { x }, output = { 4, 1280, 1024 } }, "", "", "" },
  transpose = { "transpose", { inputs = { x }, output = { 4, 1280, 1024 } }, "", "", "" },
  split = { "split", { inputs = { x }, output = { 4, 1024, 640 } }, "", "", "" },
  size = { "size", { inputs = { x }, output = { 1 } }, "", "", "" },
}

local T = {}

for case, c in pairs(CASES) do
  T["test_op_" .. case] = function()
    local rule = load_op(c[1])
    if rule.check then eq(rule.check(make_node(c[2])), nil, c[1] .. " check() of the reference node") end
    local fw, bw, acc = expand(c[1], c[2])
    eq(fw, c[3], c[1] .. " forward")
    eq(bw, c[4], c[1] .. " backward")
    eq(acc, c[5], c[1] .. " accumulate")
  end
end

local function total(kernels, field)
  local sum = 0
  for _, k in ipairs(kernels) do sum = sum + k[field] end
  return sum
end

-- Forward elementwise bytes count every input and the output once (the reference's MemPerO).
function T.test_elementwise_bytes_follow_shapes()
  local n = 4096 * 1280
  local _, _, _, k = expand("add", { inputs = { x, { 1, 1024, 1280 } }, output = x })
  eq(k.fw[1].bytes, 4 * (n + 1024 * 1280 + n), "broadcast add reads the small operand once")
  _, _, _, k = expand("div", { inputs = { scores, { 1 } }, output = scores, attrs = { tensor_inputs = 2 } })
  eq(k.fw[1].bytes, 4 * (2 * 81920 * 1024 + 1), "division by a 0-dim tensor is unary traffic")
  eq(k.bw[1].bytes, 12 * 81920 * 1024, "backward kernels use the op's default traffic")
  _, _, _, k = expand("mul", { inputs = { act }, output = act, dtype = "bf16" })
  eq(k.fw[1].bytes, 2 * 2 * 4096 * 5120, "bf16 unary")
  eq(k.fw[1].dtype, "bf16", "dtype is carried")
end

-- The fused Megatron kernels' traffic, FLOPs and saved bytes (bf16): RMSNorm is LayerNorm's kernel family and bytes
-- (read x, write y; backward read dy and x, write dx) with its own FLOPs, the rstd saved instead of mean and rstd, one
-- affine gradient; RoPE one pass each way that saves nothing; SwiGLU (and GeGLU) reads gate and up, writes their
-- product, and its backward writes both gradients.
function T.test_megatron_fused_kernels_traffic()
  local n, rows = 4096 * 1280, 4096
  local _, _, _, k = expand("rms_norm", { inputs = { x }, output = x, dtype = "bf16" })
  local _, _, _, ln = expand("layernorm", { inputs = { x }, output = x, dtype = "bf16" })
  eq(k.fw[1].kind, "layernorm", "RMSNorm runs on the layer-norm family's model")
  eq(k.fw[1].bytes, ln.fw[1].bytes, "the bytes of a fused LayerNorm")
  eq(k.fw[1].bytes, 2 * 2 * n, "reads x, writes y")
  eq(k.fw[1].flops, 4 * n, "square, sum, rsqrt scale, weight: 4 FLOPs per element (LayerNorm's 6)")
  eq(k.bw[1].bytes, 3 * 2 * n, "reads dy and x, writes dx")
  local node = make_node { op = "rms_norm", inputs = { x }, output = x, dtype = "bf16" }
  eq(load_op("rms_norm").saves(node), 2 * n + 4 * rows, "the input and one fp32 rstd per row")
  eq(load_op("layernorm").saves(node), 2 * n + 8 * rows, "LayerNorm: mean and rstd")
  local heads = { 4, 20, 1024, 64 }
  _, _, _, k = expand("rope", { inputs = { heads }, output = heads, dtype = "bf16" })
  eq(k.fw[1].bytes, 2 * 2 * 4 * 20 * 1024 * 64, "reads x, writes the rotated x (the cos/sin table is not counted)")
  eq(k.fw[1].flops, 3 * 4 * 20 * 1024 * 64, "2 mul + 1 add per element")
  eq(k.bw[1].bytes, k.fw[1].bytes, "the same pass over dy")
  eq(load_op("rope").saves(make_node { op = "rope", inputs = { heads }, output = heads, dtype = "bf16" }), 0,
    "nothing saved")
  local m = 4096 * 5120
  _, _, _, k = expand("swiglu", { inputs = { act, act }, output = act, dtype = "bf16" })
  eq(k.fw[1].bytes, 3 * 2 * m, "reads gate and up, writes silu(gate) · up")
  eq(k.fw[1].flops, 5 * m, "silu 4 + mul 1")
  eq(k.bw[1].bytes, 5 * 2 * m, "reads dy, gate and up, writes both gradients")
  eq(load_op("swiglu").saves(make_node { op = "swiglu", inputs = { act, act }, output = act, dtype = "bf16" }), 2 * 2 * m,
    "gate and up saved")
  -- GeGLU (Gemma under Megatron's kernels): SwiGLU's traffic and saves, the FLOPs of HF's gelu and mul kernels
  _, _, _, k = expand("geglu", { inputs = { act, act }, output = act, dtype = "bf16" })
  eq(k.fw[1].bytes, 3 * 2 * m, "reads gate and up, writes gelu(gate) · up")
  eq(k.fw[1].flops, 2 * m, "gelu 1 + mul 1, as HF's two kernels count them")
  eq(k.bw[1].bytes, 5 * 2 * m, "reads dy, gate and up, writes both gradients")
  eq(k.bw[1].flops, 3 * m, "gelu's backward 1 + the mul's 2")
  eq(load_op("geglu").saves(make_node { op = "geglu", inputs = { act, act }, output = act, dtype = "bf16" }), 2 * 2 * m,
    "gate and up saved")
end

function T.test_optimizer_traffic()
  local _, _, _, k = expand("adam", { inputs = { { 1000 } }, output = { 1000 } })
  eq(#k.fw, 7, "adam kernels")
  eq(total(k.fw, "bytes"), 18 * 4 * 1000, "adam: 18 element accesses per parameter")
  eq(total(k.fw, "flops"), 13 * 1000, "adam flops")
  _, _, _, k = expand("sgd", { inputs = { { 1000 } }, output = { 1000 } })
  eq(total(k.fw, "bytes"), 12 * 1000, "sgd: read param and grad, write param")
end

-- Optimizer kernels per precision recipe: total bytes and FLOPs per parameter equal the closed forms of
-- ops/adam.lua, ops/adamw.lua and ops/sgd.lua. Roles (bytes per element, rules.optimizer_roles):
--   w the parameters the step updates, g the gradients it reads, m one moment element, copy the 16-bit model
--   parameters written from a master, grad16 fp16 gradients cast into fp32 main gradients.
--   pure d            w = g = m = d, copy = grad16 = 0
--   amp autocast      w = g = m = 4 (fp32 parameters, gradients, moments), copy = 0; fp16: + unscale pass 2g
--   amp megatron bf16 w = 4 (master), g = 4 (fp32 gradients), m = 4, copy = 2
--   amp megatron fp16 w = 4, g = 4 (fp32 main gradients), m = 4, copy = 2, + cast (grad16 + g = 2 + 4) + unscale 2g
-- Formulas (bytes per parameter):
--   AdamW fused    2w + g + 4m + copy            (read w g m m, write w m m + the copy)     14 FLOPs
--   AdamW foreach  4w + 2g + 14m [+ w + copy]    (decay pass + Adam's 7 passes [+ copy])    14 FLOPs
--   Adam  fused    2w + g + 4m + copy                                                       13 FLOPs
--   Adam  foreach  2w + 2g + 14m [+ w + copy]                                               13 FLOPs
--   SGD   foreach  2w + g [+ w + copy]                                                       1 FLOP
-- plus, fp16 amp: unscale 2g (1 FLOP) and, Megatron, the cast grad16 + g.
function T.test_optimizer_bytes_per_parameter_by_recipe()
  local precision = require "neusight.precision"
  local P = 1000
  local cases = {
    -- optimizer, impl, precision, dtype, convention, bytes per param, FLOPs per param, kernels
    { "adamw", "fused", "pure", "fp32", nil, 2 * 4 + 4 + 4 * 4, 14, 1 },                 -- 28 = 7·4
    { "adamw", "fused", "pure", "bf16", nil, 2 * 2 + 2 + 4 * 2, 14, 1 },                 -- 14 = 7·2
    { "adamw", "fused", "amp", "bf16", "autocast", 2 * 4 + 4 + 4 * 4, 14, 1 },           -- 28: all fp32
    { "adamw", "fused", "amp", "fp16", "autocast", 2 * 4 + 4 + 4 * 4 + 2 * 4, 15, 2 },   -- 36: + unscale
    { "adamw", "fused", "amp", "bf16", "megatron", 2 * 4 + 4 + 4 * 4 + 2, 14, 1 },       -- 30: + bf16 copy
    { "adamw", "fused", "amp", "fp16", "megatron", 2 * 4 + 4 + 4 * 4 + 2 + (2 + 4) + 2 * 4, 15, 3 }, -- 44
    { "adamw", "foreach", "pure", "fp32", nil, 4 * 4 + 2 * 4 + 14 * 4, 14, 8 },          -- 80 = 20·4
    { "adamw", "foreach", "pure", "bf16", nil, 4 * 2 + 2 * 2 + 14 * 2, 14, 8 },          -- 40
    { "adamw", "foreach", "amp", "bf16", "megatron", 4 * 4 + 2 * 4 + 14 * 4 + (4 + 2), 14, 9 }, -- 86
    { "adam", "foreach", "pure", "fp32", nil, 2 * 4 + 2 * 4 + 14 * 4, 13, 7 },           -- 72 = 18·4
    { "adam", "foreach", "amp", "bf16", "megatron", 2 * 4 + 2 * 4 + 14 * 4 + (4 + 2), 13, 8 }, -- 78
    { "adam", "fused", "amp", "bf16", "megatron", 2 * 4 + 4 + 4 * 4 + 2, 13, 1 },        -- 30
    { "sgd", "foreach", "pure", "bf16", nil, 2 * 2 + 2, 1, 1 },                          -- 6
    { "sgd", "foreach", "amp", "bf16", "megatron", 2 * 4 + 4 + (4 + 2), 1, 2 },          -- 18
    { "sgd", "fused", "amp", "bf16", "megatron", 2 * 4 + 4 + 2, 1, 1 },                  -- 14
  }
  for _, c in ipairs(cases) do
    local op, impl, name, dtype, convention, bytes, flops, n = table.unpack(c)
    local r = precision.recipe(name, dtype, convention)
    local what = ("%s %s, %s %s %s"):format(op, impl, name, dtype, convention or "")
    local _, _, _, k = expand(op, { inputs = { { P } }, output = { P }, dtype = precision.step_dtype(r),
      phase = "optimizer", attrs = precision.optimizer_attrs(r, impl) })
    eq(#k.fw, n, what .. ": kernels")
    eq(total(k.fw, "bytes"), bytes * P, what .. ": bytes")
    eq(total(k.fw, "flops"), flops * P, what .. ": flops")
  end
  -- without recipe attrs (a hand-built node) the defaults: adamw fused, pure in the node's dtype
  local _, _, _, k = expand("adamw", { inputs = { { P } }, output = { P }, dtype = "bf16" })
  eq(K.describe_all(k.fw), "VECadamw(1,1000)", "adamw default: one fused kernel")
  eq(k.fw[1].bytes, 7 * 2 * P, "pure bf16")
  local ok, err = pcall(expand, "adamw", { name = "opt", inputs = { { P } }, output = { P }, attrs = { impl = "fast" } })
  assert(not ok and err:find("attrs.impl must be \"fused\" or \"foreach\" (got fast)", 1, true), tostring(err))
end

function T.test_gemm_flops()
  local _, _, _, k = expand("addmm", CASES.addmm[2])
  eq(total(k.fw, "flops"), 2 * 4096 * 1280 * 3840, "forward flops")
  eq(total(k.bw, "flops"), 2 * 2 * 4096 * 1280 * 3840, "backward = 2 x forward")
end

-- Shape contracts (rule.check): nil when the shapes agree, else what is wrong; the engine runs them on every node.
function T.test_shape_contracts()
  local function problem(op, fields) return load_op(op).check(make_node(fields)) end
  eq(problem("linear", { inputs = { { 4, 128, 64 } }, output = { 7, 3, 99 } }),
    "x {4,128,64} has 512 rows of 64 features but the output {7,3,99} has 21 rows of 99", "linear rows")
  eq(problem("linear", { inputs = { { 4, 128, 64 } }, output = { 512, 99 } }), nil, "linear: rows flattened")
  eq(problem("linear", { inputs = {}, output = { 4, 8 } }), "needs input #1 (x), got 0 input(s)", "linear without x")
  eq(problem("addmm", { inputs = { { 99 }, { 512, 64 }, { 64, 98 } }, output = { 512, 99 } }),
    "the weight {64,98} does not hold 64 x 99 elements", "addmm weight")
  eq(problem("matmul", { inputs = { { 4, 8, 16 }, { 4, 15, 8 } }, output = { 4, 8, 8 } }),
    "A {4,8,16} and B {4,15,8} do not multiply", "matmul inner dims")
  eq(problem("bmm", { inputs = { { 4, 8, 16 }, { 4, 16, 8 } }, output = { 4, 8, 9 } }),
    "A {4,8,16} · B {4,16,8} is 4 x {8,8}, not the output {4,8,9}", "bmm output")
  eq(problem("bmm", { inputs = { { 4, 8, 16 }, { 3, 16, 8 } }, output = { 4, 8, 8 } }),
    "B {3,16,8} has 3 matrices, which do not broadcast over A's 4", "bmm batch")
  eq(problem("baddbmm", { inputs = { { 4, 8, 9 }, { 4, 8, 16 }, { 4, 16, 8 } }, output = { 4, 8, 8 } }),
    "C {4,8,9} does not broadcast to the output {4,8,8}", "baddbmm C")
  eq(problem("add", { inputs = { { 4, 8 }, { 8 } }, output = { 4, 8 } }), nil, "add broadcast")
  eq(problem("add", { inputs = { { 4, 8 }, { 4, 1 } }, output = { 4, 16 } }),
    "input #1 {4,8} does not broadcast to the output {4,16}", "add")
  eq(problem("mul", { inputs = { { 4, 1 }, { 1, 8 } }, output = { 4, 16 } }),
    "input #2 {1,8} does not broadcast to the output {4,16}", "mul")
  eq(problem("sub", { inputs = { { 4, 1 }, { 1 } }, output = { 4, 8 } }),
    "the output is not the broadcast of the inputs (dimension 2 is 8, the inputs give 1)", "output larger than inputs")
  eq(problem("gelu", { inputs = { { 4, 0 } }, output = { 4, 8 } }), "input #1 {4,0} has a dimension < 1", "zero dim")
  -- a float dimension (D / H in a model function) is said as a non-integer, not as "< 1"
  eq(problem("gelu", { inputs = { { 4, 64.0 } }, output = { 4, 64 } }), "input #1 {4,64.0}: dimension 2 is 64.0, not an "
    .. "integer (a shape's dimensions are integers: Lua's / and ^ give floats, // and math.tointeger integers)",
    "float dim")
end

function T.test_bad_nodes_raise_clear_errors()
  local ok, err = pcall(expand, "matmul", { name = "h.attn.qk", inputs = { { 4, 8, 16 } }, output = { 4, 8, 8 } })
  assert(not ok and err:find("node 'h.attn.qk' (op 'matmul') needs input #2, got 1 input(s)", 1, true), tostring(err))
  ok, err = pcall(expand, "matmul", { name = "mm", inputs = { { 4, 8, 16 }, { 4, 15, 8 } }, output = { 4, 8, 8 } })
  assert(not ok and err:find("shapes do not multiply: [4,8,16] x [4,15,8]", 1, true), tostring(err))
  ok, err = pcall(expand, "embedding", { name = "wte", inputs = { { 4, 8 } }, output = { 4, 8, 16 } })
  assert(not ok and err:find("node 'wte' (op 'embedding') needs attrs.num_embeddings", 1, true), tostring(err))
end

return T
