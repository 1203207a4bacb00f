-- scripts/neusight/vector_form.lua — a two-parameter physical form for a vector family on NVIDIA GPUs beyond the fp32
-- weights' training range, read by `--predictor neusight_vector_form` (scripts/neusight/predictors/
-- neusight_vector_form.lua; opt-in, the default neusight predictor does not use it). A `--scripts DIR` with
-- DIR/neusight/vector_form.lua replaces it.
--
-- time = max(floor_s, (roofline + s_half_bytes · SMs / bandwidth) / efficiency)
--      = max(floor_s, bytes / (bandwidth · efficiency · s / (s + s_half_bytes))), s = the kernel's bytes per SM,
-- roofline = the engine's max(FLOPs / fp32 peak, bytes / DRAM bandwidth). Applied to a family only where the GPU's per-SM
-- DRAM bandwidth (mem_bw_gbps / num_sm) or per-SM memory (mem_gb / num_sm) is above the most of the GPUs that family's
-- weights were trained on (their manifests' training.gpus, as ns.trained_gpus hands them: the --weights DIR's when
-- given), the condition of the range warning (scripts/neusight/uncertainty.lua per_sm_beyond, the one rule of both) —
-- elsewhere the MLP's forecast is kept bit for bit. With the shipped weights that range is the five fp32 training GPUs'
-- maxima (A100-PCIE-40GB 1555 / 108 GB/s; 0.4 GB: V100-PCIE-32GB, T4, P4); a leave-one-GPU-out fold trained without
-- the A100 has another. The forecast names the predictor; no extra warning is printed (the built-in's range warning
-- still says the GPU is beyond the fp32 weights' range).
--
-- Why softmax only: weights/VECTOR_FORM_RULE.md (rule written before scoring) kept candidate C3 for softmax alone:
-- leave-one-GPU-out, the A100 fold (the only fold beyond its training GPUs' range) 41.78 → 24.84 % held-out MAPE,
-- end to end 12.80 → 12.87 %; elementwise (16.54 → 16.92) and layer norm (39.52 → 44.08) failed it. One held-out
-- GPU is all the evidence (weights/ACCURACY.md has the table).
-- Constants: `weights/vector_form.py` on the TRAIN split of the five training GPUs (dataset/train/collect/softmax,
-- 8 750 rows priced by `eval kernels --predictor roofline`): efficiency by roofline_efficiency.py's estimator,
-- s_half on a 2^(k/4)-byte grid by MAPE (17.87 % on those rows, in sample), floor = their least measured time (the
-- eager host floor the MLP also learnt). No held-out evaluation GPU was read.
return {
  softmax = { efficiency = 0.6105, s_half_bytes = 155872, floor_s = 31.92e-6 },
}
