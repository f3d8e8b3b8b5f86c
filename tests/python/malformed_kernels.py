"""Malformed declarations, one per attribute, each made only when the test
names it (module __getattr__): a module-level mistake would hide the rest.
MALFORMED maps the attribute to the declaration's fields."""

import attnfuzz
from attnfuzz.kernels import numpy_reference


def _fields(**change):
    base = dict(caps=dict(flags=["lse"], in_dtypes=["fp16"], out_dtypes=["fp16"], min_head_dim=1,
                          max_head_dim=256),
                precision=dict(score_dtype="fp32", p_dtype="of_v", acc_dtype="fp32", exp_ulps=1,
                               flush_subnormals=0, l_from_unrounded_p=1),
                conventions=dict(masked_row_output="zero", empty_lse="-inf"))
    for path, value in change.items():
        group, _, field = path.partition("__")
        if field:
            base[group] = dict(base[group])
            if value is None:
                del base[group][field]
            else:
                base[group][field] = value
        else:
            base[group] = value
    return base


MALFORMED = {
    "unknown_flag": dict(_fields(caps__flags=["casual_top_left"])),
    "missing_precision": dict(_fields(precision__exp_ulps=None)),
    "bad_dtype": dict(_fields(caps__in_dtypes=["fp64"])),
    "unknown_field": dict(_fields(conventions__masked_rows="zero")),
    "bad_head_dims": dict(_fields(caps__max_head_dim=0)),
    "bad_convention": dict(_fields(conventions__empty_lse="zero")),
    "gpu_flag": dict(_fields(caps__flags=["gpu"])),
}


def __getattr__(name):
    if name == "not_a_kernel":
        return 42
    if name == "bad_name":
        return attnfuzz.Kernel("has space", numpy_reference.attention, **_fields())
    if name not in MALFORMED:
        raise AttributeError(name)
    return attnfuzz.Kernel("py.test." + name, numpy_reference.attention, **MALFORMED[name])
