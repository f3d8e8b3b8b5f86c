"""Declaring a Python function as an attnfuzz kernel.

    kernel = attnfuzz.Kernel(
        name="py.mine", fn=my_attention, description="...",
        caps=dict(flags=["causal_top_left", "varlen", "lse"], in_dtypes=["fp16"],
                  out_dtypes=["fp16"], min_head_dim=16, max_head_dim=256),
        precision=dict(score_dtype="fp32", p_dtype="of_v", acc_dtype="fp32", exp_ulps=2,
                       flush_subnormals=0, l_from_unrounded_p=1),
        conventions=dict(masked_row_output="zero", empty_lse="-inf"))

The fields are the C ABI's (afz_caps, afz_precision, afz_conventions), by
name.  Precision and conventions have no defaults: the error bound is derived
from them, so a kernel must say what it does.  Every mistake is one line,
raised as DeclarationError when the declaration is made, naming the kernel
and the field.
"""

import math
import numbers

from . import abi

# Where the callable's tensors live and what they are (see problem.py).
TENSOR_KINDS = ("numpy", "torch", "jax")
DEVICES = ("cpu", "cuda")

CAPS_REQUIRED = ("flags", "in_dtypes", "out_dtypes", "min_head_dim", "max_head_dim")
CAPS_DEFAULTS = {"head_dim_multiple": 1, "max_seqlen": 0}
PRECISION_FIELDS = ("score_dtype", "p_dtype", "acc_dtype", "exp_ulps", "flush_subnormals",
                    "l_from_unrounded_p")
CONVENTION_FIELDS = ("masked_row_output", "empty_lse")
NAME_MAX = 200


class DeclarationError(ValueError):
    """A malformed kernel declaration; str() is one line."""


class Unsupported(Exception):
    """Raise (or return) from a kernel to decline a problem at run time: an
    `unsupported` verdict with this reason, never a failure."""


def _fail(kernel, field, why):
    raise DeclarationError(f"kernel '{kernel}': {field}: {why}")


def _one_line(text):
    return " ".join(str(text).split())


def _check_keys(kernel, group, given, allowed):
    if not isinstance(given, dict):
        _fail(kernel, group, f"expected a dict of fields, got {type(given).__name__}")
    for key in given:
        if key not in allowed:
            _fail(kernel, f"{group}.{key}", f"unknown field (fields: {', '.join(allowed)})")


def _dtype_mask(kernel, field, names):
    if isinstance(names, str) or not hasattr(names, "__iter__"):
        _fail(kernel, field, "expected a list of dtype names")
    mask = 0
    for n in names:
        if n not in abi.DTYPES:
            _fail(kernel, field, f"unknown dtype '{n}' (dtypes: {', '.join(abi.DTYPES)})")
        mask |= 1 << abi.DTYPES[n]
    if mask == 0:
        _fail(kernel, field, "no dtype given")
    return mask


def _int_field(kernel, field, value, lo):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        _fail(kernel, field, f"expected an integer, got {value!r}")
    if value < lo:
        _fail(kernel, field, f"{value} is below {lo}")
    return int(value)


def _flag(kernel, field, value):
    if value not in (0, 1) or isinstance(value, float):
        _fail(kernel, field, f"expected 0 or 1 (or a bool), got {value!r}")
    return int(value)


def _choice(kernel, field, value, table):
    if value not in table:
        _fail(kernel, field, f"'{value}' is not one of {', '.join(table)}")
    return table[value]


