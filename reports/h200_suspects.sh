#!/usr/bin/env bash
# The cases that were running when a libtorch sweep lost the GPU (issue 12), run one at a
# time on a fresh H200 in one device-tool command, the GPU's health read after each: the
# first after which the GPU needs a reset (or the driver logs a new kind of Xid) is named.
# The libtorch plugin is built here; attnfuzz is carried in .carry/ as for the sweeps.
# Results: $OUT/suspects.tgz.
# Usage: SUSPECTS=FILE reports/h200_suspects.sh DEADLINE_SECONDS
#   FILE: lines as an audit's in_flight.txt (or reports/xid_window.py) prints them, each
#   holding `--cells A-B`; '#' lines are skipped.  KERNELS: the audit's kernels (default the
#   five libtorch ones); SEED (1) as the sweep's.
set -u
deadline=$((SECONDS + ${1:-300}))
. "$(dirname "$0")/h200_lib.sh"
h200_begin suspects
export OMP_NUM_THREADS=1
start_samplers 5
build_torch_plugin 8
[ -n "$TL" ] || { step "no libtorch plugin: nothing run"; exit 1; }
export ATTNFUZZ_CUDNN_LIB=$TORCH_CUDNN
kernels=${KERNELS:-torch.flash,torch.efficient,torch.cudnn,torch.math,torch.flash_varlen}

# Healthy: nvidia-smi answers with the GPU's name (a wedged GPU reads "GPU requires reset" or hangs).
gpu_ok() {
  local name
  name=$(timeout 15 nvidia-smi --query-gpu=name --format=csv,noheader 2>&1) || return 1
  [[ $name != *"requires reset"* && $name != *"No devices"* ]]
}
xid_kinds() { grep -io 'xid ([^)]*): [0-9]*' "$R/dmesg.txt" 2>/dev/null | sed 's/.*: //' | sort -u | tr '\n' ' '; }

step "suspects of ${SUSPECTS:?SUSPECTS=FILE}, one at a time ($(left) s left)"
known=$(xid_kinds)
echo "Xid kinds before: ${known:-none}"
n=0
while read -r line; do
  [[ $line == \#* || $line != *--cells* ]] && continue
  cells=$(sed -E 's/.*--cells ([0-9]+-[0-9]+).*/\1/' <<<"$line")
  [ "$(left)" -lt 30 ] && { echo "deadline: $cells and later not run"; break; }
  n=$((n + 1))
  d="$R/cell_$cells"
  timeout -k 10 90 $AF --kernel-lib "$TL" audit --kernel "$kernels" --seed "${SEED:-1}" --cells "$cells" \
    --time 1 --jobs 1 --out "$d" > "$d.log" 2>&1
  rc=$?
  sleep 2  # the driver's log of a fault comes a moment after the process ends
  now=$(xid_kinds)
  verdicts=$(grep -h 'failing cells by verdict' "$d.log" | sort | uniq -c | tr -s ' ' | tr '\n' ';')
  echo "$line"
  echo "  rc=$rc; ${verdicts:-no failing cell}; Xid kinds now: ${now:-none}"
  if ! gpu_ok || [ "$now" != "$known" ]; then
    echo "  => the GPU after this case: $(timeout 15 nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -1)"
    [ "$now" != "$known" ] && echo "  => new Xid kind(s): $(comm -13 <(tr ' ' '\n' <<<"$known" | sort) <(tr ' ' '\n' <<<"$now" | sort) | tr '\n' ' ')"
    gpu_ok || { echo "  => GPU lost: stopping here"; break; }
    known=$now
  fi
done < "$SUSPECTS"
echo "$n suspect(s) run"
kill "${samplers[@]}" 2>/dev/null
grep -m 30 -i 'xid' "$R/dmesg.txt"
gpu_loss_report
step done
