return {
  gpu = "h100", mode = "inference", batch = 4, seq = 128,
  model = function(opts)
    return { { op = "sdpa", name = "attn", inputs = { { 4, 3, 128, 64 }, { 4, 5, 128, 64 }, { 4, 5, 128, 64 } }, output = { 4, 3, 128, 64 } } }
  end,
}
