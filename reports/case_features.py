#!/usr/bin/env python3
"""The features of saved failure cases that the known defect classes turn on (glue).

Usage: reports/case_features.py CASE_FILE_OR_DIR...

For each (kernel, verdict) of the case files: how many have row gaps (row_gap
not 0), a keyless sequence (a batch entry with seqlen_k 0 and queries), a
ragged batch (per-sequence lengths that differ), a bottom-right window, and
how many have none of those, with the verdict messages of that last group
(the cases that no known class explains; each needs a look).
"""
import collections
import os
import re
import sys


def read_case(path):
    fields, verdict = {}, ""
    for line in open(path):
        if line.startswith("# provenance: verdict "):
            verdict = line[len("# provenance: verdict "):].strip()
        elif line.strip() and not line.startswith("#"):
            key, _, value = line.strip().partition(" ")
            fields[key] = value
    return fields, verdict


def features(fields):
    ints = lambda key: [int(x) for x in fields.get(key, "0").split() if re.fullmatch(r"-?\d+", x)]
    q, k = ints("seqlen_q"), ints("seqlen_k")
    batch = int(fields.get("batch", "1"))
    q = q * batch if len(q) == 1 else q
    k = k * batch if len(k) == 1 else k
    out = set()
    if fields.get("row_gap", "0") != "0":
        out.add("row gaps")
    if any(kk == 0 and qq > 0 for qq, kk in zip(q, k)):
        out.add("keyless sequence")
    if len(set(q)) > 1 or len(set(k)) > 1:
        out.add("ragged")
    if "bottom_right" in fields.get("window", ""):
        out.add("window_br")
    return out


def main():
    paths = []
    for arg in sys.argv[1:]:
        if os.path.isdir(arg):
            paths += sorted(os.path.join(arg, f) for f in os.listdir(arg) if f.endswith(".case"))
        else:
            paths.append(arg)
    groups = collections.defaultdict(list)
    for path in paths:
        fields, verdict = read_case(path)
        groups[(fields.get("kernel", "?"), verdict.split(":")[0])].append((features(fields), verdict, path))
    for (kernel, verdict), cases in sorted(groups.items()):
        counts = collections.Counter(f for feats, _, _ in cases for f in feats)
        plain = [(v, p) for feats, v, p in cases if not feats & {"row gaps", "keyless sequence", "window_br"}]
        print(f"{kernel} {verdict}: {len(cases)} cases; " +
              ", ".join(f"{f} {n}" for f, n in sorted(counts.items())) +
              f"; without row gaps, keyless sequence or window_br: {len(plain)}")
        for v, p in plain[:8]:
            print(f"    {os.path.basename(p)}: {v[:140]}")


if __name__ == "__main__":
    main()
