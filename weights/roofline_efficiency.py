#!/usr/bin/env python3
"""weights/roofline_efficiency.py — derives the efficiency table of scripts/neusight/efficiency.lua (used by roofline_derated.lua and the neusight predictor's fallback).

    weights/roofline_efficiency.py [--exe build/neusight] [--data ../shared/data/neusight]
                                   [--aic ../shared/data/aiconfigurator] [--no-tile]

Per kernel family, the constant e that minimises the mean absolute percentage error of roofline / e against the
measured times: |roofline/e - m| / m = (roofline/m) |1/e - m/roofline|, so 1/e is the median of measured / roofline
weighted by roofline / measured. Rows: `neusight eval kernels … --predictor roofline --format json` over the NeuSight
test split (dataset/test/{bmm,linear,elem,softmax,ln}.csv: fp32 CUDA-core kernels) and the AIConfigurator
measurements ({gemm,context_attention,generation_attention}.csv of every folder whose device is not a held-out
evaluation GPU of weights/HELD_OUT: those files are never read). Prints the comment table (rows, MAPE of the roofline
and of roofline / e, and unless --no-tile the MAPE of neusight's tile model with the shipped weights on the same rows)
and the Lua table. In sample: the MAPE it reaches there flatters it. Standard library only.

The table's `errors`: per family, the fallback's own error distribution on the same rows, what the uncertainty band
(scripts/neusight/uncertainty.lua) draws a fallback-priced family's error factor from: quantiles at the leave-one-GPU-out
table's levels (weights/uncertainty.py LEVELS) of r = ln(measured / (roofline / e)), e the rounded constant shipped,
weighted by measured time as that table's are (weights/uncertainty.py weighted_quantiles). The comment table's p10 / p90
columns are e^r at 0.1 and 0.9: measured / derated.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys

from held_out import UnknownDevice, held_out_matcher, trainable  # weights/held_out.py
from uncertainty import LEVELS, weighted_quantiles  # weights/uncertainty.py: the band's levels and quantile rule

ORDER = ["linear", "bmm", "gemm_tc16", "gemm_fp8", "elementwise", "softmax", "layernorm", "attention_prefill",
         "attention_decode"]
TABLE_ORDER = ["linear", "bmm", "elementwise", "softmax", "layernorm", "gemm_tc16", "gemm_fp8", "attention_prefill",
               "attention_decode"]


def rows(exe, files, predictor):
    cmd = [exe, "eval", "kernels", *files, "--format", "json"] + (["--predictor", predictor] if predictor else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["rows"]


def weighted_median(pairs):
    pairs = sorted(pairs)
    half, acc = sum(w for _, w in pairs) / 2, 0.0
    for v, w in pairs:
        acc += w
        if acc >= half:
            return v
    return pairs[-1][0]


def mape(pairs):  # (measured, predicted)
    return 100 * sum(abs(p - m) / m for m, p in pairs) / len(pairs)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exe", default="build/neusight")
    ap.add_argument("--data", default="../shared/data/neusight")
    ap.add_argument("--aic", default="../shared/data/aiconfigurator")
    ap.add_argument("--no-tile", action="store_true")
    a = ap.parse_args()
    is_held_out = held_out_matcher(os.path.join(root, "weights", "HELD_OUT"), os.path.join(root, "gpus"))
    t = os.path.join(a.data, "dataset", "test")
    files = [os.path.join(t, f) for f in ("bmm.csv", "linear.csv", "elem.csv", "softmax.csv", "ln.csv")]
    for name in ("gemm", "context_attention", "generation_attention"):
        try:  # a file whose GPU is unknown (no column, no rows, an empty cell) could be a held-out one: stop
            files += trainable(sorted(glob.glob(os.path.join(a.aic, "*", name + ".csv"))), is_held_out,
                               "roofline_efficiency.py")
        except UnknownDevice as e:
            sys.exit(f"roofline_efficiency.py: {e}")
    roof = rows(a.exe, files, "roofline")
    tile = None if a.no_tile else rows(a.exe, files, None)
    by = {}
    for i, r in enumerate(roof):
        if is_held_out(r["device"]) or is_held_out(r["gpu"]):
            sys.exit(f"roofline_efficiency.py: a row of held-out {r['gpu']}")
        tp = tile[i]["predicted_ms"] if tile else None
        if tile and (tile[i]["where"] != r["where"]):
            sys.exit("roofline_efficiency.py: tile and roofline rows differ")
        by.setdefault(r["family"], []).append((r["measured_ms"], r["predicted_ms"], tp))
    eff, errs = {}, {}
    print("--   family              rows   MAPE roofline → derated   measured / derated   "
          "(tile model, same rows)\n--                                                           p10   p90")
    for fam in TABLE_ORDER:
        rs = by.get(fam)
        if not rs:
            continue
        inv = weighted_median([(m / p, p / m) for m, p, _ in rs])
        e = 1 / inv
        eff[fam] = round(e, 3)
        roof_m = mape([(m, p) for m, p, _ in rs])
        der_m = mape([(m, p / eff[fam]) for m, p, _ in rs])
        errs[fam] = weighted_quantiles([(math.log(m / (p / eff[fam])), m) for m, p, _ in rs], LEVELS)
        p10, p90 = (math.exp(errs[fam][LEVELS.index(x)]) for x in (0.1, 0.9))
        tile_s = f"{mape([(m, tp) for m, _, tp in rs]):5.1f} %" if tile else ""
        print(f"--   {fam:<17} {len(rs):>7,}   {roof_m:4.1f} % → {der_m:4.1f} %            {p10:5.2f} {p90:5.2f}   "
              f"{tile_s}")
    print("return {")
    for fam in ORDER:
        if fam in eff:
            print(f"  {fam} = {eff[fam]:.3f},")
    print("  errors = {")
    print("    levels = { " + ", ".join(f"{x:.2f}" for x in LEVELS) + " },")
    for fam in ORDER:
        if fam in errs:
            print(f"    {fam} = {{ " + ", ".join(f"{v:.4f}" for v in errs[fam]) + " },")
    print("  },")
    print("}")


if __name__ == "__main__":
    main()
