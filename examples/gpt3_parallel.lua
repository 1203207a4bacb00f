-- examples/gpt3_parallel.lua — GPT-3 175B trained on 64 H100s (8 nodes): Megatron-LM's 3-D parallelism, tp 8 × pp 8 × dp 1.
--
-- The layout is shaped like Narayanan et al.'s (SC'21, Table 1: 175B on 1536 GPUs with tp 8 × pp 16):
-- tensor parallelism inside a node, pipeline stages across nodes, 1F1B interleaved over 2 model chunks
-- per device, activation recomputation. `neusight search` ranks the alternatives for 64 GPUs. `batch` is the global
-- batch; each pipeline runs `microbatches` microbatches of batch / (dp · microbatches) sequences.
-- The cluster is DGX H100-like: 8 GPUs per node on NVLink 4 (taken from gpus/h100_sxm5_80gb.toml),
-- one 400 Gb/s NIC per GPU between nodes. Change any field and rerun; --dp/--tp/--pp/--microbatches/
-- --schedule on the command line override the table.
return {
  description = "GPT-3 175B, one training iteration on 64 H100s (tp 8, pp 8, interleaved 1F1B), bf16, Adam",
  model = "gpt3_175b",
  gpu = "H100-SXM5-80GB",
  mode = "train",
  batch = 64,
  seq = 2048,
  dtype = "bf16",
  optimizer = "adam",
  parallel = {
    dp = 1, tp = 8, pp = 8,
    microbatches = 64,
    schedule = "interleaved", virtual_stages = 2,
    recompute = "full",  -- as Megatron-LM trains 175B: without it stage 0 needs 96.6 GB of 80 (try "none")
    cluster = {
      gpus_per_node = 8, nodes = 8,
      inter = { bw_gbps = 50, latency_us = 5, efficiency = 0.8 },  -- 400 Gb/s InfiniBand NDR per GPU
    },
  },
}
