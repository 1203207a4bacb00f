return { gpu = "h100", mode = "inference", batch = 4, seq = 128, model = "mixtral_8x7b", experts = "groupd" }
