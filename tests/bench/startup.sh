#!/usr/bin/env bash
# tests/bench/startup.sh — cold whole-process time of the main job (`neusight run examples/gpt3_train.lua`).
# Usage: tests/bench/startup.sh [BUILD_DIR] [RUNS]   (target: <= 50 ms on the 2-core reference machine)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
runs=${2:-200}
exe="$build/neusight"
[ -x "$exe" ] || { echo "startup.sh: $exe not built (cmake --build $build)" >&2; exit 1; }
cmd="$exe run examples/gpt3_train.lua --format json"
if command -v hyperfine >/dev/null 2>&1; then
  out=$(mktemp)
  trap 'rm -f "$out"' EXIT
  hyperfine --warmup 3 --runs "$runs" -N --style none --export-json "$out" "$cmd" >/dev/null
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print("startup: mean %.2f ms, median %.2f ms, min %.2f ms, max %.2f ms over %d runs" % tuple([1e3*r[k] for k in ("mean","median","min","max")] + [len(r["times"])]))' "$out"
else
  # Fallback without hyperfine: wall time of N sequential runs.
  start=$(date +%s%N)
  for _ in $(seq "$runs"); do $cmd >/dev/null; done
  end=$(date +%s%N)
  echo "startup: mean $(( (end - start) / runs / 1000 )) us over $runs runs (no hyperfine: includes shell overhead)"
fi
