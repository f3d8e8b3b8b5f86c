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
within 2 ulps.  A fully masked row: XLA's softmax over all -inf is NaN
(0/0): declared "nan"; cuDNN: declared 0.

Run: --kernel-lib libattnfuzz_python.so#attnfuzz.kernels.jax_dpa:kernels
"""

import numpy as np

import attnfuzz
from attnfuzz import masks

PRECISION = dict(score_dtype="fp32", p_dtype="of_v", acc_dtype="fp32", exp_ulps=2, flush_subnormals=1,
                 l_from_unrounded_p=1)


def _lengths(jnp, p):
    return jnp.asarray(np.asarray(p.seqlens_q, dtype=np.int32)), jnp.asarray(np.asarray(p.seqlens_k, dtype=np.int32))


def _xla(p):
    import jax
    import jax.numpy as jnp
    if p.dtypes["o"] != p.dtypes["q"]:
        raise attnfuzz.Unsupported("O comes back in the input dtype")
    visible = np.zeros((p.batch, p.heads_q, p.max_seqlen_q, p.max_seqlen_k), dtype=bool)
    for b in range(p.batch):
        sq, sk = int(p.seqlens_q[b]), int(p.seqlens_k[b])
        visible[b, :, :sq, :sk] = masks.visible(_host(p), b)
    bias = None
    if p.add_mask is not None:
        bias = jnp.asarray(np.asarray(p.add_mask), dtype=jnp.float32).astype(p.q.dtype)
    sq, sk = _lengths(jnp, p)
    o = jax.nn.dot_product_attention(jnp.swapaxes(p.q, 1, 2), jnp.swapaxes(p.k, 1, 2), jnp.swapaxes(p.v, 1, 2),
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
    sq, sk = _lengths(jnp, p)
    o = jax.nn.dot_product_attention(jnp.swapaxes(p.q, 1, 2), jnp.swapaxes(p.k, 1, 2), jnp.swapaxes(p.v, 1, 2),
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
                                  "varlen", "gqa", "strided"], ["fp16", "bf16", "fp32"], (1, 512, 1), "nan"),
    _declare("py.jax.cudnn", _cudnn, ["causal_top_left", "window", "varlen", "gqa", "strided"], ["fp16", "bf16"],
             (8, 128, 8), "zero"),
]
