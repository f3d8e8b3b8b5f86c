"""FlexAttention (torch.nn.attention.flex_attention, compiled to Triton by
torch.compile) under the ABI's masks, two ways:

  py.flex.padded  the batch as the harness lays it out ([b][h][s][d] with
                  per-sequence lengths): a mask_mod over seqlens and window;
  py.flex.packed  the ragged batch packed into one sequence with a document
                  mask (the canonical FlexAttention varlen recipe): queries
                  and keys of different documents never meet.

Causal and sliding windows (either alignment) and the boolean mask are
mask_mods; softcap, the scale and the additive mask are one score_mod
(score * scale, then softcap * tanh(score / softcap), then + the mask), with
flex's own scale 1.0 so that the order is the ABI's.  Sequence lengths,
scale and masks are captured tensors, so they are data, not guards: a new
compilation happens per shape, dtype, stride pattern and mask structure
(attnfuzz.shape_key), timed apart by the bridge.

Precision: q.k in fp32 on tensor cores, the score_mod in fp32, then
exp2(s * log2 e) (one more fp32 rounding, the SFU's exp2: 2 ulps, subnormals
flushed); P rounded to V's dtype for the P.V dot; fp32 m, l and
accumulator; LSE returned natural-log.  A fully masked row: 0 and -inf.

Run: --kernel-lib libattnfuzz_python.so#attnfuzz.kernels.flex:kernels
"""

import attnfuzz
from attnfuzz.kernels import torch_inputs

FLAGS = ["causal_top_left", "causal_bottom_right", "window", "bool_mask", "add_mask", "varlen", "gqa",
         "softcap", "lse", "strided"]
DTYPES = ["fp16", "bf16", "fp32"]
HEAD_DIMS = (16, 256, 16)
PRECISION = dict(score_dtype="fp32", p_dtype="of_v", acc_dtype="fp32", exp_ulps=2, flush_subnormals=1,
                 l_from_unrounded_p=1)
CONVENTIONS = dict(masked_row_output="zero", empty_lse="-inf")

_compiled = {}


def _flex():
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    if "flex" not in _compiled:
        _compiled["flex"] = torch.compile(flex_attention, dynamic=False)
    return torch, create_block_mask, _compiled["flex"]


def _score_mod(torch, p, add_mask):
    scale = torch.tensor(p.scale, dtype=torch.float32, device=p.q.device)
    cap = torch.tensor(p.softcap, dtype=torch.float32, device=p.q.device)
    has_cap, has_add = p.softcap != 0, add_mask is not None

    def score_mod(score, b, h, q_idx, kv_idx):
        s = score * scale
        if has_cap:
            s = cap * torch.tanh(s / cap)
        if has_add:
            s = s + add_mask[b, h, q_idx, kv_idx]
        return s
    return score_mod


def _window(p, torch, device):
    """(left, right, offset per sequence) tensors, and which sides bound."""
    t = lambda x: torch.tensor(x, dtype=torch.int64, device=device)  # noqa: E731
    offsets = [p.offset(b) for b in range(p.batch)]
    return t(p.window_left), t(p.window_right), t(offsets), p.has_window and p.window_left >= 0, \
        p.has_window and p.window_right >= 0


def _padded(p):
    torch, create_block_mask, flex = _flex()
    q, k, v = torch_inputs.inputs(p)
    dev = q.device
    sq = torch.tensor([int(x) for x in p.seqlens_q], device=dev)
    sk = torch.tensor([int(x) for x in p.seqlens_k], device=dev)
    left, right, offset, bound_left, bound_right = _window(p, torch, dev)
    bool_mask = p.bool_mask

    def mask_mod(b, h, q_idx, kv_idx):
        ok = (q_idx < sq[b]) & (kv_idx < sk[b])
        if bound_left:
            ok = ok & (kv_idx >= q_idx + offset[b] - left)
        if bound_right:
            ok = ok & (kv_idx <= q_idx + offset[b] + right)
        if bool_mask is not None:
            ok = ok & (bool_mask[b, h, q_idx, kv_idx] != 0)
        return ok
    heads = p.heads_q if bool_mask is not None else None
    block = create_block_mask(mask_mod, p.batch, heads, p.max_seqlen_q, p.max_seqlen_k, device=dev)
    add = p.add_mask.float() if p.add_mask is not None else None
    o, lse = flex(q, k, v, score_mod=_score_mod(torch, p, add), block_mask=block, scale=1.0,
                  enable_gqa=p.heads_q != p.heads_kv, return_lse=True)
    return o, lse  # flex's LSE is natural-log


