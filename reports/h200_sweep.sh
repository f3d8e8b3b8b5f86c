#!/usr/bin/env bash
# The rest of the production forward matrices (issue 12) on the H200 in one
# device-tool command: shards run one after another per group until the
# deadline, the cuDNN-direct group (system cuDNN) beside the libtorch group
# (built there first), then every case saved is re-run with
# `attnfuzz --determinism repro`.  A shard the deadline cuts says so in its
# log ("sweep stopped by --sweep-time after X of Y cells"): the cells it ran
# are the first X of its range.
# attnfuzz and MPFR/GMP are built on a CPU machine for sm_90a and carried in
# .carry/ (reports/production/README.md: the call).  Results: $OUT/sweep.tgz.
# Usage: reports/h200_sweep.sh DEADLINE_SECONDS
#   CUDNN_SHARDS ("2/5 3/5 4/5"), TORCH_SHARDS ("2/10 ... 9/10"): shards (K/N) or cell
#   ranges (A-B, for `audit --cells`) in run order
#   CUDNN_JOBS (4), TORCH_JOBS (4), REPRO_S (seconds kept for the re-runs, 90): throughput stops
#   growing past 4 jobs, and the GPU was lost twice with 16 worker processes on it
#   (reports/production/README.md, run 7)
#   BWD_SMOKE=1: first the new backward adapters on the case files (issue 14)
#   EARLIER_CUDNN, EARLIER_TORCH: globs of an earlier run's saved cases, re-run in the re-run step too
#   SERIAL_GROUPS=1: the torch group starts when the cuDNN group is done (fewer GPU processes at once)
set -u
deadline=$((SECONDS + ${1:-560}))
repro_s=${REPRO_S:-90}
. "$(dirname "$0")/h200_lib.sh"
h200_begin sweep
# The GPU kernels need no CPU threads: one OpenMP thread per worker process
# (libtorch would start one per core in each of them).
export OMP_NUM_THREADS=1
start_samplers 10

# One group's shards in order, each with the sweep time the group has left.
# A SIGTERM ends an audit at a case boundary with its report written.
group() {  # name jobs "shards" kernels [--kernel-lib ...]
  local name=$1 jobs=$2 shards=$3 kernels=$4; shift 4
  for s in $shards; do
    local budget=$(($(left) - repro_s - 15))
    [ $budget -lt 20 ] && { echo "$name: no time for shard $s"; continue; }
    # K/N is a shard; A-B the cells [A, B) (the rest of a shard a deadline cut).
    local sel=(--shard "$s") d="$R/${name}_${s/\//of}"
    [[ $s == *-* ]] && { sel=(--cells "$s"); d="$R/${name}_cells_$s"; }
    echo "$name ${sel[*]}: sweep time $budget s ($(date +%T))"
    timeout -k 40 $((budget + 60)) $AF "$@" audit --kernel "$kernels" --time 4 --sweep-time $budget \
      "${sel[@]}" --jobs $jobs --minimize-time 2 --minimize-budget 20 --out "$d" > "$d.log" 2>&1
    echo "$name ${sel[*]} audit rc=$? ($(date +%T)): $(grep -m1 'cases in' "$d.log")"
    grep 'sweep stopped' "$d.log" | head -1
    grep -m1 '^GPU workers:' "$d.log"
  done
}

step "cuDNN direct (system cuDNN) starts: shards ${CUDNN_SHARDS:-2/5 3/5 4/5}"
$AF kernels > "$R/kernels_system_cudnn.txt" 2>&1; grep -A1 '^cudnn' "$R/kernels_system_cudnn.txt"
( group cudnn "${CUDNN_JOBS:-4}" "${CUDNN_SHARDS:-2/5 3/5 4/5}" cudnn.sdpa,cudnn.sdpa.raw ) \
  > "$R/cudnn_group.log" 2>&1 &
pids+=($!)

build_torch_plugin 6
if [ -n "${SERIAL_GROUPS:-}" ]; then
  step "SERIAL_GROUPS: waiting for the cuDNN group"
  wait "${pids[@]}"
  pids=()
fi
TORCH_KERNELS=torch.flash,torch.efficient,torch.cudnn,torch.math,torch.flash_varlen
if [ -n "$TL" ]; then
  # One process, one libcudnn.so.9: with libtorch loaded, PyTorch's cuDNN.
  export ATTNFUZZ_CUDNN_LIB=$TORCH_CUDNN
  $AF --kernel-lib "$TL" kernels > "$R/kernels.txt" 2>&1
  grep -A2 '^torch' "$R/kernels.txt" | head -40
  if [ -n "${BWD_SMOKE:-}" ]; then
    step "issue 14: the new backward adapters (torch.flash_varlen, GQA in torch.flash) on the case files"
    python3 -c 'import torch;print(torch.ops.aten._flash_attention_backward.default._schema)'
    for k in torch.flash_varlen torch.flash; do
      timeout 60 $AF --kernel-lib "$TL" run --kernel $k --pass bwd tests/kernels/cudnn/cases/*.case \
        >> "$R/bwd_smoke.txt" 2>&1
      echo "$k [bwd] case files rc=$?"
    done
    grep -v '^  ' "$R/bwd_smoke.txt"
  fi
  step "libtorch kernels start: shards ${TORCH_SHARDS:-2/10 3/10 4/10 5/10 6/10 7/10 8/10 9/10}"
  ( group torch "${TORCH_JOBS:-4}" "${TORCH_SHARDS:-2/10 3/10 4/10 5/10 6/10 7/10 8/10 9/10}" $TORCH_KERNELS \
      --kernel-lib "$TL" ) > "$R/torch_group.log" 2>&1 &
  pids+=($!)
fi

step "waiting for the groups"
wait "${pids[@]}"
pids=()
cat "$R/cudnn_group.log" "$R/torch_group.log" 2>/dev/null
for f in "$R"/*of*.log "$R"/*cells_*.log; do
  [ -f "$f" ] || continue
  echo "--- $f"; grep -A3 '^cudnn\.\|^torch\.' "$f" | grep -v '^ *unsupported\|minimization' | head -30; done

step "every case saved, re-run on the H200 ($(left) s left)"
( unset ATTNFUZZ_CUDNN_LIB; repro cudnn "$R/cudnn_*/corpus/*.case" ) & pids+=($!)
[ -n "$TL" ] && { repro torch "$R/torch_*/corpus/*.case" --kernel-lib "$TL" & pids+=($!); }
# Saved cases of earlier runs not yet confirmed there (globs, e.g. reports/production/run7/call2/cudnn_*/corpus/*.case).
[ -n "${EARLIER_CUDNN:-}" ] && { ( unset ATTNFUZZ_CUDNN_LIB; repro earlier_cudnn "$EARLIER_CUDNN" ) & pids+=($!); }
[ -n "${EARLIER_TORCH:-}" ] && [ -n "$TL" ] && { repro earlier_torch "$EARLIER_TORCH" --kernel-lib "$TL" & pids+=($!); }
wait "${pids[@]}"
kill "${samplers[@]}" 2>/dev/null
gpu_loss_report
step done
