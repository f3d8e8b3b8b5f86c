#!/usr/bin/env bash
# The libtorch forward sweep (issue 12) split by what faults, in one device-tool command.
# Run 9 found why the GPU was lost under the libtorch sweeps: torch.flash and torch.cudnn
# fault on rows with row gaps (Xid 13, misaligned address); with other contexts on the GPU
# each fault stalls a context switch (Xid 109, CTX SWITCH TIMEOUT, about 5 s after such a
# case starts) and, after some tens of them, the GPU's firmware stops answering (Xid 119,
# GSP RPC timeout) and the GPU needs a reset (Xid 154).  So the phases run the cells that
# cannot fault first, and those that do last:
#   1. every kernel, rows without row gaps            (--rows '^(?!.*row_gap3)')
#   2. torch.efficient, torch.math, torch.flash_varlen on the row-gap rows
#   3. torch.flash, torch.cudnn on the row-gap rows (the faults), with torch.math: its fp32
#      rows are in the 5-kernel matrix, where both decline them ("q dtype fp32 not supported"),
#      and a matrix of the two alone has none
# Each phase skips the cells earlier reports cover (DIR/torch_covered.txt's folders, and
# the report folders of this command's earlier phases), so a later call resumes where a
# deadline or a lost GPU stopped it.  Then the saved cases are re-run (`attnfuzz
# --determinism repro`): the phases' that cannot fault first, then the faulting phase's and
# DIR/torch_fault_cases.txt's (earlier calls' faulting cases not yet re-run).
# attnfuzz is carried in .carry/; the plugin is built here.  Results: $OUT/split.tgz.
# Usage: COVERED=DIR reports/h200_torch_split.sh DEADLINE_SECONDS
#   DIR/torch_covered.txt: report folders (globs allowed), one a line.
#   PASS=bwd: the backward kernels of the same names (issue 14; their faults are the same
#   row-gap ones); the folders are then DIR/torch_bwd_covered.txt's, results $OUT/split_bwd.tgz.
#   JOBS (4): jobs of the phases that cannot fault.  FAULT_JOBS (1): jobs of the faulting phase
#   and of its re-runs; 1 leaves no other context beside a faulting one, so no context switch
#   can time out (run 9 lost the GPU after those timeouts at 4 jobs; run 10 at 1 job took
#   more faults, kept the GPU and swept 3.9 cells/s against 4 jobs' 3.0).  FAULT_GPU_WORKERS
#   (unset): `--gpu-workers N` for them, e.g. FAULT_JOBS=4 FAULT_GPU_WORKERS=1: one CUDA
#   context, as with one job, while four jobs judge.  Measured on the backward's faulting
#   rows (reports/backward/README.md, session 6): 1.0 cells/s with FAULT_JOBS=4
#   FAULT_GPU_WORKERS=1 against 1.5 with one job, both keeping the GPU: leave it unset.
#   REPRO_S (120): seconds the faulting phase leaves for the re-runs.
#   NOFAULT_KEEP (0): seconds the first phase leaves (for the re-runs, when it cannot finish).
#   CUDNN_SIDE=JOBS (PASS=bwd only): cuDNN direct's backward (`cudnn.sdpa [bwd]`, PyTorch's
#   cuDNN) audited beside the phases that cannot fault, with JOBS jobs, skipping the folders of
#   DIR/cudnn_bwd_covered.txt; cuDNN's backward has not faulted in any call (its failures are
#   values), so it shares the GPU safely until the faulting phase, which waits for it.
set -u
deadline=$((SECONDS + ${1:-560}))
. "$(dirname "$0")/h200_lib.sh"
pass=${PASS:-fwd}
name=split; [ "$pass" = bwd ] && name=split_bwd
h200_begin "$name"
export OMP_NUM_THREADS=1
start_samplers 10
build_torch_plugin 8
[ -n "$TL" ] || { step "no libtorch plugin: nothing run"; exit 1; }
export ATTNFUZZ_CUDNN_LIB=$TORCH_CUDNN
list=${COVERED:?COVERED=DIR}/torch_covered.txt
[ "$pass" = bwd ] && list=$COVERED/torch_bwd_covered.txt
# Unpacked once: each phase passes these and the report folders of the phases before it.
earlier=$(unpack_reports /tmp/covered_earlier $(cat "$list"))

