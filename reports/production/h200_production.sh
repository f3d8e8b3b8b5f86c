#!/usr/bin/env bash
# The production audits of issue 12 on the H200, in one command (device tool):
#   build the libtorch plugin there (Torch lives there only) while the cuDNN
#   audit runs, list the kernels, the convention table, the PyTorch audit, and
#   every saved repro re-run with `attnfuzz repro`.  Everything lands in
#   $OUT/prod.tgz.  attnfuzz is built on a CPU machine for sm_90a and carried
#   in .carry/ with its MPFR and GMP (reports/production/README.md: the call).
# Usage: reports/production/h200_production.sh AUDIT_SECONDS SWEEP_SECONDS
set -u
audit_s=${1:-100}
sweep_s=${2:-80}
R=$OUT/prod
mkdir -p "$R"
exec > >(tee "$R/log.txt") 2>&1
# At most 8 files come back from $OUT: everything travels as one archive,
# packed on any exit.
trap 'sleep 1; tar czf "$OUT/prod.tgz" -C "$OUT" prod && rm -rf "$OUT/prod"' EXIT
step() { printf '\n=== %s  (%s)\n' "$*" "$(date +%T)"; }
export LD_LIBRARY_PATH=$PWD/.carry${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
AF=$PWD/.carry/attnfuzz
step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
export PATH=/opt/torch/.venv/bin:$PATH
TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
TORCH_CUDNN=$(python3 -c 'import nvidia.cudnn,os;print(os.path.join(list(nvidia.cudnn.__path__)[0],"lib","libcudnn.so.9"))')
echo "torch $(python3 -c 'import torch;print(torch.__version__, torch.backends.cudnn.version())'), its cuDNN: $TORCH_CUDNN"
$AF kernels > "$R/kernels_system_cudnn.txt" 2>&1; grep -A1 '^cudnn' "$R/kernels_system_cudnn.txt"

step "audit of cudnn.sdpa and cudnn.sdpa.raw (system cuDNN), in the background"
# cudnn.sdpa.raw: the adapter without its guards against the cuDNN defects
# found by its first H200 runs, so they are on record with repros.
( timeout $((audit_s + sweep_s + 150)) $AF audit --kernel cudnn.sdpa,cudnn.sdpa.raw --time $audit_s \
    --sweep-time $sweep_s --jobs 8 --minimize-time 8 --out "$R/audit_cudnn" > "$R/audit_cudnn.log" 2>&1
  echo "cudnn audit rc=$?" >> "$R/audit_cudnn.log" ) &
cudnn_audit=$!

step "build the libtorch plugin"
B=/tmp/build-torch
( cmake -S kernels/torch -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TP" &&
  cmake --build $B -j 8 --target attnfuzz_torch ) > "$R/torch_build.log" 2>&1 || tail -30 "$R/torch_build.log"
TL=$(ls $B/libattnfuzz_torch.so 2>/dev/null)
echo "plugin: ${TL:-none}"
TORCH_KERNELS=torch.flash,torch.efficient,torch.cudnn,torch.math,torch.flash_varlen
# One process, one libcudnn.so.9: libtorch would bind to whichever was loaded
# first (the loader matches by soname), so runs with the plugin give the
# direct adapter PyTorch's own cuDNN too.
export ATTNFUZZ_CUDNN_LIB=$TORCH_CUDNN
$AF --kernel-lib "$TL" kernels > "$R/kernels.txt" 2>&1; grep -A2 '^cudnn\|^torch' "$R/kernels.txt"

step "convention table, in the background"
( timeout 150 $AF --kernel-lib "$TL" conventions --kernel cudnn.sdpa,cudnn.sdpa.raw,$TORCH_KERNELS,gpu.fa2 \
    --out "$R/conventions.md" > "$R/conventions.log" 2>&1; echo "conventions rc=$?" >> "$R/conventions.log" ) &
conventions=$!

step "audit of the five PyTorch kernels (one sweep, the oracle shared)"
timeout $((audit_s + sweep_s + 150)) $AF --kernel-lib "$TL" audit --kernel $TORCH_KERNELS --time $audit_s \
  --sweep-time $sweep_s --jobs 12 --minimize-time 8 --out "$R/audit_torch" > "$R/audit_torch.log" 2>&1
echo "rc=$?"; tail -30 "$R/audit_torch.log"
wait $cudnn_audit; tail -16 "$R/audit_cudnn.log"
wait $conventions; tail -16 "$R/conventions.log"

step "control: the cuDNN padding finding with padding that holds zeros instead of NaN"
# If cuDNN reads K/V rows past seq_len_kv, the NaN-poisoned cases fail and
# these pass: the committed repros of the first H200 run, with `poison none`.
mkdir -p "$R/control"
for f in reports/production/run2/audit_cudnn/corpus/cudnn.sdpa-nan_inf-*.case; do
  sed 's/^poison nan$/poison none/' "$f" > "$R/control/$(basename "$f")"
done
( unset ATTNFUZZ_CUDNN_LIB; timeout 60 $AF run --kernel cudnn.sdpa "$R"/control/*.case > "$R/control.txt" 2>&1
  echo "control rc=$? (0: every case passes with zero padding)"; grep -c ': pass' "$R/control.txt" )

step "every saved repro re-run"
( unset ATTNFUZZ_CUDNN_LIB; ls "$R"/audit_cudnn/corpus/*.case >/dev/null 2>&1 &&
  timeout 60 $AF --determinism repro "$R"/audit_cudnn/corpus/*.case > "$R/repro_cudnn.txt" 2>&1; echo "cudnn repro rc=$?" )
ls "$R"/audit_torch/corpus/*.case >/dev/null 2>&1 &&
  timeout 60 $AF --kernel-lib "$TL" --determinism repro "$R"/audit_torch/corpus/*.case > "$R/repro_torch.txt" 2>&1
echo "torch repro rc=$?"
step "done"
