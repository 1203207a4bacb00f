-- scripts/neusight/parallel/zero.lua — sharded data parallelism (ZeRO stages 1-3, PyTorch FSDP): what each rank keeps
-- of the model state, ZeRO-3's transient unsharded parameters, and ZeRO-3's per-unit communication.
--
-- parallel.zero (neusight.parallel.config) is the ZeRO stage (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations
-- Toward Training Trillion Parameter Models", Table 1 / Fig. 1: P_os, P_os+g, P_os+g+p; DeepSpeed's
-- zero_optimization.stage; PyTorch FSDP's sharding strategies): over the `dp` ranks of a replica group each keeps 1/dp
--   zero 1  of the optimizer state (master copies, moments) and runs 1/dp of the step: Megatron-LM's distributed
--           optimizer (distributed_optimizer = true is its other name). Gradients are reduce-scattered in buckets
--           during the last backward, the updated parameters all-gathered after the step (neusight.parallel.timeline).
--   zero 2  + of the gradients (DeepSpeed stage 2; FSDP SHARD_GRAD_OP): stage 1's communication (the bucket
--           reduce-scatter leaves each rank its shard; DeepSpeed's stage 2 reduces per bucket as stage 1 does), but
--           with gradient accumulation (microbatches > 1) every microbatch's backward reduce-scatters, since no rank
--           keeps the whole gradient to accumulate into (DeepSpeed's and FSDP's default; neusight.parallel.timeline);
--           the transient unsharded gradient buckets (bucket_mb each) are not counted.
--   zero 3  + of the parameters (DeepSpeed stage 3; FSDP FULL_SHARD, FSDP2 fully_shard as torchtitan and HF accelerate
--           run it): each unit's parameters are all-gathered before its forward and again before its backward, and
--           its gradients reduce-scattered after its backward (M.exposed). No bucket all-reduce, no parameter
--           all-gather after the step (it updates the rank's own shard).
-- The precision recipe's element sizes are the run's (neusight.precision: amp keeps fp32 master copies and moments,
-- pure none): zero 3 gathers parameters in the recipe's parameter dtype and reduce-scatters gradients in its gradient
-- dtype (Megatron's amp: bf16 parameters, fp32 gradients; FSDP's MixedPrecisionPolicy(param_dtype = bf16,
-- reduce_dtype = fp32) alike).
--
-- Units (FSDP's wrapping as torchtitan's apply_fsdp does it: fully_shard per transformer block, on the token embedding,
-- on the final norm with the output projection, then on the root): each layer of the graph (a rep of a layered segment,
-- neusight.parallel.stages) is one unit, and so is each run of nodes outside the layers (the prologue: embeddings; the
-- epilogue: final norm, LM head). Every unit is gathered before its forward, freed after it (reshard_after_forward),
-- gathered again before its backward and reduce-scattered after it: 2 gathers + 1 scatter of every parameter per
-- microbatch, the ZeRO paper's 3Ψ (§7) against DDP's 2Ψ.
local ipairs, max = ipairs, math.max

local M = {}

--- The ZeRO stage of a plan (parallel.zero, 0 when not given): the one stored fact of what it shards;
--- M.optimizer_sharded is derived from it.
function M.stage(plan) return plan.zero or 0 end

--- Whether the plan shards the optimizer state and step over dp: Megatron-LM's distributed optimizer, ZeRO stage 1,
--- and stages 2 and 3, which shard it too (distributed_optimizer = true is zero = 1's other name in the input,
--- neusight.parallel.config). The stage as asked: the report's JSON distributed_optimizer says M.active_stage >= 1,
--- whether it shards in this run.
function M.optimizer_sharded(plan) return M.stage(plan) >= 1 end

--- Whether the run has data-parallel gradients to synchronise: training (it has gradients) over dp > 1 replicas. The
--- one test of the gradient buckets and their reduction (neusight.parallel.timeline, the report's gradient line) and
--- of whether a ZeRO stage can shard at all (the optimizer state and gradients are replicated over dp only then:
--- M.active_stage, neusight.parallel.memory's suggestions, neusight.compare's distributed_optimizer setting). One name:
--- (M.shardable, its exact alias, is gone: one name for one fact.)
function M.dp_gradients(plan) return plan.training and plan.dp > 1 end

--- The stage that shards in this run: the plan's in data-parallel training (dp > 1), else 0 (nothing to shard). The one
--- test of whether ZeRO-3 runs (== 3: its units, their communication and transient bytes; neusight.parallel.timeline,
--- memory, report) and whether the optimizer step is sharded (>= 1).
function M.active_stage(plan) return M.dp_gradients(plan) and M.stage(plan) or 0 end

--- Over how many GPUs each role of the model state of parameters replicated over a group of `size` ranks is split
--- under `plan`: { optimizer (master copies and moments), gradients, weights }, each `size` or 1.
function M.shards(plan, size)
  local r = M.roles(M.active_stage(plan))
  return { optimizer = r.optimizer and size or 1, gradients = r.gradients and size or 1, weights = r.weights and size or 1 }
end

--- Which roles of the model state ZeRO stage `z` shards: { optimizer (master copies and moments, from stage 1),
--- gradients (from 2), weights (3) }, each a boolean; M.shards' and search's no-fit hint's one rule.
function M.roles(z) return { optimizer = z >= 1, gradients = z >= 2, weights = z >= 3 } end

--- A stage's units in forward order: { params (per GPU, this tp shard's), fw, bw (seconds per microbatch: the unit's
--- kernels, its in-graph collectives as the stage counts them, a recomputed forward in bw) }.
---@param st table a virtual stage (neusight.parallel.stages partition)
---@param nodes table[]
---@param times table[] per node { fw, bw, … }
---@param hidden table<integer, number> per node the backward seconds under weight-gradient GEMMs (timeline hidden_comm)
---@param rerun table<integer, boolean> per node: re-runs its forward before its backward (recomputation)
function M.units(st, nodes, times, hidden, rerun)
  local out = {}
  for _, seg in ipairs(st.segments) do
    local params, fw, bw = 0, 0, 0
    for j, i in ipairs(seg.nodes) do
      local t, x = times[i], seg.per[j]
      fw = fw + t.fw * x
      bw = bw + (t.bw - (hidden[i] or 0) + (seg.layered and rerun[i] and t.fw or 0)) * x
      params = params + nodes[i].params * x
    end
    if seg.layered then
      for _ = 1, seg.reps do out[#out + 1] = { params = params, fw = fw, bw = bw } end
    else
      out[#out + 1] = { params = params * seg.reps, fw = fw * seg.reps, bw = bw * seg.reps }
    end
  end
  return out
end

--- Transient bytes of ZeRO-3 on one GPU holding `units` (in forward order): the largest pair of neighbouring units'
--- (the one computing and the one prefetched: FSDP's forward/backward prefetch of one unit ahead, limit_all_gathers;
--- DeepSpeed's stage3_prefetch_bucket_size alike — the next unit in forward, the previous one in backward, so two units
--- far apart, as the embedding and the LM head, are never unsharded together) full parameters and gradients (before
--- their reduce-scatter), at the recipe's parameter and gradient bytes. The sharded copies are the state's (M.shards).
function M.transient_bytes(units, bp, bg)
  local most = #units == 1 and units[1].params or 0
  for k = 2, #units do most = max(most, units[k - 1].params + units[k].params) end
  return most * (bp + bg)
end

-- One pass over `blocks` ({ ag, rs, t }: seconds of the all-gather the block needs before it, of the reduce-scatter
-- after it, of its compute) on one compute stream and one link: block k+1's all-gather is issued when block k starts
-- (FSDP's prefetch of one unit ahead; block 1's at once, so it is exposed whole), block k's reduce-scatter when it
-- ends; the link runs them in the order issued, one at a time. Returns the pass's end (the last reduce-scatter
-- included: the step needs every gradient) less its compute: the exposed communication.
local function pass(blocks)
  local n = #blocks
  if n == 0 then return 0 end
  local link, compute_end, busy = 0, 0, 0
  local ag_end = blocks[1].ag
  link = ag_end
  for k = 1, n do
    local b = blocks[k]
    local start = max(compute_end, ag_end)
    local nxt = blocks[k + 1]
    if nxt then
      if nxt.ag > 0 then
        ag_end = max(link, start) + nxt.ag
        link = ag_end
      else
        ag_end = start
      end
    end
    compute_end = start + b.t
    busy = busy + b.t
    if b.rs > 0 then link = max(link, compute_end) + b.rs end
  end
  return max(compute_end, link) - busy
end

--- ZeRO-3's communication of one microbatch through a stage's `units`, priced by `price(op, bytes)` (the timeline's
--- collective pricer over the dp group: neusight.collectives, the one formula): forward, each unit's all-gather before
--- it; backward in reverse, each unit's all-gather again and its reduce-scatter after it. Exposed = what the compute
--- does not hide, unit by unit (pass above: the first all-gather is exposed whole, the last reduce-scatter too).
--- Gradient accumulation (microbatches > 1) repeats it every microbatch, as FSDP and DeepSpeed stage 3 do by default
--- (FSDP2's set_requires_gradient_sync(False) would skip the reduce-scatters at the cost of unsharded gradients: not
--- modelled).
---@return table { fw_exposed, bw_exposed, wire (seconds on the link), bytes (payload bytes handed to the collectives),
---  gathers, scatters (payload bytes of each kind) }
function M.exposed(units, bp, bg, price)
  local fw, bw, wire, gathers, scatters = {}, {}, 0, 0, 0
  for k, u in ipairs(units) do
    local ag = u.params > 0 and price("all_gather", u.params * bp) or 0
    fw[k] = { ag = ag, rs = 0, t = u.fw }
    wire, gathers = wire + ag, gathers + u.params * bp
  end
  for k = #units, 1, -1 do
    local u = units[k]
    local ag = u.params > 0 and price("all_gather", u.params * bp) or 0
    local rs = u.params > 0 and price("reduce_scatter", u.params * bg) or 0
    bw[#bw + 1] = { ag = ag, rs = rs, t = u.bw }
    wire, gathers, scatters = wire + ag + rs, gathers + u.params * bp, scatters + u.params * bg
  end
  return { fw_exposed = pass(fw), bw_exposed = pass(bw), wire = wire, bytes = gathers + scatters, gathers = gathers,
           scatters = scatters }
end

--- Bytes each rank sends over the link for a collective of `bytes` payload over `size` ranks, bandwidth-optimal (ring):
--- all-reduce 2 (size − 1)/size × bytes, all-gather and reduce-scatter (size − 1)/size × bytes (Patarasuk & Yuan
--- 2009; the ZeRO paper's §7 volume count: DDP 2Ψ, ZeRO-3 3Ψ per step). A volume, not a time: the time is
--- neusight.collectives'.
function M.wire_bytes(op, bytes, size)
  if size <= 1 then return 0 end
  local f = (size - 1) / size
  return (op == "all_reduce" and 2 or 1) * f * bytes
end

return M
