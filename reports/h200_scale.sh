#!/usr/bin/env bash
# Issue 15 on the H200 in one device-tool command:
#   1. the GPU oracle's and the GPU verdict's tests (attnfuzz_gpu_oracle_tests);
#   2. side by side (reports/gpu_oracle): the kernel's own time, FlashAttention's
#      test method on the same inputs and output (tests/bench/fa_test_method.py),
#      attnfuzz's full validation phase by phase (`attnfuzz bench validation`);
#   3. the `scale` class (reports/scale) against gpu.fa2 and gpu.splitkv with
#      the fp64 GPU oracle: the committed case of each kind, the huge K/V case
#      (K and V past 2^31 elements each) validated end to end and timed, a
#      seeded campaign of the class, and two GPU mutants against it;
#   4. a 16-job campaign's throughput breakdown (generate / oracle / kernel / judge);
#   5. EXTRA (optional): another script's steps in the time left, e.g. the
#      cuDNN 9.19 control of reports/production/h200_cudnn919_control.sh.
# attnfuzz and the GPU oracle's test binary are built on a CPU machine for
# sm_90a and carried as .carry/bins.tar.xz.  Every step is cut to the time
# left before DEADLINE_SECONDS.  Results: $OUT/scale.tgz.
# Usage: reports/h200_scale.sh [DEADLINE_SECONDS] [EXTRA]
set -u
deadline=$((SECONDS + ${1:-560}))
extra=${2:-}
R=$OUT/scale
mkdir -p "$R"
exec > >(tee "$R/log.txt") 2>&1
trap 'sleep 1; tar czf "$OUT/scale.tgz" -C "$OUT" scale && rm -rf "$OUT/scale"' EXIT
step() { printf '\n=== %s  (%s, %d s in)\n' "$*" "$(date +%T)" "$SECONDS"; }
# A step's timeout: its own cap, or what is left before the deadline.
cap() { local left=$((deadline - SECONDS - 5)); echo $((left < $1 ? (left > 1 ? left : 1) : $1)); }
C=/tmp/carry
mkdir -p $C && tar xJf .carry/bins.tar.xz -C $C
export LD_LIBRARY_PATH=$C${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
AF=$C/attnfuzz
export PATH=/opt/torch/.venv/bin:$PATH

step machine
git log -1 --format='commit %H %s' 2>/dev/null || true
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
nproc; free -g | head -2

step "1. GPU oracle and GPU verdict tests"
timeout "$(cap 150)" $C/attnfuzz_gpu_oracle_tests > "$R/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"; grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|Failure|error' "$R/gpu_tests.txt" | head -30

step "2. side by side: the kernel, FlashAttention's test method, attnfuzz's full validation"
timeout "$(cap 200)" $AF bench validation --dump /tmp/fa_inputs --csv "$R/bench.csv" > "$R/bench.txt" 2>&1
echo "bench rc=$?"; cat "$R/bench.txt"
timeout "$(cap 120)" python3 tests/bench/fa_test_method.py /tmp/fa_inputs --csv "$R/bench.csv" > "$R/side_by_side.txt" 2>&1
echo "fa method rc=$?"; cat "$R/side_by_side.txt"
rm -rf /tmp/fa_inputs

step "3a. the committed scale cases, one per kind"
small=$(ls reports/scale/cases/*.case | grep -v huge_kv)
for k in gpu.fa2 gpu.splitkv; do
  /usr/bin/time -f "$k: %e s, %M KiB peak" timeout "$(cap 90)" $AF --oracle gpu run --kernel $k $small \
    > "$R/scale_cases_$k.txt" 2>&1
  echo "$k rc=$?"; grep -E ': (pass|unsupported|[a-z_]+mismatch|nan_inf|crash|hang|unwritten|out_of_bounds)| s, ' "$R/scale_cases_$k.txt"
done

step "3b. the huge K/V case (K and V past 2^31 elements each), end to end"
/usr/bin/time -f "gpu.splitkv: %e s, %M KiB peak" timeout "$(cap 150)" $AF --oracle gpu --timeout 120 run \
  --kernel gpu.splitkv reports/scale/cases/huge_kv.case > "$R/huge_kv.txt" 2>&1
echo "huge case rc=$?"; cat "$R/huge_kv.txt"

step "3c. a campaign of the class (seed 1, cases 0-9: no huge case) and two GPU mutants"
timeout "$(cap 90)" $AF --oracle gpu fuzz --kernel gpu.fa2,gpu.splitkv --classes scale --cases 10 --seed 1 \
  --jobs 2 --progress plain --out "$R/scale_campaign" --corpus "$R/scale_corpus" > "$R/scale_campaign.txt" 2>&1
echo "scale campaign rc=$?"; tail -20 "$R/scale_campaign.txt"
timeout "$(cap 60)" $AF --oracle gpu mutants --only gpu.mutant.causal_off_by_one --only gpu.mutant.splitkv_merge_no_rescale \
  --classes scale --budget-cases 6 --minimize-runs 0 --no-corpus --out "$R/scale_mutants" > "$R/scale_mutants.txt" 2>&1
echo "scale mutants rc=$?"; tail -8 "$R/scale_mutants.txt"

step "4. campaign throughput: gpu.fa2 + gpu.splitkv, 16 jobs"
t=$(cap 90); t=$((t > 40 ? t - 30 : 10))
timeout $((t + 30)) $AF --timeout 20 fuzz --kernel gpu.fa2,gpu.splitkv --time $t --jobs 16 --seed 2 \
  --progress plain --corpus "$R/campaign_corpus" --out "$R/campaign" > "$R/campaign.txt" 2>&1
echo "campaign rc=$?"; grep -E 'cases in|^time:' "$R/campaign.txt"; tail -12 "$R/campaign.txt"

if [ -n "$extra" ]; then
  step "5. extra: $extra"
  timeout "$(cap 120)" bash -c "$extra" > "$R/extra.txt" 2>&1
  echo "extra rc=$?"; cat "$R/extra.txt"
fi
step done
