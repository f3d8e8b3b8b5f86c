#!/usr/bin/python3
"""PyTorch's math SDPA path and its autograd backward, emulated in float32 with numpy.

Follows aten::_scaled_dot_product_attention_math (transformers/attention.cpp, PyTorch 2.x)
op by op, as the torch.math adapter calls it (one call per sequence of a ragged batch,
the masks as one fp32 additive bias, enable_gqa for GQA):

  sf = float32(sqrt(scale))          calculate_scale(...).sqrt(), a double scalar that the
                                     CUDA mul kernel casts to its fp32 opmath type
  qs = q * sf                        one fp32 rounding per element
  kt = k_expanded^T * sf             (GQA: K and V heads repeated, exact)
  S  = qs @ kt                       fp32 GEMM
  S += bias                          fp32 add
  P  = _safe_softmax(S)              m = max, e = exp(S - m), l = sum e, P = e / l (all -inf: 0)
  O  = P @ v_expanded                fp32 GEMM

and the backward autograd builds from it:

  dP  = dO @ v^T                     matmul backward
  dV  = P^T @ dO
  D   = rowsum(dP * P)               _softmax_backward_data: P * (dP - D)
  dS  = P * (dP - D)
  dqs = dS @ kt^T,  dq = dqs * sf    mul backward
  dkt = qs^T @ dS,  dk = dkt^T * sf
  GQA: each group's dK, dV summed in fp32

Variants isolate which step carries the error (--variant):
  torch      the above
  exact_s    S computed in float64 from the UNSCALED inputs and rounded once to fp32 (no
             q/k scaling roundings, no GEMM rounding in S)
  exact_p    P = exp(S - LSE) from the exact fp64 softmax of the fp32 S (no own normalization)
  d_from_o   D = dO . O (O from the fp32 forward) instead of rowsum(dP * P)
  fused      exact_p and D = dO . O_exact rounded to fp32: what the bound's model assumes

Usage: math_sdpa_emulate.py DIR [--variant V]   (DIR from `attnfuzz_math_case_io dump`);
writes DIR/emu_{dq,dk,dv}.npy and prints the worst errors against exact_*.npy.
"""
import argparse
import json
import os

import numpy as np

F32 = np.float32


def safe_softmax(s):
    """_safe_softmax in fp32: a row of -inf gives zeros, not NaN."""
    m = s.max(axis=-1, keepdims=True)
    dead = np.isneginf(m)
    m = np.where(dead, F32(0), m)
    e = np.exp((s - m).astype(F32)).astype(F32)
    l = e.sum(axis=-1, keepdims=True, dtype=F32)
    p = np.where(dead, F32(0), e / np.where(dead, F32(1), l)).astype(F32)
    return p


def exact_softmax(s):
    """The exact softmax (fp64) of the fp32 scores s: what a given exact LSE would give."""
    s64 = s.astype(np.float64)
    m = s64.max(axis=-1, keepdims=True)
    dead = np.isneginf(m)
    m = np.where(dead, 0.0, m)
    e = np.exp(s64 - m)
    l = e.sum(axis=-1, keepdims=True)
    return np.where(dead, 0.0, e / np.where(dead, 1.0, l))


def one_sequence(q, k, v, bias, dout, scale, variant):
    """q [Hq,sq,d], k/v [Hkv,sk,*], bias [Hq,sq,sk], dout [Hq,sq,dv]: dq, dk, dv in fp32."""
    hq, hkv = q.shape[0], k.shape[0]
    group = hq // hkv
    ke = np.repeat(k, group, axis=0)
    ve = np.repeat(v, group, axis=0)
    sf = F32(np.sqrt(np.float64(scale)))
    qs = (q * sf).astype(F32)
    kt = (np.swapaxes(ke, -1, -2) * sf).astype(F32)
    if variant == "exact_s":
        s = (scale * np.matmul(q.astype(np.float64), np.swapaxes(ke, -1, -2).astype(np.float64))).astype(F32)
    else:
        s = np.matmul(qs, kt).astype(F32)
    s = (s + bias).astype(F32)
    if variant in ("exact_p", "fused"):
        p = exact_softmax(s).astype(F32)
    else:
        p = safe_softmax(s)
    o = np.matmul(p, ve).astype(F32)
    dp = np.matmul(dout, np.swapaxes(ve, -1, -2)).astype(F32)
    dve = np.matmul(np.swapaxes(p, -1, -2), dout).astype(F32)
    if variant == "d_from_o":
        d = (dout * o).sum(axis=-1, keepdims=True, dtype=F32)
    elif variant == "fused":
        o_exact = np.matmul(exact_softmax(s), ve.astype(np.float64)).astype(F32)
        d = (dout * o_exact).sum(axis=-1, keepdims=True, dtype=F32)
    else:
        d = (dp * p).sum(axis=-1, keepdims=True, dtype=F32)
    ds = (p * (dp - d).astype(F32)).astype(F32)
    dqs = np.matmul(ds, np.swapaxes(kt, -1, -2)).astype(F32)
    dq = (dqs * sf).astype(F32)
    dkt = np.matmul(np.swapaxes(qs, -1, -2), ds).astype(F32)
    dke = (np.swapaxes(dkt, -1, -2) * sf).astype(F32)
    dk = dke.reshape(hkv, group, *dke.shape[1:]).sum(axis=1, dtype=F32)
    dv = dve.reshape(hkv, group, *dve.shape[1:]).sum(axis=1, dtype=F32)
    return dq, dk, dv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--variant", default="torch", choices=["torch", "exact_s", "exact_p", "d_from_o", "fused"])
    a = ap.parse_args()
    load = lambda n: np.load(os.path.join(a.dir, n + ".npy"))
    meta = json.load(open(os.path.join(a.dir, "meta.json")))
    q, k, v, bias, dout = (load(n) for n in ("q", "k", "v", "bias", "dout"))
    dq, dk, dv = (np.zeros_like(load("exact_" + n), dtype=F32) for n in ("dq", "dk", "dv"))
    for b, (sq, sk) in enumerate(zip(meta["seqlens_q"], meta["seqlens_k"])):
        if sq == 0 or sk == 0:
            continue  # the adapter makes no call: gradients 0
        g = one_sequence(q[b, :, :sq], k[b, :, :sk], v[b, :, :sk], bias[b, :, :sq, :sk], dout[b, :, :sq],
                         meta["scale"], a.variant)
        dq[b, :, :sq], dk[b, :, :sk], dv[b, :, :sk] = g
    for n, t in (("dq", dq), ("dk", dk), ("dv", dv)):
        np.save(os.path.join(a.dir, "emu_" + n + ".npy"), t)
        err = np.abs(t.astype(np.float64) - load("exact_" + n))
        at = np.unravel_index(np.argmax(err), err.shape)
        print(f"{a.variant:9s} {n}: max |error| {err.max():.3g} at {tuple(int(i) for i in at)}")


if __name__ == "__main__":
    main()
