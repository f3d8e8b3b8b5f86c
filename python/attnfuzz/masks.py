"""Which keys each query sees, as the ABI defines it: sequence lengths, the
causal / sliding window in its alignment, and the boolean mask."""

import numpy as np


def window_visible(p, b, right_extra=0):
    """[seqlens_q[b], seqlens_k[b]] booleans of the window alone (all True
    without one).  right_extra widens the right edge: a test's planted defect."""
    sq, sk = int(p.seqlens_q[b]), int(p.seqlens_k[b])
    i = np.arange(sq)[:, None]
    j = np.arange(sk)[None, :]
    visible = np.ones((sq, sk), dtype=bool)
    if p.has_window:
        centre = i + p.offset(b)
        if p.window_left >= 0:
            visible &= j >= centre - p.window_left
        if p.window_right >= 0:
            visible &= j <= centre + p.window_right + right_extra
    return visible


def visible(p, b, right_extra=0):
    """[heads_q, seqlens_q[b], seqlens_k[b]] booleans: window and boolean mask."""
    sq, sk = int(p.seqlens_q[b]), int(p.seqlens_k[b])
    out = np.broadcast_to(window_visible(p, b, right_extra), (p.heads_q, sq, sk)).copy()
    if p.bool_mask is not None:
        part = p.bool_mask[b, :, :sq, :sk]
        if hasattr(part, "cpu"):  # a torch tensor, maybe on the device
            part = part.cpu().numpy()
        out &= np.asarray(part) != 0
    return out
