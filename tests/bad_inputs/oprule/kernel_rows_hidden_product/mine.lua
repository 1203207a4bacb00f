return {
  name = "mine", doc = "d", backward = false,
  forward = function(node, gpu)
    return { { kind = "softmax", name = "S", rows = 1 << 30, hidden = 1 << 30, flops = 1, bytes = 1 } }
  end,
}
