return {
  gpu = "h100", mode = "inference", batch = 4, seq = 128,
  model = function(opts)
    return { { op = "add", name = "res", inputs = { { 4, 128, 64 }, { 4, 128, 64 }, { 4, 128, 64 } }, output = { 4, 128, 64 }, attrs = { input_dtypes = "bf16,,fp32" } } }
  end,
}
