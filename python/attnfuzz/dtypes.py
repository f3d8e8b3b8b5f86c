"""numpy has no bfloat16: the bridge shows bf16 tensors to numpy kernels as
their raw uint16 bits, and these helpers decode and round them."""

import numpy as np

from . import abi

# How a tensor of each ABI dtype appears to numpy (bf16: its bits).
NUMPY_STORAGE = {"fp32": np.float32, "fp16": np.float16, "bf16": np.uint16, "u8": np.uint8,
                 "fp8e4m3": np.uint8}

F32_SIGN_ROUND = np.uint32(0x7FFF)  # round-to-nearest-even carry for the 16 dropped bits
BF16_SHIFT = 16


def to_float(array, dtype):
    """The values of a tensor of ABI dtype `dtype` as float32 (exact: every
    fp16 and bf16 value is a float32)."""
    if dtype == "bf16":
        return (array.astype(np.uint32) << BF16_SHIFT).view(np.float32)
    if dtype in ("fp32", "fp16"):
        return array.astype(np.float32)
    raise TypeError(f"no float decoding for dtype {dtype}")


def _round_to_odd_f32(values):
    """float64 -> float32 rounding to odd: an inexact result gets its last bit
    set, so that a second rounding to a narrower format is correct (the
    classic double-rounding fix; float32 has 16 more bits than bf16)."""
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        near = values.astype(np.float32)
        inexact = np.isfinite(near) & (near.astype(np.float64) != values)
    bits = near.view(np.uint32).copy()
    even = (bits & 1) == 0
    fix = inexact & even
    # Step one ulp toward the exact value: up in magnitude when |exact| > |near|.
    away = np.abs(values) > np.abs(near.astype(np.float64))
    bits[fix & away] += 1
    bits[fix & ~away] -= 1
    return bits.view(np.float32)


def from_float(values, dtype):
    """float values (any precision) rounded to nearest-even in ABI dtype
    `dtype`, as the numpy storage of that dtype."""
    if dtype == "fp32":
        return np.asarray(values, dtype=np.float64).astype(np.float32)
    if dtype == "fp16":
        # numpy converts float64 straight to half with one correct rounding.
        with np.errstate(over="ignore"):
            return np.asarray(values, dtype=np.float64).astype(np.float16)
    if dtype == "bf16":
        bits = _round_to_odd_f32(values).view(np.uint32)
        nan = (bits & 0x7FFFFFFF) > 0x7F800000
        rounded = ((bits + F32_SIGN_ROUND + ((bits >> BF16_SHIFT) & 1)) >> BF16_SHIFT).astype(np.uint16)
        rounded[nan] = ((bits[nan] >> BF16_SHIFT) | 0x40).astype(np.uint16)  # stays a (quiet) NaN
        return rounded
    raise TypeError(f"cannot store floats as dtype {dtype}")


def storage_dtype(dtype):
    if dtype not in NUMPY_STORAGE:
        raise TypeError(f"unknown dtype {dtype} (known: {', '.join(abi.DTYPES)})")
    return NUMPY_STORAGE[dtype]
