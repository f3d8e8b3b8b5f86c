#!/usr/bin/env bash
# The backward audits (issue 14) on the H200 in one device-tool command:
#   1. the libtorch plugin is built (Torch lives there only) while cuDNN's
#      direct backward (system cuDNN, then PyTorch's 9.19) is audited;
#   2. `attnfuzz kernels` lists the backward kernels with their versions;
#   3. the backward of torch.flash, torch.efficient, torch.cudnn and
#      torch.math is audited (--pass bwd: every case judged on dQ, dK, dV);
#   (beside them, for issue 12: the forward of cuDNN direct on PyTorch's 9.19,
#   and the public-SDPA check of two stride findings);
#   4. every case the audits saved is re-run with `attnfuzz repro`
#      (each file records `pass bwd`), in the time that is left.
# attnfuzz and MPFR/GMP are built on a CPU machine for sm_90a and carried in
# .carry/ (reports/backward/README.md: the call).  Results: $OUT/backward.tgz.
# Usage: reports/h200_backward.sh SWEEP_SECONDS [SHARD K/N] [DEADLINE_SECONDS] [EXTRA_STEP] [REPRO_ROOT]
#   EXTRA_STEP: a command run beside the audits (e.g. the GPU oracle's tests), output in extra.txt
#   REPRO_ROOT: corpora of an earlier run (its cudnn914/, cudnn919/, torch/ folders), re-run once the
#   plugin is built (repro_earlier_*.txt)
#   ONLY_TORCH=1: the libtorch backward kernels only (no cuDNN-direct audits, no public-SDPA check)
#   CUDNN_JOBS (default 2 per cuDNN audit, three of them), TORCH_JOBS (6): the forward audits ran
#   2.5 x as many cases per second with the cores to themselves (reports/production/README.md, run 6)
set -u
sweep_s=${1:-240}
shard=${2:-0/1}
deadline=$((SECONDS + ${3:-540}))
extra_step=${4:-}
repro_root=${5:-}
. "$(dirname "$0")/h200_lib.sh"
h200_begin backward
audit() {  # name jobs sweep_s kernels [--kernel-lib ...]; PASS=fwd for a forward audit
  local name=$1 jobs=$2 s=$3 kernels=$4; shift 4
  ( timeout -k 40 $((s + 90)) $AF "$@" audit --pass ${PASS:-bwd} --kernel "$kernels" --time 20 --sweep-time $s \
      --shard $shard --jobs $jobs --minimize-time 3 --minimize-budget $((s / 6)) \
      --out "$R/$name" > "$R/$name.log" 2>&1
    echo "$name audit rc=$?" >> "$R/$name.log" ) &
  pids+=($!)
}
repro() {  # name corpus_dir libs...
  local name=$1 dir=$2; shift 2
  ls "$dir"/*.case > /dev/null 2>&1 || { echo "$name: no saved cases"; return; }
  timeout -k 10 $(($(left) - 15)) $AF "$@" repro --jobs "${REPRO_JOBS:-4}" "$dir"/*.case > "$R/repro_$name.txt" 2>&1
  echo "$name repro rc=$? ($(ls "$dir"/*.case | wc -l) cases, $(grep -c ': pass' "$R/repro_$name.txt") pass)"
}

if [ -z "${ONLY_TORCH:-}" ]; then
step "cuDNN direct backward: the case files, then audits (system cuDNN 9.14 and PyTorch's 9.19)"
$AF kernels > "$R/kernels_system_cudnn.txt" 2>&1
grep -A3 '^cudnn' "$R/kernels_system_cudnn.txt" | head -20
timeout 60 $AF run --kernel cudnn.sdpa --pass bwd tests/kernels/cudnn/cases/*.case > "$R/cudnn_cases_914.txt" 2>&1
echo "cudnn 9.14 case files rc=$?"; cat "$R/cudnn_cases_914.txt" | head -20
ATTNFUZZ_CUDNN_LIB=$TORCH_CUDNN timeout 60 $AF run --kernel cudnn.sdpa --pass bwd tests/kernels/cudnn/cases/*.case \
  > "$R/cudnn_cases_919.txt" 2>&1
echo "cudnn 9.19 case files rc=$?"; cat "$R/cudnn_cases_919.txt" | head -20
audit cudnn914 "${CUDNN_JOBS:-2}" $sweep_s cudnn.sdpa
# bash exports an assignment before a function call for the call's duration.
ATTNFUZZ_CUDNN_LIB=$TORCH_CUDNN audit cudnn919 "${CUDNN_JOBS:-2}" $sweep_s cudnn.sdpa
# Issue 12: the forward of cuDNN direct against PyTorch's cuDNN 9.19 (run 4 audited the system's 9.14 only).
PASS=fwd ATTNFUZZ_CUDNN_LIB=$TORCH_CUDNN audit cudnn919_fwd "${CUDNN_JOBS:-2}" $sweep_s cudnn.sdpa,cudnn.sdpa.raw
( timeout 120 python3 tests/kernels/torch/sdpa_public_repro.py > "$R/sdpa_public_repro.txt" 2>&1
  echo "sdpa_public_repro rc=$?" >> "$R/sdpa_public_repro.txt" ) & pids+=($!)
fi
if [ -n "$extra_step" ]; then
  ( timeout $(($(left) - 30)) bash -c "$extra_step" > "$R/extra.txt" 2>&1; echo "extra step rc=$?" >> "$R/extra.txt" ) &
  pids+=($!)
fi

build_torch_plugin 8
TORCH_BWD=torch.flash,torch.efficient,torch.cudnn,torch.math,torch.flash_varlen
if [ -n "$TL" ]; then
  export ATTNFUZZ_CUDNN_LIB=$TORCH_CUDNN  # one process, one libcudnn.so.9
  $AF --kernel-lib "$TL" kernels > "$R/kernels.txt" 2>&1
  sed -n '/^backward kernels/,$p' "$R/kernels.txt" | head -60
  step "the torch backward on the case files"
  for k in ${TORCH_BWD//,/ }; do
    timeout 60 $AF --kernel-lib "$TL" run --kernel $k --pass bwd tests/kernels/cudnn/cases/*.case \
      tests/harness/run/cases/mha_fp32.case >> "$R/torch_cases.txt" 2>&1
    echo "$k case files rc=$?"
  done
  grep -v "^  " "$R/torch_cases.txt" | head -24
  if [ -n "$repro_root" ]; then
    [ -d "$repro_root/torch" ] && { repro earlier_torch "$repro_root/torch" --kernel-lib "$TL" & pids+=($!); }
    [ -d "$repro_root/cudnn919" ] && { repro earlier_cudnn919 "$repro_root/cudnn919" & pids+=($!); }
  fi
  audit torch "${TORCH_JOBS:-6}" $((sweep_s - SECONDS + 20)) $TORCH_BWD --kernel-lib "$TL"
fi

step "waiting for the audits"
wait "${pids[@]}"
pids=()
for f in "$R"/*.log; do echo "--- $f"; grep -A14 '^audit matrix' "$f" | head -40; tail -1 "$f"; done

step "every case this run saved, re-run on the H200 ($(left) s left)"
if [ -z "${ONLY_TORCH:-}" ]; then
  ( unset ATTNFUZZ_CUDNN_LIB; repro cudnn914 "$R/cudnn914/corpus" ) & pids+=($!)
  ( export ATTNFUZZ_CUDNN_LIB=$TORCH_CUDNN; repro cudnn919 "$R/cudnn919/corpus" ) & pids+=($!)
  ( export ATTNFUZZ_CUDNN_LIB=$TORCH_CUDNN; repro cudnn919_fwd "$R/cudnn919_fwd/corpus" ) & pids+=($!)
fi
[ -n "$TL" ] && { repro torch "$R/torch/corpus" --kernel-lib "$TL" & pids+=($!); }
wait "${pids[@]}"
step done
