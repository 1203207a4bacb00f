#!/usr/bin/env bash
# tests/bench/scale_pairs.sh — `neusight scale` on every training GPU's per-op traces to every other training
# GPU with a measured end-to-end label for the same configuration: APE per pair, and the pure tile-predictor
# forecast (`predict --graph`) for the same targets. Usage: tests/bench/scale_pairs.sh [DATA] > report.md
# A pair whose `scale` or `predict` fails is no row: stderr names it and the command's last error line, and the table
# ends with a line counting the pairs scored and skipped, so a shorter table never reads as a full one.
set -euo pipefail
cd "$(dirname "$0")/../.."
data=${1:-../shared/data/neusight}
exe=${NEUSIGHT:-build/neusight}
[ -d "$data/label" ] || { echo "scale_pairs.sh: no labels at $data/label" >&2; exit 1; }
err=$(mktemp)
trap 'rm -f "$err"' EXIT
scored=0 skipped=0
skip() {  # FROM TO TAG COMMAND: one stderr line, with the command's last error line
  skipped=$((skipped + 1))
  echo "scale_pairs.sh: skipped $1 -> $2 $3: $4 failed: $(grep -v '^[[:space:]]*$' "$err" | tail -n 1)" >&2
}
echo "| from | to | config | measured ms | scaled ms | APE % | tile predictor ms | APE % |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for src in "$data"/label/*/; do
  for trace in "$src"*.csv; do
    tag=$(basename "$trace" .csv)
    for dst in "$data"/label/*/; do
      [ "$dst" = "$src" ] && continue
      label="$dst$tag.json"
      [ -f "$label" ] || continue
      from=$(basename "$src"); to=$(basename "$dst")
      s=$("$exe" scale --trace "$trace" --from "$from" --to "$to" --format json 2>"$err") ||
        { skip "$from" "$to" "$tag" scale; continue; }
      p=$("$exe" predict --graph "$data/opgraph/$tag.csv" --gpu "$to" --format json 2>"$err") ||
        { skip "$from" "$to" "$tag" predict; continue; }
      scored=$((scored + 1))
      python3 -c '
import json, sys
s, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
m = json.load(open(sys.argv[3]))["e2e_latency"]
a, b = s["latency_ms"], p["latency_ms"]
print("| {} | {} | {} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.1f} |".format(
    s["from"], s["to"], sys.argv[4], m, a, 100 * abs(a - m) / m, b, 100 * abs(b - m) / m))
' "$s" "$p" "$label" "$tag"
    done
  done
done
echo
echo "pairs: $scored scored, $skipped skipped (scale or predict failed: stderr names each)"
[ "$skipped" -eq 0 ] || echo "scale_pairs.sh: $skipped of $((scored + skipped)) pairs skipped" >&2