def _packed(p):
    torch, create_block_mask, flex = _flex()
    torch_inputs.same_output_dtype(p)
    if p.bool_mask is not None or p.add_mask is not None:
        raise attnfuzz.Unsupported("the packed (document mask) form takes no pattern masks")
    dev = p.q.device
    qs = [int(x) for x in p.seqlens_q]
    ks = [int(x) for x in p.seqlens_k]
    if sum(qs) == 0 or sum(ks) == 0:
        raise attnfuzz.Unsupported("an empty packed batch")
    pack = lambda t, lens: torch.cat([t[b, :, :n] for b, n in enumerate(lens)], dim=1)[None]  # noqa: E731
    q, k, v = pack(p.q, qs), pack(p.k, ks), pack(p.v, ks)
    doc_q = torch.repeat_interleave(torch.arange(p.batch, device=dev), torch.tensor(qs, device=dev))
    doc_k = torch.repeat_interleave(torch.arange(p.batch, device=dev), torch.tensor(ks, device=dev))
    start_q = torch.tensor([sum(qs[:b]) for b in range(p.batch)], device=dev)
    start_k = torch.tensor([sum(ks[:b]) for b in range(p.batch)], device=dev)
    left, right, offset, bound_left, bound_right = _window(p, torch, dev)

    def mask_mod(b, h, q_idx, kv_idx):
        d = doc_q[q_idx]
        ok = d == doc_k[kv_idx]
        i, j = q_idx - start_q[d], kv_idx - start_k[d]
        if bound_left:
            ok = ok & (j >= i + offset[d] - left)
        if bound_right:
            ok = ok & (j <= i + offset[d] + right)
        return ok
    block = create_block_mask(mask_mod, 1, None, q.shape[2], k.shape[2], device=dev)
    o_packed, lse_packed = flex(q, k, v, score_mod=_score_mod(torch, p, None), block_mask=block, scale=1.0,
                                enable_gqa=p.heads_q != p.heads_kv, return_lse=True)
    o = torch.zeros(p.o.shape, dtype=p.o.dtype, device=dev)
    lse = torch.zeros(p.lse.shape, dtype=torch.float32, device=dev)
    for b, n in enumerate(qs):
        o[b, :, :n] = o_packed[0, :, start_q[b]:start_q[b] + n]
        lse[b, :, :n] = lse_packed[0, :, start_q[b]:start_q[b] + n]
    return o, lse


def _declare(name, fn, description, flags):
    return attnfuzz.Kernel(name, fn, tensors="torch", device="cuda", description=description, shape_key=attnfuzz.shape_key,
                           **torch_inputs.declared(flags, DTYPES, HEAD_DIMS, PRECISION, CONVENTIONS))


def _packed_key(p):
    # The packed length is a shape: the total tokens decide the compilation.
    return (attnfuzz.shape_key(p), int(sum(int(x) for x in p.seqlens_q)), int(sum(int(x) for x in p.seqlens_k)))


kernels = [
    _declare("py.flex.padded", _padded, "FlexAttention, padded batch, mask_mod over seqlens, window and mask",
             FLAGS),
    attnfuzz.Kernel("py.flex.packed", _packed, tensors="torch", device="cuda", shape_key=_packed_key,
                    description="FlexAttention, ragged batch packed with a document mask",
                    **torch_inputs.declared([f for f in FLAGS if f not in ("bool_mask", "add_mask")], DTYPES,
                                            HEAD_DIMS, PRECISION, CONVENTIONS)),
]
