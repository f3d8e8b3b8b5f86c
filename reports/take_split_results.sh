#!/usr/bin/env bash
# Takes one h200_torch_split.sh call's results off the device tool's folder into the tree,
# packed as the committed runs are, and writes the plan of the next call: run it as soon as
# a call returns (the tool's folders do not outlive the session: session 7's third call was
# lost that way).
# Usage: reports/take_split_results.sh TGZ CALL_DIR PLAN_DIR NEXT_PLAN_DIR
#   TGZ            the call's split_bwd.tgz (or split.tgz) under the tool's files_at
#   CALL_DIR       where it goes, e.g. reports/backward/run10/call1 (must not exist)
#   PLAN_DIR       the plan the call ran (COVERED=...)
#   NEXT_PLAN_DIR  PLAN_DIR's lists plus each phase folder of CALL_DIR that holds a report
set -euo pipefail
. "$(dirname "$0")/pack_report_folder.sh"
tgz=${1:?TGZ} call=${2:?CALL_DIR} plan=${3:?PLAN_DIR} next=${4:?NEXT_PLAN_DIR}
[ -e "$call" ] && { echo "$call exists: not overwritten" >&2; exit 2; }
[ -e "$next" ] && { echo "$next exists: not overwritten" >&2; exit 2; }
mkdir -p "$call"
tar xzf "$tgz" -C "$call"
top=$(find "$call" -mindepth 1 -maxdepth 1 -type d)  # the archive's one folder (split_bwd/)
[ "$(echo "$top" | wc -l)" = 1 ] || { echo "$tgz: expected one top folder" >&2; exit 1; }
mv "$top"/* "$call"/ && rmdir "$top"
# Report folders: corpus packed, report.html left out (size), the large texts xz'ed.
phases=()
for d in "$call"/*/; do
  d=${d%/}
  [ -f "$d/report.json" ] || continue
  pack_report_folder "$d"
  phases+=("$d")
done
[ -f "$call/dmesg.txt" ] && xz -9 "$call/dmesg.txt"
mkdir -p "$next"
cp "$plan"/*.txt "$next"/
# The phases' folders join the torch list the call's PASS read (bwd: torch_bwd_covered.txt).
list=$next/torch_bwd_covered.txt
[ -f "$list" ] || list=$next/torch_covered.txt
for d in "${phases[@]}"; do
  case "$(basename "$d")" in cudnn_bwd) echo "$d" >> "$next/cudnn_bwd_covered.txt" ;; *) echo "$d" >> "$list" ;; esac
done
echo "$call: ${#phases[@]} report folder(s) (${phases[*]}); next plan $next"
grep -h 'cases in\|cells not run' "$call"/*.log 2>/dev/null | awk '!seen[$0]++' || true
