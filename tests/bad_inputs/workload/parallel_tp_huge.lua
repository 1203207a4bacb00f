return { gpu = "h100", mode = "train", batch = 8, seq = 128, model = "gpt2_large", parallel = { tp = 2^40 } }
