-- scripts/neusight/fallback.lua — memory-bound latency for ops without a model of their own: move every input and the output once.
--
-- An op reaches it only through a rule file that says so (an op without any rule is an error, never a silent guess):
--   -- ops/fancy.lua
--   return require("neusight.fallback").rule { name = "fancy", doc = "priced as memory-bound" }
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

--- An op rule that prices its op with M.forward / M.backward: { name, doc } as for every op file.
---@param spec { name: string, doc: string }
---@return neusight.OpRule
function M.rule(spec)
  if type(spec) ~= "table" or type(spec.name) ~= "string" or type(spec.doc) ~= "string" then
    error("fallback.rule: { name = <the file stem>, doc = <one line> } expected", 2)
  end
  for k in pairs(spec) do
    if k ~= "name" and k ~= "doc" then error(("fallback.rule: unknown field '%s'"):format(tostring(k)), 2) end
  end
  return {
    name = spec.name,
    doc = spec.doc,
    forward = function(node, gpu) return M.forward(node, gpu) end,
    backward = function(node, gpu) return M.backward(node, gpu) end,
  }
end

return M
