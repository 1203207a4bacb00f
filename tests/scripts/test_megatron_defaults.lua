-- tests/scripts/test_megatron_defaults.lua — what a run of Megatron-LM's kernels does by default (tester9 #2, #5):
-- gradient-accumulation fusion (a linear's weight gradient accumulates inside its dW GEMM: no accumulation kernel
-- per microbatch for it; a bias's stays) and the fused optimizer step (Megatron's --optimizer adam is FusedAdam);
-- eager (HF) graphs keep PyTorch's accumulation and foreach default.
local workload = require "neusight.workload"
local t = require("neusight.testing").bind(load_op, make_node)
local eq = t.eq

local T = {}

local function run(parallel, extra)
  local spec = { model = "gpt2_large", gpu = "h100", mode = "train", batch = 8, seq = 128, dtype = "bf16",
                 parallel = parallel }
  for k, v in pairs(extra or {}) do spec[k] = v end
  return workload.build(spec, { name = "H100-SXM5-80GB", interconnect = "nvlink4", interconnect_bw_gbps = 900.0,
                                pcie_bw_gbps = 64.0, num_sm = 132, mem_gb = 80 })
end

-- the accumulation kernels of the nodes named `suffix` (their op rules' accumulate)
local function accumulated(nodes, suffix)
  for _, n in ipairs(nodes) do
    if n.name:sub(-#suffix) == suffix then
      local _, _, acc = t.kernels(n, true)
      return acc, n
    end
  end
  error("no node named *" .. suffix)
end

function T.test_megatron_kernels_fuse_the_weight_gradient_accumulation()
  local megatron = run { tp = 2, microbatches = 2 }
  eq(megatron.plan.kernels, "megatron", "a tp 2 plan runs Megatron's kernels")
  local acc, n = accumulated(megatron.nodes, "mlp.c_fc")
  eq(n.attrs.wgrad_fused, true, "the workload marks it")
  eq(#acc, 1, "only the bias's accumulation is left")
  eq(acc[1].flops, n.output[#n.output], "the bias's O elements")
  -- the same layout with the HF eager kernels: the weight's VECadd(1, O·I) and the bias's
  local eager = run { tp = 2, microbatches = 2, kernels = "eager" }
  acc, n = accumulated(eager.nodes, "mlp.c_fc")
  eq(n.attrs.wgrad_fused, nil, "eager: not marked")
  eq(#acc, 2, "eager: weight and bias accumulate")
  -- inference graphs are not marked (nothing accumulates)
  local inf = run({ tp = 2 }, { mode = "inference", optimizer = "none" })
  eq(select(2, accumulated(inf.nodes, "mlp.c_fc")).attrs.wgrad_fused, nil, "inference: not marked")
end

function T.test_megatron_kernels_default_to_the_fused_optimizer()
  eq(workload.normalize({ model = "gpt2_large", gpu = "h100", mode = "train", batch = 8, seq = 128,
    parallel = { dp = 2 } }).optimizer_impl, "fused", "Megatron's adam is FusedAdam")
  eq(workload.normalize({ model = "gpt2_large", gpu = "h100", mode = "train", batch = 8, seq = 128 }).optimizer_impl,
    "foreach", "one GPU, PyTorch eager: torch.optim.Adam's foreach default")
  eq(workload.normalize({ model = "gpt2_large", gpu = "h100", mode = "train", batch = 8, seq = 128,
    parallel = { dp = 2, kernels = "eager" } }).optimizer_impl, "foreach", "eager kernels: PyTorch's default")
  eq(workload.normalize({ model = "gpt2_large", gpu = "h100", mode = "train", batch = 8, seq = 128,
    parallel = { dp = 2 }, optimizer_impl = "foreach" }).optimizer_impl, "foreach", "as given")
  eq(workload.normalize({ model = "gpt2_large", gpu = "h100", mode = "train", batch = 8, seq = 128,
    optimizer = "adamw" }).optimizer_impl, "fused", "adamw: fused")
end

return T
