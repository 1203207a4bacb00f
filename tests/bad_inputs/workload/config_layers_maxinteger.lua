return { gpu = "h100", mode = "inference", batch = 4, seq = 128, model = { name = "m", arch = "gpt", n_layer = math.maxinteger, n_embd = 1024, n_head = 16, vocab_size = 50257, n_positions = 1024 } }
