#!/usr/bin/env bash
# How the libtorch forward audit's throughput scales with --jobs on the H200
# (one GPU shared by every worker process), measured on real coverage: the
# cells [FIRST, END) are swept in steps of SECONDS each, one --jobs value per
# step, every step starting where the previous one stopped.
# attnfuzz and MPFR/GMP are carried in .carry/ (built on a CPU machine for
# sm_90a); the libtorch plugin is built here.  Results: $OUT/scaling.tgz.
# Usage: reports/h200_jobs_scaling.sh FIRST_CELL END_CELL SECONDS "JOBS..."
set -u
first=$1 end=$2 step_s=$3 jobs_list=$4
deadline=$((SECONDS + 600))
. "$(dirname "$0")/h200_lib.sh"
h200_begin scaling
export OMP_NUM_THREADS=1  # the GPU kernels need no CPU threads in each worker
start_samplers 5

build_torch_plugin 16
export ATTNFUZZ_CUDNN_LIB=$TORCH_CUDNN  # one process, one libcudnn.so.9

next=$first
for j in $jobs_list; do
  [ "$next" -ge "$end" ] && break
  d="$R/torch_cells_$next-${end}_jobs$j"
  step "jobs $j: cells $next-$end for $step_s s"
  timeout -k 30 $((step_s + 90)) $AF --kernel-lib "$TL" audit \
    --kernel torch.flash,torch.efficient,torch.cudnn,torch.math,torch.flash_varlen --time 1 \
    --sweep-time "$step_s" --cells "$next-$end" --jobs "$j" --minimize-time 2 --minimize-budget 5 \
    --out "$d" > "$d.log" 2>&1
  echo "rc=$? $(grep -m1 'cases in' "$d.log")"
  grep -m1 '^time:' "$d.log"
  # Cut by the step's time, or by a lost GPU (then the range stops here), or swept whole.
  ran=$(grep -m1 -o 'sweep stopped by --sweep-time [0-9]* s after [0-9]*' "$d.log" | awk '{print $NF}')
  lost=$(grep -m1 -o 'the GPU was lost after [0-9]* cells' "$d.log" | awk '{print $(NF-1)}')
  [ -n "$lost" ] && { echo "jobs $j: GPU lost after $lost cells"; next=$((next + lost)); break; }
  [ -z "$ran" ] && ran=$((end - next))
  echo "jobs $j: $ran cells in a ${step_s} s sweep"
  next=$((next + ran))
done
kill "${samplers[@]}" 2>/dev/null
step "done: cells $first-$next swept"
