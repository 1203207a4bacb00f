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
-- and the constants, and the fallback's own errors (`errors` below; p10 / p90 here: measured / (roofline / e) at those
-- levels). In sample, so the MAPE it reaches there flatters it:
--   family              rows   MAPE roofline → derated   measured / derated   (tile model, same rows)
--                                                           p10   p90
--   linear              5,134   30.9 % → 20.9 %             0.96  3.32     8.5 %
--   bmm                 6,405   39.6 % → 28.7 %             0.80  2.29    10.5 %
--   elementwise         3,219   20.0 % →  8.2 %             0.84  1.04     1.0 %
--   softmax               375   40.1 % → 20.1 %             0.86  1.75     8.7 %
--   layernorm             375   43.3 % → 13.5 %             0.86  1.22     4.1 %
--   gemm_tc16         214,382   49.9 % → 37.5 %             0.77  1.35    12.5 %
--   gemm_fp8          214,428   74.3 % → 60.3 %             0.63  2.01    15.3 %
--   attention_prefill  78,079   75.0 % → 54.2 %             0.67  1.29    13.3 %
--   attention_decode   96,049   73.2 % → 68.9 %             0.85 11.10    17.6 %
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
  -- ERRORS: the fallback's own error distribution, per family: quantiles at `levels` of r = ln(measured / (roofline /
  -- e)) over the rows above, weighted by measured time (as weights/<vendor>/uncertainty.toml's are), e the constant
  -- above; the comment table's p10 / p90 are e^r. What scripts/neusight/uncertainty.lua draws the error of a family the
  -- neusight predictor priced by this fallback from (the band of an AMD GPU's bf16 / fp8 GEMMs and attention): one
  -- draw per family and forecast, all its kernels moved together (one constant's error moves them all). Fitted on
  -- NVIDIA rows, in sample: the spread of roofline / e where it was fitted, not a measurement of any GPU it prices.
  -- A family without an entry is not widened (the band says so). Printed by weights/roofline_efficiency.py.
  errors = {
    levels = { 0.01, 0.05, 0.10, 0.20, 0.30, 0.40, 0.50, 0.60, 0.70, 0.80, 0.90, 0.95, 0.99 },
    linear = { -0.2429, -0.0786, -0.0456, 0.0579, 0.4359, 0.4884, 0.5775, 0.6748, 0.8084, 1.1358, 1.1996, 1.2232, 1.3990 },
    bmm = { -0.2720, -0.2601, -0.2231, -0.1587, -0.1054, 0.0993, 0.4070, 0.4573, 0.4982, 0.5877, 0.8282, 0.8802, 1.0014 },
    gemm_tc16 = { -0.3336, -0.3117, -0.2588, -0.1910, -0.1374, -0.0848, -0.0486, -0.0024, 0.0655, 0.1549, 0.3014, 0.4082, 0.6524 },
    gemm_fp8 = { -0.5900, -0.5280, -0.4628, -0.3121, -0.1423, -0.0973, -0.0634, -0.0230, 0.0674, 0.2164, 0.6991, 1.2819, 2.6103 },
    elementwise = { -0.1889, -0.1758, -0.1720, -0.1320, -0.0029, 0.0059, 0.0154, 0.0169, 0.0184, 0.0344, 0.0379, 0.0405, 0.1563 },
    softmax = { -0.2784, -0.1628, -0.1497, -0.0535, 0.1116, 0.2849, 0.4081, 0.4338, 0.4901, 0.5490, 0.5571, 0.5574, 0.5584 },
    layernorm = { -0.3999, -0.2472, -0.1507, -0.0457, 0.0269, 0.0778, 0.1085, 0.1114, 0.1227, 0.1324, 0.1955, 0.2371, 0.2571 },
    attention_prefill = { -0.4811, -0.4167, -0.4007, -0.3413, -0.2475, -0.1626, -0.1244, -0.0891, -0.0423, 0.0613, 0.2520, 0.4135, 1.0217 },
    attention_decode = { -0.5355, -0.1887, -0.1618, -0.1343, -0.1139, -0.0801, -0.0432, -0.0020, 0.0932, 0.9774, 2.4070, 3.2760, 6.0963 },
  },
}
