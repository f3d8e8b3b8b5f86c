#!/usr/bin/env bash
# The soak run of reports/soak/README.md: one campaign of an hour against one
# correct and one broken kernel, niced, with its memory and output sizes
# sampled every minute into a table.
#
#   reports/soak/soak.sh ATTNFUZZ OUT [SECONDS]
#
# OUT receives the campaign's folder (OUT/run: report.json checkpointed every
# 30 s, the corpus, at the end the whole report folder), its progress lines
# (OUT/progress.log) and the samples (OUT/samples.tsv): elapsed seconds,
# resident memory of the attnfuzz process, cases so far (from the
# checkpoint), failure signatures, report.json bytes, case files, their total
# and largest bytes.
set -euo pipefail
bin=$1 out=$2 seconds=${3:-3600}
interval=60
mkdir -p "$out"
rm -rf "$out/run"
nice -n 10 "$bin" fuzz --kernel cpu.tiled,cpu.mutant.acc_not_rescaled --time "$seconds" --seed 16 --jobs 1 \
  --checkpoint 30 --progress plain --out "$out/run" > "$out/progress.log" 2>&1 &
pid=$!
start=$(date +%s)
printf 'elapsed_s\trss_kib\tcases\tsignatures\treport_json_bytes\tcase_files\tcase_bytes\tlargest_case_bytes\n' > "$out/samples.tsv"
sample() {
  local rss cases sigs json files bytes largest
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo -)
  if [[ -f $out/run/report.json ]]; then
    json=$(stat -c %s "$out/run/report.json")
    read -r cases sigs < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["run"]["cases"], len(d["failures"]))' "$out/run/report.json")
  else
    json=0 cases=0 sigs=0
  fi
  files=0 bytes=0 largest=0
  if [[ -d $out/run/corpus ]]; then
    read -r files bytes largest < <(find "$out/run/corpus" -name '*.case' -printf '%s\n' |
      awk '{n++; t+=$1; if ($1>m) m=$1} END {print n+0, t+0, m+0}')
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(( $(date +%s) - start ))" "$rss" "$cases" "$sigs" "$json" "$files" \
    "$bytes" "$largest" >> "$out/samples.tsv"
}
while kill -0 "$pid" 2>/dev/null; do
  sleep "$interval"
  kill -0 "$pid" 2>/dev/null && sample
done
wait "$pid" || true  # exit 1: the broken kernel failed, as it should
sample
