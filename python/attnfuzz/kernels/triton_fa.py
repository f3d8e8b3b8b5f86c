"""Our own FlashAttention-2 forward in Triton: one program per (query
block, head, sequence), an online softmax over key blocks, the problem's
strides as they are (BHSD, BSHD, packed, row gaps, stride-0 broadcast),
per-sequence lengths, GQA, causal and sliding windows in both alignments,
softcap, and the LSE.

Precision: q.k by tl.dot in fp32 (fp16/bf16 inputs: exact products), times
scale in fp32, softcap in fp32, then exp2((s - m) * log2 e) (the SFU's
exp2: 2 ulps, subnormals flushed); P rounded to V's dtype for the P.V dot;
l sums the fp32 P; fp32 m, l and accumulator; O = acc / l rounded to the
output dtype; LSE = m + ln l.  A fully masked row: O = 0, LSE = -inf.
Compiled per (dtype, head dim, flags): attnfuzz.shape_key groups the calls.

Run: --kernel-lib libattnfuzz_python.so#attnfuzz.kernels.triton_fa:kernel
"""

import attnfuzz

BLOCK_M, BLOCK_N = 64, 64
FLAGS = ["causal_top_left", "causal_bottom_right", "window", "varlen", "gqa", "softcap", "lse", "strided"]
DTYPES = ["fp16", "bf16"]
HEAD_DIMS = (16, 128, 16)

_kernel = {}


def _build():
    import triton
    import triton.language as tl

    @triton.jit
    def fwd(Q, K, V, O, L, SQ, SK, OFF, sq_b, sq_h, sq_s, sk_b, sk_h, sk_s, sv_b, sv_h, sv_s,
            so_b, so_h, so_s, sl_b, sl_h, sl_s, scale, softcap, wl, wr, group,
            D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, HAS_L: tl.constexpr, HAS_R: tl.constexpr,
            HAS_CAP: tl.constexpr, HAS_LSE: tl.constexpr):
        mb, h, b = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        n_q, n_k, off = tl.load(SQ + b), tl.load(SK + b), tl.load(OFF + b)
        if mb * BM >= n_q:
            return
        hk = h // group
        i = mb * BM + tl.arange(0, BM)
        d = tl.arange(0, D)
        q = tl.load(Q + b * sq_b + h * sq_h + i[:, None] * sq_s + d[None, :], mask=i[:, None] < n_q, other=0.0)
        m = tl.full([BM], float("-inf"), tl.float32)
        l = tl.zeros([BM], tl.float32)
        acc = tl.zeros([BM, D], tl.float32)
        lo = 0
        hi = n_k
        if HAS_L:
            lo = tl.maximum(0, mb * BM + off - wl) // BN * BN
        if HAS_R:
            hi = tl.minimum(n_k, (mb + 1) * BM + off + wr)
        for start in range(lo, hi, BN):
            j = start + tl.arange(0, BN)
            k = tl.load(K + b * sk_b + hk * sk_h + j[None, :] * sk_s + d[:, None], mask=j[None, :] < n_k, other=0.0)
            s = tl.dot(q, k) * scale
            if HAS_CAP:
                s = softcap * (2 * tl.sigmoid(2 * s / softcap) - 1)  # tanh
            ok = (j[None, :] < n_k) & (i[:, None] < n_q)
            if HAS_L:
                ok = ok & (j[None, :] >= i[:, None] + off - wl)
            if HAS_R:
                ok = ok & (j[None, :] <= i[:, None] + off + wr)
            s = tl.where(ok, s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.exp2((s - m_safe[:, None]) * 1.4426950408889634)
            alpha = tl.exp2((m - m_safe) * 1.4426950408889634)
            l = l * alpha + tl.sum(p, 1)
            v = tl.load(V + b * sv_b + hk * sv_h + j[:, None] * sv_s + d[None, :], mask=j[:, None] < n_k, other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m = m_new
        empty = l == 0
        o = tl.where(empty[:, None], 0.0, acc / tl.where(empty, 1.0, l)[:, None])
        tl.store(O + b * so_b + h * so_h + i[:, None] * so_s + d[None, :], o.to(O.dtype.element_ty),
                 mask=i[:, None] < n_q)
        if HAS_LSE:
            lse = tl.where(empty, float("-inf"), m + tl.log(tl.where(empty, 1.0, l)))
            tl.store(L + b * sl_b + h * sl_h + i * sl_s, lse, mask=i < n_q)
    return fwd


def run(p):
    import torch
    if "fwd" not in _kernel:
        _kernel["fwd"] = _build()
    if p.head_dim & (p.head_dim - 1):
        raise attnfuzz.Unsupported("tl.arange needs a power-of-two head dimension")
    for t in (p.q, p.k, p.v, p.o):
        if t.stride(3) != 1:
            raise attnfuzz.Unsupported("the head dimension must be contiguous (stride 1)")
    dev = p.q.device
    sq = torch.tensor([int(x) for x in p.seqlens_q], dtype=torch.int32, device=dev)
    sk = torch.tensor([int(x) for x in p.seqlens_k], dtype=torch.int32, device=dev)
    off = torch.tensor([p.offset(b) for b in range(p.batch)], dtype=torch.int32, device=dev)
    lse = p.lse if p.lse is not None else torch.empty(0, device=dev)
    ls = lse.stride() if p.lse is not None else (0, 0, 0)
    grid = ((p.max_seqlen_q + BLOCK_M - 1) // BLOCK_M, p.heads_q, p.batch)
    _kernel["fwd"][grid](
        p.q, p.k, p.v, p.o, lse, sq, sk, off, *p.q.stride()[:3], *p.k.stride()[:3], *p.v.stride()[:3],
        *p.o.stride()[:3], *ls, p.scale, p.softcap, p.window_left, p.window_right, p.heads_q // p.heads_kv,
        D=p.head_dim, BM=BLOCK_M, BN=BLOCK_N, HAS_L=bool(p.has_window and p.window_left >= 0),
        HAS_R=bool(p.has_window and p.window_right >= 0), HAS_CAP=p.softcap != 0, HAS_LSE=p.lse is not None)


def _specialization(p):
    """What Triton compiles one program for: dtypes and the constexprs, not
    the sizes (attnfuzz.shape_key counted 260 of 261 calls as compiles on
    the H200)."""
    return (tuple(sorted(p.dtypes.items())), p.head_dim, p.has_window and p.window_left >= 0,
            p.has_window and p.window_right >= 0, p.softcap != 0, p.lse is not None)


kernel = attnfuzz.Kernel(
    "py.triton.fa2", run, tensors="torch", device="cuda", shape_key=_specialization,
    description="our FlashAttention-2 forward in Triton (BLOCK_M = BLOCK_N = 64)",
    caps=dict(flags=FLAGS, in_dtypes=DTYPES, out_dtypes=DTYPES, min_head_dim=HEAD_DIMS[0],
              max_head_dim=HEAD_DIMS[1], head_dim_multiple=HEAD_DIMS[2]),
    precision=dict(score_dtype="fp32", p_dtype="of_v", acc_dtype="fp32", exp_ulps=2, flush_subnormals=1,
                   l_from_unrounded_p=1),
    conventions=dict(masked_row_output="zero", empty_lse="-inf"))
