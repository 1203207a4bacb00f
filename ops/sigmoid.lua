-- ops/sigmoid.lua — torch.sigmoid / F.sigmoid (Qwen2-MoE's shared-expert gate): one element-wise kernel each way.
-- Forward VECsigmoid reads x and writes y; backward VECsigmoid_backward (PyTorch's sigmoid_backward, dy·y·(1 − y))
-- reads dy and y and writes dx.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

---@type neusight.OpRule
return {
  name = "sigmoid",
  doc = "sigmoid 1/(1+exp(−x)): VECsigmoid(rows,H); bw VECsigmoid_backward(rows,H) (reads dy and y)",
  forward = function(node)
    local rows, hidden = rules.vec_dims(node)
    if not rows then return {} end
    return { K.vec("sigmoid", rows, hidden, node.dtype, { bytes = rules.io_bytes(node) }) }
  end,
  backward = function(node)
    local rows, hidden = rules.vec_dims(node)
    if not rows then return {} end
    return { K.vec("sigmoid_backward", rows, hidden, node.dtype) }
  end,
}
