return {
  gpu = "h100", mode = "inference", batch = 4, seq = 128,
  model = function(opts)
    return { { op = "linear", name = "fc", inputs = { { 4, 128, 64 } }, output = { 4, 128, 64 }, params = 4096, layer = 1 } }
  end,
}
