-- scripts/neusight/efficiency.lua — the fraction of the roofline each kernel family reaches on real GPUs: what
-- `--predictor roofline_derated` (scripts/neusight/predictors/roofline_derated.lua) divides the roofline by, and what the
-- neusight predictor prices a family with when it has no weights for a GPU's vendor (AMD GPUs have no tensor-core or
-- fused-attention measurements: their bf16/fp8 GEMMs and attention kernels take roofline / efficiency, with a
-- warning, not the bare roofline, which no GPU reaches; and no less than scripts/neusight/launch.lua's floor_s each).
-- One table for both; a `--scripts DIR` with
-- DIR/neusight/efficiency.lua replaces it. Keys are the tile predictor's families (engine/core/tile_model.h, `neusight
-- train --family`) and "memory"; values in (0, 1].
--
-- EFFICIENCY: per family, the constant e that minimises the mean absolute percentage error of roofline / e against
-- measured times (1 / e is the median of measured / roofline weighted by roofline / measured), over the NeuSight
-- test split (../shared/data/neusight/dataset/test: fp32 CUDA-core kernels on five GPUs) and the AIConfigurator
-- measurements (../shared/data/aiconfigurator/*/{gemm,context_attention,generation_attention}.csv: tensor-core GEMMs
-- and fused attention on L40S, RTX PRO 6000, B200, B300, GB200, GB300; the A100-SXM4-80GB folder is a held-out
-- evaluation GPU of weights/HELD_OUT and never read), from the rows of
-- `neusight eval kernels … --predictor roofline --format json`: `weights/roofline_efficiency.py` prints this table
-- and the constants. In sample, so the MAPE it reaches there flatters it:
--   family              rows   MAPE roofline → derated   (neusight's tile model, shipped weights, same rows)
--   linear             5,134   30.9 % → 20.9 %            8.5 %
--   bmm                6,405   39.6 % → 28.7 %           10.5 %
--   elementwise        3,219   20.0 % →  8.2 %            1.0 %
--   softmax              375   40.1 % → 20.1 %            8.7 %
--   layernorm            375   43.3 % → 13.5 %            4.1 %
--   gemm_tc16        214,382   49.9 % → 37.5 %           12.5 %
--   gemm_fp8         214,428   74.3 % → 60.3 %           15.3 %
--   attention_prefill 78,079   75.0 % → 54.2 %           13.3 %
--   attention_decode  96,049   73.2 % → 68.9 %           17.6 %
-- (Before the A100-SXM4 was held out, its rows were in: gemm_tc16 0.694, attention_prefill 0.426, attention_decode
-- 0.721; the fp32 and fp8 constants are unchanged. The old table listed 3× the row counts `eval kernels` gives today for
-- the vector families on the same files, with the same constants and MAPEs.)
return {
  linear = 0.779,             -- fp32 GEMM (CUDA cores, TF32 off)
  bmm = 0.723,                -- fp32 batched matmul
  gemm_tc16 = 0.697,          -- fp16 / bf16 / tf32 GEMM and BMM on tensor cores
  gemm_fp8 = 0.486,           -- fp8 GEMM
  elementwise = 0.764,
  softmax = 0.665,
  layernorm = 0.574,
  attention_prefill = 0.424,  -- fused attention, prefill (and its backward, for want of measurements)
  attention_decode = 0.736,   -- fused attention over a KV cache
  memory = 0.764,             -- copies, no measurements of their own: the elementwise efficiency
}
