-- examples/gpt3_train.lua — one training iteration of GPT-3 175B as it is trained today: bf16 compute with
-- fp32 master weights and moments (Megatron-LM mixed precision), fused AdamW, flash attention (sdpa), on 64 H100
-- SXM5 GPUs in 8 DGX H100 nodes: tensor parallel 8 inside a node, pipeline parallel 8 across nodes, 1F1B over
-- 64 microbatches of one 2048-token sequence, Megatron sequence parallelism.
--
-- This is the layout `neusight search --model gpt3_175b --gpu h100 --gpus 64 --batch 64 --seq 2048 --dtype bf16
-- --cluster dgx_h100 --sequence-parallel` ranks second (tp 4 x pp 16 first, ~4 % faster); it fits in 80 GB per
-- GPU without recomputation (61 GB on the first stage). The
-- report gives the iteration time, per stage compute, communication, bubble and memory, and the kernels of one
-- microbatch through one tensor-parallel shard. The single-GPU fp32 setting of the NeuSight paper (which does not
-- fit one GPU) is `neusight predict --model gpt3_175b --gpu h100 --mode train --batch 1 --seq 2048`.
--
-- The model is spelled out as a config table to show how a user defines one: `arch = "gpt"` selects the builder
-- in scripts/neusight/models/gpt.lua (the HF GPT-2 code path, which the reference also uses for its GPT-3
-- configs). The preset "gpt3_175b" in scripts/neusight/models/presets.lua is the same.
return {
  description = "GPT-3 175B, one training iteration, global batch 64 x 2048 tokens, bf16 amp, fused AdamW, 64 H100s (tp 8 x pp 8)",
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
  batch = 64,             -- global batch (sequences per iteration)
  seq = 2048,
  optimizer = "adamw",
  dtype = "bf16",
  precision = "amp",
  attention = "sdpa",
  parallel = { tp = 8, pp = 8, microbatches = 64, schedule = "1f1b", sequence_parallel = true, cluster = "dgx_h100" },
}
