"""Kernels for the bridge's tests (tests/kernels/python_bridge_test.cpp):
the numpy reference, a planted defect, and the failure modes a Python kernel
has: it raises, it kills its process, it never returns, it declines."""

import ctypes

import attnfuzz
from attnfuzz.kernels import numpy_reference

reference = numpy_reference.kernel


def _causal_one_late(p):
    # The defect: the window's right edge one key too far (j <= i + offset + 1
    # under causal masking): the query sees its first future key.
    numpy_reference.attention(p, right_extra=1)


planted = numpy_reference.declare("py.test.causal_off_by_one", _causal_one_late,
                                  "numpy reference with a planted causal off-by-one")


def _raise(p):
    raise ValueError("planted failure in a Python kernel")


def _segfault(p):
    ctypes.string_at(0)  # reads address 0: SIGSEGV in the worker


def _spin(p):
    while True:
        pass


def _decline(p):
    raise attnfuzz.Unsupported("this kernel declines every problem")


def _noop(p):
    return None  # the bridge's own cost, for the benchmark


raises = numpy_reference.declare("py.test.raises", _raise, "raises ValueError")
segfaults = numpy_reference.declare("py.test.segfaults", _segfault, "dereferences address 0")
hangs = numpy_reference.declare("py.test.hangs", _spin, "never returns")
declines = numpy_reference.declare("py.test.declines", _decline, "declines at run time")
noop = numpy_reference.declare("py.test.noop", _noop, "writes nothing")
faulty = [raises, segfaults, hangs]



# The same through torch views (DLPack); where torch is missing it declines.
def _noop_torch(p):
    try:
        import torch  # noqa: F401
    except ImportError:
        raise attnfuzz.Unsupported("torch is not importable")


noop_torch = numpy_reference.declare("py.test.noop_torch", _noop_torch, "writes nothing (torch views)",
                                     tensors="torch")
