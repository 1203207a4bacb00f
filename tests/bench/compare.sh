#!/usr/bin/env bash
# tests/bench/compare.sh — wall and CPU time of one comparison in one process: GPT-3 175B bf16 training on 3 GPUs
# (H100 SXM5, A100 SXM4 80GB, MI300X) × 4 global batches (64 … 512) × 3 layouts (tp 8 × pp 8 / 16 / 4, 64 microbatches,
# sequence parallel) = 36 forecasts, each as `predict` with those single values would make it.
# Usage: tests/bench/compare.sh [BUILD_DIR] [RUNS]
#   (target, 2-core reference machine: under 1 s)
# NEUSIGHT_NO_CACHE=1 in the environment times it without the per-process memos.
set -euo pipefail
TIMEFORMAT='%R %U %S'
cd "$(dirname "$0")/../.."
build=${1:-build}
runs=${2:-3}
exe="$build/neusight"
[ -x "$exe" ] || { echo "compare.sh: $exe not built (cmake --build $build)" >&2; exit 1; }
args=(predict --model gpt3_175b --gpu h100,a100_sxm4_80gb,mi300x --batch 64,128,256,512 --seq 2048 --dtype bf16
      --mode train --optimizer adamw --tp 8 --pp 8,16,4 --microbatches 64 --sequence-parallel)
out=$(mktemp); err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
best_wall="" best_cpu=""
for _ in $(seq "$runs"); do
  { time "$exe" "${args[@]}" --format json >"$out"; } 2>"$err"
  read -r wall user sys < <(tail -1 "$err")
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
  if [ -z "$best_wall" ] || awk -v a="$wall" -v b="$best_wall" 'BEGIN { exit !(a < b) }'; then best_wall=$wall; fi
  if [ -z "$best_cpu" ] || awk -v a="$cpu" -v b="$best_cpu" 'BEGIN { exit !(a < b) }'; then best_cpu=$cpu; fi
done
rows=$(grep -c '"latency_ms"' "$out" || true)
errors=$(grep -c '"error"' "$out" || true)
printf '%-40s %3s rows (%s errors)  wall %5.2f s  cpu %5.2f s  (best of %d; target < 1 s)\n' \
  "gpt3_175b, 3 GPUs x 4 batches x 3 layouts" "$((rows + errors))" "$errors" "$best_wall" "$best_cpu" "$runs"
