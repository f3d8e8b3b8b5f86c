#!/usr/bin/env bash
# The production and Python-bridge audits (issues 12 and 13) on the H200 in
# one device-tool command, repros included:
#   1. the cuDNN-direct and Python-kernel audits start at once (system cuDNN);
#   2. the libtorch plugin is built meanwhile (Torch lives there only), then
#      the libtorch adapters and SDPA through Python are audited together (the
#      same case in every cell for both, so their verdicts compare) beside the
#      convention table;
#   3. the bridge's per-call benchmark and the poison-none control of the
#      cuDNN padding finding;
#   4. every case the audits saved is re-run with `attnfuzz --determinism
#      repro`, with the plugins it was found with, in the time that is left;
#      so are the corpora of an earlier run (REPRO_ROOT, its cudnn/, torch/,
#      py_*/ folders), at once, beside the audits.
# attnfuzz, the Python bridge plugin, its benchmark and MPFR/GMP are built on
# a CPU machine for sm_90a and carried (reports/production/README.md: the
# call).  Results: $OUT/audits.tgz.
# Usage: reports/h200_audits.sh SWEEP_SECONDS [SHARD K/N] [DEADLINE_SECONDS] [REPRO_ROOT]
set -u
sweep_s=${1:-300}
shard=${2:-0/1}
deadline=$((SECONDS + ${3:-570}))
repro_root=${4:-}
. "$(dirname "$0")/h200_lib.sh"
h200_begin audits
PY=$PWD/.carry/libattnfuzz_python.so
export ATTNFUZZ_PYTHON=/opt/torch/.venv/bin/python3 ATTNFUZZ_PYTHONPATH=$PWD/python
# JAX would take 75 % of the GPU at import, in every worker.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
python3 -c 'import jax,triton;print("jax",jax.__version__,"triton",triton.__version__)'
# A SIGTERM ends an audit at a case boundary with its report written
# (stop_request.h); the KILL 40 s later is for a harness that does not answer.
audit() {  # name jobs minimize_s kernels [--kernel-lib ...]
  local name=$1 jobs=$2 min_s=$3 kernels=$4; shift 4
  # The sweep's minimizations hold every job: a sixth of the sweep for them.
  ( timeout -k 40 $((sweep_s + 100)) $AF "$@" audit --kernel "$kernels" --time 30 --sweep-time $sweep_s \
      --shard $shard --jobs $jobs --minimize-time $min_s --minimize-budget $((sweep_s / 6)) \
      --out "$R/$name" > "$R/$name.log" 2>&1
    echo "$name audit rc=$?" >> "$R/$name.log" ) &
  pids+=($!)
}
repro() {  # name corpus_dir libs...: every case there, twice each for identical bits
  local name=$1 dir=$2; shift 2
  ls "$dir"/*.case > /dev/null 2>&1 || { echo "$name: no saved cases"; return; }
  timeout -k 10 $(($(left) - 20)) $AF "$@" --determinism repro --jobs "${REPRO_JOBS:-4}" "$dir"/*.case > "$R/repro_$name.txt" 2>&1
  echo "$name repro rc=$? ($(ls "$dir"/*.case | wc -l) cases, $(grep -c ': pass' "$R/repro_$name.txt") pass)"
}
PYFLEX=(--kernel-lib "$PY#attnfuzz.kernels.flex:kernels")
PYJAX=(--kernel-lib "$PY#attnfuzz.kernels.jax_dpa:kernels")
PYTRITON=(--kernel-lib "$PY#attnfuzz.kernels.triton_fa:kernel")

# PRODUCTION_ONLY=1: cuDNN direct and the libtorch kernels alone (issue 12),
# with the machine's cores to themselves (CUDNN_JOBS, TORCH_JOBS); no Python
# bridge, so nothing of it needs carrying.
py=1
[ -n "${PRODUCTION_ONLY:-}" ] && py=
if [ -n "$py" ]; then
step "first, on a quiet machine: the bridge's per-call cost (a no-op kernel, numpy and torch views)"
timeout 60 .carry/python_bridge_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  > "$R/bridge_bench.txt" 2>&1; cat "$R/bridge_bench.txt"
fi

step "audits start: cuDNN direct (system cuDNN) and the Python kernels"
$AF kernels > "$R/kernels_system_cudnn.txt" 2>&1; grep -A1 '^cudnn' "$R/kernels_system_cudnn.txt"
audit cudnn "${CUDNN_JOBS:-3}" 2 cudnn.sdpa,cudnn.sdpa.raw
if [ -n "$py" ]; then
  audit py_flex 2 3 py.flex.padded,py.flex.packed "${PYFLEX[@]}"
  audit py_jax 3 3 py.jax.xla,py.jax.cudnn "${PYJAX[@]}"
  shard=${TRITON_SHARD:-$shard} audit py_triton 1 3 py.triton.fa2 "${PYTRITON[@]}"
else
  PYFLEX=() PYJAX=() PYTRITON=()
fi
if [ -n "$repro_root" ]; then
  [ -d "$repro_root/cudnn" ] && { repro earlier_cudnn "$repro_root/cudnn/corpus" & pids+=($!); }
  [ -d "$repro_root/py_jax" ] && { repro earlier_py_jax "$repro_root/py_jax/corpus" "${PYJAX[@]}" & pids+=($!); }
  [ -d "$repro_root/py_flex" ] && { repro earlier_py_flex "$repro_root/py_flex/corpus" "${PYFLEX[@]}" & pids+=($!); }
fi

build_torch_plugin 6
TORCH_KERNELS=torch.flash,torch.efficient,torch.cudnn,torch.math,torch.flash_varlen
SDPA_PY=${py:+,py.sdpa.flash,py.sdpa.efficient,py.sdpa.cudnn,py.sdpa.math}
# One process, one libcudnn.so.9: with libtorch loaded, the direct adapter
# uses PyTorch's cuDNN too.  (The audits above forked with the system's.)
export ATTNFUZZ_CUDNN_LIB=$TORCH_CUDNN
TLIBS=(--kernel-lib "$TL" ${py:+--kernel-lib "$PY#attnfuzz.kernels.sdpa:kernels"})
$AF "${TLIBS[@]}" "${PYFLEX[@]}" "${PYJAX[@]}" "${PYTRITON[@]}" kernels \
  > "$R/kernels.txt" 2>&1
grep -A2 '^cudnn\|^torch\|^py' "$R/kernels.txt" | head -90
# Shorter sweep: it starts after the build.
sweep_s=$((sweep_s - SECONDS + 15))
audit torch "${TORCH_JOBS:-6}" 3 $TORCH_KERNELS$SDPA_PY "${TLIBS[@]}"
( timeout 150 $AF "${TLIBS[@]}" conventions \
    --kernel cudnn.sdpa,cudnn.sdpa.raw,$TORCH_KERNELS$SDPA_PY,gpu.fa2 \
    --out "$R/conventions.md" > "$R/conventions.log" 2>&1; echo "conventions rc=$?" >> "$R/conventions.log" ) &
pids+=($!)
[ -n "$repro_root" ] && [ -d "$repro_root/torch" ] && { repro earlier_torch "$repro_root/torch/corpus" "${TLIBS[@]}" & pids+=($!); }

step "control: the cuDNN padding finding with zero padding instead of NaN"
mkdir -p "$R/control"
found=(${repro_root:-reports/production/run4}/cudnn/corpus/cudnn.sdpa-nan_inf-*.case)
if [ -f "${found[0]}" ]; then
  for f in "${found[@]}"; do sed 's/^poison .*$/poison none/' "$f" > "$R/control/$(basename "$f")"; done
  ( unset ATTNFUZZ_CUDNN_LIB; timeout 90 $AF run --kernel cudnn.sdpa "$R"/control/*.case > "$R/control.txt" 2>&1
    echo "control (poison none) rc=$?: $(grep -c ': pass' "$R/control.txt") pass"
    timeout 90 $AF run --kernel cudnn.sdpa "${found[@]}" > "$R/control_nan.txt" 2>&1
    echo "the same cases, poison nan: rc=$?" ) &
  pids+=($!)
else
  echo "no cudnn.sdpa nan_inf cases to control"
fi

step "waiting for the audits"
wait "${pids[@]}"
pids=()
for f in "$R"/*.log; do echo "--- $f"; grep -A14 '^audit matrix' "$f" | head -60; tail -1 "$f"; done

step "every case this run saved, re-run on the H200 ($(left) s left)"
( unset ATTNFUZZ_CUDNN_LIB; repro cudnn "$R/cudnn/corpus" ) & pids+=($!)
repro torch "$R/torch/corpus" "${TLIBS[@]}" & pids+=($!)
if [ -n "$py" ]; then
  repro py_flex "$R/py_flex/corpus" "${PYFLEX[@]}" & pids+=($!)
  repro py_jax "$R/py_jax/corpus" "${PYJAX[@]}" & pids+=($!)
  repro py_triton "$R/py_triton/corpus" "${PYTRITON[@]}" & pids+=($!)
fi
wait "${pids[@]}"
step done
