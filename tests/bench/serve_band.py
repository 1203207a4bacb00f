#!/usr/bin/env python3
# tests/bench/serve_band.py — how often the uncertainty band holds a "measured" bf16 serving phase on a GPU the
# predictor never saw: the end-to-end check of the tensor-core and attention families' band, which has no measured
# bf16 end-to-end labels (weights/ACCURACY.md, "Uncertainty band").
#
#   tests/bench/serve_band.py --folds DIR [--exe build/neusight] [--gpus l40s,b200,…] [--models llama32_3b,qwen3_8b]
#
# The phases are tests/bench/serve_calibration.py's: for GPU G, Llama-3.2-3B and Qwen3-8B in bf16 with CUDA graphs,
# batches 1, 4, 16, 64 × prompts 512, 2048, the prefill (where AIConfigurator has its shapes: batch × prompt ≤ 32768)
# and one decode step at that context, "measured" = the forecast with every bf16 GEMM and attention kernel replaced by
# AIConfigurator's measured time for its exact shape (the element-wise, norm and copy kernels keep their forecast:
# taken as exact, so the band's width for them is never tested and the coverage leans high). The forecast and its
# band come from G's leave-one-GPU-out fold (DIR/<G's device, spaces as _>/nvidia/{gemm_tc16,attention_prefill,
# attention_decode}: weights/train.sh --exclude-gpu G, or weights/uncertainty.sh --part tc's folds) with the shipped
# error table less G's folds (and the held-out A100-SXM4's), i.e. the raw band (width factor 1). Per phase,
# z = the smallest width factor whose band holds the measured time (weights/band_spread.py's); the report gives the
# coverage at factor 1 and at the shipped table's `spread`, per GPU and in all. Nothing here is fitted. The phases run
# HF eager's kernels (serve_calibration.py's KERNELS: `serve --kernels eager`); serve's default, Megatron-LM's fused
# set, prices the same families (one QKV and one gate-up GEMM where eager has three and two).
import argparse
import os
import sys
import tempfile
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "weights"))
import serve_calibration as sc  # noqa: E402  (tests/bench/serve_calibration.py: the measured phases)
from band_spread import read_spread, z_of  # noqa: E402  (weights/band_spread.py)

# serve_calibration's three GPUs and the other three AIConfigurator training GPUs with Llama/Qwen shapes
sc.GPUS.update({
    "b300_sxm": ("b300_sxm", "NVIDIA B300 SXM6 AC", "B300"),
    "gb200": ("gb200", "NVIDIA GB200", "GB200"),
    "gb300": ("gb300", "NVIDIA GB300", "GB300"),
})


def phases(exe0, folds, gpu, model, tmp):
    """(phase, batch, input, measured ms, forecast row with p10 / p50 / p90) of G's configurations."""
    exe, gpu_file, folder = sc.fold_install(tmp, exe0, folds, gpu)
    meas = sc.Measured(folder)
    env = dict(os.environ, NEUSIGHT_NO_CACHE="1")
    out = []
    for b in sc.BATCHES:
        for i in sc.INPUTS:
            for mode in ("prefill", "decode"):
                if mode == "prefill" and b * i > sc.PREFILL_TOKENS_MAX:
                    continue
                measured, j = sc.measured_phase(exe, model, gpu_file, meas, mode, b, i, env)
                row = {"gpu": gpu, "measured_ms": measured, "predicted_ms": j["latency_ms"],
                       "predicted_ms_p10": j["latency_ms_p10"], "predicted_ms_p50": j["latency_ms_p50"],
                       "predicted_ms_p90": j["latency_ms_p90"]}
                out.append((mode, b, i, measured, row))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--folds", required=True)
    ap.add_argument("--exe", default=os.path.join(sc.SRC, "build", "neusight"))
    ap.add_argument("--gpus", default=",".join(sc.GPUS))
    ap.add_argument("--models", default="llama32_3b,qwen3_8b")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    spread = read_spread(os.path.join(sc.SRC, "weights", "nvidia", "uncertainty.toml")) or 1.0
    exe = os.path.abspath(a.exe)
    cells = defaultdict(list)  # (gpu, phase) -> [z]
    print(f"| GPU (held out of the predictor) | phase | n | APE % (mean) | inside raw p10-p90 | inside at spread "
          f"{spread:g} | below p10 | above p90 |")
    print("| --- | --- | ---: | ---: | --- | --- | ---: | ---: |")
    with tempfile.TemporaryDirectory(prefix="serveband-") as tmp:
        for gpu in a.gpus.split(","):
            rows = []
            for model in a.models.split(","):
                try:
                    rows += [(p, model, b, i, mt, r) for p, b, i, mt, r in
                             phases(exe, os.path.abspath(a.folds), gpu, model, os.path.join(tmp, gpu, model))]
                except SystemExit as e:  # a shape AIConfigurator lacks on this GPU: say so, go on; any other failure stops
                    if "no AIConfigurator row" not in str(e):
                        raise
                    print(f"<!-- {gpu} {model}: skipped: {e} -->")
            for phase in ("prefill", "decode"):
                sel = [r for r in rows if r[0] == phase]
                if not sel:
                    continue
                zs = [z_of(r[5]) for r in sel]
                cells[(gpu, phase)] = zs
                ape = sum(abs(r[5]["predicted_ms"] / r[4] - 1) for r in sel) / len(sel) * 100
                # outside the band at the factor (z > spread), on either side of the median
                below = sum(z > spread and r[4] < r[5]["predicted_ms_p50"] for r, z in zip(sel, zs))
                above = sum(z > spread and r[4] > r[5]["predicted_ms_p50"] for r, z in zip(sel, zs))
                n, raw, at = len(zs), sum(z <= 1 for z in zs), sum(z <= spread for z in zs)
                print(f"| {gpu} | {phase} | {n} | {ape:.1f} | {raw} ({100 * raw / n:.0f} %) | {at} ({100 * at / n:.0f} %) "
                      f"| {below} | {above} |")
                if a.verbose:
                    for r, z in zip(sel, zs):
                        print(f"<!-- {gpu} {r[1]} {phase} b{r[2]} i{r[3]}: measured {r[4]:.3f} ms, forecast "
                              f"{r[5]['predicted_ms']:.3f}, raw band {r[5]['predicted_ms_p10']:.3f} - "
                              f"{r[5]['predicted_ms_p90']:.3f}, z {z:.2f} -->")
                sys.stdout.flush()
    for phase in ("prefill", "decode", "all"):
        zs = [z for (g, p), v in cells.items() if phase in ("all", p) for z in v]
        if zs:
            n, raw, at = len(zs), sum(z <= 1 for z in zs), sum(z <= spread for z in zs)
            print(f"| **all** | {phase} | {n} | | **{raw} ({100 * raw / n:.0f} %)** | **{at} ({100 * at / n:.0f} %)** | | |")


if __name__ == "__main__":
    main()
