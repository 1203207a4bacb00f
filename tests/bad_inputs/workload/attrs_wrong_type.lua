return {
  gpu = "h100", mode = "inference", batch = 4, seq = 128,
  model = function(opts)
    return { { op = "sdpa", name = "attn", inputs = { { 1, 2, 8, 4 }, { 1, 2, 8, 4 }, { 1, 2, 8, 4 } }, output = { 1, 2, 8, 4 }, attrs = { causal = "false" } } }
  end,
}
