return { gpu = "h100", mode = "train", batch = 8, seq = 128, optimizer = "sgd", model = { name = "m", arch = "gpt", n_layer = 2, n_embd = 1024, n_head = 16, vocab_size = 50257, n_positions = 1024 },
  parallel = { tp = 3 } }
