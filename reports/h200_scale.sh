#!/usr/bin/env bash
# Issue 15 on the H200 in one device-tool command: the GPU oracle's and the
# GPU verdict's tests, the side-by-side benchmark (the kernel's own time,
# FlashAttention's test method on the same inputs, attnfuzz's full
# validation), a case past 2^31 elements validated end to end, the `scale`
# class against our GPU kernels, and a campaign's throughput breakdown.
# attnfuzz and the GPU oracle's test binary are built on a CPU machine for
# sm_90a and carried as .carry/bins.tar.xz (reports/gpu_oracle/README.md:
# the call).  Results: $OUT/scale.tgz.
# Usage: reports/h200_scale.sh [SCALE_SECONDS] [CAMPAIGN_SECONDS]
set -u
scale_s=${1:-120}
campaign_s=${2:-90}
R=$OUT/scale
mkdir -p "$R"
exec > >(tee "$R/log.txt") 2>&1
trap 'sleep 1; tar czf "$OUT/scale.tgz" -C "$OUT" scale && rm -rf "$OUT/scale"' EXIT
step() { printf '\n=== %s  (%s, %d s in)\n' "$*" "$(date +%T)" "$SECONDS"; }
C=/tmp/carry
mkdir -p $C && tar xJf .carry/bins.tar.xz -C $C
AF=$C/attnfuzz
export PATH=/opt/torch/.venv/bin:$PATH

step machine
git log -1 --format='commit %H %s' 2>/dev/null || true
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
nproc; free -g | head -2

step "GPU oracle and GPU verdict tests"
timeout 150 $C/attnfuzz_gpu_oracle_tests 2>&1 | tail -40

step "side by side: kernel, FlashAttention's test method, attnfuzz's full validation"
timeout 200 $AF bench validation --dump /tmp/fa_inputs --csv "$R/bench.csv" 2>&1 | tee "$R/bench.txt"
timeout 120 python3 tests/bench/fa_test_method.py /tmp/fa_inputs --csv "$R/bench.csv" 2>&1 | tee "$R/side_by_side.txt"
rm -rf /tmp/fa_inputs

step "one case past 2^31 elements, validated end to end"
for f in tests/harness/case/cases/scale_*.case; do
  [ -f "$f" ] || continue
  /usr/bin/time -v timeout 120 $AF --oracle gpu run --kernel gpu.fa2,gpu.splitkv "$f" > "$R/$(basename "$f").txt" 2>&1
  grep -E 'gpu\.|Elapsed|Maximum resident' "$R/$(basename "$f").txt"
done

step "the scale class against our GPU kernels (--oracle gpu)"
timeout $((scale_s + 60)) $AF --oracle gpu --check-rows 4096 fuzz --kernel gpu.fa2,gpu.splitkv --classes scale \
  --time $scale_s --jobs 2 --seed 1 --progress plain --corpus "$R/scale_corpus" --out "$R/scale_campaign" \
  > "$R/scale_campaign.txt" 2>&1
echo "scale campaign rc=$?"; tail -25 "$R/scale_campaign.txt"

step "campaign throughput: gpu.fa2 + gpu.splitkv, 16 jobs"
timeout $((campaign_s + 60)) $AF --timeout 20 fuzz --kernel gpu.fa2,gpu.splitkv --time $campaign_s --jobs 16 --seed 2 \
  --progress plain --corpus "$R/campaign_corpus" --out "$R/campaign" > "$R/campaign.txt" 2>&1
echo "campaign rc=$?"; grep -E 'cases in|^time:' "$R/campaign.txt"; tail -15 "$R/campaign.txt"
step done
