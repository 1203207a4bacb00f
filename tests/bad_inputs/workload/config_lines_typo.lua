return {
  model = {
    name = "m", arch = "gpt",
    n_layer = 2,
    n_embd = 1024,
    n_head = 16,
    vocab_size = 50257,
    n_positons = 1024,
  },
  gpu = "h100", mode = "inference", batch = 4, seq = 128,
}
