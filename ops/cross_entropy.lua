-- ops/cross_entropy.lua — token cross-entropy loss on logits (T, V) and targets (T); ours, the reference traces no loss.
--
-- PyTorch computes F.cross_entropy as log_softmax followed by nll_loss:
--   forward  log_softmax over V: one row-softmax pass       K.softmax(T, V)
--            nll_loss gathers one log-prob per row           MEM((T,), (T,))  (targets read, picked values written)
--   backward nll_loss_backward zero-fills a (T, V) gradient, then scatters −1/T into it:  MEM((T, V))
--            log_softmax_backward dx = dy − softmax·Σdy, i.e. softmax − one-hot: one binary
--            elementwise pass over (T, V) reading two tensors and writing one:              VECsub(T, V)
-- Logits of any rank are accepted: V = last dim, T = numel / V.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

local function dims(node)
  return K.vec_shape(rules.input(node, 1))
end

---@type neusight.OpRule
return {
  name = "cross_entropy",
  doc = "CE loss on logits (T,V): VECsoftmax(T,V) + MEM((T,),(T,)); bw MEM((T,V)) zero-fill + VECsub(T,V)",
  -- log_softmax keeps its output for backward, in fp32 (HF upcasts the logits; autocast runs log_softmax in fp32),
  -- nll_loss the int64 targets
  saves = function(node)
    local T, V = dims(node)
    return 4 * T * V + K.index_bytes * T
  end,
  -- the peak of the step is often here: the logits (kept as the model's output) and, in backward, two fp32 (T, V)
  -- gradients at once (of the log-probabilities and of the logits); inference: the logits and the log-probabilities
  temporary = function(node)
    local T, V = dims(node)
    return T * V * K.dtype_bytes(node.dtype) + 2 * 4 * T * V
  end,
  forward = function(node)
    local T, V = dims(node)
    return { K.softmax(T, V, node.dtype), K.mem({ { T }, { T } }, node.dtype) }
  end,
  backward = function(node)
    local T, V = dims(node)
    return { K.mem({ { T, V } }, node.dtype), K.vec("sub", T, V, node.dtype) }
  end,
}
