return { gpu = "h100", mode = "train", batch = 8, seq = 128, model = "gpt2_large", parallel = { pp = 2, microbatches = 2, schedule = 'interleaved', virtual_stages = 1e308 } }
