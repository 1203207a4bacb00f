return {
  name = "mine", doc = "d", backward = false,
  forward = function(node, gpu)
    return { { kind = "elementwise", name = "V", op = "add", rows = 1 << 62, hidden = 4, flops = 1, bytes = 1 } }
  end,
}
