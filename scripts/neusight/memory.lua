-- scripts/neusight/memory.lua — memory per GPU: model state, saved activations, the temporary peak, workspace, KV cache.
--
-- What one GPU holds at its peak (what torch.cuda.max_memory_allocated reports; the CUDA context, ~0.5 GB, is not
-- counted: that counter excludes it too):
--   state        weights + gradients + fp32 master copies + optimizer moments, by precision recipe
--                (neusight.precision.state_parts: bytes per parameter × the graph's parameters)
--   activations  training only: the tensors autograd keeps for backward, per node from its op rule's `saves(node)`
--                (PyTorch eager's saved tensors: a linear's input, a softmax's output, dropout's 1-byte mask, …;
--                scripts/neusight/rules.lua has the shared defaults). A rule that declares nothing is charged its
--                node's output (an upper bound); parameters are state, never activations. The graph has no producer
--                links, so a tensor two nodes save is counted twice unless the builder says otherwise
--                (node.attrs.saved_inputs; the Llama builder does for q/k/v_proj, gate/up_proj and RMSNorm, the OPT
--                builder for q/k/v_proj; not under torch.autocast, where each projection casts and saves its own copy:
--                neusight.nodes autocast_cast). Under sequence parallelism a column-parallel linear reading the all-gathered
--                input keeps its 1/tp sequence shard (node.attrs.sequence_shard, set by neusight.nodes tp_in), as Megatron does.
--                Parallel runs: the peak over the pipeline schedule with recomputation (neusight/parallel.lua).
--   temporary    the largest transient on top of that: per node its op rule's `temporary(node)`, by default its
--                inputs and output (forward), or the gradients of both (backward), alive at once. The loss is
--                usually the peak in training: the logits plus two fp32 (tokens × vocab) gradients.
--   workspace    cuBLAS workspace, 32 MiB per stream (PyTorch's default on Hopper, CUBLAS_WORKSPACE_CONFIG
--                ":4096:8"; GEMMs run on one stream), plus, under torch.autocast (amp, autocast convention) in
--                training, the cached 16-bit copies of the GEMM weights (autocast keeps them until the forward ends,
--                and backward holds them as saved tensors), and with fp8 compute Transformer Engine's cached fp8
--                weight copies (transformer_engine convention; neusight.precision caches_weights). The caching allocator's fragmentation is not modelled.
--   kv_cache     serving phases (prefill, decode): the KV cache (neusight.nodes.kv_cache_write) of every sequence, all
--                microbatches' (neusight.workload kv_cache_bytes); a pipeline stage its own layers'
--                (neusight.parallel.timeline). Inference with HF's graph: the past_key_values its forward returns
--                (neusight.nodes hf_cache).
-- memory_gb = the sum (GB = 1e9 bytes); fits = memory_gb <= capacity_gb = the datasheet's mem_gb in 1e9 bytes, never
-- more than M.REPORTED_SHARE of the total the device reports (M.budget_gb). The HBM datasheets' GB are binary (an
-- "A100 40GB" has 40 GiB = 42.9e9 bytes; torch reports 42.5e9 total): the ~6 % between is left for what is not
-- modelled — the CUDA context (~0.5 GB), NCCL buffers and the caching allocator's fragmentation (typically a few GB
-- at these sizes). GDDR parts with ECC on report less than their datasheet's GB (L4 22.0 GiB = 23.6e9 of "24 GB").
local K = require "neusight.kernels"
local precision = require "neusight.precision"
local ipairs, pairs, type, tostring, pcall, max, floor, fmt = ipairs, pairs, type, tostring, pcall, math.max, math.floor,
  string.format

local M = {}

