#!/usr/bin/env bash
# H200 check: GPU tests, throughput, a short campaign, the faulty kernels.
# Runs in the repo root on the device machine with the carried binaries.
set -u
B=build-h200/carry
OUT=${OUT:-/tmp/out}
CASES=${CASES:-3000}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
timeout 200 $B/attnfuzz_tests --gtest_filter='CudaKernels.*:GpuWorker.*' > "$OUT/gtest.log" 2>&1
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|^gpu|worst" "$OUT/gtest.log" | head -30
timeout 60 $B/attnfuzz_gpu_bench 2>&1 | tee "$OUT/bench.log"
timeout 90 python3 tests/bench/torch_sdpa_bench.py > "$OUT/torch_bench.log" 2>&1
timeout 200 $B/attnfuzz --timeout 20 fuzz --kernel gpu.fa2,gpu.splitkv --cases "$CASES" --jobs 16 --seed 7 \
  --progress plain --out "$OUT/fuzz" --minimize-time 10 > "$OUT/fuzz.log" 2>&1
echo "fuzz rc=$?"; grep -A40 "attnfuzz campaign" "$OUT/fuzz.log" | head -60
timeout 100 $B/attnfuzz --timeout 3 fuzz --kernel gpu.faulty.oob_write,gpu.faulty.illegal_address,gpu.faulty.endless_loop \
  --cases 12 --jobs 1 --seed 9 --no-minimize --progress plain --out "$OUT/faulty" > "$OUT/faulty.log" 2>&1
echo "faulty rc=$?"; grep -A30 "attnfuzz campaign" "$OUT/faulty.log" | head -40
tar czf "$OUT/reports.tgz" -C "$OUT" fuzz faulty && rm -rf "$OUT/fuzz" "$OUT/faulty"
