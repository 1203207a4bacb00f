-- examples/gpt3_train.lua — one training iteration (forward, backward, Adam step) of GPT-3 175B on one H100 SXM5.
--
-- The model is spelled out as a config table to show how a user defines one: `arch = "gpt"` selects
-- the builder in scripts/neusight/models/gpt.lua (HF GPT-2 code path, which the reference also uses
-- for its GPT-3 configs). The preset "gpt3_175b" in scripts/neusight/models/presets.lua is the same.
-- The weights, gradients and Adam state (≈ 2.8 TB in fp32) do not fit one 80 GB GPU: this forecasts
-- the compute time of the iteration, not whether it runs.
return {
  description = "GPT-3 175B, one training iteration, batch 1 x 2048 tokens, fp32, Adam",
  model = {
    name = "gpt3_175b",
    arch = "gpt",
    n_layer = 96,
    n_embd = 12288,
    n_head = 96,          -- head size 128
    vocab_size = 50257,
    n_positions = 2048,
    -- n_inner defaults to 4 · n_embd = 49152
  },
  gpu = "H100-SXM5-80GB",
  mode = "train",
  batch = 1,
  seq = 2048,
  optimizer = "adam",
  dtype = "fp32",
}
