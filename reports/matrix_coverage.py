#!/usr/bin/env python3
"""Per kernel, how much of an audit matrix a (merged) report covers (glue).

Usage: reports/matrix_coverage.py REPORT_JSON CELLS_TXT

CELLS_TXT is `attnfuzz ... audit --kernel K1,K2,... --shard 0/1 --list-cells`
of the matrix in question (index, row, class, tab-separated); REPORT_JSON an
`attnfuzz report merge` of the report folders.  Prints a markdown table (cells
of the matrix the report has, pass, fail by verdict, unsupported) and, on
stderr, the matrix cells it lacks per kernel (by dtype, row gaps or not) and
how many of its cells lie outside the matrix (older matrices' rows).
"""
import collections
import json
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    cells = [tuple(line.rstrip("\n").split("\t")[1:3]) for line in open(sys.argv[2]) if line.strip()]
    want = set(cells)
    report = json.load(open(sys.argv[1]))
    print(f"| kernel | cells of the {len(want):,} | pass | fail (by verdict) | unsupported |")
    print("| --- | --- | --- | --- | --- |")
    for audit in report["audits"]:
        got = {(c["row"], c["column"]): c for c in audit["cells"] if (c["row"], c["column"]) in want}
        status = collections.Counter(c["status"] for c in got.values())
        verdicts = collections.Counter(c["verdict"] for c in got.values() if c["status"] == "fail")
        fails = ", ".join(f"{v} {n:,}" for v, n in verdicts.most_common())
        print(f"| {audit['kernel']} | {len(got):,} | {status['pass']:,} | {sum(verdicts.values()):,}"
              f"{': ' + fails if fails else ''} | {status['unsupported']:,} |")
        missing = want - set(got)
        if missing:
            where = collections.Counter(
                row.split()[0] + (" row_gap3" if "row_gap3" in row else " other") for row, _ in missing)
            print(f"{audit['kernel']}: {len(missing)} matrix cells missing: {dict(where)}", file=sys.stderr)
        outside = collections.Counter(c["status"] for c in audit["cells"] if (c["row"], c["column"]) not in want)
        if outside:
            print(f"{audit['kernel']}: cells outside the matrix: {dict(outside)}", file=sys.stderr)


if __name__ == "__main__":
    main()
