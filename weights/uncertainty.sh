#!/usr/bin/env bash
# weights/uncertainty.sh — the leave-one-GPU-out residuals behind the forecast's uncertainty band
# (weights/<vendor>/uncertainty.toml, scripts/neusight/uncertainty.lua).
#
#   weights/uncertainty.sh --work DIR [--data DIR] [--aic DIR] [--part fp32|tc|all] [--gpus "A;B"] [--tc-gpus "C;D"]
#                          [--seed S] [--out FILE]
#   weights/uncertainty.sh --work DIR --table-only        # re-derive the tables from DIR's rows
# --seed S trains the folds with that seed (default 0, as the shipped tables); --out FILE writes the table there
# instead of weights/nvidia/uncertainty.toml (a second seed's folds, whose table is scratch).
#
# 1. For every training GPU G of a family group (fp32: the five NeuSight GPUs; tensor-core and attention: the six
#    AIConfigurator training GPUs; never a GPU of weights/HELD_OUT), the group's predictors are retrained without any
#    row of G (DIR/folds/<G>/) and G's rows are forecast with them (DIR/rows/<G>.json: measured and predicted ms
#    per row, `neusight eval kernels`).
# 2. weights/uncertainty.py turns the rows into quantiles of ln(measured / predicted) per family, split by whether G
#    lay inside the other GPUs' range (SMs, bandwidth, the family's peak) or outside it, and writes
#    weights/nvidia/uncertainty.toml (all folds: what forecasts use) and, for each fp32 fold G,
#    DIR/folds/<G>/nvidia/uncertainty.toml from the other folds only (the nested table that the end-to-end coverage
#    check in weights/ACCURACY.md uses with G's retrained weights, so G's own errors never widen G's band).
# 3. A run that re-derives the fp32 families drops the band's width factor (`spread`: the raw band, wider, until it
#    is refitted); one without fp32 rows keeps the fp32 sections and the factor as they were. The shipped factor pools
#    the fp32 folds of two seeds (the fit moved from 0.72 to 0.91 between seeds 0 and 1 alone):
#      weights/uncertainty.sh --work DIR1 --part fp32 --seed 1 --out DIR1/table.toml   # a second set of folds
#      weights/band_coverage.sh --work DIR --work DIR1 --write
# The folds are kept in DIR for that check; about 45 minutes on 2 cores with --part all.
set -euo pipefail
cd "$(dirname "$0")/.."
data=../shared/data/neusight aic=../shared/data/aiconfigurator part=all work= table_only=0 seed=0 out=weights/nvidia/uncertainty.toml
source weights/training_gpus.sh
gpus=$training_fp32_gpus tc_gpus=$training_tc_gpus
while [ $# -gt 0 ]; do
  case "$1" in
    --work) work=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --aic) aic=$2; shift 2 ;;
    --part) part=$2; shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    --tc-gpus) tc_gpus=$2; shift 2 ;;
    --table-only) table_only=1; shift ;;
    --seed) seed=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n 2,25p "$0"; exit 0 ;;
    *) echo "uncertainty.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$work" ] || { echo "uncertainty.sh: --work DIR is required" >&2; exit 2; }
exe=${NEUSIGHT:-build/neusight}
source weights/held_out.sh
refuse_held_out "$tc_gpus;$gpus" uncertainty.sh
mkdir -p "$work/rows" "$work/folds"
stem() { echo "$1" | tr ' ' '_'; }

# One fold: GPU $2 of group $1 held out of training families "$3"; the rows of files "$4…" it is scored on go to
# rows/<GPU>.json (only the held-out GPU's rows: the fp32 test files hold every GPU's).
fold() {
  local group=$1 g=$2 families=$3 s start only=()
  shift 3
  s=$(stem "$g")
  [ -s "$work/rows/$s.json" ] && { echo "$group $g: done before"; return 0; }
  start=$SECONDS
  for f in $families; do only+=(--only "$f"); done
  weights/train.sh --data "$data" --aic "$aic" --out "$work/folds/$s" --vendor nvidia --exclude-gpu "$g" "${only[@]}" --seed "$seed" \
    >/dev/null 2>&1
  "$exe" eval kernels "$@" --weights "$work/folds/$s" --format json 2>/dev/null |
    python3 -c 'import json,sys; g=sys.argv[1]; j=json.load(sys.stdin); j["rows"]=[r for r in j["rows"] if r["device"]==g]; json.dump(j,sys.stdout)' "$g" \
    > "$work/rows/$s.json.tmp"
  mv "$work/rows/$s.json.tmp" "$work/rows/$s.json"
  echo "$group $g: $((SECONDS - start)) s"
}

if [ "$table_only" = 0 ]; then
  if [ "$part" = all ] || [ "$part" = fp32 ]; then
    t=$data/dataset/test
    IFS=';' read -ra list <<< "$gpus"
    for g in "${list[@]}"; do
      fold fp32 "$g" "bmm linear elementwise softmax layernorm" "$t"/{bmm,linear,elem,softmax,ln}.csv
    done
  fi
  if [ "$part" = all ] || [ "$part" = tc ]; then
    IFS=';' read -ra list <<< "$tc_gpus"
    for g in "${list[@]}"; do
      d=$(dirname "$(grep -l "$g" "$aic"/*/gemm.csv | head -1)")
      fold tc "$g" "gemm_tc16 gemm_fp8 attention_prefill attention_decode" \
        "$d"/{gemm,context_attention,generation_attention}.csv
    done
  fi
fi
python3 weights/uncertainty.py --work "$work" --gpus-dir gpus --out "$out"
