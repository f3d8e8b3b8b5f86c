#!/usr/bin/env bash
# Replays stretches of earlier audits in ONE worker (--jobs 1), to tell a kernel whose
# verdict depends on what ran before it in the same process (a cache, the allocator's
# leftovers) from one that is merely intermittent; then re-runs listed saved cases.
# One device-tool command; results in $OUT/replay.tgz.
# Usage: reports/h200_replay.sh DEADLINE_SECONDS PLAN_FILE
#   PLAN_FILE lines, run in order:
#     audit NAME COVERED_LIST ROWS_REGEX CELLS   the 5-kernel libtorch backward audit of
#        the cells CELLS (A-B) that COVERED_LIST's folders leave, rows ROWS_REGEX: the same
#        cells, in the same order, as the audit that met the case, but all in one worker
#     repro NAME CORPUS LIST [JOBS]              the cases LIST names (file names, one a line)
#        from CORPUS (a packed corpus or a corpus folder), JOBS at a time (default 1: they fault)
#     sweep NAME PASS KERNELS ROWS_REGEX SECONDS JOBS [COVERED_LIST]   a fresh audit (seed 1)
#        of KERNELS' rows ROWS_REGEX, the sweep stopped past SECONDS, less the cells that
#        COVERED_LIST's folders hold: the same cases as the earlier audits of those cells, to
#        compare cell by cell (reports/compare_cells.py); skipped unless SECONDS + 60 are left
#        (the fuzz phase, minimization and the report come after the sweep)
#     dump NAME CORPUS LIST                      the same cases (CORPUS: a packed corpus or a
#        corpus folder) once more with `repro --dump-tensors`: their tensors and the kernel's
#        dQ, dK, dV as .npy files in NAME/<case>/, to be examined on the CPU machine
#     minimize NAME CORPUS LIST JOBS SECONDS     the same cases through `repro --minimize NAME/`
#        (JOBS at a time, SECONDS per minimization: reports/pick_minimize.py writes these
#        lines), then every repro saved there run again with `repro`: the confirmation
#     confirm SECONDS                            later sweep and cudnn_audit lines run with
#        --confirm-alone --confirm-time SECONDS (each finding's repro alone in a fresh process,
#        representatives first) and wait SECONDS longer; `confirm 0` turns it off again
#     cudnn_audit NAME LIB COVERED_LIST SECONDS JOBS [ROWS_REGEX]   cuDNN direct's backward
#        (cudnn.sdpa [bwd], no plugin) on LIB (`system`: the machine's cuDNN 9.14; `torch`:
#        PyTorch's 9.19), the cells COVERED_LIST's folders leave (an empty file: none), the
#        sweep stopped past SECONDS, only the rows ROWS_REGEX finds when given
#     cudnn_fwd_audit NAME LIB COVERED_LIST SECONDS JOBS [ROWS_REGEX]   the same for the forward
#        of cudnn.sdpa and cudnn.sdpa.raw (the kernels, and so the rows and cases, of issue 12's audits)
#     cudnn_repro NAME CORPUS LIST LIB           as repro (one job), for cudnn.sdpa cases: no plugin
#        loaded, cuDNN LIB (`system` or `torch`)
#     cudnn_lib LIB                              later lines' cuDNN (ATTNFUZZ_CUDNN_LIB): `system`
#        or `torch` (the default: PyTorch's, which its libtorch needs)
#     report_confirm NAME REPORT_DIR JOBS SECONDS [LIB]   `attnfuzz report confirm` on a copy of
#        REPORT_DIR (a committed report folder, its .xz files unpacked) in NAME/: the repros its
#        run left unconfirmed, each alone in a fresh process, JOBS at a time (a crash's or hang's
#        with none beside it since session 16: twelve faulting at once left the GPU needing
#        a reset), for at most SECONDS;
#        LIB `torch` (the default: the libtorch plugin loaded, PyTorch's cuDNN), `system`
#        (cudnn.sdpa on the machine's cuDNN 9.14, no plugin) or `torch_cudnn` (cudnn.sdpa on
#        PyTorch's cuDNN 9.19, no plugin: as the cudnn_audit lines ran it)
#        On a machine left warm, a NAME an earlier call ran goes on from that call's folder.
# attnfuzz is carried in .carry/; the plugin is built here.
set -u
deadline=$((SECONDS + ${1:?DEADLINE_SECONDS}))
plan=${2:?PLAN_FILE}
. "$(dirname "$0")/h200_lib.sh"
h200_begin replay
export OMP_NUM_THREADS=1
start_samplers 10
build_torch_plugin 8
[ -n "$TL" ] || { step "no libtorch plugin: nothing run"; exit 1; }
export ATTNFUZZ_CUDNN_LIB=$TORCH_CUDNN
T=torch.flash,torch.efficient,torch.cudnn,torch.math,torch.flash_varlen
KEEP=/tmp/replay_keep  # outside $OUT: kept while the machine stays warm, gone on a fresh one
mkdir -p "$KEEP"
CONFIRM=()
# The outcomes of a log's --confirm-alone lines ("  LABEL: OUTCOME (LINE, S s)"), counted.
alone_counts() { sed -n '/^confirm alone/,/^attnfuzz /p' "$1" | sed -nE 's/^  [^:]*: ([a-z_]+) \(.*/\1/p' | sort | uniq -c; }
exec 3< "$plan"
while read -r -u 3 kind name a b c d e f; do
  case "$kind" in
    audit)
      step "replay $name: cells $c of rows '$b', the folders of $a skipped, one job ($(left) s left)"
      covered=$(unpack_reports "/tmp/covered_$name" $(cat "$a"))
      timeout -k 20 $(($(left) - 30)) $AF --kernel-lib "$TL" audit --pass bwd --kernel "$T" --cells "$c" --rows "$b" \
        --skip-covered $covered --time 4 --jobs 1 --minimize-time 1 --minimize-budget 5 --out "$R/$name" > "$R/$name.log" 2>&1
      echo "replay $name rc=$?: $(grep -m1 'cases in' "$R/$name.log")"
      grep -h '^  F[0-9]' "$R/$name.log" | head -40 ;;
    repro)
      step "re-run $name: the cases of $b from $a, ${c:-1} jobs ($(left) s left)"
      if [ -d "$a" ]; then src=$a; else mkdir -p "/tmp/$name" && tar xJf "$a" -C "/tmp/$name" && src=/tmp/$name/corpus; fi
      sed "s|^|$src/|" "$b" > "/tmp/$name.list"
      REPRO_JOBS=${c:-1} repro "$name" "@/tmp/$name.list" --kernel-lib "$TL"
      grep -o '\[bwd\]: [a-z_]*' "$R/repro_$name.txt" | sort | uniq -c ;;
    dump)
      step "dump $name: the cases of $b from $a with the kernel's gradients ($(left) s left)"
      if [ -d "$a" ]; then src=$a; else mkdir -p "/tmp/$name" && tar xJf "$a" -C "/tmp/$name" && src=/tmp/$name/corpus; fi
      mapfile -t cases < <(sed "s|^|$src/|" "$b")
      timeout -k 10 $(($(left) - 10)) $AF --kernel-lib "$TL" repro --dump-tensors "$R/$name" "${cases[@]}" \
        > "$R/dump_$name.txt" 2>&1
      echo "dump $name rc=$?: $(ls "$R/$name" 2>/dev/null | wc -l) of ${#cases[@]} cases written"
      grep '\[bwd\]: ' "$R/dump_$name.txt" ;;
    minimize)
      step "minimize $name: the cases of $b from $a, $c at a time, $d s each ($(left) s left)"
      [ "$(left)" -gt 45 ] || { echo "no time"; continue; }
      if [ -d "$a" ]; then src=$a; else mkdir -p "/tmp/$name" && tar xJf "$a" -C "/tmp/$name" && src=/tmp/$name/corpus; fi
      mapfile -t cases < <(sed "s|^|$src/|" "$b")
      # A kill at the deadline loses the minimization in progress only: each repro is saved
      # (atomically) as its file finishes.
      timeout -k 10 $(($(left) - 25)) $AF --kernel-lib "$TL" repro -j "$c" --minimize "$R/$name" --minimize-time "$d" \
        "${cases[@]}" > "$R/minimize_$name.txt" 2>&1
      echo "minimize $name rc=$?: $(grep -c '^  minimized: ' "$R/minimize_$name.txt") of ${#cases[@]} cases minimized"
      if ls "$R/$name"/*.case > /dev/null 2>&1; then
        timeout -k 5 $(($(left) - 10)) $AF --kernel-lib "$TL" repro -j "$c" "$R/$name"/*.case > "$R/confirm_$name.txt" 2>&1
        echo "confirm $name rc=$?: $(grep -v '^ ' "$R/confirm_$name.txt" | sed -E 's/^[^ ]+: [^:]+: ([a-z_]+).*/\1/' |
          sort | uniq -c | tr -s ' ' | tr '\n' ';')"
      fi ;;
    confirm)
      if [ "$name" -gt 0 ]; then CONFIRM=(--confirm-alone --confirm-time "$name"); else CONFIRM=(); fi
      step "confirm alone: ${CONFIRM[*]:-off}" ;;
    cudnn_repro)
      step "re-run $name: the cases of $b from $a on cuDNN $c, one job ($(left) s left)"
      if [ "$c" = system ]; then lib=$(ls /usr/lib/x86_64-linux-gnu/libcudnn.so.9); else lib=$TORCH_CUDNN; fi
      sed "s|^|$a/|" "$b" > "/tmp/$name.list"
      ATTNFUZZ_CUDNN_LIB=$lib REPRO_JOBS=1 repro "$name" "@/tmp/$name.list"
      grep -o '\[bwd\]: [a-z_]*' "$R/repro_$name.txt" | sort | uniq -c ;;
    cudnn_lib)
      if [ "$name" = system ]; then export ATTNFUZZ_CUDNN_LIB=$(ls /usr/lib/x86_64-linux-gnu/libcudnn.so.9)
      else export ATTNFUZZ_CUDNN_LIB=$TORCH_CUDNN; fi
      step "cuDNN for the lines after this: $ATTNFUZZ_CUDNN_LIB" ;;
    report_confirm)
      step "report_confirm $name: the unconfirmed repros of $a alone, $b at a time, up to $c s on ${d:-torch} ($(left) s left)"
      # The last repros start before the budget ends (they take seconds; --timeout 20 bounds
      # a hung one), and the folder is saved every minute: the budget leaves this margin.
      margin=50
      # Past the margin, at least 20 s of repros.
      [ "$(left)" -gt $((margin + 20)) ] || { echo "no time"; continue; }
      # On a machine an earlier call of this session left warm, the folder that call left in
      # $KEEP/NAME goes on where it stopped (same NAME): a plan can be run again call after call.
      src=$a; [ -d "$KEEP/$name" ] && src=$KEEP/$name && echo "resumed from $src"
      rm -rf "$R/$name" && cp -r "$src" "$R/$name" && find "$R/$name" -name '*.xz' -exec xz -df {} +
      # A packed corpus (corpus.tar.xz) unpacked, so that the saved cases get their alone lines.
      [ -f "$R/$name/corpus.tar" ] && tar xf "$R/$name/corpus.tar" -C "$R/$name" && rm "$R/$name/corpus.tar"
      plugin=(--kernel-lib "$TL") lib=$TORCH_CUDNN
      [ "${d:-torch}" = system ] && plugin=() lib=$(ls /usr/lib/x86_64-linux-gnu/libcudnn.so.9)
      [ "${d:-torch}" = torch_cudnn ] && plugin=()
      budget=$(( c < $(left) - margin ? c : $(left) - margin ))
      ATTNFUZZ_CUDNN_LIB=$lib timeout -k 10 $(($(left) - 10)) $AF "${plugin[@]}" --timeout 20 report confirm \
        --confirm-jobs "$b" --confirm-time "$budget" "$R/$name" > "$R/$name.log" 2>&1
      echo "report_confirm $name rc=$?: $(tail -1 "$R/$name.log")"
      rm -rf "$KEEP/$name.new" && cp -r "$R/$name" "$KEEP/$name.new" && rm -rf "$KEEP/$name" && mv "$KEEP/$name.new" "$KEEP/$name"
      sed -nE 's/^  [^:]*: ([a-z_]+) \(.*/\1/p' "$R/$name.log" | sort | uniq -c ;;
    cudnn_audit|cudnn_fwd_audit)
      extra=0; [ "${#CONFIRM[@]}" -gt 0 ] && extra=${CONFIRM[-1]}
      pass=bwd kernels=cudnn.sdpa
      [ "$kind" = cudnn_fwd_audit ] && pass=fwd kernels=cudnn.sdpa,cudnn.sdpa.raw
      step "$kind $name: $kernels [$pass] on cuDNN $a, sweep stopped past $c s, $d jobs ${CONFIRM[*]} ($(left) s left)"
      [ "$(left)" -gt $((c + 70 + extra)) ] || { echo "no time"; continue; }
      if [ "$a" = system ]; then lib=$(ls /usr/lib/x86_64-linux-gnu/libcudnn.so.9); else lib=$TORCH_CUDNN; fi
      ATTNFUZZ_CUDNN_LIB=$lib CUDNN_PASS=$pass CUDNN_KERNELS=$kernels audit_cudnn_bwd "$name" "$d" "$c" 10 "$b" "$e"
      tail -1 "$R/$name.log"; grep -m1 'cases in' "$R/$name.log"; grep -h '^  F[0-9]' "$R/$name.log" | head -40
      alone_counts "$R/$name.log" ;;
    sweep)
      extra=0; [ "${#CONFIRM[@]}" -gt 0 ] && extra=${CONFIRM[-1]}
      step "sweep $name: $a pass of $b, rows '$c', sweep stopped past $d s, $e jobs ${CONFIRM[*]} ($(left) s left)"
      [ "$(left)" -gt $((d + 60 + extra)) ] || { echo "no time"; continue; }
      skip=()
      [ -n "$f" ] && skip=(--skip-covered $(unpack_reports "/tmp/covered_$name" $(cat "$f")))
      timeout -k 20 $(($(left) - 20)) $AF --kernel-lib "$TL" audit --pass "$a" --kernel "$b" --rows "$c" "${skip[@]}" \
        --sweep-time "$d" --time 40 --jobs "$e" --minimize-time 1 --minimize-budget 5 "${CONFIRM[@]}" \
        --out "$R/$name" > "$R/$name.log" 2>&1
      echo "sweep $name rc=$?: $(grep -m1 'cases in' "$R/$name.log")"
      grep -h '^  F[0-9]' "$R/$name.log" | head -40
      alone_counts "$R/$name.log" ;;
    ''|'#'*) ;;
    *) echo "plan line not understood: $kind" ;;
  esac
done
kill "${samplers[@]}" 2>/dev/null
gpu_loss_report
step done
