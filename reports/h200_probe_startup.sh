#!/usr/bin/env bash
# Where an alone repro's ~1.9 s goes (session 17 measured only the whole): each command
# below three times, wall seconds, on the machine an h200_replay.sh call left (its plugin
# in /tmp/build-torch).  One saved row-gap crash case of run 12 is run through its own
# kernel (GPU worker, CUDA context, the fault) and, its kernel line changed, through the
# CPU reference (no worker) with and without the plugin loaded.
# Usage: reports/h200_probe_startup.sh  (after h200_replay.sh, binaries in .carry/)
set -u
AF=.carry/attnfuzz TL=/tmp/build-torch/libattnfuzz_torch.so
[ -f "$TL" ] || { echo "no plugin at $TL"; exit 1; }
d=$(mktemp -d)
tar xJf reports/backward/run12/call1/gaps_fault/corpus.tar.xz -C "$d"
gpu=$d/corpus/torch.cudnn-crash-0023f629c89b7657.case
cpu=$d/cpu.case
sed 's/^kernel torch.cudnn$/kernel cpu.bwd.fa2/' "$gpu" > "$cpu"
TIMEFORMAT=%R
probe() {  # LABEL COMMAND...: three wall times
  local label=$1 t ts=""; shift
  for _ in 1 2 3; do t=$( { time "$@" > /dev/null 2>&1; } 2>&1 ); ts="$ts $t"; done
  echo "$label:$ts s"
}
probe "attnfuzz kernels, no plugin" $AF kernels
probe "attnfuzz --kernel-lib plugin kernels" $AF --kernel-lib "$TL" kernels
probe "repro on cpu.bwd.fa2, no plugin" $AF repro "$cpu"
probe "repro on cpu.bwd.fa2, plugin loaded" $AF --kernel-lib "$TL" repro "$cpu"
probe "repro on torch.cudnn (worker, fault)" $AF --kernel-lib "$TL" --timeout 20 repro "$gpu"
$AF --kernel-lib "$TL" --timeout 20 repro "$gpu" 2>&1 | tail -n 3
rm -rf "$d"
