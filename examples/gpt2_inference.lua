-- examples/gpt2_inference.lua — GPT-2 Large forward pass, batch 4 x 1024 tokens, on an A100 PCIe 40GB (a reference configuration).
return {
  description = "GPT-2 Large inference, batch 4, seq 1024, fp32 (reference tag gpt2_large-inf-1024-4)",
  model = "gpt2_large",
  gpu = "A100-PCIE-40GB",
  mode = "inference",
  batch = 4,
  seq = 1024,
}
