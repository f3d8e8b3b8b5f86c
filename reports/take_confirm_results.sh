#!/usr/bin/env bash
# Takes one h200_replay.sh call's results off the device tool's folder into the tree: the
# call's logs into CALL_DIR, and each folder a `report_confirm NAME REPORT_DIR ...` line of
# PLAN confirmed, packed as the committed runs are, in place of REPORT_DIR (it is a copy of
# REPORT_DIR with the alone outcomes added).  Run it as soon as a call returns: the tool's
# folders do not outlive the session.
# Usage: reports/take_confirm_results.sh TGZ CALL_DIR PLAN
#   TGZ       the call's replay.tgz under the tool's files_at
#   CALL_DIR  where its logs go, e.g. reports/backward/run18/call1 (must not exist)
#   PLAN      the plan file the call ran
set -euo pipefail
. "$(dirname "$0")/pack_report_folder.sh"
tgz=${1:?TGZ} call=${2:?CALL_DIR} plan=${3:?PLAN}
[ -e "$call" ] && { echo "$call exists: not overwritten" >&2; exit 2; }
mkdir -p "$call"
tar xzf "$tgz" -C "$call"
top=$(find "$call" -mindepth 1 -maxdepth 1 -type d)  # the archive's one folder (replay/)
[ "$(echo "$top" | wc -l)" = 1 ] || { echo "$tgz: expected one top folder" >&2; exit 1; }
mv "$top"/* "$call"/ && rmdir "$top"
while read -r kind name dir _; do
  [ "$kind" = report_confirm ] || continue
  d=$call/$name
  [ -f "$d/report.json" ] || continue  # a line the call did not reach
  [ -d "$dir" ] || { echo "$dir (plan line $name) is not in the tree" >&2; exit 1; }
  pack_report_folder "$d"
  rm -rf "$dir" && mv "$d" "$dir"
  echo "$name -> $dir: $(tail -n1 "$call/$name.log")"
done < "$plan"
if [ -f "$call/dmesg.txt" ]; then xz -9 "$call/dmesg.txt"; fi
