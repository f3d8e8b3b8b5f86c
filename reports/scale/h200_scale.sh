#!/usr/bin/env bash
# The scale class (issue 15) on the H200: our GPU kernels, gpu.fa2 and
# gpu.splitkv, judged by the fp64 GPU oracle (--oracle gpu) on
#   1. the committed scale cases, one per kind (reports/scale/cases: keys
#      just below/above 2^15, 2^16, 2^17; causal and windowed rows of both
#      alignments seeing keys past 32,768; decode over 128K keys), each kernel
#      on each file (`attnfuzz run`);
#   2. the huge K/V case (K and V each past 2^31 elements), alone, with the
#      time it takes (input generation is minutes on the host today);
#   3. a short seeded campaign of the class (`fuzz --classes scale`);
#   4. the GPU mutants against the class, for what it catches.
# Skips (exit 0) where no CUDA device is usable.  attnfuzz is built on a CPU
# machine for sm_90a and passed as $1 (e.g. .carry/attnfuzz).
# Usage: reports/scale/h200_scale.sh [ATTNFUZZ] [CAMPAIGN_CASES] [SEED]
set -u
AF=${1:-./build/attnfuzz}
cases=${2:-10}  # seed 1, cases 0-9: no huge K/V case (ScaleClass.TheScriptsCampaignHoldsNoHugeCase)
seed=${3:-1}
R=${OUT:-/tmp}/scale
here=$(cd "$(dirname "$0")" && pwd)
if ! nvidia-smi -L > /dev/null 2>&1; then
  echo "skipped: no CUDA device here"
  exit 0
fi
mkdir -p "$R"
exec > >(tee "$R/log.txt") 2>&1
step() { printf '\n=== %s  (%s, %d s in)\n' "$*" "$(date +%T)" "$SECONDS"; }
rc=0

step machine
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
free -g | head -2
"$AF" kernels 2>&1 | grep -A2 '^gpu\.\(fa2\|splitkv\)\b' | head -8

step "1. the committed scale cases, one per kind, on gpu.fa2 and gpu.splitkv"
small=$(ls "$here"/cases/*.case | grep -v huge_kv)
for k in gpu.fa2 gpu.splitkv; do
  /usr/bin/time -f "$k: %e s, %M KiB peak" "$AF" --oracle gpu run --kernel $k $small || rc=1
done

step "2. the huge K/V case (K and V past 2^31 elements each)"
for k in gpu.splitkv gpu.fa2; do
  /usr/bin/time -f "$k: %e s, %M KiB peak" timeout 550 "$AF" --oracle gpu --timeout 300 run --kernel $k \
    "$here"/cases/huge_kv.case || rc=1
done

step "3. a campaign of the class: $cases cases, seed $seed"
timeout 900 "$AF" --oracle gpu fuzz --kernel gpu.fa2,gpu.splitkv --classes scale --cases "$cases" --seed "$seed" \
  --out "$R/campaign" --corpus "$R/corpus" || rc=1

step "4. two GPU mutants against the class (a band admitting one key too many, a merge without its rescale)"
timeout 900 "$AF" --oracle gpu mutants --only gpu.mutant.causal_off_by_one --only gpu.mutant.splitkv_merge_no_rescale \
  --classes scale --budget-cases 6 --minimize-runs 0 --no-corpus --out "$R/mutants" || true

step "done: rc=$rc"
exit $rc
