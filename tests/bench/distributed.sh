#!/usr/bin/env bash
# tests/bench/distributed.sh — distributed sanity check: 4-GPU GPT forecasts (DP4, TP4, PP4) against the issue's measurements.
#
# The only measured multi-GPU numbers we have (issue 5, Megatron-LM via HF accelerate, fp32, forward +
# backward, no optimizer step): 4×A100-SXM4-40GB, GPT-2 Large, seq 1024, global batch 4:
#   DP4 452.3 ms, TP4 484.9 ms, PP4 (1 microbatch) 1597.6 ms; NeuSight (ASPLOS'25) predicted 510.5, 525.6, 1761.6.
# Nothing was fitted to them. The other rows (GPT-3 XL, batch 16, H100) are printed for reference only.
# Usage: tests/bench/distributed.sh [path/to/neusight]   (default: build/neusight)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-build/neusight}
[[ -x $bin ]] || { echo "distributed.sh: $bin not found; build first (cmake --build build)" >&2; exit 1; }

ms() { "$bin" predict --mode train --optimizer none --format json "$@" |
  python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["latency_ms"])'; }

# The reference's own operator graphs (opgraph/*-dp4/-tp4/-pp4_1.csv: HF eager kernels) through our predictor,
# collectives and schedule, when the shared data is there: isolates our kernel predictor from our graphs.
graphs=../shared/data/neusight/opgraph
if [[ -d $graphs ]]; then
  echo "reference graphs (predict --graph), A100-SXM4-40GB, GPT-2 Large, seq 1024, batch 4:"
  for layout in dp4:452.3 tp4:484.9 pp4_1:1597.6; do
    name=${layout%%:*} meas=${layout##*:}
    ours=$("$bin" predict --graph "$graphs/gpt2_large-train-1024-4-$name.csv" --gpu A100-SXM4-40GB --format json 2>/dev/null |
      python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["latency_ms"])')
    python3 -c "import sys; o,m=float('$ours'),float('$meas'); print('  %-6s %8.1f ms vs %8.1f measured: %5.1f %%' % ('$name', o, m, 100*abs(o-m)/m))"
  done
  echo
else
  echo "(../shared/data/neusight/opgraph not found: reference-graph rows skipped)"
fi

printf '%-16s %-6s %-5s %-10s %10s %10s %8s %10s %8s\n' gpu model batch layout ours_ms measured err% neusight err%
row() { # gpu model seq batch layout-label measured neusight flags...
  local gpu=$1 model=$2 seq=$3 batch=$4 label=$5 meas=$6 ref=$7; shift 7
  local ours; ours=$(ms --model "$model" --gpu "$gpu" --seq "$seq" --batch "$batch" "$@")
  if [[ $meas == - ]]; then
    printf '%-16s %-6s %-5s %-10s %10s %10s %8s %10s %8s\n' "$gpu" "${model:0:6}" "$batch" "$label" "$ours" - - - -
  else
    python3 - "$gpu" "${model:0:6}" "$batch" "$label" "$ours" "$meas" "$ref" <<'PY'
import sys
g, m, b, l, o, me, r = sys.argv[1:]
o, me, r = float(o), float(me), float(r)
print("%-16s %-6s %-5s %-10s %10.1f %10.1f %8.1f %10.1f %8.1f" % (g, m, b, l, o, me, 100 * abs(o - me) / me, r, 100 * abs(r - me) / me))
PY
  fi
}
for gpu in A100-SXM4-40GB H100-SXM5-80GB; do
  if [[ $gpu == A100-SXM4-40GB ]]; then d=(452.3 510.5) t=(484.9 525.6) p=(1597.6 1761.6); else d=(- -) t=(- -) p=(- -); fi
  row $gpu gpt2_large 1024 4 dp4 "${d[@]}" --dp 4
  row $gpu gpt2_large 1024 4 tp4 "${t[@]}" --tp 4
  row $gpu gpt2_large 1024 4 pp4_1 "${p[@]}" --pp 4 --microbatches 1
  row $gpu gpt2_large 1024 16 dp4 - - --dp 4
  row $gpu gpt2_large 1024 16 tp4 - - --tp 4
  row $gpu gpt2_large 1024 16 pp4_1 - - --pp 4 --microbatches 1
  row $gpu gpt3_xl 2048 4 dp4 - - --dp 4
  row $gpu gpt3_xl 2048 4 tp4 - - --tp 4
  row $gpu gpt3_xl 2048 4 pp4_1 - - --pp 4 --microbatches 1
  row $gpu gpt3_xl 2048 4 pp4_4 - - --pp 4 --microbatches 4
done
