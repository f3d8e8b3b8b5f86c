#!/usr/bin/env bash
# Issue 12/14 on the H200 in one device-tool command, one group at a time (at most 4 GPU worker
# processes at once): the cells of cuDNN direct's matrix no earlier report covers, every saved case
# not yet confirmed there re-run (`attnfuzz --determinism repro`), the torch.math backward cases
# re-judged under the own-forward bound, then the libtorch sweep over the cells no earlier report
# covers until the deadline.
# attnfuzz is built on a CPU machine for sm_90a and carried in .carry/; the libtorch plugin is built
# here.  Results: $OUT/confirm.tgz.
# Usage: reports/h200_confirm.sh DEADLINE_SECONDS
#   CONFIRM=DIR: the lists of cases to re-run (cudnn.txt, torch_suspect.txt, torch.txt; empty: none;
#   the corpora of runs 6-9 are committed as corpus.tar.xz: extract the ones a list names first);
#   default reports/production/run8/confirm (run 8 call 3), reports/production/run9_plan for the next call
#   the report folders of earlier audits whose cells are skipped (--skip-covered): DIR/cudnn_covered.txt
#   and DIR/torch_covered.txt, one a line (the libtorch cells of a call whose GPU was failing are left out)
set -u
deadline=$((SECONDS + ${1:-430}))
. "$(dirname "$0")/h200_lib.sh"
h200_begin confirm
export OMP_NUM_THREADS=1  # the GPU kernels need no CPU threads in each worker
start_samplers 10
L=${CONFIRM:-reports/production/run8/confirm}
sweep_flags=(--time 4 --jobs 4 --minimize-time 2 --minimize-budget 20)

step "cuDNN direct (system cuDNN): the cells no earlier report covers"
covered=$(unpack_reports /tmp/covered/cudnn $(cat "$L/cudnn_covered.txt"))
$AF audit --kernel cudnn.sdpa,cudnn.sdpa.raw --shard 0/1 --skip-covered $covered --list-cells --out /tmp/x \
  > "$R/cudnn_holes_cells.txt"
if [ -s "$R/cudnn_holes_cells.txt" ]; then
  $AF audit --kernel cudnn.sdpa,cudnn.sdpa.raw --shard 0/1 --skip-covered $covered --sweep-time 120 "${sweep_flags[@]}" \
    --out "$R/cudnn_holes" > "$R/cudnn_holes.log" 2>&1 &
  holes=$!
  build_torch_plugin 6
  wait $holes
  echo "cuDNN holes audit rc=$? ($(wc -l < "$R/cudnn_holes_cells.txt") cells listed): $(grep -m1 'cases in' "$R/cudnn_holes.log")"
  grep -m1 '^GPU workers' "$R/cudnn_holes.log"; grep -A3 '^cudnn\.sdpa' "$R/cudnn_holes.log" | grep 'failing cells by verdict\|rows x'
else
  echo "cuDNN direct: earlier reports cover every cell"
  build_torch_plugin 6
fi

step "cuDNN saved cases re-run ($(left) s left)"
repro cudnn_holes "$R/cudnn_holes/corpus/*.case"
repro cudnn "@$L/cudnn.txt"

[ -n "$TL" ] || { kill "${samplers[@]}"; step "no libtorch plugin: done"; exit 0; }
export ATTNFUZZ_CUDNN_LIB=$TORCH_CUDNN  # one process, one libcudnn.so.9: PyTorch's
step "torch.math [bwd] cases re-judged under the own-forward bound ($(left) s left)"
timeout 60 $AF --kernel-lib "$TL" repro reports/backward/run*/torch/corpus/torch.math-*.case > "$R/repro_torch_math_bwd.txt" 2>&1
echo "rc=$?"; grep -v '^ ' "$R/repro_torch_math_bwd.txt"

step "torch saved cases re-run: torch_suspect.txt (the suspects of a failing GPU, or the cases that cannot fault), then torch.txt ($(left) s left)"
repro torch_suspect "@$L/torch_suspect.txt" --kernel-lib "$TL"
repro torch "@$L/torch.txt" --kernel-lib "$TL"

# The sweep's own stop plus one kernel call's hang timeout (60 s) and the report: a sweep killed
# before its report counts for nothing (run 8 call 4).
budget=$(($(left) - 100))
if [ "$budget" -gt 30 ]; then
  step "libtorch kernels: the cells no earlier report covers, for $budget s"
  covered=$(unpack_reports /tmp/covered/torch $(cat "$L/torch_covered.txt"))
  timeout -k 20 $((budget + 80)) $AF --kernel-lib "$TL" audit --kernel torch.flash,torch.efficient,torch.cudnn,torch.math,torch.flash_varlen \
    --shard 0/1 --skip-covered $covered --sweep-time "$budget" "${sweep_flags[@]}" --out "$R/torch_sweep" > "$R/torch_sweep.log" 2>&1
  echo "torch sweep rc=$?: $(grep -m1 'cases in' "$R/torch_sweep.log")"; grep -m1 'sweep stopped' "$R/torch_sweep.log"
  # After a kill or a lost GPU: the cases that were running then.
  grep -v '^#' "$R/torch_sweep/in_flight.txt" 2>/dev/null
fi
kill "${samplers[@]}" 2>/dev/null
gpu_loss_report
step done
