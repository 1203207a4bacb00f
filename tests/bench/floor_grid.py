#!/usr/bin/env python3
"""tests/bench/floor_grid.py — the roofline-floor warning (scripts/neusight/figures.lua forecast_floor, floor_warning)
over a grid of parallel layouts: none where nothing makes a forecast faster than the GPU can be, and one where a
calibration does.

The grid: gpt3_175b, llama3_8b and mixtral_8x7b, bf16, in train and inference, over dp / tp / pp / ep / microbatches,
the schedules (1f1b, gpipe, interleaved), recomputation (none, selective, full), sequence parallelism and the
distributed optimizer. Each combination is one row of a `predict` comparison (the lists of values of one command run
every combination; a combination the layout rules refuse is an error row, counted apart). Each row is forecast with a calibration applied (uncalibrated, only the model FLOPs floor is checked), a calibration
file written by hand beside a copy of the GPU's file in a temporary folder:
  1. every family's factor 1.0 and --predictor roofline (every kernel at its own floor: never below it),
  2. every family's factor 1.0 and the default predictor (which never prices a kernel below its floor),
  3. with every kernel family's factor 0.3 (a calibration file written by hand beside a copy of the GPU's file, in a
     temporary folder: nothing is written beside gpus/) and --predictor roofline: 0.3 of each kernel's floor, so the
     forecast is below the floor unless communication and the bubble make up the difference.
Prints per pass the rows forecast, the error rows and the rows that warn; exits 1 when pass 1 or 2 warns or pass 3
never does.
Usage: tests/bench/floor_grid.py [BUILD_DIR]   (about 10 s on the 2-core reference machine)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
EXE = os.path.join(BUILD, "neusight")
FAMILIES = ["bmm", "linear", "elementwise", "softmax", "layernorm", "gemm_tc16", "gemm_fp8", "attention_prefill",
            "attention_decode"]
WARNING = "below what"  # figures.lua floor_warning's words

# (model, mode, batch, seq, list flags, variants: extra flags each)
TRAIN_VARIANTS = [
    [],
    ["--schedule", "gpipe"],
    ["--schedule", "interleaved"],
    ["--sequence-parallel"],
    ["--distributed-optimizer"],
    ["--sequence-parallel", "--distributed-optimizer", "--schedule", "interleaved"],
]
INFER_VARIANTS = [[], ["--schedule", "gpipe"], ["--schedule", "interleaved"]]
GRID = [
    ("gpt3_175b", "train", 64, 2048,
     ["--dp", "1,2", "--tp", "8", "--pp", "2,4,8", "--microbatches", "8,16", "--recompute", "none,selective,full"],
     TRAIN_VARIANTS),
    ("gpt3_175b", "inference", 16, 2048, ["--dp", "1,2", "--tp", "4,8", "--pp", "2,4", "--microbatches", "4,8"],
     INFER_VARIANTS),
    ("llama3_8b", "train", 32, 4096,
     ["--dp", "1,2,4", "--tp", "1,2,4", "--pp", "1,2,4", "--microbatches", "1,4,8", "--recompute", "none,selective,full"],
     TRAIN_VARIANTS),
    ("llama3_8b", "inference", 16, 4096, ["--dp", "1,2", "--tp", "1,2", "--pp", "1,2,4", "--microbatches", "1,4"],
     INFER_VARIANTS),
    ("mixtral_8x7b", "train", 32, 4096,
     ["--dp", "4", "--ep", "1,2,4", "--tp", "2", "--pp", "2,4", "--microbatches", "4,8", "--recompute", "none,full"],
     TRAIN_VARIANTS),
    ("mixtral_8x7b", "inference", 16, 4096, ["--dp", "2", "--ep", "1,2", "--tp", "2", "--pp", "2", "--microbatches", "2,4"],
     INFER_VARIANTS),
]


def rows_of(gpu, extra):
    """Every row of every comparison of the grid on `gpu` with `extra` flags: (rows forecast, error rows, warned)."""
    forecast = errors = warned = 0
    examples = []
    for model, mode, batch, seq, lists, variants in GRID:
        for variant in variants:
            args = [EXE, "predict", "--model", model, "--gpu", gpu, "--mode", mode, "--batch", str(batch), "--seq",
                    str(seq), "--dtype", "bf16", "--format", "json"] + lists + variant + extra
            run = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
            if run.returncode != 0:
                sys.exit("floor_grid: %s failed (%d):\n%s" % (" ".join(args), run.returncode, run.stderr[-2000:]))
            for row in json.loads(run.stdout)["rows"]:
                if row.get("error"):
                    errors += 1
                    continue
                forecast += 1
                w = row.get("warnings") or ""  # a comparison row's warnings: a list
                if WARNING in ("; ".join(w) if isinstance(w, list) else w):
                    warned += 1
                    if len(examples) < 2:
                        examples.append("%s %s %s: %s" % (model, mode, " ".join(variant), row["warnings"]))
    return forecast, errors, warned, examples


def calibrated_gpu(tmp, factor):
    """A copy of the H100's file in folder `tmp` with every kernel family's factor `factor` beside it (nothing is written
    beside gpus/): a calibration applied, so the kernels' floor holds the forecast (uncalibrated, only the model FLOPs
    floor does: figures.lua forecast_floor)."""
    os.makedirs(tmp, exist_ok=True)
    gpu = os.path.join(tmp, "h100_sxm5_80gb.toml")
    shutil.copy(os.path.join(ROOT, "gpus", "h100_sxm5_80gb.toml"), gpu)
    with open(os.path.join(tmp, "h100_sxm5_80gb.calibration.toml"), "w") as f:
        # fitted for the roofline (a file without `predictor` is the default predictor's: skipped under roofline)
        f.write('format_version = 1\ngpu = "H100-SXM5-80GB"\npredictor = "roofline"\n[factors]\n')
        f.write("".join("%s = %g\n" % (fam, factor) for fam in FAMILIES))
    return gpu


def main():
    if not os.access(EXE, os.X_OK):
        sys.exit("floor_grid: %s not built (cmake --build %s --target neusight)" % (EXE, BUILD))
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        same = calibrated_gpu(os.path.join(tmp, "x1"), 1.0)
        fast = calibrated_gpu(os.path.join(tmp, "x03"), 0.3)
        for name, gpu, extra, want in [
            ("every family x1.0, --predictor roofline", same, ["--predictor", "roofline"], False),
            ("every family x1.0, default predictor", same, [], False),
            ("every family x0.3, --predictor roofline", fast, ["--predictor", "roofline"], True),
        ]:
            forecast, errors, warned, examples = rows_of(gpu, extra)
            print("%-40s %4d rows forecast (%d error rows), %4d below the floor" % (name, forecast, errors, warned))
            for e in examples[: 0 if want else 2]:
                print("  e.g. " + e[:600])
            ok = ok and forecast > 0 and (warned > 0 if want else warned == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
