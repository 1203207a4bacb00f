return {
  name = "mine", doc = "d", backward = false,
  forward = function(node, gpu)
    return { { kind = "collective", name = "AllReduce", flops = 0, bytes = 1e6, seconds = 0 } }
  end,
}
