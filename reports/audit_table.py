#!/usr/bin/env python3
"""The audit matrix of a report.json as a markdown table, one line per kernel:
cells run of the matrix, pass, fail (by verdict), unsupported, and the cases
behind them.  Glue for the committed READMEs.

Usage: audit_table.py REPORT.json...
"""
import json
import sys
from collections import Counter


def main(paths):
    if not paths:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    print("| kernel | matrix cells | cells run | pass | fail | fail by verdict | unsupported | cases |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for path in paths:
        report = json.load(open(path))
        for a in report["audits"]:
            cells = a["cells"]
            status = Counter(c["status"] for c in cells)
            verdicts = Counter(c["verdict"] for c in cells if c["status"] == "fail")
            matrix = len(a["rows"]) * len(a["columns"])
            by = ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items(), key=lambda x: -x[1])) or "-"
            print(f"| {a['kernel']} | {matrix:,} | {len(cells):,} | {status['pass']:,} | {status['fail']:,} | {by} "
                  f"| {status['unsupported']:,} | {sum(c['cases'] for c in cells):,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
