#!/usr/bin/env bash
# Re-run of steps 1-3 of h200_campaign.sh (tests, campaign, GPU mutants) with
# a later build (the tighter bound of 53d07ac/9134e09); faulty kernels and
# throughput are in the first run's logs.
set -u
B=build-h200/carry
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
timeout 120 $B/attnfuzz_tests --gtest_filter='CudaKernels.*:GpuWorker.*' > "$OUT/gtest.log" 2>&1
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure" "$OUT/gtest.log"
timeout 150 $B/attnfuzz --timeout 20 fuzz --kernel gpu.fa2,gpu.splitkv --cases 30000 --jobs 16 --seed 2026 \
  --progress plain --out "$OUT/campaign" --corpus "$OUT/campaign/corpus" > "$OUT/campaign.log" 2>&1
echo "campaign rc=$?"; grep -A24 "^attnfuzz campaign" "$OUT/campaign.log"
timeout 120 $B/attnfuzz --timeout 20 mutants --only gpu.mutant.no_acc_rescale --only gpu.mutant.m_init_zero \
  --only gpu.mutant.no_empty_row_guard --only gpu.mutant.partial_block_unmasked \
  --only gpu.mutant.causal_off_by_one --only gpu.mutant.splitkv_merge_no_rescale \
  --budget-cases 3000 --time-per-mutant 60 --jobs 8 --seed 1 --minimize-time 15 \
  --out "$OUT/mutants" --corpus "$OUT/mutants/corpus" > "$OUT/mutants.log" 2>&1
echo "mutants rc=$?"; tail -18 "$OUT/mutants.log"
tar czf "$OUT/gpu_reports.tgz" -C "$OUT" campaign mutants && rm -rf "$OUT/campaign" "$OUT/mutants"
