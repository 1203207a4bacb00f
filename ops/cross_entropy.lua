-- ops/cross_entropy.lua — token cross-entropy loss on logits (T, V) and targets (T); ours, the reference traces no loss.
--
-- PyTorch computes F.cross_entropy as log_softmax followed by nll_loss:
--   forward  log_softmax over V: one row-softmax pass       K.softmax(T, V)
--            nll_loss gathers one log-prob per row           MEM((T,), (T,))  (targets read, picked values written)
--   backward nll_loss_backward zero-fills a (T, V) gradient, then scatters −1/T into it:  MEM((T, V))
--            log_softmax_backward dx = dy − softmax·Σdy, i.e. softmax − one-hot: one binary
--            elementwise pass over (T, V) reading two tensors and writing one:              VECsub(T, V)
-- Logits of any rank are accepted: V = last dim, T = numel / V.
-- Every kernel, the saved log-probabilities and the two (T, V) gradients are in node.dtype, the type the loss computes
-- in. The stacks run it in fp32 whatever the model's dtype: HF's causal-LM loss upcasts the logits (logits.float() in
-- ForCausalLMLoss, LlamaForCausalLM / GPT2LMHeadModel), torch.autocast has cross_entropy and log_softmax on its fp32
-- list, Megatron-LM's vocab-parallel cross-entropy calls .float(). A 16-bit graph then says so: a `cast` node to fp32
-- before the loss (that upcast's kernel; neusight.nodes.causal_lm_loss, neusight.workload autocast_loss) and this node
-- in fp32 with attrs.from = the logits' own dtype, which the memory temporary counts them in.
local K = require "neusight.kernels"
local rules = require "neusight.rules"

local function dims(node)
  return K.vec_shape(rules.input(node, 1))
end

---@type neusight.OpRule
return {
  name = "cross_entropy",
  doc = "CE loss on logits (T,V): VECsoftmax(T,V) + MEM((T,),(T,)); bw MEM((T,V)) zero-fill + VECsub(T,V)",
  attrs = rules.attrs { from = "string: the logits' dtype before their upcast to node.dtype (HF's logits.float(), "
    .. "autocast's cast to fp32; a cast node before this one moves them): the model's output the memory temporary "
    .. "counts (default: node.dtype)",
    inplace = "boolean: Megatron-Core's vocab-parallel cross-entropy, which works in the upcast logits' own buffer "
      .. "(the saved softmax) forward and backward: the temporary is the logits (or their gradient) in `from` only" },
  -- log_softmax keeps its output for backward (in the loss's dtype: fp32 where the stack upcasts), nll_loss the int64
  -- targets
  saves = function(node)
    local T, V = dims(node)
    return K.dtype_bytes(node.dtype) * T * V + K.index_bytes * T
  end,
  -- the peak of the step is often here: the logits (kept as the model's output, in their own dtype) and, in backward,
  -- two (T, V) gradients at once in the loss's dtype (of the log-probabilities and of the logits); inference: the
  -- logits and the log-probabilities
  -- Megatron-Core's _VocabParallelCrossEntropy (attrs.inplace) subtracts the max, exponentiates and normalises in the
  -- fp32 logits' own buffer and saves that buffer as the softmax; its backward writes the gradient into it (grad_input
  -- = softmax, then in-place updates), so beyond the saved softmax only the 16-bit logits (forward) or their
  -- gradient's cast back (backward) are alive: T·V in `from`.
  temporary = function(node)
    local T, V = dims(node)
    local logits = T * V * K.dtype_bytes(node.attrs.from or node.dtype)
    if node.attrs.inplace then return logits end
    return logits + 2 * K.dtype_bytes(node.dtype) * T * V
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
