-- scripts/neusight/parallel.lua — data, tensor and pipeline parallelism: workload validation, the rank layout, collective nodes, and the per-device timeline.
--
-- A workload's `parallel` table (or predict's --dp/--tp/--pp/--microbatches/--schedule):
--   parallel = { dp = 4, tp = 2, pp = 2, microbatches = 8, schedule = "1f1b", ep = 1,
--                virtual_stages = 2, bucket_mb = 25, overlap_grad_reduce = true, kernels = "megatron",
--                cluster = { gpus_per_node = 8, nodes = 2, inter = { bw_gbps = 50 } } }
-- `batch` stays the global batch: each pipeline runs microbatches of batch / (dp · microbatches).
--
-- This file is the facade: require("neusight.parallel") is what workloads, model builders, op rules (ops/all_reduce.lua
-- …), tests and the engine (engine/lua/session_hooks.cpp) use. Each concern lives in its own module under
-- scripts/neusight/parallel/, in the order the engine uses them:
--   1. config.lua    M.normalize validates the table (unknown keys → did-you-mean) and fills defaults; M.active;
--                    M.check_choice checks one choice field alone (a comparison's up-front check of its values).
--   2. layout.lua    M.plan lays out the ranks Megatron-style (tp fastest, then dp, then pp), builds the cluster
--                    (neusight/topology.lua) and each communicator group's shape (M.group_shape).
--   3. shard.lua     Model builders shard themselves when opts.tp > 1 (M.tensor_shard: Megatron column/row-parallel
--                    layers; M.expert_shard; M.split) and insert collectives with M.comm_node, priced once by
--                    neusight/collectives.lua (α–β model) and priced again by M.retype when a workload pass
--                    changes their element type; M.rule is the op rule of a collective node kind;
--                    M.price_reference prices a reference graph's collective kernels; M.mark_replicated marks the
--                    nodes every tp rank runs whole, which the model FLOPs count once.
--   4. After the kernels are predicted, timeline.lua (M.timeline) partitions the layers into pipeline stages
--      (stages.lua; M.layer_count), simulates the schedule (schedule.lua: GPipe, 1F1B, interleaved 1F1B; M.schedules,
--      M.simulate) from the per-stage forward/backward times, overlaps the data-parallel gradient all-reduce buckets
--      with the last backward pass, and returns per device: compute, exposed communication and bubble, and the memory
--      per stage (memory.lua: saved activations over the schedule, temporaries, the state share).
--   5. report.lua    M.report turns the plan and its timeline into what the forecast report shows: the JSON `parallel`
--                    object, the table's lines, the state per GPU and the layout figures.lua gets; the engine renders
--                    them as they are.
-- Every step is plain Lua: a new schedule is a function in M.schedules, a new collective algorithm a
-- function in neusight.collectives.algorithms; nothing needs recompiling.
local config = require "neusight.parallel.config"
local layout = require "neusight.parallel.layout"
local shard = require "neusight.parallel.shard"
local schedule = require "neusight.parallel.schedule"
local stages = require "neusight.parallel.stages"
local timeline = require "neusight.parallel.timeline"
local report = require "neusight.parallel.report"

local M = {}

-- the same functions and registry as the modules' own (errors keep their levels: no wrappers)
M.schedules = schedule.schedules
M.normalize, M.active, M.check_choice = config.normalize, config.active, config.check_choice
M.group_shape, M.plan = layout.group_shape, layout.plan
M.comm_node, M.rule, M.tensor_shard, M.expert_shard = shard.comm_node, shard.rule, shard.tensor_shard, shard.expert_shard
M.retype = shard.retype
M.price_reference, M.split, M.mark_replicated = shard.price_reference, shard.split, shard.mark_replicated
M.simulate = schedule.simulate
M.layer_count = stages.layer_count
M.timeline = timeline.timeline
M.report = report.report

return M