phase() {  # name kernels rows-regex jobs seconds-to-leave [gpu-workers]
  local name=$1 kernels=$2 rows=$3 jobs=$4 keep=$5 gw=${6:+--gpu-workers $6} d="$R/$1"
  local covered="$earlier ${done_dirs[*]}"
  local todo
  todo=$($AF --kernel-lib "$TL" audit --pass "$pass" --kernel "$kernels" --shard 0/1 --rows "$rows" --skip-covered $covered \
    --list-cells --out /tmp/x 2>/dev/null | wc -l)
  # The sweep's own stop, plus one kernel call's hang timeout (60 s) and the report.
  local budget=$(($(left) - 80 - keep))
  step "phase $name: $kernels, rows '$rows': $todo cells, sweep time $budget s"
  [ "$todo" -gt 0 ] || return 0
  [ "$budget" -gt 20 ] || { echo "no time"; return 0; }
  timeout -k 20 $((budget + 70)) $AF --kernel-lib "$TL" $gw audit --pass "$pass" --kernel "$kernels" --shard 0/1 --rows "$rows" \
    --skip-covered $covered --sweep-time "$budget" --time 4 --jobs "$jobs" --minimize-time 2 \
    --minimize-budget 20 --out "$d" > "$d.log" 2>&1
  echo "phase $name rc=$?: $(grep -m1 'cases in' "$d.log")"
  grep -m1 'sweep stopped' "$d.log"; grep -m1 '^GPU workers' "$d.log"
  grep -v '^#' "$d/in_flight.txt" 2>/dev/null
  [ -f "$d/report.json" ] && done_dirs+=("$d")
  echo "Xid kinds so far: $(grep -io 'xid ([^)]*): [0-9]*' "$R/dmesg.txt" | sed 's/.*: //' | sort | uniq -c | tr -s ' ' | tr '\n' ' ')"
}
side_pid=
if [ "$pass" = bwd ] && [ -n "${CUDNN_SIDE:-}" ]; then
  # It stops with the first phase: the time left less the re-runs' share (REPRO_S) and
  # the report's.
  side_s=$(($(left) - 80 - ${REPRO_S:-120}))
  step "beside the phases: cudnn.sdpa [bwd] on PyTorch's cuDNN, $CUDNN_SIDE jobs, sweep time $side_s s"
  audit_cudnn_bwd cudnn_bwd "$CUDNN_SIDE" "$side_s" 20 "$COVERED/cudnn_bwd_covered.txt" &
  side_pid=$!
fi
done_dirs=()
T=torch.flash,torch.efficient,torch.cudnn,torch.math,torch.flash_varlen
phase no_gaps "$T" '^(?!.*row_gap3)' "${JOBS:-4}" "${NOFAULT_KEEP:-0}"
phase gaps_nofault torch.efficient,torch.math,torch.flash_varlen row_gap3 "${JOBS:-4}" 0
if [ -n "$side_pid" ]; then
  step "waiting for cudnn.sdpa [bwd] before the faulting phase"
  wait "$side_pid"; tail -1 "$R/cudnn_bwd.log"; grep -m1 'cases in' "$R/cudnn_bwd.log"; grep -A14 '^audit matrix' "$R/cudnn_bwd.log" | head -20
  REPRO_JOBS=${JOBS:-4} repro cudnn_bwd "$R/cudnn_bwd/corpus/*.case"
fi
phase gaps_fault torch.flash,torch.cudnn,torch.math row_gap3 "${FAULT_JOBS:-1}" "${REPRO_S:-120}" "${FAULT_GPU_WORKERS:-}"

step "saved cases re-run: those that cannot fault ($(left) s left)"
REPRO_JOBS=${JOBS:-4} repro nofault "$R/no_gaps/corpus/*.case $R/gaps_nofault/corpus/*.case" --kernel-lib "$TL"
step "saved cases re-run: the faulting phase's, then earlier calls' ($(left) s left)"
fault_gw=${FAULT_GPU_WORKERS:+--gpu-workers $FAULT_GPU_WORKERS}
REPRO_JOBS=${FAULT_JOBS:-1} repro fault "$R/gaps_fault/corpus/*.case" --kernel-lib "$TL" $fault_gw
[ -s "$COVERED/torch_fault_cases.txt" ] &&
  REPRO_JOBS=${FAULT_JOBS:-1} repro earlier_fault "@$COVERED/torch_fault_cases.txt" --kernel-lib "$TL" $fault_gw
kill "${samplers[@]}" 2>/dev/null
gpu_loss_report
step done
