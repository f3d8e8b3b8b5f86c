"""PyTorch's scaled_dot_product_attention through Python, one kernel per
backend (math, flash, efficient, cudnn), on the GPU.

A problem without ragged lengths, windows or pattern masks reaches SDPA as a
user writes it: no mask, is_causal, or causal_lower_right (native_mask);
the rest as one boolean attn_mask (seqlens, window, the boolean mask) or,
with an additive mask, a float mask: the fused backends
that take neither decline through torch's own error ("No available kernel"),
which the bridge reports as a crash unless caught: it is caught here and
turned into `unsupported` with torch's reason.  SDPA returns no LSE.

Precision, declared per backend: the fused backends compute scores in fp32
from fp16/bf16 inputs, round P to the input dtype for the P.V product and
keep fp32 statistics (FlashAttention-2's structure); exp is the GPU's exp2
with the scale folded in (within 2 ulps, subnormals flushed).  The math
backend computes in the input dtype's upcast (fp32 for fp16/bf16 on CUDA)
and softmaxes in fp32.  A fully masked row is NaN in the math backend
(0/0) and 0 elsewhere... when it runs at all: declared per backend below.

Run: --kernel-lib libattnfuzz_python.so#attnfuzz.kernels.sdpa:kernels
"""

import attnfuzz
from attnfuzz.kernels import torch_inputs

FLAGS = ["causal_top_left", "causal_bottom_right", "window", "bool_mask", "add_mask", "varlen", "gqa",
         "strided", "dv_ne_d"]
FUSED_PRECISION = dict(score_dtype="fp32", p_dtype="of_v", acc_dtype="fp32", exp_ulps=2, flush_subnormals=1,
                       l_from_unrounded_p=1)
MATH_PRECISION = dict(score_dtype="fp32", p_dtype="fp32", acc_dtype="fp32", exp_ulps=2, flush_subnormals=0,
                      l_from_unrounded_p=1)
# our name: (torch.nn.attention.SDPBackend member, dtypes, head dims (min, max, multiple), precision,
# a fully masked row's output)
BACKENDS = {
    # PyTorch >= 2.5's math backend softmaxes with _safe_softmax: a fully
    # masked row is 0, not 0/0 (seen on the H200, reports/python/README.md).
    "math": ("MATH", ["fp16", "bf16", "fp32"], (1, 512, 1), MATH_PRECISION, "zero"),
    "flash": ("FLASH_ATTENTION", ["fp16", "bf16"], (8, 256, 8), FUSED_PRECISION, "zero"),
    "efficient": ("EFFICIENT_ATTENTION", ["fp16", "bf16", "fp32"], (8, 512, 8), FUSED_PRECISION, "zero"),
    "cudnn": ("CUDNN_ATTENTION", ["fp16", "bf16"], (8, 128, 8), FUSED_PRECISION, "zero"),
}


def native_mask(torch, p):
    """(attn_mask, is_causal) the way a user calls SDPA when the problem needs
    no materialized mask: none at all, is_causal (top-left), or PyTorch's
    causal_lower_right bias (bottom-right); (False, False) when it does
    (ragged lengths, windows, pattern masks).  The fused backends take these
    natively, so flash runs at all (it takes no attn_mask tensor)."""
    full = all(int(s) == p.max_seqlen_q for s in p.seqlens_q) and all(int(s) == p.max_seqlen_k for s in p.seqlens_k)
    if not full or p.bool_mask is not None or p.add_mask is not None:
        return False, False
    if not p.has_window:
        return None, False
    if not (p.window_left < 0 and p.window_right == 0):
        return False, False
    if p.align == "top_left" or p.max_seqlen_q == p.max_seqlen_k:
        return None, True
    if p.heads_q != p.heads_kv:
        return False, False  # CausalBias takes no enable_gqa in PyTorch 2.11
    from torch.nn.attention.bias import causal_lower_right
    return causal_lower_right(p.max_seqlen_q, p.max_seqlen_k), False


def make(backend):
    def run(p):
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
        q, k, v = torch_inputs.inputs(p)
        mask, is_causal = native_mask(torch, p)
        if mask is False:
            mask = torch_inputs.visible_mask(torch, p, q.device)
            if p.add_mask is not None:
                bias = torch.where(mask, p.add_mask.float(), torch.tensor(float("-inf"), device=q.device))
                mask = bias.to(q.dtype)
                # SDPA takes a float mask in the query's dtype: a mask value
                # that dtype cannot hold (-1e4 in bf16 is -9984) would change
                # the problem, not test the kernel (seen on the H200 as
                # numeric mismatches of every backend, reports/python/README.md).
                if not torch.equal(mask.float(), bias):
                    raise attnfuzz.Unsupported(f"an additive mask value is not exact in {p.dtypes['q']}, "
                                               "the dtype SDPA takes the mask in")
        try:
            with sdpa_kernel(getattr(SDPBackend, member)):
                return torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, attn_mask=mask, is_causal=is_causal, scale=p.scale,
                    enable_gqa=p.heads_q != p.heads_kv)
        except RuntimeError as e:
            if "No available kernel" in str(e):
                raise attnfuzz.Unsupported(f"SDPA {backend}: " + str(e).split(".")[0]) from None
            raise
    member, dtypes, head_dims, precision, masked = BACKENDS[backend]
    return attnfuzz.Kernel(f"py.sdpa.{backend}", run, tensors="torch", device="cuda",
                           description=f"torch.nn.functional.scaled_dot_product_attention, {backend} backend",
                           shape_key=attnfuzz.shape_key,
                           **torch_inputs.declared(FLAGS, dtypes, head_dims, precision,
                                                   dict(masked_row_output=masked, empty_lse="-inf")))


kernels = [make(b) for b in BACKENDS]
