-- scripts/neusight/precision.lua — precision recipes: which element type each role of training state has.
--
-- The workload's `dtype` is the compute type (GEMM inputs, activations). `precision` says how the training
-- state around it is kept; this module is the one place that turns both into element sizes, for the optimizer
-- node (workload.lua → ops/adam.lua, adamw.lua, sgd.lua), the data-parallel gradient and parameter traffic
-- (parallel.lua) and the memory report (state_gb: M.state_report; the engine reads none of M.state's numbers).
--
--   "pure"  model.to(dtype): parameters, gradients and optimizer moments in the dtype, no master copy.
--   "amp"   mixed precision: compute in a 16-bit (or fp8) dtype, fp32 optimizer state. Two conventions,
--           picked by whose code runs the model (workload.lua: parallel.kernels):
--     "autocast" (PyTorch torch.autocast, eager kernels: single-GPU runs and parallel.kernels = "eager"):
--           parameters, gradients and moments stay fp32; the 16-bit weight copies are casts inside the ops
--           (not separate state; the graph's dtype flow under it — fp32 stream and norms, per-op input casts, a weight
--           cast per GEMM per forward — is the builders', from the workload's opts.autocast: neusight.nodes
--           autocast_cast). fp16 adds GradScaler's unscale/inf-check pass over the gradients. With fp8
--           compute the same bytes are named "transformer_engine": torch.autocast has no fp8, and fp8 GEMMs over
--           fp32 parameters, gradients and moments with cached fp8 weight copies is Transformer Engine's recipe.
--     "megatron" (Megatron-LM Float16Optimizer / distributed optimizer, parallel.kernels = "megatron"):
--           16-bit model parameters (bf16 for fp8 compute, as Transformer Engine keeps them), fp32 master
--           parameters and moments. Gradients: bf16 (and fp8) runs accumulate and all-reduce them in fp32
--           (Megatron-LM forces --accumulate-allreduce-grads-in-fp32 for bf16); fp16 runs keep fp16
--           gradients, copy them to fp32 main gradients for the step and unscale them (loss scaling).
--           Bytes per parameter with Adam — bf16: 2 + 4 + 4 + 8 = 18, fp16: 2 + 2 + (4 + 4) + 8 = 20,
--           fp32: 16 — with the distributed optimizer 6 + 12/dp, 4 + 16/dp, 8 + 8/dp: the table of
--           Megatron-LM's docs/source/distrib_optimizer.md.
-- Default: "amp" when training in fp16, bf16 or fp8 (what mixed-precision training means in practice),
-- "pure" otherwise (fp32/tf32/fp64 training, and every inference run: weights loaded in the dtype).
-- "amp" with a 4- or 8-byte dtype is an error: there is nothing to mix.
local K = require "neusight.kernels"
local ipairs, tostring, error, setmetatable, fmt, type = ipairs, tostring, error, setmetatable, string.format, type

local M = {}

--- Recipe names, in display order (workload validation and "did you mean" use them).
M.names = { "pure", "amp" }

-- Compute dtypes amp can mix with fp32 (a 2- or 1-byte floating-point type).
local LOW = { fp16 = true, bf16 = true, fp8 = true }

--- True when `dtype` is a 16-bit or fp8 compute type that "amp" can mix with fp32 state.
function M.mixable(dtype) return LOW[dtype] == true end

--- The default recipe for a compute dtype and mode ("train" | "inference").
function M.default(dtype, mode)
  return (mode == "train" and LOW[dtype]) and "amp" or "pure"
end

--- nil when `precision` goes with `dtype`, else an error fragment for workload.lua ("\"amp\" needs …").
function M.check(precision, dtype)
  if precision == "amp" and not LOW[dtype] then
    return ("\"amp\" mixes a 16-bit or fp8 compute dtype with fp32 state; dtype %q is already %d bytes per element"
      .. " (parameters, gradients and optimizer state in it): use precision = \"pure\" or dtype \"bf16\" / \"fp16\"")
      :format(tostring(dtype), K.dtype_bytes(dtype))
  end
  return nil
end

--- The convention of "amp" for a run: "megatron" when Megatron-LM's kernels run the model, else "autocast" (which
--- M.recipe names "transformer_engine" for fp8 compute: torch.autocast has no fp8).
function M.convention(megatron) return megatron and "megatron" or "autocast" end

