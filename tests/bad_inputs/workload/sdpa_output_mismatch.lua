return {
  gpu = "h100", mode = "inference", batch = 4, seq = 128,
  model = function(opts)
    return { { op = "sdpa", name = "attn", inputs = { { 4, 8, 128, 64 }, { 4, 8, 128, 64 }, { 4, 8, 128, 64 } }, output = { 4, 8, 131, 64 } } }
  end,
}
