#!/usr/bin/env bash
# weights/evaluate.sh — the kernel-level accuracy study behind weights/ACCURACY.md.
#
#   weights/evaluate.sh [--data DIR] [--gpus "NVIDIA A100-PCIE-40GB;Tesla T4;..."] [--part fp32|tc|all]
#                       [--aic DIR] [--tc-gpus "NVIDIA L40S;..."]
#
# 1. in-distribution: weights trained on the micro-benchmark grids only, evaluated on dataset/test
#    (transformer-shaped kernels of the same GPUs);
# 2. leave-one-GPU-out, our proxy for unseen GPUs: for each GPU G, weights trained on every row of the
#    other GPUs (grids + test rows, as shipped), evaluated on G's dataset/test rows with rule tiles.
# 3. tensor-core GEMMs (gemm_tc16 = bf16, gemm_fp8) and fused attention (prefill, decode), leave-one-GPU-out
#    over the six AIConfigurator training GPUs (never one of weights/HELD_OUT): for each GPU G, those families
#    trained on the other GPUs' rows, evaluated on all of G's rows, next to roofline.
# Work goes to a temporary folder; the tables go to standard output.
set -euo pipefail
cd "$(dirname "$0")/.."
data=../shared/data/neusight aic=../shared/data/aiconfigurator part=all
source weights/training_gpus.sh
tc_gpus=$training_tc_gpus gpus=$training_fp32_gpus
while [ $# -gt 0 ]; do
  case "$1" in
    --data) data=$2; shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    --part) part=$2; shift 2 ;;
    --aic) aic=$2; shift 2 ;;
    --tc-gpus) tc_gpus=$2; shift 2 ;;
    -h|--help) sed -n 2,10p "$0"; exit 0 ;;
    *) echo "evaluate.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
exe=${NEUSIGHT:-build/neusight}
source weights/held_out.sh
refuse_held_out "$tc_gpus;$gpus" evaluate.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gpu_name() {  # canonical name of a GPU alias
  "$exe" gpus --format json | python3 -c 'import json,sys; q=sys.argv[1].lower(); print(next(x["name"] for x in json.load(sys.stdin) if q==x["name"].lower() or q in [a.lower() for a in x["aliases"]]))' "$1"
}
if [ "$part" = tc ]; then skip_fp32=1; else skip_fp32=0; fi
t=$data/dataset/test
tests=("$t/bmm.csv" "$t/linear.csv" "$t/elem.csv" "$t/softmax.csv" "$t/ln.csv")

if [ "$skip_fp32" = 0 ]; then
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
  name=$(gpu_name "$g")
  "$exe" eval kernels "${tests[@]}" --weights "$dir" 2>/dev/null | grep -E "^gpu |^$name " | sed "s/^gpu /held-out gpu /"
done
echo '```'
fi

if [ "$part" = all ] || [ "$part" = tc ]; then
echo
echo "## Tensor-core GEMMs, leave one GPU out (AIConfigurator; trained on the other GPUs, evaluated on all rows of the held-out one)"
echo '```'
IFS=';' read -ra list <<< "$tc_gpus"
for g in "${list[@]}"; do
  dir="$tmp/tc"
  rm -rf "$dir"
  weights/train.sh --data "$data" --aic "$aic" --out "$dir" --vendor nvidia --only gemm_tc16 --only gemm_fp8 \
    --only attention_prefill --only attention_decode --exclude-gpu "$g" >/dev/null 2>&1
  name=$(gpu_name "$g")
  d=$(dirname "$(grep -l "$g" "$aic"/*/gemm.csv | head -1)")
  fs=("$d/gemm.csv" "$d/context_attention.csv" "$d/generation_attention.csv")
  "$exe" eval kernels "${fs[@]}" --weights "$dir" 2>/dev/null | grep -E "^$name " | sed 's/^/held-out /'
  "$exe" eval kernels "${fs[@]}" --predictor roofline 2>/dev/null | grep -E "^$name " | sed 's/^/roofline /'
done
echo '```'
fi
