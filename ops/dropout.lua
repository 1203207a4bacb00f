-- ops/dropout.lua — nn.Dropout: a masked copy when training, MEM(in, out) (backward MEM(in) ×2); free in inference.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "dropout",
  doc = "dropout: training MEM(inputs…, out), bw MEM(inputs…) x2; inference no kernels (identity)",
  fusion = "elementwise", -- eval-mode dropout (no kernel) joins a fused run
  saves = function(node) return K.numel(rules.input(node, 1)) end, -- native_dropout's bool mask, 1 B per element
  forward = function(node)
    if not node.training then return {} end -- eval-mode dropout is the identity: no kernel is launched
    return { K.mem(rules.shapes(node, true), node.dtype) }
  end,
  backward = function(node)
    local inputs = rules.shapes(node, false)
    return { K.mem(inputs, node.dtype), K.mem(inputs, node.dtype) }
  end,
}
