return {
  gpu = "h100", mode = "inference", batch = 4, seq = 128,
  model = function(opts)
    return { { op = "linear", name = "fc", inputs = { { 4, 128, 64 } }, output = { 7, 3, 99 }, params = 6336 } }
  end,
}