class Kernel:
    """A callable with its capabilities, precision model and conventions.

    fn(problem) gets a Problem (problem.py) and either writes problem.o (and
    problem.lse) in place and returns None, or returns o or (o, lse) arrays of
    the logical shapes, of which the bridge copies the valid rows.  Raising
    Unsupported declines the problem; any other exception is the kernel's
    failure (a crash verdict with the exception as its detail).

    tensors: "numpy" (views on the harness's shared buffers), "torch" (the
    same through DLPack, or device copies with device="cuda"), "jax" (device
    arrays, dense: JAX has no strides).  A kernel compiled per shape
    (torch.compile, Triton, jax.jit) passes shape_key(problem) -> hashable,
    which says which calls share a compiled program (attnfuzz.shape_key:
    dtypes, shapes, strides and the masking scalars); the first call of each
    key is timed apart, as compilation.
    """

    def __init__(self, name, fn, *, caps, precision, conventions, description="",
                 tensors="numpy", device="cpu", shape_key=None):
        if not isinstance(name, str) or not name or len(name) > NAME_MAX or any(c.isspace() for c in name):
            raise DeclarationError(f"kernel {name!r}: name: expected a non-empty name without spaces, "
                                   f"at most {NAME_MAX} characters")
        self.name = name
        if not callable(fn):
            _fail(name, "fn", f"not callable ({type(fn).__name__})")
        self.fn = fn
        if not isinstance(description, str):
            _fail(name, "description", "expected a string")
        self.description = _one_line(description)
        self.tensors = tensors
        if tensors not in TENSOR_KINDS:
            _fail(name, "tensors", f"'{tensors}' is not one of {', '.join(TENSOR_KINDS)}")
        if device not in DEVICES:
            _fail(name, "device", f"'{device}' is not one of {', '.join(DEVICES)}")
        if tensors == "numpy" and device != "cpu":
            _fail(name, "device", "numpy arrays live on the host: device must be 'cpu'")
        self.device = device
        if shape_key is not None and not callable(shape_key):
            _fail(name, "shape_key", "not callable")
        self.shape_key = shape_key
        self.caps = self._caps(caps)
        self.precision = self._precision(precision)
        self.conventions = self._conventions(conventions)

    def _caps(self, caps):
        n = self.name
        _check_keys(n, "caps", caps, CAPS_REQUIRED + tuple(CAPS_DEFAULTS))
        for key in CAPS_REQUIRED:
            if key not in caps:
                _fail(n, f"caps.{key}", "missing")
        flags = caps["flags"]
        if isinstance(flags, str) or not hasattr(flags, "__iter__"):
            _fail(n, "caps.flags", "expected a list of flag names")
        mask = 0
        for f in flags:
            if f == "gpu":
                _fail(n, "caps.flags", "'gpu' is not declared: say device='cuda' (the bridge copies)")
            if f not in abi.CAP_FLAGS:
                _fail(n, "caps.flags", f"unknown flag '{f}' (flags: {', '.join(abi.CAP_FLAGS)})")
            mask |= abi.CAP_FLAGS[f]
        out = {"flags": mask,
               "in_dtypes": _dtype_mask(n, "caps.in_dtypes", caps["in_dtypes"]),
               "out_dtypes": _dtype_mask(n, "caps.out_dtypes", caps["out_dtypes"])}
        out["min_head_dim"] = _int_field(n, "caps.min_head_dim", caps["min_head_dim"], 1)
        out["max_head_dim"] = _int_field(n, "caps.max_head_dim", caps["max_head_dim"], 1)
        if out["max_head_dim"] < out["min_head_dim"]:
            _fail(n, "caps.max_head_dim", f"{out['max_head_dim']} is below min_head_dim {out['min_head_dim']}")
        out["head_dim_multiple"] = _int_field(n, "caps.head_dim_multiple",
                                              caps.get("head_dim_multiple", CAPS_DEFAULTS["head_dim_multiple"]), 1)
        out["max_seqlen"] = _int_field(n, "caps.max_seqlen", caps.get("max_seqlen", CAPS_DEFAULTS["max_seqlen"]), 0)
        return out

    def _precision(self, precision):
        n = self.name
        _check_keys(n, "precision", precision, PRECISION_FIELDS)
        for key in PRECISION_FIELDS:
            if key not in precision:
                _fail(n, f"precision.{key}", "missing (precision fields have no defaults: the bound is "
                                             "derived from them)")
        float_dtypes = {k: v for k, v in abi.DTYPES.items() if k != "u8"}
        p_dtypes = dict(float_dtypes, **{abi.P_DTYPE_OF_V: abi.DTYPE_COUNT})
        ulps = precision["exp_ulps"]
        if isinstance(ulps, bool) or not isinstance(ulps, numbers.Real) or not math.isfinite(ulps) or ulps < 0:
            _fail(n, "precision.exp_ulps", f"expected a finite number >= 0, got {ulps!r}")
        return {"score_dtype": _choice(n, "precision.score_dtype", precision["score_dtype"], float_dtypes),
                "p_dtype": _choice(n, "precision.p_dtype", precision["p_dtype"], p_dtypes),
                "acc_dtype": _choice(n, "precision.acc_dtype", precision["acc_dtype"], float_dtypes),
                "exp_ulps": float(ulps),
                "flush_subnormals": _flag(n, "precision.flush_subnormals", precision["flush_subnormals"]),
                "l_from_unrounded_p": _flag(n, "precision.l_from_unrounded_p", precision["l_from_unrounded_p"])}

    def _conventions(self, conventions):
        n = self.name
        _check_keys(n, "conventions", conventions, CONVENTION_FIELDS)
        for key in CONVENTION_FIELDS:
            if key not in conventions:
                _fail(n, f"conventions.{key}", "missing")
        return {"masked_row_output": _choice(n, "conventions.masked_row_output",
                                             conventions["masked_row_output"], abi.MASKED_ROW_OUTPUT),
                "empty_lse": _choice(n, "conventions.empty_lse", conventions["empty_lse"], abi.EMPTY_LSE)}

    def has(self, flag):
        return bool(self.caps["flags"] & abi.CAP_FLAGS[flag])

    def __repr__(self):
        return f"attnfuzz.Kernel({self.name!r}, tensors={self.tensors!r}, device={self.device!r})"


def kernel(name, **fields):
    """Decorator form: @attnfuzz.kernel("py.mine", caps=..., precision=..., conventions=...)."""
    def wrap(fn):
        return Kernel(name, fn, **fields)
    return wrap


def as_kernel_list(obj, where):
    """A Kernel or a non-empty sequence of Kernels with distinct names."""
    kernels = [obj] if isinstance(obj, Kernel) else obj
    if isinstance(kernels, (str, bytes)) or not hasattr(kernels, "__iter__"):
        raise DeclarationError(f"{where}: expected an attnfuzz.Kernel or a list of them, "
                               f"got {type(obj).__name__}")
    kernels = list(kernels)
    if not kernels:
        raise DeclarationError(f"{where}: an empty list of kernels")
    seen = set()
    for k in kernels:
        if not isinstance(k, Kernel):
            raise DeclarationError(f"{where}: expected attnfuzz.Kernel items, got {type(k).__name__}")
        if k.name in seen:
            raise DeclarationError(f"{where}: duplicate kernel name '{k.name}'")
        seen.add(k.name)
    return kernels
