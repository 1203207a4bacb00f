-- tests/golden/tiny_gpt_neusight/run.lua — GPT-2 large shapes, 2 layers, on an A100: the MLP-predictor golden case.
return {
  model = { arch = "gpt", name = "gpt2_large_2l", n_layer = 2, n_embd = 1280, n_head = 20, vocab_size = 50257,
            n_positions = 1024 },
  gpu = "A100-PCIE-40GB",
  mode = "train",
  batch = 2,
  seq = 512,
  optimizer = "adam",
}
