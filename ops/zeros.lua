-- ops/zeros.lua — torch.zeros / new_zeros (a MoE block's output buffer that experts index_add into): one fill kernel writing the output, MEM(out); no gradient.
local K = require "neusight.kernels"

---@type neusight.OpRule
return {
  name = "zeros",
  doc = "zero-filled tensor: MEM(out) (written once); no backward (no inputs)",
  backward = false,
  forward = function(node) return { K.mem({ node.output }, node.dtype) } end,
}
