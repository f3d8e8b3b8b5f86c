"""The problem a kernel receives: the afz_problem's fields by their C names,
its tensors as views on the harness's buffers (shared memory), keeping
their strides, padding and layout.

Tensors are [batch][head][seq][dim] (masks [b][h][i][j], the LSE
[b][heads_q][i]); positions past seqlens_q[b] / seqlens_k[b] are padding that
a kernel must neither read (it holds NaN) nor write.  Absent tensors (no
mask, no LSE) are None.  `dtypes` maps each tensor to its ABI dtype name.

numpy: fp32 / fp16 arrays as such, bf16 as uint16 bits (attnfuzz.dtypes
decodes and rounds them), masks as uint8.  torch: the same memory through
DLPack (bf16 as torch.bfloat16), or with device="cuda" device copies of each
tensor's whole span with the same strides.  jax: dense device arrays of the
logical shape (JAX has no strides), bf16 as jnp.bfloat16.
"""

import importlib
import time

import numpy as np

from . import abi, dtypes, protocol
from .declaration import Unsupported


def _library(module, tensors):
    """The library a kernel's tensors need; a kernel whose library is missing
    declines (unsupported, with the reason), it does not fail."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise Unsupported(f"tensors='{tensors}' needs {module}, which does not import here: {e}") from None


class Problem:
    def __init__(self, fields, seqlens_q, seqlens_k, tensors, dtype_names):
        for name, value in fields.items():
            setattr(self, name, value)
        self.seqlens_q = seqlens_q
        self.seqlens_k = seqlens_k
        self.dtypes = dtype_names
        for name in protocol.SLOTS:
            setattr(self, name, tensors.get(name))

    @property
    def causal(self):
        return bool(self.has_window) and self.window_left < 0 and self.window_right == 0

    def offset(self, b):
        """The alignment offset of sequence b: key j is visible to query i iff
        i + offset - window_left <= j <= i + offset + window_right."""
        if self.align == "bottom_right":
            return int(self.seqlens_k[b]) - int(self.seqlens_q[b])
        return 0

    def __repr__(self):
        return (f"Problem(batch={self.batch}, heads={self.heads_q}/{self.heads_kv}, d={self.head_dim}/"
                f"{self.head_dim_v}, seqlens_q={list(self.seqlens_q)}, seqlens_k={list(self.seqlens_k)})")


def parse_request(frame, shared):
    """(kernel index, shared memory size, Problem with numpy views) from a
    request frame; `shared(size)` returns the mapped buffer of that size."""
    head = protocol.REQUEST_HEAD.unpack_from(frame, 0)
    (magic, index, shm_size, batch, heads_q, heads_kv, head_dim, head_dim_v, max_sq, max_sk, scale,
     softcap, window_left, window_right, has_window, align) = head
    if magic != protocol.REQUEST_MAGIC:
        raise ValueError("not a request frame")
    at = protocol.REQUEST_HEAD.size
    seqlens_q = np.frombuffer(frame, dtype=np.int32, count=batch, offset=at).copy()
    at += 4 * batch
    seqlens_k = np.frombuffer(frame, dtype=np.int32, count=batch, offset=at).copy()
    at += 4 * batch
    buf = shared(shm_size)
    tensors, names = {}, {}
    for slot in protocol.SLOTS:
        present, dtype, *rest = protocol.SLOT.unpack_from(frame, at)
        at += protocol.SLOT.size
        if not present:
            continue
        shape, strides, offset = rest[0:4], rest[4:8], rest[8]
        name = abi.DTYPE_NAMES[dtype]
        storage = np.dtype(dtypes.storage_dtype(name))
        if slot == "lse":  # [1][b][h][i] on the wire
            shape, strides = shape[1:], strides[1:]
        tensors[slot] = np.ndarray(shape, dtype=storage, buffer=buf, offset=offset,
                                   strides=tuple(s * storage.itemsize for s in strides))
        names[slot] = name
    fields = dict(batch=batch, heads_q=heads_q, heads_kv=heads_kv, head_dim=head_dim,
                  head_dim_v=head_dim_v, max_seqlen_q=max_sq, max_seqlen_k=max_sk, scale=scale,
                  softcap=softcap, window_left=window_left, window_right=window_right,
                  has_window=has_window, align=abi.ALIGN_NAMES.get(align, "top_left"))
    return index, Problem(fields, seqlens_q, seqlens_k, tensors, names)


def default_shape_key(p):
    """What a compiler specializes on: dtypes, shapes and strides of every
    tensor, and the masking scalars (a window size is a Python constant in a
    mask function).  Sequence lengths and scale are data, not part of it."""
    tensors = tuple((name, p.dtypes.get(name), None if t is None else (t.shape, t.strides))
                    for name in protocol.SLOTS for t in [getattr(p, name)])
    return (tensors, p.has_window, p.window_left, p.window_right, p.align, p.softcap != 0)


class Staged:
    """The problem as the kernel sees it (numpy, torch or jax tensors) and how
    its outputs get back to the shared buffers.  Times the copies apart."""

    def __init__(self, kernel, problem):
        self.kernel, self.problem = kernel, problem
        self.copy_in_s = self.copy_out_s = 0.0
        self.device_outputs = {}
        if kernel.tensors == "numpy":
            self.view = problem
        elif kernel.tensors == "torch":
            self.view = self._torch(problem, kernel.device)
        else:
            self.view = self._jax(problem)

    def _clone(self, tensors):
        p = self.problem
        fields = {k: v for k, v in vars(p).items() if k not in protocol.SLOTS}
        out = Problem.__new__(Problem)
        out.__dict__.update(fields)
        for name in protocol.SLOTS:
            setattr(out, name, tensors.get(name))
        return out

    def _torch(self, p, device):
        torch = _library("torch", "torch")
        if device == "cuda" and not torch.cuda.is_available():
            raise Unsupported("device='cuda': torch finds no CUDA device")
        kinds = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "u8": torch.uint8}
        t0 = time.perf_counter()
        tensors = {}
        for name in protocol.SLOTS:
            a = getattr(p, name)
            if a is None:
                continue
            dtype = p.dtypes[name]
            # int16 carries bf16 bits through DLPack (torch has no uint16 everywhere).
            host = torch.from_dlpack(a.view(np.int16) if dtype == "bf16" else a)
            if dtype == "bf16":
                host = host.view(torch.bfloat16)
            if device == "cpu":
                tensors[name] = host
                continue
            tensors[name] = _device_copy(torch, a, host, kinds[dtype], device)
            if name in protocol.OUTPUT_SLOTS:
                self.device_outputs[name] = tensors[name]
        if device != "cpu":
            torch.cuda.synchronize()
        self.copy_in_s = time.perf_counter() - t0
        return self._clone(tensors)

    def _jax(self, p):
        jax = _library("jax", "jax")
        jnp = _library("jax.numpy", "jax")
        t0 = time.perf_counter()
        tensors = {}
        for name in protocol.SLOTS:
            a = getattr(p, name)
            if a is None or name in protocol.OUTPUT_SLOTS:
                continue
            dense = np.ascontiguousarray(a)
            if p.dtypes[name] == "bf16":
                dense = dense.view(jnp.bfloat16)
            tensors[name] = jax.device_put(dense).block_until_ready()
        self.copy_in_s = time.perf_counter() - t0
        return self._clone(tensors)

    def sync(self):
        """Waits for the device, so that the call's time is the kernel's."""
        if self.kernel.device == "cuda" and self.kernel.tensors == "torch":
            import torch
            torch.cuda.synchronize()

    def finish(self, result):
        """Writes a returned o / (o, lse) into the valid rows, then brings
        device outputs home."""
        t0 = time.perf_counter()
        if result is not None:
            if isinstance(result, tuple) and len(result) != 2:
                raise TypeError(f"a kernel returns None, o, or (o, lse); got a tuple of {len(result)}")
            o, lse = result if isinstance(result, tuple) else (result, None)
            self._store("o", o)
            if lse is not None:
                self._store("lse", lse)
        for name, dev in self.device_outputs.items():
            host = getattr(self.problem, name)
            _copy_span_home(dev, host)
        self.copy_out_s = time.perf_counter() - t0

    def _store(self, name, value):
        p = self.problem
        if getattr(p, name) is None:  # no LSE asked for
            return
        if self.kernel.tensors == "torch":
            target = getattr(self.view, name)
            for b in range(p.batch):
                n = int(p.seqlens_q[b])
                target[b, :, :n].copy_(value[b, :, :n])
            return
        values = np.asarray(value)
        host = getattr(p, name)
        dtype = p.dtypes[name]
        for b in range(p.batch):
            n = int(p.seqlens_q[b])
            rows = values[b, :, :n]
            if dtype == "bf16" and rows.dtype.itemsize == 2 and rows.dtype.kind not in "iu":
                if rows.dtype != np.float16:  # a bfloat16 array (ml_dtypes): its bits as they are
                    host[b, :, :n] = rows.view(np.uint16)
                    continue
            host[b, :, :n] = dtypes.from_float(rows, dtype) if dtype != "u8" else rows


def _device_copy(torch, array, host, kind, device):
    """A device tensor with the strides of `array` over a copy of its whole
    span (padding, gaps and poison included)."""
    lo, hi = _span_elements(array)
    count = hi - lo
    if count == 0:
        return torch.empty(array.shape, dtype=kind, device=device)
    base = host.as_strided((count,), (1,), host.storage_offset() + lo)
    flat = base.to(device)
    return flat.as_strided(array.shape, [s // array.itemsize for s in array.strides], -lo)


def _copy_span_home(device_tensor, array):
    import torch
    lo, hi = _span_elements(array)
    if hi == lo:
        return
    host = torch.from_dlpack(array.view(np.int16) if array.dtype == np.uint16 else array)
    host_flat = host.as_strided((hi - lo,), (1,), host.storage_offset() + lo)
    dev_flat = device_tensor.as_strided((hi - lo,), (1,), device_tensor.storage_offset() + lo)
    host_flat.copy_(dev_flat.view(host_flat.dtype) if dev_flat.dtype != host_flat.dtype else dev_flat)


def _span_elements(array):
    """[lo, hi) in elements relative to array[0,0,0,0] that its strides reach."""
    if array.size == 0:
        return 0, 0
    lo, hi = 0, 1
    for n, s in zip(array.shape, array.strides):
        reach = (n - 1) * (s // array.itemsize)
        if reach < 0:
            lo += reach
        else:
            hi += reach
    return lo, hi
