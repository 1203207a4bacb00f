return {
  name = "mine", doc = "d", backward = false,
  forward = function(node, gpu)
    return { { kind = "gemm", name = "G", m = 0, n = 64, k = 64 } }
  end,
}
