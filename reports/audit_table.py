#!/usr/bin/env python3
"""The audit matrix of a report.json as a markdown table, one line per kernel:
cells run of the matrix, pass, fail (by verdict), unsupported, and the cases
behind them.  Glue for the committed READMEs.

With --matrix CELLS_TXT (`attnfuzz ... audit --kernel K1,K2,... --shard 0/1
--list-cells`: index, row, class), only the cells of that matrix count and it
is the "matrix cells" column: how much of one matrix a merged report of
several audits (whose older rows may differ) covers.  Then stderr names, per
kernel, the matrix cells it lacks (by dtype, row gaps or not).

Usage: audit_table.py [--matrix CELLS_TXT] REPORT.json...
"""
import json
import sys
from collections import Counter


def main(args):
    matrix_cells = None
    if args[:1] == ["--matrix"] and len(args) > 1:
        matrix_cells = {tuple(line.rstrip("\n").split("\t")[1:3]) for line in open(args[1]) if line.strip()}
        args = args[2:]
    if not args:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    print("| kernel | matrix cells | cells run | pass | fail | fail by verdict | unsupported | cases |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for path in args:
        report = json.load(open(path))
        for a in report["audits"]:
            cells = a["cells"]
            matrix = len(a["rows"]) * len(a["columns"])
            if matrix_cells is not None:
                cells = [c for c in cells if (c["row"], c["column"]) in matrix_cells]
                matrix = len(matrix_cells)
                missing = matrix_cells - {(c["row"], c["column"]) for c in cells}
                if missing:
                    where = Counter(row.split()[0] + (" row_gap3" if "row_gap3" in row else " other")
                                    for row, _ in missing)
                    print(f"{a['kernel']}: {len(missing)} matrix cells missing: {dict(where)}", file=sys.stderr)
            status = Counter(c["status"] for c in cells)
            verdicts = Counter(c["verdict"] for c in cells if c["status"] == "fail")
            by = ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items(), key=lambda x: -x[1])) or "-"
            print(f"| {a['kernel']} | {matrix:,} | {len(cells):,} | {status['pass']:,} | {status['fail']:,} | {by} "
                  f"| {status['unsupported']:,} | {sum(c['cases'] for c in cells):,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
