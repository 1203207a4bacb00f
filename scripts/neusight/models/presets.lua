-- scripts/neusight/models/presets.lua — named model configs (name → cfg with `arch`), shapes from the reference's DLmodel_configs.
--
-- The reference's gpt3_* configs are HF GPT2LMHeadModel configs with GPT-3 shapes (the GPT-2 code
-- path: learned positions, dense attention, gelu_new), so they all use arch = "gpt". gpt3_175b is
-- GPT-3 "175B" (Brown et al. 2020, table 2.1) on the same code path.
local function gpt(name, n_layer, n_embd, n_head, n_positions)
  return {
    name = name, arch = "gpt",
    n_layer = n_layer, n_embd = n_embd, n_head = n_head,
    vocab_size = 50257, n_positions = n_positions,
  }
end

return {
  gpt2_med   = gpt("gpt2_med",   24, 1024, 16, 1024),
  gpt2_large = gpt("gpt2_large", 36, 1280, 20, 1024),
  gpt2_xl    = gpt("gpt2_xl",    48, 1600, 25, 1024),
  gpt3_xl    = gpt("gpt3_xl",    24, 3072, 24, 2048),
  gpt3_27    = gpt("gpt3_27",    32, 2560, 32, 2048),
  gpt3_67    = gpt("gpt3_67",    32, 4096, 32, 2048),
  gpt3_13    = gpt("gpt3_13",    40, 5120, 40, 2048),
  gpt3_175b  = gpt("gpt3_175b",  96, 12288, 96, 2048),
}
