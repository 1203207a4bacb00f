#!/usr/bin/env bash
# weights/evaluate.sh — the kernel-level accuracy study behind weights/ACCURACY.md.
#
#   weights/evaluate.sh [--data DIR] [--gpus "NVIDIA A100-PCIE-40GB;Tesla T4;..."]
#
# 1. in-distribution: weights trained on the micro-benchmark grids only, evaluated on dataset/test
#    (transformer-shaped kernels of the same GPUs);
# 2. leave-one-GPU-out, our proxy for unseen GPUs: for each GPU G, weights trained on every row of the
#    other GPUs (grids + test rows, as shipped), evaluated on G's dataset/test rows with rule tiles.
# Work goes to a temporary folder; the tables go to standard output.
set -euo pipefail
cd "$(dirname "$0")/.."
data=../shared/data/neusight
gpus="NVIDIA A100-PCIE-40GB;Tesla V100-PCIE-32GB;Tesla T4;Tesla P100-PCIE-16GB;Tesla P4"
while [ $# -gt 0 ]; do
  case "$1" in
    --data) data=$2; shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    -h|--help) sed -n 2,10p "$0"; exit 0 ;;
    *) echo "evaluate.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
exe=${NEUSIGHT:-build/neusight}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
t=$data/dataset/test
tests=("$t/bmm.csv" "$t/linear.csv" "$t/elem.csv" "$t/softmax.csv" "$t/ln.csv")

echo "## In-distribution (trained on dataset/train grids, evaluated on dataset/test)"
echo '```'
weights/train.sh --data "$data" --out "$tmp/indist" --vendor nvidia --no-test-rows >/dev/null 2>&1
"$exe" eval kernels "${tests[@]}" --weights "$tmp/indist"
"$exe" eval kernels "${tests[@]}" --weights "$tmp/indist" --predictor roofline | grep -v "rows evaluated" | grep . | sed 's/^/roofline: /' 
echo '```'

echo
echo "## Leave one GPU out (trained on the other four GPUs' rows, evaluated on the held-out GPU's dataset/test rows)"
echo '```'
IFS=';' read -ra list <<< "$gpus"
for g in "${list[@]}"; do
  dir="$tmp/logo"
  rm -rf "$dir"
  weights/train.sh --data "$data" --out "$dir" --vendor nvidia --exclude-gpu "$g" >/dev/null 2>&1
  name=$("$exe" gpus --format json | python3 -c 'import json,sys; q=sys.argv[1].lower(); print(next(x["name"] for x in json.load(sys.stdin) if q==x["name"].lower() or q in [a.lower() for a in x["aliases"]]))' "$g")
  "$exe" eval kernels "${tests[@]}" --weights "$dir" 2>/dev/null | grep -E "^gpu |^$name " | sed "s/^gpu /held-out gpu /"
done
echo '```'
