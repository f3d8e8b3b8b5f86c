#!/usr/bin/python3
"""Where a backward kernel's gradients leave the exact ones, row by row (glue).

Usage: reports/grad_dump_diff.py DUMP_DIR [--rows N]

DUMP_DIR is one case's folder of `attnfuzz repro --dump-tensors DIR` (harness/
case/tensor_dump.h).  For dQ, dK, dV: the N (default 8) rows with the largest
|kernel - exact|, each with what the masks leave it: a query row's visible keys
(0: an emptied row, whose exact gradients are 0), a key row's visible and
masked query rows.  Then, for every sequence with one key, how far the kernel's
dV is from the exact one and from the exact one plus the emptied rows' dO (the
reading of an emptied row as P = 1 on its only key): a rejection or a lead, not
a verdict.
Needs numpy (Debian's python3-numpy).
"""
import json
import sys

import numpy as np


def load(d, name):
    return np.load(f"{d}/{name}.npy").astype(np.float64)


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    d = argv[1]
    rows = int(argv[argv.index("--rows") + 1]) if "--rows" in argv else 8
    meta = json.load(open(f"{d}/meta.json"))
    if not meta.get("kernel_ran"):
        sys.exit(f"{d}: the kernel did not run (meta.json: kernel_ran false): no kernel gradients")
    bias, dout = load(d, "bias"), load(d, "dout")
    lens_q, lens_k = meta["seqlens_q"], meta["seqlens_k"]
    hq = bias.shape[1]
    visible = np.isfinite(bias)  # [b][hq][i][j]
    print(f"{d}: {meta['dtype']}, scale {meta['scale']:.9g}, seqlens_q {lens_q}, seqlens_k {lens_k}")
    kernel = {g: load(d, "kernel_" + g) for g in ("dq", "dk", "dv")}
    exact = {g: load(d, "exact_" + g) for g in ("dq", "dk", "dv")}
    group = hq // kernel["dk"].shape[1]  # query heads per K/V head
    for g in ("dq", "dk", "dv"):
        kern, ex = kernel[g], exact[g]
        err = np.abs(kern - ex)
        err[~np.isfinite(err)] = np.inf
        per_row = err.max(axis=3)  # [b][h][s]
        order = np.argsort(per_row, axis=None)[::-1][:rows]
        print(f"\n{g}: max |kernel - exact| {np.max(err):.4g}; the {rows} worst rows")
        for flat in order:
            b, h, s = np.unravel_index(flat, per_row.shape)
            if g == "dq":
                if s >= lens_q[b]:
                    continue
                what = f"query row: {int(visible[b, h, s, :lens_k[b]].sum())} of {lens_k[b]} keys visible"
            else:
                if s >= lens_k[b]:
                    continue
                heads = slice(h * group, (h + 1) * group)
                seen = visible[b, heads, :lens_q[b], s]
                emptied = ~visible[b, heads, :lens_q[b], :lens_k[b]].any(axis=2)
                what = (f"key row: seen by {int(seen.sum())} query rows, "
                        f"{int(emptied.sum())} emptied rows in its sequence")
            x = int(np.argmax(err[b, h, s]))
            print(f"  [b={b} h={h} s={s}] max {per_row[b, h, s]:.4g} at x={x} "
                  f"(kernel {kern[b, h, s, x]:.9g}, exact {ex[b, h, s, x]:.9g}); {what}")
    # dV of a sequence with one key: its exact value sums dO over the rows that see the key;
    # an emptied row read as P = 1 adds its dO too.
    kern_dv, exact_dv = kernel["dv"], exact["dv"]
    print("\ndV of the one-key sequences, the emptied rows' dO added with weight 1:")
    for b, (sq, sk) in enumerate(zip(lens_q, lens_k)):
        if sk != 1 or sq == 0:
            continue
        for h in range(kern_dv.shape[1]):
            heads = slice(h * group, (h + 1) * group)
            emptied = ~visible[b, heads, :sq, 0]
            with_emptied = exact_dv[b, h, 0] + (dout[b, heads, :sq] * emptied[..., None]).sum(axis=(0, 1))
            print(f"  [b={b} h={h}] {int(emptied.sum())} emptied rows: max |kernel - exact| "
                  f"{np.abs(kern_dv[b, h, 0] - exact_dv[b, h, 0]).max():.4g}, "
                  f"max |kernel - (exact + emptied dO)| {np.abs(kern_dv[b, h, 0] - with_emptied).max():.4g}")


if __name__ == "__main__":
    main(sys.argv)
