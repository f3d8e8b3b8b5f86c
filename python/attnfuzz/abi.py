"""The C ABI's names and numbers (kernels/abi/attnfuzz_kernel.h), as tables.

A Python declaration names every field as the C header does, minus the
AFZ_/AFZ_CAP_ prefixes and in lower case; this module maps those names to the
numbers the bridge sends to the harness.  Keep it in step with the header:
tests/kernels/python_bridge_test.cpp checks the numbers against it.
"""

# afz_dtype, by the names `attnfuzz kernels` prints (kernels/abi/dtype.cpp).
DTYPES = {"fp32": 0, "fp16": 1, "bf16": 2, "fp8e4m3": 3, "u8": 4}
DTYPE_COUNT = 5
# AFZ_P_DTYPE_OF_V: P is rounded to the dtype of V, whatever it is.
P_DTYPE_OF_V = "of_v"
DTYPE_NAMES = {number: name for name, number in DTYPES.items()}
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8e4m3": 1, "u8": 1}

# Capability flags (AFZ_CAP_*).  AFZ_CAP_GPU is not declarable: the bridge
# always hands the harness's host buffers over, and a kernel that wants the
# GPU says device="cuda" (the worker copies in and out, timed apart).
CAP_FLAGS = {
    "causal_top_left": 1 << 0,
    "causal_bottom_right": 1 << 1,
    "window": 1 << 2,
    "bool_mask": 1 << 3,
    "add_mask": 1 << 4,
    "varlen": 1 << 5,
    "gqa": 1 << 6,
    "softcap": 1 << 7,
    "lse": 1 << 8,
    "strided": 1 << 9,
    "dv_ne_d": 1 << 10,
    "nondeterministic": 1 << 12,
}

MASKED_ROW_OUTPUT = {"zero": 0, "nan": 1}
EMPTY_LSE = {"-inf": 0, "+inf": 1, "nan": 2}

ALIGN_NAMES = {0: "top_left", 1: "bottom_right"}
