#!/usr/bin/env python3
"""SDPA through Python against the libtorch adapters, cell by cell (issue 13).

An audit that holds torch.X and py.sdpa.X ran the same case in every cell for
both (cases are a function of seed and cell), so their verdicts compare
directly.  Prints, per backend: the cells both ran, how many agree (both pass,
or both fail with the same verdict), and every cell where they disagree.

Usage: compare_sdpa.py REPORT.json [--list N]
"""
import json
import lzma
import sys
from collections import Counter

PAIRS = [("torch.flash", "py.sdpa.flash"), ("torch.efficient", "py.sdpa.efficient"),
         ("torch.cudnn", "py.sdpa.cudnn"), ("torch.math", "py.sdpa.math")]


# The fuzz phase's cases are drawn per kernel: only sweep cells share cases.
FUZZ_ROW = "fuzz phase"
# Row features where the two adapters hand the library different things: the
# libtorch adapters pass the harness's strided views and one call per
# sequence of a ragged batch; the Python adapter dense copies with zeroed
# padding and one padded call with a boolean mask.
PATH_FEATURES = ("row_gap3", "kv_stride0", "varlen", "bool")


def cells(report, kernel):
    for a in report["audits"]:
        if a["kernel"] == kernel:
            return {(c["row"], c["column"]): c for c in a["cells"] if not c["row"].startswith(FUZZ_ROW)}
    return None


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    listed = int(argv[argv.index("--list") + 1]) if "--list" in argv else 10
    opener = lzma.open if argv[1].endswith(".xz") else open  # committed reports may be xz'd
    report = json.load(opener(argv[1], "rt"))
    print("| backend | cells both ran | agree | disagree | of which rows without " + "/".join(PATH_FEATURES)
          + " | libtorch only | Python only |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    details = []
    for lib, py in PAIRS:
        a, b = cells(report, lib), cells(report, py)
        if a is None or b is None:
            continue
        ran = lambda c: c is not None and c["status"] != "unsupported"
        both = [key for key in a if ran(a[key]) and ran(b.get(key))]
        only_lib = sum(1 for key in a if ran(a[key]) and not ran(b.get(key)))
        only_py = sum(1 for key in b if ran(b[key]) and not ran(a.get(key)))
        differ = [key for key in both if (a[key]["status"], a[key]["verdict"]) != (b[key]["status"], b[key]["verdict"])]
        plain = sum(1 for r, _ in differ if not any(f in r.split() for f in PATH_FEATURES))
        print(f"| {lib.split('.')[1]} | {len(both)} | {len(both) - len(differ)} | {len(differ)} | {plain} "
              f"| {only_lib} | {only_py} |")
        kinds = Counter((a[k]["verdict"], b[k]["verdict"]) for k in differ)
        for (va, vb), n in kinds.most_common():
            details.append(f"{lib} {va} / {py} {vb}: {n} cells, e.g. "
                           + "; ".join(f"{r} x {c}" for r, c in [k for k in differ
                                                                  if (a[k]["verdict"], b[k]["verdict"]) == (va, vb)][:listed]))
    if details:
        print()
        for line in details:
            print("-", line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
