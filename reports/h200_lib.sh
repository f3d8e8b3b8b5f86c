# Shared preamble of the H200 scripts (sourced): results under $OUT/$1,
# tarred into $OUT/$1.tgz on exit; step/left helpers; the carried binaries.
# Expects `deadline` (in $SECONDS) to be set by the caller.
h200_begin() {  # name
  pids=()  # background jobs by pid: a bare `wait` would wait for the tee below too
  R=$OUT/$1
  mkdir -p "$R"
  exec > >(tee "$R/log.txt") 2>&1
  trap "sleep 1; tar czf \"\$OUT/$1.tgz\" -C \"\$OUT\" $1 && rm -rf \"\$OUT/$1\"" EXIT
  export LD_LIBRARY_PATH=$PWD/.carry${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  AF=$PWD/.carry/attnfuzz
  export PATH=/opt/torch/.venv/bin:$PATH
  step machine
  # The device's copy of the tree carries a .git that need not follow it (session 13 saw 43a51be on
  # every call): the binaries say which commit they were built from (.carry/COMMIT, see README).
  echo "binaries: $(cat .carry/COMMIT 2>/dev/null || echo 'no .carry/COMMIT')"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  nproc
  # The memory's error counters before the work (a GPU that needs a reset after uncorrectable
  # HBM errors reads 'Pending: Yes' for row remapping, and its counters say so).
  timeout 20 nvidia-smi -q -d ECC,ROW_REMAPPER > "$R/ecc_before.txt" 2>&1
  grep -iE 'uncorrectable|correctable|pending|remapping failure' "$R/ecc_before.txt" | sort | uniq -c | head -12
  TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  TORCH_CUDNN=$(python3 -c 'import nvidia.cudnn,os;print(os.path.join(list(nvidia.cudnn.__path__)[0],"lib","libcudnn.so.9"))')
  python3 -c 'import torch;print("torch",torch.__version__,"cudnn",torch.backends.cudnn.version())'
}
# Builds kernels/torch against the machine's torch (Torch lives there only):
# TL is the plugin, "" if the build failed (its log's tail printed).
build_torch_plugin() {  # jobs
  step "build the libtorch plugin"
  local B=/tmp/build-torch
  ( cmake -S kernels/torch -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TP" -DATTNFUZZ_TORCH_PROBE=ON &&
    cmake --build $B -j "$1" --target attnfuzz_torch attnfuzz_allocator_poison_check ) > "$R/torch_build.log" 2>&1 ||
    tail -30 "$R/torch_build.log"
  TL=$(ls $B/libattnfuzz_torch.so 2>/dev/null)
  echo "plugin: ${TL:-none}"
  # The adapters poison the caching allocator before each call: whether that holds here.
  [ -x $B/attnfuzz_allocator_poison_check ] && timeout 60 $B/attnfuzz_allocator_poison_check > "$R/allocator_poison.txt" 2>&1
  tail -1 "$R/allocator_poison.txt" 2>/dev/null
}
step() { printf '\n=== %s  (%s, %d s in)\n' "$*" "$(date +%T)" "$SECONDS"; }
left() { echo $((deadline - SECONDS)); }
# Report folders as `audit --skip-covered` reads them (DIR/report.json):
# committed ones hold report.json.xz.  Prints the unpacked folders.
unpack_reports() {  # dest dir...
  local dest=$1 n=0; shift
  for d in "$@"; do
    n=$((n + 1)); mkdir -p "$dest/$n"
    if [ -f "$d/report.json" ]; then cp "$d/report.json" "$dest/$n/"; else xz -dc "$d/report.json.xz" > "$dest/$n/report.json"; fi
    echo "$dest/$n"
  done
}
# cuDNN direct's backward (`cudnn.sdpa [bwd]`) over the cells that the report folders of a
# list file leave, into $R/NAME (log $R/NAME.log); ATTNFUZZ_CUDNN_LIB picks the library.
# CONFIRM (an array, default empty) adds its flags (`--confirm-alone --confirm-time S`) and S to the limit;
# a sixth argument, a regex, sweeps only the rows it finds (--rows).  An empty list file skips nothing.
# CUDNN_PASS=fwd CUDNN_KERNELS=cudnn.sdpa,cudnn.sdpa.raw audits the forward instead (issue 12's kernels).
audit_cudnn_bwd() {  # name jobs sweep-seconds minimize-budget-seconds list-file [rows-regex]
  local covered extra=0 skip=() rows=()
  covered=$(unpack_reports "/tmp/covered_$1" $(cat "$5"))
  [ -n "$covered" ] && skip=(--skip-covered $covered)
  [ -n "${6:-}" ] && rows=(--rows "$6")
  [ "${#CONFIRM[@]}" -gt 0 ] && extra=${CONFIRM[-1]}
  timeout -k 20 $(($3 + 70 + extra)) $AF audit --pass "${CUDNN_PASS:-bwd}" --kernel "${CUDNN_KERNELS:-cudnn.sdpa}" \
    --shard 0/1 "${skip[@]}" "${rows[@]}" \
    --sweep-time "$3" --time 4 --jobs "$2" --minimize-time 2 --minimize-budget "$4" "${CONFIRM[@]}" \
    --out "$R/$1" > "$R/$1.log" 2>&1
  echo "$1 audit rc=$?" >> "$R/$1.log"
}
# Every case of the globs (or of a list file: "@FILE", one path a line) re-run
# with `attnfuzz --determinism repro`, twice each for identical bits, until
# the deadline; results in $R/repro_NAME.txt.
repro() {  # name "globs"|@list [global options...]
  local name=$1 globs=$2; shift 2
  local files
  if [[ $globs == @* ]]; then mapfile -t files < "${globs#@}"; else files=($globs); fi
  local f kept=()  # a glob that matched nothing stays as its pattern: left out
  for f in "${files[@]}"; do [ -f "$f" ] && kept+=("$f"); done
  files=("${kept[@]}")
  [ "${#files[@]}" -gt 0 ] || { echo "$name: no saved cases"; return; }
  timeout -k 10 $(($(left) - 10)) $AF "$@" --determinism repro --jobs "${REPRO_JOBS:-4}" "${files[@]}" \
    > "$R/repro_$name.txt" 2>&1
  echo "$name repro rc=$? (${#files[@]} cases, $(grep -c ': pass' "$R/repro_$name.txt") pass)"
}
# What the machine is busy with while the work runs: CPU (vmstat) and GPU (SM
# and memory utilization, memory used) every N seconds, and the driver's log as
# it comes (Xid lines, UTC to the microsecond, to line up with an audit's
# in_flight_history.txt); `samplers` holds their pids.
start_samplers() {  # seconds
  vmstat -t "$1" > "$R/vmstat.txt" 2>&1 & samplers=($!)
  nvidia-smi dmon -s um -d "$1" > "$R/gpu_util.txt" 2>&1 & samplers+=($!)
  dmesg --follow --time-format iso > "$R/dmesg.txt" 2>&1 & samplers+=($!)
}
# After a lost GPU (any log or re-run of $R says so): what the driver says of
# it; nvidia-smi may hang on a wedged device, hence the timeouts.
gpu_loss_report() {
  grep -qh 'the GPU was lost\|no CUDA device' "$R"/*.log "$R"/repro_*.txt 2>/dev/null || return 0
  step "the GPU was lost: driver state"
  timeout 20 nvidia-smi -q 2>&1 | grep -iE 'xid|retired|pending|remapp|recovery|reset|persistence|compute mode' | head -20
  timeout 5 dmesg 2>&1 | grep -iE 'xid|nvrm' | tail -20
  echo "the driver's first Xid lines of this call (dmesg.txt):"
  grep -m 20 -i 'xid' "$R/dmesg.txt" 2>/dev/null
  timeout 20 nvidia-smi -q -d ECC,ROW_REMAPPER > "$R/ecc_after.txt" 2>&1
}
