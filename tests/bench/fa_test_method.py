#!/usr/bin/env python3
"""FlashAttention's own test method, timed on the inputs `attnfuzz bench validation --dump DIR` wrote.

FlashAttention's tests (tests/test_flash_attn.py) judge a kernel's output O against two references
computed in PyTorch on the GPU: one with the inputs upcast to fp32 (the "truth") and one in the input
dtype (how far a same-precision implementation strays), and pass O when
    max|O - ref_fp32| <= 2 * max|ref_same - ref_fp32| + atol.
This script times exactly that (both references and the comparison; the kernel itself is not part of
it) with CUDA events, median of --reps after a warm-up, on each shape DIR holds (q.bin, k.bin, v.bin,
o.bin as dense (b, h, s, d) bf16 and manifest.txt), and prints it beside attnfuzz's own figures read
from the benchmark's --csv: the side-by-side table of reports/gpu_oracle/.

    python3 tests/bench/fa_test_method.py DIR --csv bench.csv [--reps 5]

Glue for a benchmark (Python is where the method lives), not a test.
"""
import argparse
import csv
import os
import statistics

import numpy as np
import torch

FA_ATOL = 0.0  # FlashAttention's forward tests add no absolute slack for bf16 outputs


def load(shape_dir):
    meta = {}
    with open(os.path.join(shape_dir, "manifest.txt")) as f:
        for line in f:
            key, value = line.split()
            meta[key] = value
    if meta["dtype"] != "bf16":
        raise SystemExit(f"{shape_dir}: dtype {meta['dtype']}, this script reads bf16")
    b, h, sq, sk, d = (int(meta[k]) for k in ("batch", "heads", "seqlen_q", "seqlen_k", "head_dim"))

    def tensor(name, s):
        raw = np.fromfile(os.path.join(shape_dir, name), dtype=np.int16)  # the bits; torch has no uint16 view to bf16
        return torch.from_numpy(raw).view(torch.bfloat16).reshape(b, h, s, d).cuda()

    return (tensor("q.bin", sq), tensor("k.bin", sk), tensor("v.bin", sk), tensor("o.bin", sq),
            float.fromhex(meta["scale"]), meta["causal"] == "1")


def reference(q, k, v, scale, causal, upcast):
    """Softmax attention as FlashAttention's attention_ref computes it: the whole score matrix."""
    if upcast:
        q, k, v = q.float(), k.float(), v.float()
    scores = torch.matmul(q, (k * scale).transpose(-1, -2))  # reorder_ops: scale on K, as its same-precision ref
    if causal:  # bottom-right: query i sees keys j <= i + sk - sq
        sq, sk = q.shape[-2], k.shape[-2]
        keep = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril(sk - sq)
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1).to(v.dtype), v)


def fa_method(q, k, v, o, scale, causal):
    ref = reference(q, k, v, scale, causal, upcast=True)
    same = reference(q, k, v, scale, causal, upcast=False)
    kernel_err = (o.float() - ref).abs().max()
    same_err = (same.float() - ref).abs().max()
    return bool(kernel_err <= 2 * same_err + FA_ATOL), float(kernel_err), float(same_err)


def time_ms(fn, reps):
    fn()  # warm-up: cuBLAS handles, allocator pools
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--csv", help="attnfuzz bench validation --csv output, for the side-by-side table")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    ours = {}
    if args.csv:
        with open(args.csv) as f:
            for row in csv.DictReader(f):
                ours[(int(row["n"]), row["causal"] == "1")] = row
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}; FlashAttention's method = fp32 reference + "
          f"bf16 reference + max-error rule; median of {args.reps}")
    print(f"{'N':>6} {'causal':>6} {'batch':>5} {'kernel_ms':>10} {'fa_method_ms':>13} {'attnfuzz_ms':>12} "
          f"{'attnfuzz/fa':>11} {'fa_rule':>8} {'max|O-ref|':>11} {'2*max|same-ref|':>15}")
    for name in sorted(os.listdir(args.dir), key=lambda s: (int(s.split("_")[0][1:]), s)):
        shape_dir = os.path.join(args.dir, name)
        if not os.path.isfile(os.path.join(shape_dir, "manifest.txt")):
            continue
        q, k, v, o, scale, causal = load(shape_dir)
        n = q.shape[-2]
        ms = time_ms(lambda: fa_method(q, k, v, o, scale, causal), args.reps)
        ok, kernel_err, same_err = fa_method(q, k, v, o, scale, causal)
        row = ours.get((n, causal))
        kernel_ms = float(row["kernel_ms"]) if row else float("nan")
        total_ms = float(row["total_s"]) * 1e3 if row else float("nan")
        print(f"{n:>6} {'yes' if causal else 'no':>6} {q.shape[0]:>5} {kernel_ms:>10.3f} {ms:>13.3f} "
              f"{total_ms:>12.1f} {total_ms / ms:>11.1f} {'pass' if ok else 'FAIL':>8} {kernel_err:>11.3g} "
              f"{2 * same_err:>15.3g}", flush=True)
        del q, k, v, o
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
