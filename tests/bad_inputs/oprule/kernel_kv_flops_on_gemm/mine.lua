return {
  name = "mine", doc = "d", backward = false,
  forward = function(node, gpu)
    return { { kind = "gemm", name = "G", b = 1, m = 4, n = 64, k = 64, flops = 32768, bytes = 1, kv_flops = 1 } }
  end,
}
