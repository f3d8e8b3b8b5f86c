# Public-API repros of two findings of the first H200 campaign over the torch.* kernels (run by hand
# on a GPU machine: python3 tests/kernels/torch/sdpa_public_repro.py; not part of the test suite).
# The campaign found them through the private operators (kernels/torch/README.md); this checks whether
# the public F.scaled_dot_product_attention hits them too (not yet run).
# cuDNN: rows of 8 elements each followed by 17 NaN (row stride 25): O came back NaN.
# FlashAttention-2: a row stride that is not a multiple of 8 elements: cudaErrorMisalignedAddress.
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
def gapped(s, d, gap, dt=torch.bfloat16):
    base = torch.full((1, 1, s, d + gap), float('nan'), device='cuda', dtype=dt)
    base[..., :d] = torch.randn(1, 1, s, d, device='cuda', dtype=dt)
    return base[..., :d]
q = gapped(2, 8, 17); k = gapped(1, 8, 17); v = gapped(1, 8, 17)
# The reference by the math backend on contiguous fp32 copies (the fused fp32 kernels refuse these shapes).
with sdpa_kernel([SDPBackend.MATH]):
    ref = F.scaled_dot_product_attention(q.float().contiguous(), k.float().contiguous(), v.float().contiguous())
try:
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        o = F.scaled_dot_product_attention(q, k, v)
    torch.cuda.synchronize()
    print('cudnn row stride 25: nan in O:', bool(o.isnan().any()), 'max err', (o.float() - ref).abs().nan_to_num(99).max().item())
except Exception as e:
    print('cudnn:', str(e).splitlines()[0])
q = gapped(64, 64, 3); k = gapped(64, 64, 3); v = gapped(64, 64, 3)
try:
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        o = F.scaled_dot_product_attention(q, k, v)
    torch.cuda.synchronize()
    print('flash row stride 67: ok, nan', bool(o.isnan().any()))
except Exception as e:
    print('flash row stride 67:', str(e).splitlines()[0])
