#!/usr/bin/env bash
# weights/ensemble_study.sh — seed-ensemble study (weights/ENSEMBLE_RULE.md): leave-one-GPU-out folds trained with
# several seeds, each member's per-row forecasts written as JSON; tests/bench/ensemble_logo.py combines them.
#
#   weights/ensemble_study.sh --work DIR --part tc|fp32 [--seeds "0 1 2"] [--epochs N] [--tag T] [--tc-gpus "A;B"] [--data DIR] [--aic DIR]
#
# tc:   gemm_tc16 trained without G (as weights/evaluate.sh --part tc), evaluated on all of G's gemm.csv rows.
# fp32: linear and softmax trained without G (as weights/logo.sh), evaluated on dataset/test linear + softmax.
# --epochs N is passed to weights/train.sh (default 150, as shipped); --tag T names the run (default: the part).
# Outputs DIR/<tag>/<seed>/<G>.json (`eval kernels --format json`, per-row predicted_ms); existing ones are kept.
set -euo pipefail
cd "$(dirname "$0")/.."
work= part= seeds="0 1 2" epochs=150 tag= data=../shared/data/neusight aic=../shared/data/aiconfigurator
source weights/training_gpus.sh
tc_gpus=$training_tc_gpus fp32_gpus=$training_fp32_gpus
while [ $# -gt 0 ]; do
  case "$1" in
    --work) work=$2; shift 2 ;;
    --part) part=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --tc-gpus) tc_gpus=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --aic) aic=$2; shift 2 ;;
    -h|--help) sed -n 2,10p "$0"; exit 0 ;;
    *) echo "ensemble_study.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$work" ] && [ -n "$part" ] || { echo "ensemble_study.sh: --work DIR and --part tc|fp32 are required" >&2; exit 2; }
exe=${NEUSIGHT:-build/neusight}
source weights/held_out.sh
refuse_held_out "$tc_gpus;$fp32_gpus" ensemble_study.sh
tag=${tag:-$part}
if [ "$part" = tc ]; then gpus=$tc_gpus; else gpus=$fp32_gpus; fi
IFS=';' read -ra list <<< "$gpus"
for s in $seeds; do
  for g in "${list[@]}"; do
    n=$(echo "$g" | tr ' ' '_') out=$work/$tag/$s/$n.json dir=$work/$tag/$s/folds/$n start=$SECONDS
    [ -s "$out" ] && continue
    mkdir -p "$work/$tag/$s"
    if [ "$part" = tc ]; then
      weights/train.sh --data "$data" --aic "$aic" --out "$dir" --vendor nvidia --only gemm_tc16 --exclude-gpu "$g" \
        --seed "$s" --epochs "$epochs" > "$work/$tag/$s/$n.train.log" 2>&1
      d=$(dirname "$(grep -l "$g" "$aic"/*/gemm.csv | head -1)")
      "$exe" eval kernels "$d/gemm.csv" --weights "$dir" --format json -o "$out.tmp" 2>/dev/null
    else
      weights/train.sh --data "$data" --out "$dir" --vendor nvidia --exclude-gpu "$g" --only linear --only softmax \
        --seed "$s" --epochs "$epochs" > "$work/$tag/$s/$n.train.log" 2>&1
      t=$data/dataset/test
      "$exe" eval kernels "$t/linear.csv" "$t/softmax.csv" --weights "$dir" --format json -o "$out.tmp" 2>/dev/null
    fi
    mv "$out.tmp" "$out"
    echo "$tag seed $s $g: $((SECONDS - start)) s ($(grep -h 'best epoch' "$work/$tag/$s/$n.train.log" | sed 's/.*validation/validation/' | tr '\n' ';'))"
  done
done
