return {
  gpu = "h100", mode = "inference", batch = 4, seq = 128,
  model = function(opts)
    return nil
  end,
}
