"""Finding the kernels a `--kernel-lib libattnfuzz_python.so#SPEC` names.

SPEC is `module:name` (an importable module) or `path/to/file.py:name` (a
file, loaded under its own name); `name` is an attnfuzz.Kernel or a list of
them in that module."""

import importlib
import importlib.util
import os
import sys

from .declaration import DeclarationError, as_kernel_list


def _load_file(path):
    if not os.path.isfile(path):
        raise DeclarationError(f"{path}: no such file")
    module_name = "attnfuzz_target_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look modules up by name
    # The file's folder is importable, as for `python3 file.py`.
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(module)
    return module


def load_target(spec):
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise DeclarationError(f"'{spec}': expected module:name or path/to/file.py:name")
    module = _load_file(where) if where.endswith(".py") or os.sep in where else importlib.import_module(where)
    if not hasattr(module, name):
        raise DeclarationError(f"'{spec}': {where} has no attribute '{name}'")
    return as_kernel_list(getattr(module, name), f"'{spec}'")
