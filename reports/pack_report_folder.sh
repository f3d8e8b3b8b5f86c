# Packs a report folder as the committed runs are (sourced by the take_*_results scripts):
# report.html left out (size; `attnfuzz report merge` writes it again), the corpus as
# corpus.tar.xz, the large texts xz'ed.  Usage: pack_report_folder DIR
pack_report_folder() {
  local d=$1 f
  rm -f "$d/report.html"
  if [ -d "$d/corpus" ]; then tar cJf "$d/corpus.tar.xz" -C "$d" corpus && rm -rf "$d/corpus"; fi
  for f in report.json junit.xml results.sarif in_flight_history.txt; do
    if [ -f "$d/$f" ]; then xz -9f "$d/$f"; fi
  done
}
