#!/usr/bin/env bash
# weights/logo.sh — leave-one-GPU-out over the five fp32 training GPUs, kernel level and end to end
# (the "end to end 12.82 %" figure of weights/ACCURACY.md: unweighted mean over the five GPUs of their labels' mean APE).
#
#   weights/logo.sh --work DIR [--data DIR] [--folds DIR2]
#
# For each GPU G: the fp32 families trained without G (weights/train.sh --exclude-gpu G, DIR/folds/<G>; seed 0, as
# shipped), then `eval kernels dataset/test/*` (G's rows) and `eval models label/<G>`. About 5 minutes on 2 cores.
# --folds DIR2: no training; evaluate the folds an earlier run left in DIR2/folds (another binary on the same folds:
# NEUSIGHT=other/neusight weights/logo.sh --work DIR --folds DIR2).
set -euo pipefail
cd "$(dirname "$0")/.."
work= data=../shared/data/neusight folds=
while [ $# -gt 0 ]; do
  case "$1" in
    --work) work=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --folds) folds=$2; shift 2 ;;
    -h|--help) sed -n 2,10p "$0"; exit 0 ;;
    *) echo "logo.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$work" ] || { echo "logo.sh: --work DIR is required" >&2; exit 2; }
exe=${NEUSIGHT:-build/neusight}
t=$data/dataset/test
tests=("$t/bmm.csv" "$t/linear.csv" "$t/elem.csv" "$t/softmax.csv" "$t/ln.csv")
mkdir -p "$work/folds" "$work/out"
source weights/training_gpus.sh
IFS=';' read -ra fp32 <<< "$training_fp32_gpus"
for g in "${fp32[@]}"; do
  s=$(echo "$g" | tr ' ' '_') dir=$work/folds/$(echo "$g" | tr ' ' '_') start=$SECONDS
  if [ -n "$folds" ]; then
    dir=$folds/folds/$s
    [ -d "$dir" ] || { echo "logo.sh: no fold $dir (--folds)" >&2; exit 2; }
  else
    only=(--only bmm --only linear --only elementwise --only softmax --only layernorm)
    weights/train.sh --data "$data" --out "$dir" --vendor nvidia --exclude-gpu "$g" "${only[@]}" \
      > "$work/out/$s.train.log" 2>&1
  fi
  "$exe" eval kernels "${tests[@]}" --weights "$dir" > "$work/out/$s.kernels.txt" 2>/dev/null
  "$exe" eval models "$data/label/$s" --weights "$dir" > "$work/out/$s.models.txt" 2>/dev/null
  echo "$g: $((SECONDS - start)) s"
done
python3 - "$work/out" <<'PY'
import os, re, sys
d = sys.argv[1]
fams = ["bmm", "linear", "elementwise", "softmax", "layernorm"]
names = {"NVIDIA_A100-PCIE-40GB": "A100-PCIE-40GB", "Tesla_V100-PCIE-32GB": "V100-PCIE-32GB", "Tesla_T4": "T4",
         "Tesla_P100-PCIE-16GB": "P100-PCIE-16GB", "Tesla_P4": "P4"}
k = {f: {} for f in fams}; e2e = {}
for s, n in names.items():
    for line in open(os.path.join(d, s + ".kernels.txt")):
        p = line.split()
        if len(p) >= 4 and p[0] == n and p[1] in fams: k[p[1]][n] = float(p[3])
    for line in open(os.path.join(d, s + ".models.txt")):
        p = line.split()
        if len(p) >= 3 and p[0] == n and e2e.get(n) is None and re.match(r"^\d+$", p[1]): e2e[n] = float(p[2])
print("kernel-level MAPE %, held-out GPU: " + " / ".join(names.values()) + "   mean")
for f in fams:
    v = [k[f].get(n, float("nan")) for n in names.values()]
    print(f"{f:12s} " + " / ".join(f"{x:.2f}" for x in v) + f"   {sum(v)/len(v):.2f}")
v = [e2e.get(n, float("nan")) for n in names.values()]
print(f"{'end to end':12s} " + " / ".join(f"{x:.2f}" for x in v) + f"   {sum(v)/len(v):.2f}")
PY
