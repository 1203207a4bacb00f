return { gpu = "h100", mode = "train", batch = 8, seq = 128, model = "gpt2_large", parallel = { dp = 2, zero = 4 } }
