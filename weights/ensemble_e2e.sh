#!/usr/bin/env bash
# weights/ensemble_e2e.sh — end-to-end side of the seed-ensemble study (weights/ENSEMBLE_RULE.md): the five fp32
# families trained per weights/logo.sh fold with each seed, each held-out GPU's labels forecast (`eval models
# --format json`, per-label predicted_ms) to DIR/e2e/<seed>/<G>.json; tests/bench/ensemble_logo.py --part e2e
# combines them. Existing outputs are kept. Seed 0 is weights/logo.sh itself (12.82 %).
#
#   weights/ensemble_e2e.sh --work DIR [--seeds "0 1 2"] [--data DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
work= seeds="0 1 2" data=../shared/data/neusight
while [ $# -gt 0 ]; do
  case "$1" in
    --work) work=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    -h|--help) sed -n 2,7p "$0"; exit 0 ;;
    *) echo "ensemble_e2e.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$work" ] || { echo "ensemble_e2e.sh: --work DIR is required" >&2; exit 2; }
exe=${NEUSIGHT:-build/neusight}
source weights/training_gpus.sh
IFS=';' read -ra fp32 <<< "$training_fp32_gpus"
for s in $seeds; do
  for g in "${fp32[@]}"; do
    n=$(echo "$g" | tr ' ' '_') out=$work/e2e/$s/$n.json dir=$work/e2e/$s/folds/$n start=$SECONDS
    [ -s "$out" ] && continue
    mkdir -p "$work/e2e/$s"
    weights/train.sh --data "$data" --out "$dir" --vendor nvidia --exclude-gpu "$g" --only bmm --only linear \
      --only elementwise --only softmax --only layernorm --seed "$s" > "$work/e2e/$s/$n.train.log" 2>&1
    "$exe" eval models "$data/label/$n" --weights "$dir" --format json -o "$out.tmp" 2>/dev/null
    mv "$out.tmp" "$out"
    echo "e2e seed $s $g: $((SECONDS - start)) s"
  done
done
