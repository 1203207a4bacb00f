-- tests/scripts/test_launch.lua — the launch-mode rule (scripts/neusight/launch.lua): eager leaves the predictors'
-- times alone; graph re-prices vector kernels only, never above their eager time.
local L = require "neusight.launch"

local function eq(got, want, what)
  if got ~= want then error(("%s:\n  expected %s\n  got      %s"):format(what, tostring(want), tostring(got)), 2) end
end

local gpu = { name = "test gpu", mem_bw_gbps = 1000 }  -- 1e12 B/s
local M = {}

function M.test_eager_changes_nothing()
  eq(L.apply({ { kind = "elementwise", bytes = 1, compute_s = 0, memory_s = 0 } }, { 25e-6 }, gpu, "eager"), nil, "eager")
end

function M.test_graph_reprices_vector_kernels_only()
  local p = L.params(gpu)
  local kernels = {
    { kind = "elementwise", bytes = 1e3, compute_s = 0, memory_s = 1e-9 },    -- tiny: floor + roofline
    { kind = "layernorm", bytes = 8e9, compute_s = 0, memory_s = 8e-3 },      -- huge: keeps its eager time
    { kind = "softmax", bytes = 1e6, compute_s = 5e-6, memory_s = 1e-6 },     -- compute term wins
    { kind = "gemm", bytes = 1e3, compute_s = 0, memory_s = 1e-9 },           -- tensor-core/GEMM: untouched
    { kind = "memory", bytes = 1e3, compute_s = 0, memory_s = 1e-9 },
    { kind = "attention", bytes = 1e3, compute_s = 0, memory_s = 1e-9 },
    { kind = "elementwise", bytes = 0, compute_s = 0, memory_s = 0 },         -- a view: 0 stays 0
  }
  local out = L.apply(kernels, { 25e-6, 9e-3, 30e-6, 25e-6, 1e-9, 7e-6, 0 }, gpu, "graph")
  eq(out[1], 1e3 / (p.bandwidth_efficiency * 1e12) + p.floor_s, "tiny element-wise")
  eq(out[2], 9e-3, "large layer norm keeps the MLP's time (min)")
  eq(out[3], 5e-6 + p.floor_s, "compute-bound softmax")
  eq(out[4], 25e-6, "gemm")
  eq(out[5], 1e-9, "memory")
  eq(out[6], 7e-6, "attention")
  eq(out[7], 0, "view")
end

function M.test_bad_mode_and_params()
  local ok, err = pcall(L.apply, {}, {}, gpu, "cuda")
  eq(ok, false, "bad mode fails")
  eq(err, 'launch mode must be "eager" or "graph" (got cuda)', "message")
  L.PARAMS["test gpu"] = { floor_s = -1, bandwidth_efficiency = 0.8 }
  ok, err = pcall(L.apply, {}, {}, gpu, "graph")
  L.PARAMS["test gpu"] = nil
  eq(ok, false, "negative floor fails")
end

return M
