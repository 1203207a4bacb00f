#!/usr/bin/env python3
"""weights/min_seconds.py — checks each shipped model.toml's min_seconds against the data it was trained on.

    python3 weights/min_seconds.py [--exe build/neusight] [FAMILY ...]

min_seconds (engine/core/tile_model.h tile_min_seconds) is the least measured latency among the rows a tensor-core or
attention family was trained on, over all its training GPUs: the least a forecast of that family may be. `neusight
train` writes it; the shipped weights predate it and got the line `neusight train --dry-run` prints over the same rows
(the manifest's training.data and training.excluded_gpus, held-out GPUs among them), without retraining. For every
family given (default: the four that have one) this re-reads those rows with `--dry-run` and compares the printed line
with the manifest's, byte for byte. Run from anywhere; the data paths are the manifest's, relative to the repository
root (../shared/data/aiconfigurator/…). Exit 0: every line the same; 1: one differs or is missing.
"""
import argparse
import os
import subprocess
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAMILIES = ["gemm_tc16", "gemm_fp8", "attention_prefill", "attention_decode"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exe", default=os.path.join(ROOT, "build", "neusight"))
    ap.add_argument("families", nargs="*", default=FAMILIES)
    a = ap.parse_args()
    bad = 0
    for fam in a.families:
        d = os.path.join("weights", "nvidia", fam)
        path = os.path.join(ROOT, d, "model.toml")
        with open(path, "rb") as f:
            m = tomllib.load(f)
        shipped = [l.strip() for l in open(path, encoding="utf-8") if l.startswith("min_seconds")]
        tr = m["training"]
        cmd = [a.exe, "train", "--dry-run", "--family", fam, "--out", d, "--data", *tr["data"]]
        for g in tr["excluded_gpus"]:
            cmd += ["--exclude-gpu", g]
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if out.returncode != 0:
            sys.stderr.write(out.stderr)
            print(f"{fam}: neusight train --dry-run failed (exit {out.returncode})")
            bad += 1
            continue
        lines = out.stdout.splitlines()
        printed = [l.strip() for l in lines if l.startswith("min_seconds")]
        same = printed == shipped and len(printed) == 1
        print(f"{fam}: {lines[0] if lines else ''}")
        print(f"  data:     {printed[0] if printed else '(none)'}")
        print(f"  shipped:  {shipped[0] if shipped else '(none)'}  {'same' if same else 'DIFFERS'}")
        bad += not same
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
