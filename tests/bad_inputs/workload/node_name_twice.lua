return {
  gpu = "h100", mode = "inference", batch = 4, seq = 128,
  model = function(opts)
    return { { op = "gelu", name = "g", inputs = { { 4, 8 } }, output = { 4, 8 } },
      { op = "gelu", name = "g", inputs = { { 4, 8 } }, output = { 4, 8 } } }
  end,
}
