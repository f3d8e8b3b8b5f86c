"""attnfuzz's Python kernel bridge: declare an attention function with its
capabilities, precision model and conventions, and let attnfuzz fuzz it.

    attnfuzz --kernel-lib build/kernels/python/libattnfuzz_python.so#mymodule:kernel \\
        fuzz --kernel py.mine --time 60

See README.md beside this file; the wire protocol is in PROTOCOL.md."""

from .declaration import DeclarationError, Kernel, Unsupported, kernel
from .problem import default_shape_key as shape_key

__all__ = ["DeclarationError", "Kernel", "Unsupported", "kernel", "shape_key"]
__version__ = "0.1.0"
