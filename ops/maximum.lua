-- ops/maximum.lua — torch.max(x, other) / torch.maximum(x, other) with a one-element `other`: HF OPT's attention-score
-- clamp torch.max(scores, torch.tensor(finfo.min)). Forward VECmaxu(rows,H) reading x and writing y. Backward for x
-- only (the clamp value is a constant, no gradient), PyTorch's derivative of maximum:
-- at::where(x == other, grad / 2, grad).masked_fill_(x < other, 0), i.e. VECeq, VECdivu, VECwhere, VEClt,
-- VECmasked_fill over the same elements (masks 1 byte per element).
local K = require "neusight.kernels"
local rules = require "neusight.rules"

-- bytes per element of each backward kernel, as (floats read + written, mask bytes)
local BACKWARD = {
  { "eq", 1, 1 },          -- x == other: read x, write a mask
  { "divu", 2, 0 },        -- grad / 2: read grad, write
  { "where", 3, 1 },       -- where(mask, grad / 2, grad): read the mask and two floats, write
  { "lt", 1, 1 },          -- x < other: read x, write a mask
  { "masked_fill", 2, 1 }, -- in place: read and write the gradient, read the mask
}

---@type neusight.OpRule
return {
  name = "maximum",
  doc = "element-wise max with a one-element tensor: VECmaxu(rows,H); bw VECeq, VECdivu, VECwhere, VEClt, VECmasked_fill",
  attrs = rules.attrs { "no_grad" },
  saves = function(node) return node.attrs.no_grad and 0 or rules.saves_input(node) end, -- x, for the masks
  check = rules.check_broadcast,
  forward = function(node)
    local rows, hidden = rules.vec_dims(node)
    if not rows then return {} end
    return { K.vec("maxu", rows, hidden, node.dtype, { bytes = rules.io_bytes(node) }) }
  end,
  backward = function(node)
    local rows, hidden = rules.vec_dims(node)
    if not rows or node.attrs.no_grad then return {} end
    local e, n = K.dtype_bytes(node.dtype), rows * hidden
    local out = {}
    for i, k in ipairs(BACKWARD) do
      out[i] = K.vec(k[1], rows, hidden, node.dtype, { bytes = (k[2] * e + k[3]) * n })
    end
    return out
  end,
}