M.CUBLAS_WORKSPACE_BYTES = 32 * 1024 * 1024 -- per stream
M.STREAMS = 1
M.GIB = 2 ^ 30
--- The most of the total a device reports (its file's mem_reported_gib) that predict's capacity takes: a margin of at
--- least 5 % for the uncounted (M.budget_gb). A choice, not a measurement: it sits under every shipped HBM part's
--- mem_gb / reported ratio (0.938–0.945), so there mem_gb stays the capacity, and caps the GDDR parts with ECC
--- (L4 22.44 GB, L40S 45.29, T4 15.05) to the same kind of margin.
M.REPORTED_SHARE = 0.95

--- The one memory-budget rule: the GB (1e9 bytes) a run may hold on a GPU of `mem_gb` (the datasheet's, the GPU file's
--- mem_gb) that reports `reported_gib` GiB in all (the GPU file's optional mem_reported_gib; nil: not known) when it
--- takes `utilization` of it.
--- * utilization nil (predict: one PyTorch process may allocate the whole GPU): mem_gb read as 1e9 bytes. An HBM part
---   reports more (an H100 80GB 79.1 GiB = 84.9e9 bytes): the ~6 % between is the margin for what this file does not
---   count — the CUDA context, NCCL buffers, the caching allocator's fragmentation — which
---   torch.cuda.max_memory_allocated, what the memory model forecasts, leaves out too. Never more than
---   M.REPORTED_SHARE of reported_gib, where given: a GDDR part with ECC on reports less than its datasheet's GB (L4
---   22.0 GiB = 23.6e9 bytes of "24 GB", L40S 44.4 GiB of 48, T4 14.75 of 16), so mem_gb there would leave no margin
---   and claim fits the device cannot hold.
--- * utilization given (a serving engine's gpu_memory_utilization, vLLM's 0.9): that share of what the device reports,
---   as vLLM takes it of torch.cuda.mem_get_info()'s total; the rest is the engine's reservation for the CUDA context,
---   activations and CUDA graphs, so no second margin. Without reported_gib: that share of mem_gb × 1e9 (the margin
---   taken twice: ~7 % under vLLM's budget on an HBM part), which M.reported_note says.
function M.budget_gb(mem_gb, utilization, reported_gib)
  if not utilization then
    return reported_gib and math.min(mem_gb, M.REPORTED_SHARE * reported_gib * M.GIB / 1e9) or mem_gb
  end
  if reported_gib then return utilization * reported_gib * M.GIB / 1e9 end
  return utilization * mem_gb
end

--- A GPU's (the engine's view or a plain table) optional mem_reported_gib, nil where its file leaves it out (through
--- require("neusight").gpu_optional, which a plain table of a standalone test passes by its own field).
function M.reported_gib(gpu)
  if gpu == nil then return nil end
  local ok, ns = pcall(require, "neusight")
  if ok and type(ns) == "table" and type(ns.gpu_optional) == "function" then
    return ns.gpu_optional(gpu, "mem_reported_gib")
  end
  return type(gpu) == "table" and rawget(gpu, "mem_reported_gib") or nil
end

--- The note of a serving budget taken of mem_gb because the GPU file (`file`, as messages name it) gives no
--- mem_reported_gib: what `serve` and predict's serving phases say, never silently (M.budget_gb).
function M.reported_note(file, utilization, mem_gb)
  return fmt("%s gives no mem_reported_gib (the total memory the device reports, GiB: torch.cuda.mem_get_info()[1] / "
    .. "2**30): the serving budget is %.0f %% of mem_gb read as 1e9 bytes (%.1f GB), which on an HBM part is ~7 %% "
    .. "under a serving engine's (vLLM takes %.0f %% of what the device reports); add the key to the GPU file for "
    .. "that budget", file, 100 * utilization, utilization * mem_gb, 100 * utilization)
end

--- Bytes a run may use on a GPU of `mem_gb`, nil without one: all of it (M.budget_gb at utilization 1). predict's runs
--- are one PyTorch process, which may allocate the whole GPU.
function M.capacity(mem_gb, reported_gib)
  if not mem_gb then return nil end
  return M.budget_gb(mem_gb, nil, reported_gib) * 1e9
end

--- The GB of the GPU's capacity (M.capacity) as messages write them: mem_gb to the GB ("80") where the capacity is
--- all of it, else the capacity to 0.01 GB ("22.80", a share of the reported total). M.capacity_words' number and
--- search's no-fit message's (engine/cli/search_cmd.cpp). Returns the text and whether it is a share of the reported
--- total.
function M.capacity_gb_text(mem_gb, reported_gib)
  local cap = M.budget_gb(mem_gb, nil, reported_gib)
  if cap >= mem_gb then return fmt("%.0f", mem_gb), false end
  return fmt("%.2f", cap), true
end

--- How a message names the GPU's capacity (M.capacity): "the GPU's 80 GB" where it is mem_gb, else the share of the
--- reported total it is.
function M.capacity_words(mem_gb, reported_gib)
  local gb, share = M.capacity_gb_text(mem_gb, reported_gib)
  if not share then return fmt("the GPU's %s GB", gb) end
  return fmt("the GPU's %s GB (%.0f %% of the %.2f GiB it reports; its datasheet's %.0f GB is more than that)", gb,
    100 * M.REPORTED_SHARE, reported_gib, mem_gb)
end

--- The share of the GPU a serving engine holds weights and KV cache to by default (vLLM's gpu_memory_utilization 0.9;
--- the rest is left for the CUDA context, activations, CUDA graphs and NCCL): `neusight serve`'s default
--- --gpu-memory-utilization. predict's serving phases (prefill, decode) name that budget beside the whole GPU.
M.SERVING_UTILIZATION = 0.9

-- A serving phase's (mode prefill or decode) budget under a serving engine (M.SERVING_UTILIZATION of the GPU): its
-- GB into `obj` (serving_budget_gb), and the warning when `total` bytes fit the whole GPU but not that budget.
-- `reported_gib`: the GPU file's mem_reported_gib (nil: not given), what the budget is a share of (M.budget_gb).
local function serving_budget(obj, mode, mem_gb, total, reported_gib)
  if not (mem_gb and (mode == "prefill" or mode == "decode")) then return nil end
  local budget_gb = M.budget_gb(mem_gb, M.SERVING_UTILIZATION, reported_gib)
  obj.serving_budget_gb = budget_gb
  if total / 1e9 <= budget_gb or total > M.capacity(mem_gb, reported_gib) then return nil end
  return fmt("memory %.1f GB per GPU fits in %s, as one PyTorch process may take all of it, "
    .. "but not in the %.1f GB (%.0f %% of %s) a serving engine gives weights and KV cache by default (vLLM's "
    .. "gpu_memory_utilization %g, `neusight serve --gpu-memory-utilization`): check the batch with `neusight serve` "
    .. "(its fits and max_concurrency page the KV cache in that budget)", total / 1e9,
    M.capacity_words(mem_gb, reported_gib), budget_gb,
    100 * M.SERVING_UTILIZATION, reported_gib and fmt("the %.1f GiB the device reports", reported_gib)
      or "mem_gb read as 1e9 bytes: the GPU file gives no mem_reported_gib, the total the device reports",
    M.SERVING_UTILIZATION)
end

-- A node's tensor's elements by the one shape rule (neusight.kernels shape_check, raw: a shape's metamethods are not
-- run here, the engine refuses such a table); 0 for what is no shape (the node check has said so before).
local function numel(s)
  return K.shape_check(s) or 0
end

local function elem(n) return K.dtype_bytes(n.dtype or "fp32") end

--- The rule lookup of the engine (require("neusight").op_rule; nil for an op without a rule, e.g. an imported
--- reference graph's), or nil outside the engine (standalone tests pass load_op).
function M.engine_rules()
  local ok, ns = pcall(require, "neusight")
  if not (ok and type(ns) == "table" and type(ns.op_rule) == "function") then return nil end
  local op_rule = ns.op_rule
  return function(op)
    local found, rule = pcall(op_rule, op)
    return found and rule or nil
  end
end

-- Ops whose output is a view or bookkeeping, for nodes without a rule: they keep nothing for backward.
local NO_SAVES = {
  view = true, reshape = true, permute = true, transpose = true, split = true, size = true, getitem = true,
  weight = true, all_reduce = true, all_gather = true, reduce_scatter = true, send_recv = true, all_to_all = true,
}

-- What op rule hook `hook` (saves, temporary) returned for node `n`, when it is a number of bytes (finite, >= 0); else
-- an error naming the rule's file and the hook's line (require("neusight").op_where), as a kernel's bad FLOPs are: a
-- negative saves() used to give a negative memory that "fits", a string to fail in this file.
local function hook_bytes(rule, hook, n)
  local v = rule[hook](n)
  if type(v) == "number" and v >= 0 and v < math.huge then return v end
  local ok, ns = pcall(require, "neusight")
  local where = ok and type(ns) == "table" and type(ns.op_where) == "function" and ns.op_where(n.op, hook)
    or ("op '" .. tostring(n.op) .. "'")
  error(("%s: %s() returned %s for node '%s', expected a number of bytes >= 0"):format(where, hook,
    type(v) == "string" and ("%q"):format(v) or tostring(v), tostring(n.name)), 0)
end

--- Bytes one instance of node `n` keeps for backward: attrs.saved_bytes, else its rule's saves(n), else nothing for
--- a rule without backward work (backward = false) or a view, else the node's output (a rule that declares nothing:
--- an upper bound).
function M.node_saved(n, rule)
  if n.phase == "optimizer" then return 0 end
  local a = n.attrs or {}
  if type(a.saved_bytes) == "number" then
    if not (a.saved_bytes >= 0 and a.saved_bytes < math.huge) then
      error(("node '%s': attrs.saved_bytes must be a number of bytes >= 0 (got %s)"):format(tostring(n.name),
        tostring(a.saved_bytes)), 0)
    end
    return a.saved_bytes
  end
  -- attrs.sequence_shard (neusight.nodes tp_in, sequence parallelism): the saved input is the tensor the all-gather
  -- produced, and Megatron's column-parallel linear keeps only this rank's sequence shard of it (1/n).
  local shard = a.sequence_shard == nil and 1 or math.tointeger(a.sequence_shard)
  if not shard or shard < 1 then
    error(("node '%s': attrs.sequence_shard must be an integer >= 1 (got %s)"):format(tostring(n.name),
      tostring(a.sequence_shard)), 0)
  end
  if rule and rule.saves then return hook_bytes(rule, "saves", n) / shard end
  if (rule and rule.backward == false) or NO_SAVES[n.op] then return 0 end
  return numel(n.output) * elem(n)
end

--- Bytes of the largest transient while node `n` runs: its rule's temporary(n), else its inputs and output.
function M.node_temporary(n, rule)
  if n.phase == "optimizer" or NO_SAVES[n.op] then return 0 end
  if rule and rule.temporary then return hook_bytes(rule, "temporary", n) end
  local b = numel(n.output)
  for _, s in ipairs(n.inputs or {}) do b = b + numel(s) end
  return b * elem(n)
end

--- What a core-attention node keeps when selective recomputation re-runs it: the region's inputs it reads
--- (attrs.core_inputs, comma-separated input positions: Q and K of QKᵀ, V of ·V, Q/K/V of sdpa), not its own saves.
function M.node_kept_selective(n)
  local list = (n.attrs or {}).core_inputs
  if type(list) ~= "string" then return 0 end
  local b = 0
  for i in list:gmatch("%d+") do b = b + numel((n.inputs or {})[math.tointeger(tonumber(i))]) end
  return b * elem(n)
end

--- Per node (one instance): saved, temporary and selective-kept bytes, from the op rules (`rule_of(op)`; nil: every
--- node is charged its output).
function M.per_node(nodes, rule_of)
  local saved, temp, kept = {}, {}, {}
  for i, n in ipairs(nodes) do
    local rule = rule_of and rule_of(n.op) or nil
    saved[i], temp[i], kept[i] = M.node_saved(n, rule), M.node_temporary(n, rule), M.node_kept_selective(n)
  end
  return { saved = saved, temporary = temp, kept = kept }
end

--- Weight elements of the GEMMs autocast casts (linear/addmm: I·O from the shapes, so a tied LM head counts too; a
--- grouped expert GEMM, grouped_linear: I·O for each of its attrs.experts local experts, the whole (E, I, O) tensor
--- being cast as one — under autocast the grouped experts' 16-bit copies are held as the loop's linears' are); what
--- neusight.workload checks a model function's declared parameters against. A linear or addmm holds one weight; a
--- grouped_linear without a whole attrs.experts >= 1 is an error (ops/grouped_linear.lua's check refuses it too), not
--- one expert: taking 1 undercounted E - 1 experts' weights.
local function gemm_weights(nodes, per_elem)
  local total = 0
  for _, n in ipairs(nodes) do
    if n.op == "linear" or n.op == "addmm" or n.op == "grouped_linear" then
      local x = n.inputs[n.op == "addmm" and 2 or 1]
      local experts = 1
      if n.op == "grouped_linear" then
        local given = type(n.attrs) == "table" and n.attrs.experts or nil
        experts = math.type(given) and math.tointeger(given) -- a number only: math.tointeger("4") is 4
        if not (experts and experts >= 1) then
          error(("node '%s': grouped_linear needs attrs.experts, the experts of its (E, I, O) weight (got %s)")
            :format(tostring(n.name), tostring(given)), 2)
        end
      end
      if x then total = total + x[#x] * n.output[#n.output] * experts * (n.count or 1) * per_elem(n) end
    end
  end
  return total
end
function M.gemm_weight_elems(nodes)
  return gemm_weights(nodes, function() return 1 end)
end

--- Bytes of the weight copies an amp recipe caches (neusight.precision caches_weights): each GEMM's weight at the
--- dtype its node runs in where that is under 4 bytes, else at the `compute` dtype's. Under fp8 that is 1 byte for
--- the Linear GEMMs Transformer Engine runs in fp8 and 2 for the LM head, which stays bf16 (neusight.workload
--- fp8_dtypes; until audit18 its copy was counted at 1 byte: 0.53 GB short for Llama-3-8B); under torch.autocast
--- every GEMM's copy is 16-bit.
function M.weight_cache_bytes(nodes, compute)
  local default = K.dtype_bytes(compute)
  return gemm_weights(nodes, function(n)
    local b = type(n.dtype) == "string" and K.dtype_bytes(n.dtype) or default
    return b < 4 and b or default
  end)
end

--- The context build() hands to the report and the timeline: per-node bytes, parameters, state layout, workspace.
---@param t { nodes: table, rule_of?: function, training: boolean, state: table, recipe: table, kv_cache_bytes?: number, gpu_mem_gb?: number, gpu_vendor?: string, gpu_reported_gib?: number, mode: string, batch: integer }
function M.context(t)
  local per = M.per_node(t.nodes, t.rule_of)
  local params = 0
  for _, n in ipairs(t.nodes) do params = params + (n.params or 0) * (n.count or 1) end
  local autocast = 0
  if t.training and t.recipe and precision.caches_weights(t.recipe) then
    autocast = M.weight_cache_bytes(t.nodes, t.recipe.compute)
  end
  local count, names = {}, {}
  for i, n in ipairs(t.nodes) do count[i], names[i] = n.count or 1, n.name end
  return {
    saved = per.saved, temporary = per.temporary, kept = per.kept, count = count, names = names,
    params = params, state = t.state,
    training = t.training, kv_cache = t.kv_cache_bytes or 0, gpu_mem_gb = t.gpu_mem_gb, gpu_vendor = t.gpu_vendor,
    gpu_reported_gib = t.gpu_reported_gib, mode = t.mode,
    batch = t.batch, cublas = M.CUBLAS_WORKSPACE_BYTES * M.STREAMS, autocast_cache = autocast,
  }
end

local PARTS = { "state", "activations", "temporary", "workspace", "kv_cache" }
local PARTS_GB = {} -- their keys in a memory object
for i, k in ipairs(PARTS) do PARTS_GB[i] = k .. "_gb" end

--- The JSON `memory` object of one GPU from its parts in bytes (GB in the output) plus extras.
local function memory_object(p, extra)
  local o = {}
  local total, dominant, most = 0, nil, -1
  for _, k in ipairs(PARTS) do
    local b = p[k] or 0
    o[k .. "_gb"] = b / 1e9
    total = total + b
    if b > most then dominant, most = k, b end
  end
  o.dominant = dominant
  for k, v in pairs(extra or {}) do o[k] = v end
  return o, total
end

local function gb(b) return b / 1e9 end

-- A GPU's memory object's breakdown of its parts (one GPU's and a parallel run's fullest alike): state { weights_gb,
-- gradients_gb, master_gb, optimizer_gb } (neusight.precision state_parts), workspace { cublas_gb,
-- autocast_weight_cache_gb } (bytes) and temporary_node (the node of the largest temporary, "" when none).
local function breakdown(st, cublas, autocast, temp_node)
  return {
    state = { weights_gb = gb(st.weights), gradients_gb = gb(st.gradients), master_gb = gb(st.master),
              optimizer_gb = gb(st.optimizer),
              -- ZeRO-3's unsharded parameters and gradients of the units in flight (neusight.parallel.zero)
              gathered_gb = st.gathered and gb(st.gathered) or nil },
    workspace = { cublas_gb = gb(cublas), autocast_weight_cache_gb = gb(autocast) },
    temporary_node = temp_node or "",
  }
end

--- Single-GPU memory: { memory_gb, memory = the JSON object, lines = table lines, warning?, max_batch_error? }.
--- `at_batch(b)` (optional) returns the total bytes of the same run at batch b, for the largest batch that fits; where
--- it fails the largest batch is left out and max_batch_error is its message.
function M.single(ctx, at_batch)
  local st = precision.state_parts(ctx.params, ctx.state)
  local state = st.total
  local act = 0
  if ctx.training then
    for i, b in ipairs(ctx.saved) do act = act + b * (ctx.count[i] or 1) end
  end
  local temp, temp_node = 0, nil
  for i, b in ipairs(ctx.temporary) do
    if b > temp then temp, temp_node = b, ctx.names[i] end
  end
  local parts = { state = state, activations = act, temporary = temp,
                  workspace = ctx.cublas + ctx.autocast_cache, kv_cache = ctx.kv_cache }
  local obj, total = memory_object(parts, breakdown(st, ctx.cublas, ctx.autocast_cache, temp_node))
  local cap = M.capacity(ctx.gpu_mem_gb, ctx.gpu_reported_gib) or math.huge
  if ctx.gpu_mem_gb then obj.capacity_gb = cap / 1e9 end
  local max_batch_error -- the model fails at a batch the search builds: no largest batch (the caller says why)
  if at_batch and ctx.gpu_mem_gb then
    local ok, found = pcall(M.max_batch, at_batch, ctx.batch, total, cap)
    if ok then
      obj.max_batch = found
      if found then obj.max_batch_of = "batch" end -- what was varied (M.parallel: a micro-batch)
    else
      max_batch_error = tostring(found)
    end
  end
  local out = { memory_gb = total / 1e9, memory = obj, total = total, fits = total <= cap,
                max_batch_error = max_batch_error }
  out.warning = serving_budget(obj, ctx.mode, ctx.gpu_mem_gb, total, ctx.gpu_reported_gib)
  out.lines = { M.line(obj, total, ctx) }
  if total > cap then
    local hint = (obj.max_batch and obj.max_batch > 0) and fmt(" (the largest batch that fits is %d)", obj.max_batch)
      or (state > cap and " (shard it, see the parallelism options)" or "")
    out.warning = fmt("memory %.1f GB per GPU (model state %.1f + activations %.1f + temporary %.1f + workspace %.2f%s) "
      .. "exceeds %s: the forecast assumes it fits%s", gb(total), obj.state_gb, obj.activations_gb,
      obj.temporary_gb, obj.workspace_gb, parts.kv_cache > 0 and fmt(" + KV cache %.1f", obj.kv_cache_gb) or "",
      M.capacity_words(ctx.gpu_mem_gb, ctx.gpu_reported_gib), hint)
  end
  return out
end

--- The largest batch whose memory (`at_batch(b)` bytes, increasing in b) is at most `cap`; 0 when batch 1 does not
--- fit. Activations, temporaries and the KV cache grow about linearly with the batch: a linear estimate from two
--- points, then checked against the model itself. Steps of 1, 2, 4, … from the estimate bracket the answer and a
--- bisection finds it, so a poor estimate (a term that grows faster than the batch) costs O(log b) model builds, not
--- one per batch.
function M.max_batch(at_batch, batch, total, cap)
  local f1 = batch == 1 and total or at_batch(1)
  if f1 > cap then return 0 end
  local f2 = batch == 2 and total or at_batch(2)
  local slope = f2 - f1
  if slope <= 0 then return nil end -- nothing grows with the batch
  local b = max(1, 1 + floor((cap - f1) / slope))
  local seen = { [1] = f1, [2] = f2, [batch] = total }
  local function f(x)
    local v = seen[x]
    if v == nil then v = at_batch(x); seen[x] = v end
    return v
  end
  local lo, hi, step = b, b, 1 -- f(lo) <= cap < f(hi) once bracketed
  if f(b) <= cap then
    hi = b + step
    while f(hi) <= cap do lo, step = hi, step * 2; hi = lo + step end
  else
    lo = b - step
    while lo > 1 and f(lo) > cap do hi, step = lo, step * 2; lo = max(1, hi - step) end
  end
  while hi - lo > 1 do
    local mid = (lo + hi) // 2
    if f(mid) <= cap then lo = mid else hi = mid end
  end
  return lo
end

-- A memory line's pieces, one GPU's and a parallel run's alike: whether `total` bytes fit a GPU of `mem_gb` (and a
-- serving phase's budget), what dominates ("activations dominate", "state / KV cache / … dominates") and the largest
-- batch that fits ("" when not known): a micro-batch's (max_batch_of "micro-batch size", M.parallel) with the global
-- batch it makes.
local function verdict_of(obj, total, mem_gb, reported_gib)
  local cap = M.capacity(mem_gb, reported_gib)
  local verdict = cap and (total <= cap and "fits in " .. M.capacity_words(mem_gb, reported_gib)
    or "exceeds " .. M.capacity_words(mem_gb, reported_gib) .. ": the forecast assumes it fits") or ""
  if obj.serving_budget_gb then  -- a serving phase: the budget `neusight serve` holds it to (serving_budget)
    verdict = verdict .. fmt(" (%s serve's %.1f GB, %.0f %%)", total / 1e9 <= obj.serving_budget_gb and "within"
      or "over", obj.serving_budget_gb, 100 * M.SERVING_UTILIZATION)
  end
  return verdict
end
local function dominates(obj)
  local plural = obj.dominant == "activations"
  return fmt("%s dominate%s", obj.dominant == "kv_cache" and "KV cache" or obj.dominant, plural and "" or "s")
end
local function batch_of(obj, sizing)
  if not obj.max_batch then return "" end
  if obj.max_batch_of == "micro-batch size" then
    return obj.max_batch >= 1 and fmt("; largest micro-batch that fits: %d (global batch %d = %d × dp %d × %d "
      .. "microbatch%s)", obj.max_batch, obj.max_global_batch, obj.max_batch, sizing.dp, sizing.microbatches,
      sizing.microbatches == 1 and "" or "es")
      or "; no micro-batch fits (micro-batch 1 exceeds it)"
  end
  return obj.max_batch >= 1 and fmt("; largest batch that fits: %d", obj.max_batch)
    or "; no batch fits (batch 1 exceeds it)"
end

--- The table's memory line: the total, its parts, what dominates, whether it fits, the largest batch.
function M.line(obj, total, ctx)
  local parts = fmt("state %.2f + activations %.2f + temporary %.2f%s + workspace %.2f%s", obj.state_gb,
    obj.activations_gb, obj.temporary_gb, obj.temporary_node ~= "" and " (" .. obj.temporary_node .. ")" or "",
    obj.workspace_gb, obj.kv_cache_gb > 0 and fmt(" + KV cache %.2f", obj.kv_cache_gb) or "")
  return fmt("memory           %12.2f GB   per GPU = %s; %s; %s%s (saved tensors, no %s context)",
    gb(total), parts, dominates(obj), verdict_of(obj, total, ctx.gpu_mem_gb, ctx.gpu_reported_gib), batch_of(obj),
    require("neusight.report").runtime_name(ctx.gpu_vendor))  -- neusight.launch runtime_name: HIP on an AMD GPU
end

--- Per pipeline stage of a parallel run: the device's parts in bytes → { memory_gb, memory object } for its row,
--- and the run's memory (the fullest device's). `devices[d]` = { state, activations, temporary, workspace, kv_cache }
--- in bytes and, for the breakdown a one-GPU run's object has (state, workspace, temporary_node), state_parts
--- (neusight.precision state_parts), cublas, autocast_cache (bytes) and temporary_node (a name, nil when none).
--- `lean` (a search's ranking): no per-stage lines (`lines` empty). `unsaved`: the activations were not counted (an
--- imported graph's nodes do not say what they keep for backward); the lines and the warning say so. `reported_gib`:
--- the GPU file's mem_reported_gib (nil: not given), of which a serving phase's budget is a share (M.budget_gb).
--- `sizing` (optional; nil in a search's lean ranking) = { at = function(mb) → bytes of the fullest GPU at micro-batch
--- size mb, micro_batch, dp, microbatches }: the largest micro-batch that fits, dp and the microbatch count fixed (what
--- Megatron's --micro-batch-size is; the global batch is mb · dp · microbatches), by M.max_batch against `at` (the
--- same per-stage memory, neusight.parallel.memory at) into the memory object: max_batch, max_batch_of ("micro-batch
--- size", or "batch" where dp · microbatches = 1: the micro-batch is the batch) and max_global_batch (the global batch
--- it makes; micro-batch size only). Where `at` fails the fields are left out and max_batch_error is its message.
--- Not lean, the lines end with the fullest GPU's: what dominates it, whether it fits, the largest micro-batch.
function M.parallel(devices, gpu_mem_gb, recompute, lean, unsaved, mode, reported_gib, sizing)
  local cap = M.capacity(gpu_mem_gb, reported_gib)
  local stages, most, fullest = {}, -1, 1
  local function object_of(d)
    local p = devices[d]
    -- activations_counted = false: an imported graph's, whose saved tensors are not known (0 GB is not a measure)
    local extra = p.state_parts and breakdown(p.state_parts, p.cublas or 0, p.autocast_cache or 0, p.temporary_node) or {}
    extra.stage = d - 1
    if unsaved then extra.activations_counted = false end
    return memory_object(p, extra)
  end
  for d, p in ipairs(devices) do
    local obj, total
    if lean then -- a search's ranking: each stage's parts in GB and total (as memory_object has them), the whole
      -- object of the fullest stage only (below), the one the run's memory reports
      obj, total = {}, 0
      for i, k in ipairs(PARTS) do
        local b = p[k] or 0
        obj[PARTS_GB[i]] = b / 1e9
        total = total + b
      end
    else
      obj, total = object_of(d)
    end
    stages[d] = { memory = obj, total = total }
    if total > most then most, fullest = total, d end
  end
  if lean and stages[fullest] then stages[fullest].memory = object_of(fullest) end
  local lines, over, over_list, worst, kv = {}, 0, {}, 0, false
  for d, s in ipairs(stages) do
    local o = s.memory
    if not lean then lines[d] = fmt("memory    stage %d: %.1f GB per GPU = state %.1f + %s + temporary %.2f + workspace %.2f%s%s",
      d - 1, gb(s.total), o.state_gb, unsaved and "activations not counted (an imported graph does not say what its "
        .. "nodes keep for backward)" or fmt("activations %.1f (saved for backward, peak over the schedule%s)",
        o.activations_gb, recompute ~= "none" and ", " .. recompute .. " recomputation" or ""), o.temporary_gb, o.workspace_gb,
      o.kv_cache_gb > 0 and fmt(" + KV cache %.2f", o.kv_cache_gb) or "",
      cap and s.total > cap and " — exceeds " .. M.capacity_words(gpu_mem_gb, reported_gib) or "") end
    if cap and s.total > cap then
      over, worst, kv = over + 1, max(worst, s.total), kv or o.kv_cache_gb > 0
      over_list[#over_list + 1] = tostring(d - 1)
    end
  end
  local out = { memory_gb = most / 1e9, memory = stages[fullest] and stages[fullest].memory or {}, stages = {},
                lines = lines, fits = cap == nil or most <= cap, total = stages[fullest] and most or 0 }
  if cap then out.memory.capacity_gb = cap / 1e9 end
  for d, s in ipairs(stages) do
    local o = s.memory
    out.stages[d] = { state_gb = o.state_gb, activation_gb = o.activations_gb, temporary_gb = o.temporary_gb,
                      workspace_gb = o.workspace_gb, kv_cache_gb = o.kv_cache_gb, memory_gb = s.total / 1e9 }
  end
  if stages[fullest] then out.warning = serving_budget(out.memory, mode, gpu_mem_gb, most, reported_gib) end
  if sizing and cap and stages[fullest] and not unsaved then  -- the largest micro-batch that fits
    local ok, found = pcall(M.max_batch, sizing.at, sizing.micro_batch, most, cap)
    if not ok then
      out.max_batch_error = tostring(found)
    elseif found then
      local o, per = out.memory, sizing.dp * sizing.microbatches
      o.max_batch, o.max_batch_of = found, per > 1 and "micro-batch size" or "batch"
      if per > 1 then o.max_global_batch = found * per end
    end
  end
  if not lean and stages[fullest] then  -- the fullest GPU: what dominates, whether it fits, the largest micro-batch
    local o = out.memory
    local verdict = verdict_of(o, most, gpu_mem_gb, reported_gib)
    lines[#lines + 1] = fmt("memory    fullest GPU: stage %d, %.1f GB per GPU; %s%s%s", fullest - 1, gb(most),
      dominates(o), verdict ~= "" and "; " .. verdict or "", batch_of(o, sizing))
  end
  if over > 0 then
    out.warning = fmt("%s %s %s up to %.1f GB per GPU (model state + %stemporary + workspace%s%s), "
      .. "more than %s: the forecast assumes it fits", over > 1 and "stages" or "stage",
      table.concat(over_list, ", "), over > 1 and "need" or "needs", worst / 1e9,
      unsaved and "" or "saved activations + ", kv and " + KV cache" or "",
      unsaved and "; activations not counted" or "", M.capacity_words(gpu_mem_gb, reported_gib))
  end
  return out
end

return M
