return {
  name = "mine", doc = "d", backward = false,
  forward = function(node, gpu)
    return { { kind = "elementwise", name = "V", op = "add", rows = 4, hidden = 4, flops = 0, bytes = 16 } }
  end,
}
