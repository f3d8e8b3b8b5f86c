#!/usr/bin/env bash
# cuDNN direct's backward (`cudnn.sdpa [bwd]`, issue 14) on PyTorch's cuDNN, alone on the
# H200: the cells the report folders of DIR/cudnn_bwd_covered.txt leave, then every case
# it saved re-run (`attnfuzz --determinism repro`).  For a short call: the sweep stops
# DEADLINE_SECONDS - 45 s after the start; results stay under $OUT (the corpus written as
# cases fail, the report when the sweep stops), so a call cut short brings back what it did.
# Usage: COVERED=DIR reports/h200_cudnn_bwd.sh DEADLINE_SECONDS [JOBS]
set -u
deadline=$((SECONDS + ${1:-120}))
. "$(dirname "$0")/h200_lib.sh"
h200_begin cudnn_bwd
export ATTNFUZZ_CUDNN_LIB=$TORCH_CUDNN
sweep=$(($(left) - 45))
step "cudnn.sdpa [bwd], ${2:-8} jobs, sweep time $sweep s"
audit_cudnn_bwd cudnn_bwd "${2:-8}" "$sweep" 10 "${COVERED:?COVERED=DIR}/cudnn_bwd_covered.txt"
tail -1 "$R/cudnn_bwd.log"; grep -A8 '^cudnn.sdpa \[bwd\]:' "$R/cudnn_bwd.log" | grep -v 'unsupported cases'
REPRO_JOBS=${2:-8} repro cudnn_bwd "$R/cudnn_bwd/corpus/*.case"
step done
