#!/usr/bin/env bash
# The production audits of issue 12 on the H200, in one command (device tool):
#   build the libtorch plugin there (Torch lives there only), list the kernels,
#   the convention table, seed-corpus smoke runs, the audits, and every saved
#   repro re-run with `attnfuzz repro`.  Everything lands under $OUT/prod.
# attnfuzz itself is built on a CPU machine for sm_90a and carried in .carry/
# (reports/production/README.md has the exact device-tool call).
# Usage: reports/production/h200_production.sh AUDIT_SECONDS SWEEP_SECONDS
set -u
audit_s=${1:-120}
sweep_s=${2:-150}
R=$OUT/prod
mkdir -p "$R"
exec > >(tee "$R/log.txt") 2>&1
# At most 8 files come back from $OUT: everything travels as one archive,
# packed on any exit.
trap 'sleep 1; tar czf "$OUT/prod.tgz" -C "$OUT" prod && rm -rf "$OUT/prod"' EXIT
step() { printf '\n=== %s  (%s)\n' "$*" "$(date +%T)"; }
AF=$PWD/.carry/attnfuzz
step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
export PATH=/opt/torch/.venv/bin:$PATH
TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
TORCH_CUDNN=$(python3 -c 'import nvidia.cudnn,os;print(os.path.join(list(nvidia.cudnn.__path__)[0],"lib","libcudnn.so.9"))')
echo "torch $(python3 -c 'import torch;print(torch.__version__, torch.backends.cudnn.version())'), its cuDNN: $TORCH_CUDNN"
ls -l /usr/lib/x86_64-linux-gnu/libcudnn.so.9* 2>/dev/null

step "build the libtorch plugin"
B=/tmp/build-torch
( cmake -S kernels/torch -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TP" &&
  cmake --build $B -j 16 ) > "$R/torch_build.log" 2>&1 || { tail -40 "$R/torch_build.log"; }
TL=$(ls $B/libattnfuzz_torch.so 2>/dev/null)
echo "plugin: ${TL:-none}"
TORCH_KERNELS=torch.flash,torch.efficient,torch.cudnn,torch.math,torch.flash_varlen

step "kernels (system cuDNN; then with PyTorch's cuDNN and the plugin)"
$AF kernels > "$R/kernels_system_cudnn.txt" 2>&1; grep -A2 '^cudnn' "$R/kernels_system_cudnn.txt"
# One process, one libcudnn.so.9: the plugin's libtorch would bind to whichever
# was loaded first (the loader matches by soname), so runs with the plugin load
# PyTorch's own cuDNN for the direct adapter as well.
export ATTNFUZZ_CUDNN_LIB=$TORCH_CUDNN
$AF --kernel-lib "$TL" kernels > "$R/kernels.txt" 2>&1; cat "$R/kernels.txt" | grep -A2 '^cudnn\|^torch'

step "convention table"
timeout 180 $AF --kernel-lib "$TL" conventions --kernel cudnn.sdpa,cudnn.sdpa.raw,$TORCH_KERNELS,gpu.fa2 --out "$R/conventions.md" \
  > "$R/conventions.log" 2>&1; tail -20 "$R/conventions.log"

step "seed corpus on every kernel"
for k in cudnn.sdpa ${TORCH_KERNELS//,/ }; do
  timeout 120 $AF --kernel-lib "$TL" run --kernel $k corpora/seeds/*.case > "$R/seeds_$k.txt" 2>&1
  echo "$k: rc=$? $(grep -c ': pass' "$R/seeds_$k.txt") pass, $(grep -c 'unsupported' "$R/seeds_$k.txt") unsupported"
done

step "audit: cudnn.sdpa against the system cuDNN"
# cudnn.sdpa.raw beside it: without the adapter's guards against the cuDNN
# defects found by its first H200 runs, so they are on record with repros.
( unset ATTNFUZZ_CUDNN_LIB
  timeout $((audit_s + sweep_s + 120)) $AF audit --kernel cudnn.sdpa,cudnn.sdpa.raw --time $audit_s --sweep-time $sweep_s --jobs 16 \
    --minimize-time 10 --out "$R/audit_cudnn" > "$R/audit_cudnn.log" 2>&1; echo "rc=$?" )
tail -12 "$R/audit_cudnn.log"

step "audit: the five PyTorch kernels (one sweep, the oracle shared)"
timeout $((audit_s + sweep_s + 120)) $AF --kernel-lib "$TL" audit --kernel $TORCH_KERNELS --time $audit_s \
  --sweep-time $sweep_s --jobs 16 --minimize-time 10 --out "$R/audit_torch" > "$R/audit_torch.log" 2>&1
echo "rc=$?"; tail -25 "$R/audit_torch.log"

step "every saved repro re-run"
( unset ATTNFUZZ_CUDNN_LIB; ls "$R"/audit_cudnn/corpus/*.case >/dev/null 2>&1 &&
  timeout 120 $AF --determinism repro "$R"/audit_cudnn/corpus/*.case > "$R/repro_cudnn.txt" 2>&1; echo "cudnn repro rc=$?" )
ls "$R"/audit_torch/corpus/*.case >/dev/null 2>&1 &&
  timeout 120 $AF --kernel-lib "$TL" --determinism repro "$R"/audit_torch/corpus/*.case > "$R/repro_torch.txt" 2>&1
echo "torch repro rc=$?"
step "done"
