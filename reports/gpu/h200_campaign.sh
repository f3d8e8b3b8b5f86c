#!/usr/bin/env bash
# The GPU campaign of reports/gpu: run on the H200 (device tool) from the
# repository root, with the binaries built on a CPU machine and carried in
# build-h200/carry (kernels/cuda/README.md says how to build them).
set -u
B=build-h200/carry
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"

# 1. The GPU tests.
timeout 200 $B/attnfuzz_tests --gtest_filter='CudaKernels.*:GpuWorker.*' > "$OUT/gtest.log" 2>&1
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure" "$OUT/gtest.log"

# 2. Our forward and split-KV kernels over every generator class.
timeout 240 $B/attnfuzz --timeout 20 fuzz --kernel gpu.fa2,gpu.splitkv --cases 30000 --jobs 16 --seed 2026 \
  --progress plain --out "$OUT/campaign" --corpus "$OUT/campaign/corpus" > "$OUT/campaign.log" 2>&1
echo "campaign rc=$?"; grep -A24 "^attnfuzz campaign" "$OUT/campaign.log"

# 3. The GPU mutants through the mutant gate.
timeout 200 $B/attnfuzz --timeout 20 mutants --only gpu.mutant.no_acc_rescale --only gpu.mutant.m_init_zero \
  --only gpu.mutant.no_empty_row_guard --only gpu.mutant.partial_block_unmasked \
  --only gpu.mutant.causal_off_by_one --only gpu.mutant.splitkv_merge_no_rescale \
  --budget-cases 3000 --time-per-mutant 60 --jobs 8 --seed 1 --minimize-time 15 \
  --out "$OUT/mutants" --corpus "$OUT/mutants/corpus" > "$OUT/mutants.log" 2>&1
echo "mutants rc=$?"; tail -20 "$OUT/mutants.log"

# 4. The faulty kernels: out of bounds, crash and hang verdicts; the campaign carries on.
timeout 100 $B/attnfuzz --timeout 3 fuzz --kernel gpu.faulty.oob_write,gpu.faulty.illegal_address,gpu.faulty.endless_loop \
  --cases 12 --jobs 1 --seed 9 --no-minimize --progress plain --out "$OUT/faulty" > "$OUT/faulty.log" 2>&1
echo "faulty rc=$?"; grep -E "^attnfuzz campaign|^time|^failures|^  new" "$OUT/faulty.log"

# 5. Throughput, ours and PyTorch's cuDNN and flash backends on the same shapes.
timeout 60 $B/attnfuzz_gpu_bench > "$OUT/bench.log" 2>&1
timeout 90 python3 tests/bench/torch_sdpa_bench.py > "$OUT/torch_bench.log" 2>&1
cat "$OUT/bench.log" "$OUT/torch_bench.log"
tar czf "$OUT/gpu_reports.tgz" -C "$OUT" campaign mutants faulty && rm -rf "$OUT/campaign" "$OUT/mutants" "$OUT/faulty"
