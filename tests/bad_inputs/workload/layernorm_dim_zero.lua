return {
  gpu = "h100", mode = "inference", batch = 4, seq = 128,
  model = function(opts)
    return { { op = "layernorm", name = "ln", inputs = { { 4, 0, 64 } }, output = { 4, 0, 64 }, params = 128 } }
  end,
}
