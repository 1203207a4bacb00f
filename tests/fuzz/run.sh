#!/usr/bin/env bash
# tests/fuzz/run.sh — builds the libFuzzer targets (build-fuzz/, clang, ASan + UBSan) and fuzzes each loader.
#
#   tests/fuzz/run.sh [--update] [RUNS] [TARGET...]
#
# RUNS (default 1000000) executions per target, one fuzzer process at a time, starting from tests/fuzz/corpus/<t>.
# A crash, a sanitizer report, a leak, a hang (> 10 s), an allocation over 2 GB or an error that does not name the
# input stops that target: the input is left in build-fuzz/fuzz-artifacts/<t>/ (copy it to
# tests/fuzz/regressions/<t>/ once fixed). --update replaces tests/fuzz/corpus/<t> by the minimised (-merge=1)
# union of the old corpus and what this run found. Prints executions and wall time per target.
set -euo pipefail
cd "$(dirname "$0")/../.."
update=0
if [[ "${1:-}" == "--update" ]]; then update=1; shift; fi
runs=1000000
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then runs=$1; shift; fi
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] ||
  targets=(gpu_toml cluster_toml dataset opgraph trace weights hf_config calibration_toml measurement_toml uncertainty_toml)

if [[ ! -f build-fuzz/CMakeCache.txt ]]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -DNEUSIGHT_FUZZ=ON -DNEUSIGHT_BUILD_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
nice -n 10 cmake --build build-fuzz -j2 $(printf -- '--target fuzz_%s ' "${targets[@]}")

status=0
for t in "${targets[@]}"; do
  work=build-fuzz/fuzz-corpus/$t art=build-fuzz/fuzz-artifacts/$t
  mkdir -p "$work" "$art"
  max_len=4096 keep_len=4096  # longest input fuzzed / kept in tests/fuzz/corpus/<t>
  leaks=1  # libFuzzer's leak check after each input that allocated more than it freed
  case $t in
    dataset | opgraph | trace) keep_len=2048 ;;  # their corpora grow large: this keeps them under ~400 KB
    weights) max_len=8192 keep_len=8192 ;;       # model.toml + a 5 KB weights.bin
    hf_config) leaks=0 ;;  # one Lua state for every input: its garbage (collected later) fails the per-input
                           # malloc/free balance, and the leak scan that follows took 90% of the time
    uncertainty_toml) max_len=16384 leaks=0 ;;  # the bundled table is 12 KB (kept inputs: 4096); a Lua state as above
  esac
  dict=()
  [[ -f tests/fuzz/$t.dict ]] && dict=(-dict="tests/fuzz/$t.dict")  # keys the loader knows (hf_config)
  start=$(date +%s)
  set +e
  nice -n 10 build-fuzz/fuzz/fuzz_$t "$work" tests/fuzz/corpus/$t -runs="$runs" -max_len=$max_len \
    -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 -detect_leaks=$leaks -print_final_stats=1 \
    -artifact_prefix="$art/" "${dict[@]}" >"build-fuzz/fuzz-$t.log" 2>&1
  rc=$?
  set -e
  secs=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "build-fuzz/fuzz-$t.log" | tail -1)
  echo "$t: ${execs:-?} executions in ${secs} s (exit $rc; log build-fuzz/fuzz-$t.log)"
  if [[ $rc -ne 0 ]]; then
    status=1
    grep -E "ERROR|runtime error|error without|SUMMARY|Test unit written" "build-fuzz/fuzz-$t.log" | head -5 || true
    continue
  fi
  if [[ $update -eq 1 ]]; then
    fresh=build-fuzz/fuzz-merged/$t
    rm -rf "$fresh" && mkdir -p "$fresh"
    nice -n 10 build-fuzz/fuzz/fuzz_$t -merge=1 -max_len=$keep_len "$fresh" tests/fuzz/corpus/$t "$work" \
      >"build-fuzz/fuzz-$t-merge.log" 2>&1
    rm -rf "tests/fuzz/corpus/$t" && cp -r "$fresh" "tests/fuzz/corpus/$t"
    echo "$t: corpus $(ls "tests/fuzz/corpus/$t" | wc -l) files, $(cat "tests/fuzz/corpus/$t"/* | wc -c) bytes"
  fi
done
exit $status