--- Whether a recipe's forward keeps low-precision copies of the GEMM weights beside its fp32 parameters until the
--- forward ends (neusight.memory's weight cache): torch.autocast's cast cache, and Transformer Engine's fp8 weight
--- copies (cast once per step, reused by the microbatches).
function M.caches_weights(r)
  return r.name == "amp" and (r.convention == "autocast" or r.convention == "transformer_engine")
end

--- Why a recipe is not one anyone trains with, or nil: pure fp8 training keeps the weights, gradients and optimizer
--- moments in fp8 (what precision "pure" means), where fp8 training (Transformer Engine, Megatron-LM --fp8-format)
--- runs fp8 GEMMs over bf16/fp32 parameters with fp32 master weights and moments. The forecast is made as asked
--- (neusight.workload warnings says this).
---@param precision string "pure" | "amp"
---@param dtype string compute dtype
---@param mode string "train" | …
---@return string?
function M.unrealistic(precision, dtype, mode)
  if precision == "pure" and dtype == "fp8" and mode == "train" then
    return "precision pure with dtype fp8 in training keeps the weights, gradients and optimizer moments in fp8 "
      .. "(1 byte each: state_bytes_per_param counts them so), which is not how fp8 training runs: Transformer Engine "
      .. "and Megatron-LM (--fp8-format) run fp8 GEMMs over bf16/fp32 parameters with fp32 master weights and "
      .. "optimizer moments; the forecast is made as asked, but for fp8 training as it is done use precision amp (the "
      .. "default for fp8 training)"
  end
  return nil
end

--- Element types by role. Returns { name, convention, compute, param, grad, main_grad?, master?, moment,
--- loss_scale } (dtype names; main_grad / master absent when the recipe has none) and a `bytes` table with
--- the same roles in bytes per element (0 for an absent role).
---   param      the model's parameters (what the forward reads)
---   grad       the gradient buffer backward fills and data parallelism reduces
---   main_grad  an fp32 copy of the gradients the optimizer steps on (Megatron fp16)
---   master     fp32 master parameters the optimizer updates (Megatron amp)
---   moment     each optimizer moment (Adam's exp_avg, exp_avg_sq)
---@param precision? string "pure" | "amp" (nil: M.default(dtype, mode))
---@param dtype string compute dtype
---@param convention? string "autocast" (default) | "megatron"; ignored by "pure"
---@param mode? string for the default only
function M.recipe(precision, dtype, convention, mode)
  K.dtype_bytes(dtype) -- validates
  precision = precision or M.default(dtype, mode or "train")
  local r
  if precision == "pure" then
    r = { name = "pure", convention = "pure", compute = dtype, param = dtype, grad = dtype, moment = dtype,
          loss_scale = false }
  elseif precision == "amp" then
    local problem = M.check(precision, dtype)
    if problem then error("precision: " .. problem, 2) end
    convention = convention or "autocast"
    if convention == "autocast" then
      -- torch.autocast has no fp8: fp8 compute over fp32 parameters, gradients and moments, the fp8 weight copies
      -- cached for the forward (M.caches_weights), is Transformer Engine's recipe (te.fp8_autocast over fp32 modules),
      -- and named so; the bytes are the same
      r = { name = "amp", convention = dtype == "fp8" and "transformer_engine" or "autocast", compute = dtype,
            param = "fp32", grad = "fp32", moment = "fp32", loss_scale = dtype == "fp16" }
    elseif convention == "megatron" then
      local fp16 = dtype == "fp16"
      r = { name = "amp", convention = "megatron", compute = dtype, param = fp16 and "fp16" or "bf16",
            grad = fp16 and "fp16" or "fp32", main_grad = fp16 and "fp32" or nil, master = "fp32", moment = "fp32",
            loss_scale = fp16 }
    else
      error(("precision: unknown convention %s (\"autocast\" or \"megatron\")"):format(tostring(convention)), 2)
    end
  else
    error(("precision: unknown recipe %s (\"pure\" or \"amp\")"):format(tostring(precision)), 2)
  end
  local b = {}
  for _, role in ipairs { "param", "grad", "main_grad", "master", "moment" } do
    b[role] = r[role] and K.dtype_bytes(r[role]) or 0
  end
  r.bytes = b
  return r
end

--- Model-state bytes per parameter of a recipe: { weights, gradients, master, optimizer_state, convention }.
--- master = fp32 master parameters + fp32 main gradients (the optimizer's copies), optimizer_state = its
--- moments; under the distributed optimizer both shard over dp, weights and gradients do not. Inference
--- keeps the weights only; training without an optimizer (optimizer "none") the weights and gradients.
---@param r table M.recipe()
---@param optimizer string "none" or an optimizer's op rule name (its `optimizer.moments`: the moments it keeps per
--- parameter, ops/adam.lua's 2; neusight.workload optimizer_rule)
---@param training boolean
function M.state(r, optimizer, training)
  local moments = 0
  if optimizer ~= "none" then
    local rule, problem = require("neusight.workload").optimizer_rule(optimizer)
    if not rule then error(("precision.state: optimizer %s"):format(problem), 2) end
    moments = rule.optimizer.moments
  end
  local b = r.bytes
  local s = { weights = b.param, gradients = 0, master = 0, optimizer_state = 0, convention = r.convention }
  if training then
    s.gradients = b.grad
    if optimizer ~= "none" then
      s.master = b.master + b.main_grad
      s.optimizer_state = moments * b.moment
    end
  end
  return s
end

--- state() for a workload-like table { dtype, mode, optimizer, precision?, megatron? } (the engine's
--- entry point for graphs that have no workload, e.g. predict --graph).
function M.state_of(t)
  local r = M.recipe(t.precision, t.dtype, M.convention(t.megatron), t.mode)
  return M.state(r, t.optimizer or "none", t.mode == "train")
end

--- The optimizer node's attrs for a recipe: element sizes by role plus the implementation.
---@param r table M.recipe()
---@param impl string "fused" | "foreach"
function M.optimizer_attrs(r, impl)
  local b = r.bytes
  return {
    impl = impl, precision = r.name, convention = r.convention,
    param_bytes = b.param, grad_bytes = b.grad, main_grad_bytes = b.main_grad, master_bytes = b.master,
    moment_bytes = b.moment, loss_scale = r.loss_scale,
  }
end

--- The dtype the optimizer step computes in: its moments' (fp32 in amp, the dtype in pure).
function M.step_dtype(r) return r.moment end

--- Bytes of model state of `params` parameters under a state layout (M.state) by role — weights, gradients, master
--- (the master copies), optimizer (the moments), the last two divided by `shard` (the distributed optimizer's dp; nil
--- or 1: not sharded) — and their sum, total. The one formula of the state's bytes: the report's state_gb
--- (M.state_report, neusight.parallel.report) and the memory reports' (neusight.memory, neusight.parallel.memory).
---@param params number
---@param s table M.state()
--- `shard` may also be a table { optimizer, gradients, weights } (neusight.parallel.zero shards: ZeRO stages 2 and 3
--- divide the gradients and the weights too).
---@param shard? integer|table
function M.state_parts(params, s, shard)
  local gshard, wshard = 1, 1
  if type(shard) == "table" then shard, gshard, wshard = shard.optimizer, shard.gradients, shard.weights end
  shard = shard or 1
  local p = { weights = params * s.weights / wshard, gradients = params * s.gradients / gshard,
              master = params * s.master / shard,
              optimizer = params * s.optimizer_state / shard }
  p.total = p.weights + p.gradients + p.master + p.optimizer
  return p
end

--- M.state_parts' total: bytes of model state of `params` parameters under a state layout (M.state), the optimizer's
--- part (master copies and moments) divided by `shard`.
function M.state_bytes(params, s, shard) return M.state_parts(params, s, shard).total end

--- "18 B = weights 2 + gradients 4 + master 4 + optimizer 8": a state layout (M.state) per parameter, for the table.
function M.state_breakdown(s)
  return fmt("%g B = weights %g + gradients %g + master %g + optimizer %g",
    s.weights + s.gradients + s.master + s.optimizer_state + 0.0, s.weights, s.gradients, s.master, s.optimizer_state)
end

local SHARD = " (shard it, see the parallelism options)"

--- The model state of a forecast as the report shows it (the engine renders these as they are):
---   state_gb         params × the bytes per parameter of `s` (one GPU; a parallel run's report has its own per stage)
---   convention       the recipe's convention (JSON precision_convention)
---   bytes_per_param  JSON state_bytes_per_param: weights, gradients, master, optimizer_state
---   line             the table's model-state line
---   warning          with `unreported` (no memory report covers the run: an imported graph), when the state alone
---                    exceeds the GPU; nil otherwise. The line says so too.
---@param s table M.state()
---@param params number the graph's parameters
---@param recipe string the recipe's name ("pure" | "amp")
--- The GPU's capacity is neusight.memory capacity's (mem_gb, at most memory.REPORTED_SHARE of `reported_gib`, the total
--- the device reports, where its file gives one), as every memory report holds a run to.
---@param gpu_mem_gb number
---@param unreported boolean
---@param reported_gib number? the GPU file's mem_reported_gib (nil: none)
function M.state_report(s, params, recipe, gpu_mem_gb, unreported, reported_gib)
  local memory = require "neusight.memory"
  local gb = M.state_bytes(params, s) / 1e9
  local over = unreported and gb * 1e9 > memory.capacity(gpu_mem_gb, reported_gib)
  local words = over and memory.capacity_words(gpu_mem_gb, reported_gib)
  return {
    state_gb = gb, convention = s.convention,
    bytes_per_param = setmetatable({ weights = s.weights + 0.0, gradients = s.gradients + 0.0, master = s.master + 0.0,
      optimizer_state = s.optimizer_state + 0.0 }, { __order = { "weights", "gradients", "master", "optimizer_state" } }),
    line = fmt("model state      %12.1f GB   (%.3g B parameters x %s per parameter, %s recipe%s)%s\n", gb, params / 1e9,
      M.state_breakdown(s), recipe, recipe == "amp" and " (" .. s.convention .. ")" or "",
      over and fmt(" — exceeds %s: the forecast assumes it fits%s", words, SHARD) or ""),
    warning = over and fmt("model state %.1f GB exceeds %s: the forecast assumes it fits%s", gb, words, SHARD) or nil,
  }
end

-- The predictors ns.predict has (engine/lua/prelude.lua): the built-in ones, not a Lua predictor's file.
local BUILT_IN = { neusight = true, roofline = true, ["roofline-reference"] = true }

--- Whether ns.predict has the predictor `name` (a built-in one): what prices kernels beside a run's own
--- (fp8_bf16_price's bf16 twins; neusight.pipeline's fused kernels' members). A Lua predictor's are not compared.
function M.built_in_predictor(name) return BUILT_IN[name] == true end

--- The pricing fp8_gemm_warning compares with: bf16 twins priced by the built-in predictor `name` on `gpu` (the
--- GPU's plain table) through ns.predict, or nil for a predictor ns.predict does not have (a Lua one: not compared).
function M.fp8_bf16_price(gpu, name)
  if not M.built_in_predictor(name) then return nil end
  return function(twins) return require("neusight").predict(twins, gpu, name) end
end

--- The fp8 (W8A8) GEMMs of a forecast that are forecast slower than the same GEMM in bf16, said once (tester7 P3), or
--- nil. `gemms`: its kernels as { node, kind, dtype, b, m, n, k, weight_bytes, seconds (per launch), launches }; the
--- forward fp8 Linears and BMMs among them (weight-only ones aside) — every fp8 GEMM gemm_fp8 prices, which is what the
--- warning speaks of — are priced as K.linear / K.bmm of their shape in bf16 by
--- `price(twins)` → seconds per twin (ns.predict with the forecast's GPU and predictor), each distinct shape once.
--- Which BMMs are fp8 is neusight.workload fp8_dtypes' rule (only parameter-holding Linear and grouped-expert GEMMs
--- keep fp8): a mixture of experts' grouped expert GEMMs (left out before 2026-11-29, so "all fp8 GEMMs" of
--- Qwen3-30B-A3B's decode on an H100 said 1.5 ms in fp8 against 0.9 in bf16 while the expert GEMMs alone were 21.4
--- against 11.1); eager attention's QKᵀ and ·V run in bf16 there and never reach this. Any fp8 BMM that does is
--- compared alike: it is priced by gemm_fp8 as the rest are.
--- gemm_fp8 is fitted on AIConfigurator's vLLM CutlassFP8ScaledMMLinearKernel rows, which are slower than bf16
--- F.linear at most shapes (B200 73.7 %, GB200 73.6 %, B300 72.9 %, GB300 74.7 %, L40S 50.7 %, RTX PRO 6000 46.0 %
--- of the shapes both were measured at: ../shared/data/aiconfigurator/*/gemm.csv): a forecast faithful to that kernel
--- is then slower than bf16, which is what the warning says, and what --weight-dtype fp8 (W8A16) is instead.
--- `mode`: the run's ("train": its forward GEMMs are compared, and the advice is not --weight-dtype, which training
--- does not take).
function M.fp8_gemm_warning(gemms, price, mode)
  local twins, shapes, by_key = {}, {}, {}
  for _, g in ipairs(gemms) do
    local bmm = g.kind == "bmm" -- a batched fp8 GEMM (in a workload: grouped expert GEMMs, b experts' rows at once)
    if (bmm or g.kind == "gemm" and (g.b or 1) == 1) and g.dtype == "fp8" and not g.weight_bytes and g.m and g.n
      and g.k and (not bmm or g.b) then
      local key = (bmm and g.b .. "x" or "") .. g.m .. "x" .. g.n .. "x" .. g.k
      local s = by_key[key]
      if not s then
        s = { node = g.node, b = bmm and g.b or nil, m = g.m, n = g.n, k = g.k, fp8 = g.seconds, launches = 0 }
        by_key[key] = s
        shapes[#shapes + 1] = s
        twins[#twins + 1] = bmm and K.bmm(g.b, g.m, g.n, g.k, "bf16") or K.linear(g.m, g.n, g.k, "bf16")
      end
      s.launches = s.launches + (g.launches or 1)
    end
  end
  if #twins == 0 then return nil end
  local bf16 = price(twins)
  local slower, fp8_s, bf16_s, worst = 0, 0, 0, nil
  for i, s in ipairs(shapes) do
    s.bf16 = bf16[i]
    fp8_s, bf16_s = fp8_s + s.fp8 * s.launches, bf16_s + s.bf16 * s.launches
    if s.fp8 > s.bf16 then
      slower = slower + 1
      if not worst or (s.fp8 - s.bf16) * s.launches > (worst.fp8 - worst.bf16) * worst.launches then worst = s end
    end
  end
  if slower == 0 then return nil end
  return fmt("dtype fp8 (W8A8): %d of the %d fp8 GEMM shapes of this forecast are forecast slower than the same GEMM "
    .. "in bf16 (most of all %s, %sm %d x n %d x k %d: %.1f us in fp8, %.1f us in bf16; all fp8 GEMMs %.3f ms, %.3f ms "
    .. "in bf16). gemm_fp8 is fitted on AIConfigurator's vLLM CutlassFP8ScaledMMLinearKernel timings (per-tensor "
    .. "W8A8 with dynamic activation quantisation), which are slower than bf16 F.linear at about 74 %% of the shapes "
    .. "measured on B200, GB200, B300 and GB300 and half on L40S and RTX PRO 6000: this forecast is of that kernel, "
    .. "not of a faster fp8 GEMM. %s", slower, #shapes, tostring(worst.node),
    worst.b and fmt("b %d x ", worst.b) or "", worst.m, worst.n, worst.k, worst.fp8 * 1e6,
    worst.bf16 * 1e6, fp8_s * 1e3, bf16_s * 1e3,
    mode == "train" and "In training it is not of Transformer Engine's fp8 GEMMs either: compare with --dtype bf16, "
      .. "whose GEMMs the predictors were trained on"
      or "For fp8 weights with bf16 compute (weight-only, W8A16) give --weight-dtype fp8 with --dtype bf16")
end

return M
