"""JAX's jax.nn.dot_product_attention, implementation='xla' and 'cudnn'.

JAX arrays have no strides: the bridge hands dense device arrays of the
logical shapes (tensors="jax"), transposed here to JAX's [B, T, N, H].
Sequence lengths go in as query_seq_lengths / key_value_seq_lengths; the
window, the boolean mask and the causal alignment as one boolean mask (xla);
cuDNN takes no arbitrary mask here: it gets is_causal (top-left) and
local_window_size and declines the rest.  Neither returns an LSE.

Precision (both): scores in fp32 from fp16/bf16 inputs, softmax in fp32, P
rounded to the input dtype for the P.V product (cuDNN's fused kernel; XLA
casts the fp32 softmax back to the input dtype before its P.V einsum); exp
within 2 ulps.  fp32 inputs run under jax.default_matmul_precision("highest"):
JAX's default on the GPU is TF32 for fp32 dot products (10-bit mantissas,
errors of ~1e-3, seen on the H200 as 2e4-ulp numeric mismatches), which the
precision model has no dtype for; "highest" is the full-fp32 attention a
user asks for when they pass fp32.

Padding rows past each sequence are zeroed before the call, as the torch
adapters do (torch_inputs.zero_padding): both implementations multiply the
masked P by every V row, padding included, so the harness's NaN poison
reaches O as 0 * NaN (seen on the H200, reports/python/README.md).

A fully masked row: XLA masks with a large finite negative number, not
-inf, so such a row softmaxes uniformly and returns the mean of V over all
keys (padding included); cuDNN the same where it has no key at all.  Neither
is one of the ABI's conventions (0, the exact limit, or NaN): both are
declared 0 and such rows stay semantic mismatches on record.

Run: --kernel-lib libattnfuzz_python.so#attnfuzz.kernels.jax_dpa:kernels
"""

import contextlib

import numpy as np

import attnfuzz
from attnfuzz import masks

PRECISION = dict(score_dtype="fp32", p_dtype="of_v", acc_dtype="fp32", exp_ulps=2, flush_subnormals=1,
                 l_from_unrounded_p=1)


def _lengths(jnp, p):
    return jnp.asarray(np.asarray(p.seqlens_q, dtype=np.int32)), jnp.asarray(np.asarray(p.seqlens_k, dtype=np.int32))


def _zeroed(jnp, p):
    """q, k, v ([b][h][s][d] device arrays) with rows past each sequence 0."""
    def zero(t, seqlens):
        rows = jnp.arange(t.shape[2])[None, None, :, None]
        keep = rows < jnp.asarray(np.asarray(seqlens, dtype=np.int32))[:, None, None, None]
        return jnp.where(keep, t, jnp.zeros((), t.dtype))
    return zero(p.q, p.seqlens_q), zero(p.k, p.seqlens_k), zero(p.v, p.seqlens_k)


def _precision(jax, p):
    """Full fp32 dot products for fp32 inputs (JAX's GPU default is TF32)."""
    return jax.default_matmul_precision("highest") if p.dtypes["q"] == "fp32" else contextlib.nullcontext()


def _xla(p):
    import jax
    import jax.numpy as jnp
    if p.dtypes["o"] != p.dtypes["q"]:
        raise attnfuzz.Unsupported("O comes back in the input dtype")
    q, k, v = _zeroed(jnp, p)
    visible = np.zeros((p.batch, p.heads_q, p.max_seqlen_q, p.max_seqlen_k), dtype=bool)
    for b in range(p.batch):
        sq, sk = int(p.seqlens_q[b]), int(p.seqlens_k[b])
        visible[b, :, :sq, :sk] = masks.visible(_host(p), b)
    bias = None
    if p.add_mask is not None:
        exact = jnp.asarray(np.asarray(p.add_mask), dtype=jnp.float32)
        bias = exact.astype(p.q.dtype)
        # The bias is added in the input dtype: a value it cannot hold
        # (-1e4 in bf16 is -9984) would change the problem.
        if not bool(jnp.array_equal(bias.astype(jnp.float32), exact)):
            raise attnfuzz.Unsupported(f"an additive mask value is not exact in {p.dtypes['q']}, "
                                       "the dtype the bias is added in")
    sq, sk = _lengths(jnp, p)
    with _precision(jax, p):
        o = jax.nn.dot_product_attention(jnp.swapaxes(q, 1, 2), jnp.swapaxes(k, 1, 2), jnp.swapaxes(v, 1, 2),
                                          bias=bias, mask=jnp.asarray(visible), scale=p.scale,
                                          query_seq_lengths=sq, key_value_seq_lengths=sk, implementation="xla")
    return jnp.swapaxes(o, 1, 2).block_until_ready()


def _cudnn(p):
    import jax
    import jax.numpy as jnp
    if p.dtypes["o"] != p.dtypes["q"]:
        raise attnfuzz.Unsupported("O comes back in the input dtype")
    if p.bool_mask is not None or p.add_mask is not None:
        raise attnfuzz.Unsupported("cuDNN through jax.nn.dot_product_attention: no pattern masks here")
    window = None
    causal = False
    if p.has_window:
        if p.align != "top_left":
            raise attnfuzz.Unsupported("jax.nn.dot_product_attention's causal and window are top-left")
        causal = p.window_left < 0 and p.window_right == 0
        if not causal:
            window = (p.window_left if p.window_left >= 0 else p.max_seqlen_k,
                      p.window_right if p.window_right >= 0 else p.max_seqlen_k)
            # JAX's own check (seen on the H200, a ValueError): "cuDNN doesn't
            # support right window: 16 when causal mask is not used".
            if window[1] != 0:
                raise attnfuzz.Unsupported("cuDNN through jax.nn.dot_product_attention takes no window reaching "
                                           "right of the diagonal")
    sq, sk = _lengths(jnp, p)
    q, k, v = _zeroed(jnp, p)
    o = jax.nn.dot_product_attention(jnp.swapaxes(q, 1, 2), jnp.swapaxes(k, 1, 2), jnp.swapaxes(v, 1, 2),
                                      scale=p.scale, is_causal=causal, local_window_size=window,
                                      query_seq_lengths=sq, key_value_seq_lengths=sk, implementation="cudnn")
    return jnp.swapaxes(o, 1, 2).block_until_ready()


class _host:
    """The problem with its boolean mask on the host, for masks.visible."""

    def __init__(self, p):
        self.__dict__.update(vars(p))
        self.offset = p.offset
        if p.bool_mask is not None:
            self.bool_mask = np.asarray(p.bool_mask)


def _declare(name, fn, flags, dtypes, head_dims, masked):
    return attnfuzz.Kernel(name, fn, tensors="jax", device="cuda", shape_key=attnfuzz.shape_key,
                           description=f"jax.nn.dot_product_attention, implementation='{name.split('.')[-1]}'",
                           caps=dict(flags=flags, in_dtypes=dtypes, out_dtypes=dtypes, min_head_dim=head_dims[0],
                                     max_head_dim=head_dims[1], head_dim_multiple=head_dims[2]),
                           precision=PRECISION, conventions=dict(masked_row_output=masked, empty_lse="-inf"))


kernels = [
    _declare("py.jax.xla", _xla, ["causal_top_left", "causal_bottom_right", "window", "bool_mask", "add_mask",
                                  "varlen", "gqa", "strided"], ["fp16", "bf16", "fp32"], (1, 512, 1), "zero"),
    _declare("py.jax.cudnn", _cudnn, ["causal_top_left", "window", "varlen", "gqa", "strided"], ["fp16", "bf16"],
             (8, 128, 8), "zero"),
]
