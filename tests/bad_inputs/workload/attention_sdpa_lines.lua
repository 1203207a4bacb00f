return {
  model = "switchxl4", gpu = "h100", mode = "inference",
  batch = 1, seq = 8,
  attention = "sdpa",
}
