return { gpu = "h100", mode = "train", batch = 1, seq = 128, model = "llama32_1b",
  lora_rank = 8.5 }
