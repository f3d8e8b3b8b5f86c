"""A numpy reference kernel: exact attention in float64 over the problem's
own strided views, every feature of the ABI.

It declares the fp32 tensor-core model (fp32 scores and statistics, exp
within 1 ulp): float64 arithmetic is well inside that bound, so the
declaration is an honest upper bound on its error, not a description of
how it rounds.  Run: --kernel-lib libattnfuzz_python.so#attnfuzz.kernels.numpy_reference:kernel
"""

import numpy as np

from attnfuzz import Kernel
from attnfuzz import dtypes as afz_dtypes
from attnfuzz import masks

ALL_FEATURES = ["causal_top_left", "causal_bottom_right", "window", "bool_mask", "add_mask", "varlen",
                "gqa", "softcap", "lse", "strided", "dv_ne_d"]
FLOAT_DTYPES = ["fp32", "fp16", "bf16"]
HEAD_DIM_RANGE = (1, 1024)


def attention(p, right_extra=0):
    """Writes p.o and p.lse; right_extra is a test's planted causal defect."""
    group = p.heads_q // p.heads_kv
    kv_head = np.arange(p.heads_q) // group
    for b in range(p.batch):
        sq, sk = int(p.seqlens_q[b]), int(p.seqlens_k[b])
        if sq == 0:
            continue
        q = afz_dtypes.to_float(p.q[b, :, :sq], p.dtypes["q"]).astype(np.float64)
        k = afz_dtypes.to_float(p.k[b, kv_head, :sk], p.dtypes["k"]).astype(np.float64)
        v = afz_dtypes.to_float(p.v[b, kv_head, :sk], p.dtypes["v"]).astype(np.float64)
        s = np.einsum("hid,hjd->hij", q, k) * np.float64(p.scale)
        if p.softcap != 0:
            s = p.softcap * np.tanh(s / p.softcap)
        if p.add_mask is not None:
            s = s + p.add_mask[b, :, :sq, :sk].astype(np.float64)
        s = np.where(masks.visible(p, b, right_extra), s, -np.inf)
        m = s.max(axis=2, initial=-np.inf, keepdims=True)
        empty = ~np.isfinite(m)  # no visible key: O = 0, LSE = -inf (the ABI's convention)
        w = np.exp(s - np.where(empty, 0.0, m))
        l = w.sum(axis=2, keepdims=True)
        o = np.einsum("hij,hjd->hid", w, v) / np.where(empty, 1.0, l)
        p.o[b, :, :sq] = afz_dtypes.from_float(np.where(empty, 0.0, o), p.dtypes["o"])
        if p.lse is not None:
            with np.errstate(divide="ignore"):
                p.lse[b, :, :sq] = np.where(empty, -np.inf, m + np.log(l))[..., 0].astype(np.float32)


def declare(name, fn, description, tensors="numpy"):
    return Kernel(name, fn, description=description, tensors=tensors,
                  caps=dict(flags=ALL_FEATURES, in_dtypes=FLOAT_DTYPES, out_dtypes=FLOAT_DTYPES,
                            min_head_dim=HEAD_DIM_RANGE[0], max_head_dim=HEAD_DIM_RANGE[1]),
                  precision=dict(score_dtype="fp32", p_dtype="fp32", acc_dtype="fp32", exp_ulps=1,
                                 flush_subnormals=0, l_from_unrounded_p=1),
                  conventions=dict(masked_row_output="zero", empty_lse="-inf"))


kernel = declare("py.numpy.reference", attention,
                 "numpy, float64 throughout, on the harness's strided views (every ABI feature)")
