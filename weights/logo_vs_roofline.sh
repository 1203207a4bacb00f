#!/usr/bin/env bash
# weights/logo_vs_roofline.sh — issue 10's "never worse than roofline", per cell, on our own leave-one-GPU-out table:
# the LOGO MAPE of each (held-out GPU, fp32 family) written in weights/ACCURACY.md ("Leave one GPU out, per GPU")
# next to the roofline's MAPE on the same rows (dataset/test; roofline needs no training, so it is recomputed here).
# Usage: weights/logo_vs_roofline.sh [DATA]   (default ../shared/data/neusight; NEUSIGHT=path/to/neusight)
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-../shared/data/neusight}
exe=${NEUSIGHT:-build/neusight}
[ -d "$data/dataset/test" ] || { echo "logo_vs_roofline.sh: no $data/dataset/test" >&2; exit 1; }
t=$data/dataset/test
"$exe" eval kernels "$t"/bmm.csv "$t"/linear.csv "$t"/elem.csv "$t"/softmax.csv "$t"/ln.csv --predictor roofline 2>/dev/null |
python3 -c '
import re, sys
acc = open("weights/ACCURACY.md").read().splitlines()
start = next(i for i, l in enumerate(acc) if l.startswith("## Leave one GPU out, per GPU"))
row = re.compile(r"(\S+)\s+(bmm|elementwise|layernorm|linear|softmax)\s+(\d+)\s+([\d.]+)")
logo = {}
for l in acc[start:start + 45]:
    m = row.match(l)
    if m: logo[(m.group(1), m.group(2))] = float(m.group(4))
roof = {}
for l in sys.stdin:
    m = row.match(l)
    if m: roof[(m.group(1), m.group(2))] = float(m.group(4))
print("| held-out GPU | family | neusight (LOGO) MAPE % | roofline MAPE % |")
print("| --- | --- | ---: | ---: |")
worse = 0
for k in sorted(logo):
    r = roof[k]
    better = r < logo[k]
    worse += better
    print("| %s | %s | %.2f | %.2f%s |" % (k[0], k[1], logo[k], r, " (roofline better)" if better else ""))
print()
print("cells where the roofline beats the leave-one-GPU-out MAPE: %d of %d" % (worse, len(logo)))
'
