#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (coverage, ASan, UBSan) and runs each
# for the time given in tests/fuzz/fuzzers.def; exits 1 on any finding.
#
#   .ci/fuzz-smoke.sh                        every target, times from fuzzers.def
#   .ci/fuzz-smoke.sh case_parser_fuzzer     only the targets named
#   FUZZ_TIME=3600 .ci/fuzz-smoke.sh         longer runs (nightly)
#
# A finding is saved under build-fuzz/fuzz-runs/TARGET/artifacts/; replay it
# with  build-fuzz/tests/fuzz/TARGET FILE.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
table=$root/tests/fuzz/fuzzers.def

CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja \
  -DATTNFUZZ_FUZZERS=ON -DATTNFUZZ_TESTS=OFF -DATTNFUZZ_BENCH=OFF -DATTNFUZZ_CUDA=OFF >/dev/null
cmake --build "$build" --target attnfuzz_fuzzers -j "${FUZZ_JOBS:-2}"

failed=()
while read -r target flags; do
  [[ -z $target || $target == \#* ]] && continue
  if (($#)) && [[ " $* " != *" $target "* ]]; then continue; fi
  work=$build/fuzz-runs/$target
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  args=()
  for pair in $flags; do
    name=${pair%%=*} value=${pair#*=}
    case $name in
      seeds)
        IFS=: read -ra dirs <<<"$value"
        for dir in "${dirs[@]}"; do
          [[ -d $root/$dir ]] || continue
          find "$root/$dir" -type f -print0 |
            while IFS= read -r -d '' f; do cp "$f" "$work/corpus/seed-$(echo "$f" | md5sum | cut -c1-12)"; done
        done ;;
      dict) args+=("-dict=$root/$value") ;;
      max_total_time) args+=("-max_total_time=${FUZZ_TIME:-$value}") ;;
      *) args+=("-$name=$value") ;;
    esac
  done
  echo "== $target ${args[*]} ($(ls "$work/corpus" | wc -l) seeds)"
  rc=0
  "$build/tests/fuzz/$target" "${args[@]}" -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/log" 2>&1 || rc=$?
  grep -E '^#[0-9]+[[:space:]]+DONE|^Done [0-9]+ runs|stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' \
    "$work/log" || true
  if ((rc != 0)) || [[ -n $(ls -A "$work/artifacts") ]]; then
    echo "!! $target: finding (exit $rc); log $work/log; inputs:"
    ls "$work/artifacts"
    grep -E 'ERROR|SUMMARY|runtime error|deadly signal' "$work/log" | head -5 || true
    failed+=("$target")
  fi
done <"$table"

if ((${#failed[@]})); then
  echo "fuzz-smoke: FAILED: ${failed[*]}"
  exit 1
fi
echo "fuzz-smoke: no findings"
