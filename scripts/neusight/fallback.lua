-- scripts/neusight/fallback.lua — memory-bound latency for ops without a rule: move every input and the output once.
--
-- The engine calls M.forward (and M.backward when training) for a node whose op has no ops/<op>.lua.
-- The kernel carries `seconds`, so the engine uses this latency instead of predicting one.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

local M = {}

--- Fraction of the nominal DRAM bandwidth a simple copy-like kernel reaches. Editable.
M.efficiency = 0.8
--- Fixed cost per kernel launch, seconds. Editable.
M.launch_overhead_s = 5e-6

-- One MEM kernel touching all inputs and the output, timed at M.efficiency of gpu.mem_bw_gbps.
local function memory_kernel(node, gpu)
  local k = K.mem(rules.shapes(node, true), node.dtype)
  k.seconds = k.bytes / (M.efficiency * gpu.mem_bw_gbps * 1e9) + M.launch_overhead_s
  return k
end

--- Forward: bytes = dtype_bytes · (Σ numel(inputs) + numel(output)).
function M.forward(node, gpu)
  return { memory_kernel(node, gpu) }
end

--- Backward: the same traffic once more (gradient of the output in, gradients of the inputs out).
function M.backward(node, gpu)
  return { memory_kernel(node, gpu) }
end

return M
