-- tests/golden/tiny_gpt/run.lua — a 2-layer GPT on the Tiny-1 fixture GPU: the end-to-end golden case.
return {
  model = { arch = "gpt", name = "tiny_gpt", n_layer = 2, n_embd = 64, n_head = 4, vocab_size = 100,
            n_positions = 16 },
  gpu = "tests/fixtures/gpus/tiny.toml",
  mode = "train",
  batch = 2,
  seq = 16,
  optimizer = "adam",
}
