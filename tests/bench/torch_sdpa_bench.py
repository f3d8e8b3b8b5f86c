#!/usr/bin/env python3
"""cuDNN and PyTorch flash attention on the shapes of attnfuzz_gpu_bench
(kernels/cuda/bench/gpu_bench.cpp): bf16, dense [b, h, s, d], median of
timed launches after 3 warm-ups, CUDA events.  A benchmark, not a test.

    python3 tests/bench/torch_sdpa_bench.py [--reps N]
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [  # batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, causal, what
    (16, 16, 16, 1024, 1024, 128, False, "prefill"),
    (2, 16, 16, 8192, 8192, 128, False, "prefill"),
    (2, 16, 16, 8192, 8192, 128, True, "prefill"),
    (16, 16, 16, 1024, 1024, 64, False, "prefill"),
    (2, 16, 16, 8192, 8192, 64, True, "prefill"),
    (8, 32, 8, 1, 131072, 128, True, "decode"),
]
BACKENDS = [("torch.cudnn", SDPBackend.CUDNN_ATTENTION), ("torch.flash", SDPBackend.FLASH_ATTENTION)]


def flops(b, hq, sq, sk, d, causal):
    if not causal:
        pairs = sq * sk
    else:  # bottom-right alignment, as the C++ benchmark counts
        pairs = sum(min(sk, i + sk - sq + 1) for i in range(sq))
    return 4.0 * b * hq * pairs * d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    print(f"{'kernel':<12} {'shape':<8} {'batch':>5} {'hq':>5} {'hkv':>4} {'sq':>7} {'sk':>7} {'d':>4} {'causal':>6} "
          f"{'ms':>10} {'TFLOP/s':>9}")
    gen = torch.Generator(device="cuda").manual_seed(0)
    for (b, hq, hkv, sq, sk, d, causal, what) in SHAPES:
        q = torch.randn(b, hq, sq, d, device="cuda", dtype=torch.bfloat16, generator=gen)
        k = torch.randn(b, hkv, sk, d, device="cuda", dtype=torch.bfloat16, generator=gen)
        v = torch.randn(b, hkv, sk, d, device="cuda", dtype=torch.bfloat16, generator=gen)
        for name, backend in BACKENDS:
            # Causal in SDPA is top-left; for sq == sk both alignments agree.  The
            # decode's one query sees every key either way only bottom-right: run
            # it without a mask (all keys visible), the same work.
            is_causal = causal and sq == sk
            try:
                with sdpa_kernel([backend]):
                    def call():
                        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, enable_gqa=hq != hkv)
                    times = []
                    for r in range(args.reps + 3):
                        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        t0.record()
                        call()
                        t1.record()
                        t1.synchronize()
                        if r >= 3:
                            times.append(t0.elapsed_time(t1))
                times.sort()
                ms = times[len(times) // 2]
                tf = flops(b, hq, sq, sk, d, causal) / (ms * 1e-3) / 1e12
                print(f"{name:<12} {what:<8} {b:>5} {hq:>5} {hkv:>4} {sq:>7} {sk:>7} {d:>4} "
                      f"{'yes' if causal else 'no':>6} {ms:>10.3f} {tf:>9.1f}")
            except Exception as e:  # a backend that declines a shape says so
                print(f"{name:<12} {what:<8} {b:>5} {hq:>5} {hkv:>4} {sq:>7} {sk:>7} {d:>4} "
                      f"{'yes' if causal else 'no':>6}  unsupported: {str(e).splitlines()[0][:80]}")
        del q, k, v
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
