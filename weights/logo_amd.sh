#!/usr/bin/env bash
# weights/logo_amd.sh — leave one GPU out over the two AMD training GPUs (MI100, MI210), kernel level and end to end.
#
#   weights/logo_amd.sh --work DIR [--data DIR]
#
# For each of the two: the AMD fp32 families trained on the other one only (weights/train.sh --vendor amd
# --exclude-gpu G, DIR/<G>; seed 0, as shipped), then `eval kernels` of every AMD kernel file (G's rows: the GEMM rows
# of dataset_amd/test and the vector grids of dataset_amd/train, the only AMD vector rows there are) and `eval models
# label/<G>`; the roofline on the same rows beside them. Two GPUs: each fold learns from one GPU — a harder test than
# the NVIDIA folds' four. About a minute on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
work= data=../shared/data/neusight
while [ $# -gt 0 ]; do
  case "$1" in
    --work) work=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    -h|--help) sed -n 2,10p "$0"; exit 0 ;;
    *) echo "logo_amd.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$work" ] || { echo "logo_amd.sh: --work DIR is required" >&2; exit 2; }
exe=${NEUSIGHT:-build/neusight}
d=$data/dataset_amd
files=("$d"/test/collect/bmm "$d"/test/collect/linear "$d"/train/collect/*)
mkdir -p "$work"
"$exe" eval kernels "${files[@]}" --predictor roofline > "$work/roofline.kernels.txt" 2>/dev/null
for g in "AMD Instinct MI100" "AMD Instinct MI210"; do
  s=$(echo "$g" | tr ' ' '_')
  weights/train.sh --data "$data" --vendor amd --exclude-gpu "$g" --out "$work/$s" > "$work/$s.train.log" 2>&1
  "$exe" eval kernels "${files[@]}" --weights "$work/$s" > "$work/$s.kernels.txt" 2>/dev/null
  "$exe" eval models "$data/label/$s" --weights "$work/$s" > "$work/$s.models.txt" 2>/dev/null
  "$exe" eval models "$data/label/$s" --predictor roofline > "$work/$s.roofline.models.txt" 2>/dev/null
done
python3 - "$work" <<'PY'
import os, sys
w = sys.argv[1]
fams = ["bmm", "linear", "elementwise", "softmax", "layernorm"]
def kernels(path, gpu):
    out = {}
    for line in open(path):
        p = line.split()
        if len(p) >= 4 and p[0] == gpu and p[1] in fams: out[p[1]] = (int(p[2]), float(p[3]))
    return out
def e2e(path, gpu):
    for line in open(path):
        p = line.split()
        if len(p) >= 3 and p[0] == gpu and p[1].isdigit(): return float(p[2])
print("| held-out GPU (trained on the other) | " + " | ".join(fams) + " | end to end |")
print("| --- |" + " ---: |" * (len(fams) + 1))
for s, g in (("AMD_Instinct_MI100", "MI100"), ("AMD_Instinct_MI210", "MI210")):
    k, r = kernels(os.path.join(w, s + ".kernels.txt"), g), kernels(os.path.join(w, "roofline.kernels.txt"), g)
    cells = [f"{k[f][1]:.2f} (roofline {r[f][1]:.2f}; {k[f][0]} rows)" for f in fams]
    print(f"| {g} | " + " | ".join(cells) +
          f" | {e2e(os.path.join(w, s + '.models.txt'), g):.2f} (roofline {e2e(os.path.join(w, s + '.roofline.models.txt'), g):.2f}) |")
PY
