return {
  name = "mine", doc = "d", backward = false,
  forward = function(node, gpu)
    return { { kind = "gemm", name = "G", b = 1, m = 64, n = 64, k = 64, flops = 0, bytes = 1e6 } }
  end,
}
