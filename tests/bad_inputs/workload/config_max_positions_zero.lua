return {
  model = {
    arch = "llama", hidden_size = 256, intermediate_size = 512, num_attention_heads = 4,
    num_hidden_layers = 2, vocab_size = 1000,
    max_position_embeddings = 0,
  },
  gpu = "h100", mode = "inference", batch = 1, seq = 8,
}
