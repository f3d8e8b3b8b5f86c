"""Shared by the torch kernels: the problem's tensors made safe for a library
that reads whole blocks (padding zeroed, since 0 * NaN is NaN in P.V even
where P is 0), and the ABI's masks as torch tensors."""

import numpy as np

from attnfuzz import masks


def zero_padding(p, t, seqlens):
    """A copy of [b][h][s][d] tensor t with rows past seqlens[b] set to 0
    (the harness poisons them with NaN; a blocked kernel loads them)."""
    out = t.clone()
    for b in range(p.batch):
        out[b, :, int(seqlens[b]):] = 0
    return out


def same_output_dtype(p):
    """Libraries that return O in the input dtype (flex, SDPA, JAX) would
    round it there first: a wider output than input is not what they do
    (found on the H200: bf16 in, fp32 out failed its fp32 bound)."""
    import attnfuzz
    if p.dtypes["o"] != p.dtypes["q"]:
        raise attnfuzz.Unsupported(f"O comes back in the input dtype ({p.dtypes['q']}), not {p.dtypes['o']}")


def inputs(p):
    """q, k, v with their padding rows zeroed, on the problem's device."""
    same_output_dtype(p)
    return zero_padding(p, p.q, p.seqlens_q), zero_padding(p, p.k, p.seqlens_k), zero_padding(p, p.v, p.seqlens_k)


def visible_mask(torch, p, device):
    """[b][heads_q][max_seqlen_q][max_seqlen_k] booleans: seqlens, window and
    boolean mask, as the ABI defines them (padding rows see nothing)."""
    out = np.zeros((p.batch, p.heads_q, p.max_seqlen_q, p.max_seqlen_k), dtype=bool)
    for b in range(p.batch):
        sq, sk = int(p.seqlens_q[b]), int(p.seqlens_k[b])
        out[b, :, :sq, :sk] = masks.visible(p, b)
    return torch.from_numpy(out).to(device)


def declared(flags, dtypes, head_dims, precision, conventions):
    return dict(caps=dict(flags=flags, in_dtypes=dtypes, out_dtypes=dtypes, min_head_dim=head_dims[0],
                          max_head_dim=head_dims[1], head_dim_multiple=head_dims[2]),
                precision=precision, conventions=conventions)
