#!/usr/bin/env python3
"""Cell by cell, how a fresh audit's verdicts compare with earlier audits of
the same cells (same seed: the same cases).  Glue for the committed READMEs.

OLD is one or more report folders or report.json[.xz] files (a cell several
of them ran counts as every status they gave it); NEW is one.  The fuzz
phase's cells are left out: their cases are random, not the same.  Per kernel:
the cells both ran, how many kept their status, and each change
"old -> new" with its count; then, with --list, the changed cells (row,
column, old and new verdicts and the new signature), one a line.

Usage: compare_cells.py [--list] NEW OLD...
"""
import json
import lzma
import os
import sys
from collections import Counter, defaultdict


def load(path):
    if os.path.isdir(path):
        path = os.path.join(path, "report.json")
        if not os.path.exists(path):
            path += ".xz"
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt") as f:
        return json.load(f)


FUZZ_ROW = "fuzz phase"  # the row of the fuzz phase's cells ("fuzz phase (random features)")


def cells(report):
    for a in report["audits"]:
        for c in a["cells"]:
            if not c["row"].startswith(FUZZ_ROW):
                yield (a["kernel"], c["row"], c["column"]), c


def main(args):
    listing = args[:1] == ["--list"]
    if listing:
        args = args[1:]
    if len(args) < 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    new = dict(cells(load(args[0])))
    old = defaultdict(set)
    old_verdicts = defaultdict(set)
    for path in args[1:]:
        for key, c in cells(load(path)):
            if key in new:
                old[key].add(c["status"])
                old_verdicts[key].add(c["verdict"])
    by_kernel = defaultdict(Counter)
    changed = []
    for key, c in sorted(new.items()):
        if key not in old:
            by_kernel[key[0]]["not run before"] += 1
            continue
        before = "/".join(sorted(old[key]))
        if c["status"] in old[key] and len(old[key]) == 1:
            by_kernel[key[0]]["same"] += 1
        else:
            by_kernel[key[0]][f"{before} -> {c['status']}"] += 1
            changed.append((key, "/".join(sorted(old_verdicts[key])), c))
    print("| kernel | cells in both | same status | changed (old -> new: cells) | not run before |")
    print("| --- | --- | --- | --- | --- |")
    for kernel, n in by_kernel.items():
        moves = ", ".join(f"{k}: {v}" for k, v in sorted(n.items()) if "->" in k) or "-"
        both = sum(v for k, v in n.items() if k != "not run before")
        print(f"| {kernel} | {both:,} | {n['same']:,} | {moves} | {n['not run before']:,} |")
    if listing:
        for (kernel, row, column), before, c in changed:
            print(f"{kernel}\t{row}\t{column}\t{before} -> {c['verdict']}\t{c.get('signature', '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
