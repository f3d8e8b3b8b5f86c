"""The Python worker: `python3 -m attnfuzz.worker --sock N --shm M --target SPEC`.

Started by the harness's plugin (kernels/python), one per harness thread and
kernel module.  It imports SPEC once, sends the kernels' declarations, then
serves one case per request until its socket closes.  The protocol is in
PROTOCOL.md; the plugin turns a worker that dies into a crash verdict and one
that does not answer in time into a hang verdict (and starts a new one).
"""

import argparse
import mmap
import os
import socket
import sys
import time
import traceback

from . import protocol
from .declaration import DeclarationError, Unsupported
from .problem import Staged, parse_request
from .target import load_target

# Library versions worth naming in reports, when the kernel module loaded them.
VERSIONED_MODULES = ("numpy", "torch", "triton", "jax", "jaxlib")
# Exceptions that leave a CUDA context unusable: the worker exits after the reply.
FATAL_MARKERS = ("CUDA error", "illegal memory access", "CUDA_ERROR", "cudaError", "misaligned address")
MESSAGE_MAX = 400


def one_line(text):
    text = " ".join(str(text).split())
    return text if len(text) <= MESSAGE_MAX else text[:MESSAGE_MAX - 3] + "..."


def describe_exception(e):
    where = ""
    tb = traceback.extract_tb(e.__traceback__)
    if tb:
        frame = tb[-1]
        where = f" (at {os.path.basename(frame.filename)}:{frame.lineno} in {frame.name})"
    return one_line(f"{type(e).__name__}: {e}") + where


def library_version():
    parts = [f"Python {sys.version.split()[0]}"]
    for name in VERSIONED_MODULES:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__version__", None):
            parts.append(f"{name} {module.__version__}")
    return ", ".join(parts)


class Channel:
    def __init__(self, fd):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=fd)

    def send(self, payload):
        self.sock.sendall(protocol.FRAME_HEADER.pack(len(payload)) + payload)

    def _exact(self, n):
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if k == 0:
                return None
            got += k
        return buf

    def receive(self):
        head = self._exact(protocol.FRAME_HEADER.size)
        if head is None:
            return None
        (n,) = protocol.FRAME_HEADER.unpack(head)
        return self._exact(n)


class SharedMemory:
    """The plugin's memfd, mapped again whenever the plugin grew it."""

    def __init__(self, fd):
        self.fd, self.size, self.map = fd, 0, None

    def __call__(self, size):
        if size != self.size:
            # The old map is dropped, not closed: a kernel may still hold a view.
            self.map = mmap.mmap(self.fd, size)
            self.size = size
        return self.map


def serve(channel, shared, kernels):
    seen = [set() for _ in kernels]
    while True:
        frame = channel.receive()
        if frame is None:
            return 0
        index, problem = parse_request(frame, shared)
        kernel = kernels[index]
        status, message, call_s, first = protocol.OK, "", 0.0, False
        staged = None
        try:
            staged = Staged(kernel, problem)
            # Only kernels compiled per shape say how shapes group; for the
            # rest no call is a compilation.
            key = kernel.shape_key(problem) if kernel.shape_key else None
            first = kernel.shape_key is not None and key not in seen[index]
            t0 = time.perf_counter()
            result = kernel.fn(staged.view)
            staged.sync()
            call_s = time.perf_counter() - t0
            seen[index].add(key)
            if isinstance(result, Unsupported):
                raise result
            staged.finish(result)
        except Unsupported as e:
            status, message = protocol.UNSUPPORTED, one_line(e) or "declined (no reason given)"
        except Exception as e:  # the kernel's failure, whatever it is
            message = describe_exception(e)
            status = protocol.FATAL if any(m in message for m in FATAL_MARKERS) else protocol.EXCEPTION
        copy_in = staged.copy_in_s if staged else 0.0
        copy_out = staged.copy_out_s if staged else 0.0
        channel.send(protocol.reply(status, message, call_s, copy_in, copy_out, first))
        del staged, problem
        if status == protocol.FATAL:
            return 3


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m attnfuzz.worker")
    ap.add_argument("--sock", type=int, required=True)
    ap.add_argument("--shm", type=int, required=True)
    ap.add_argument("--target", required=True)
    args = ap.parse_args(argv)
    # Kernels print as they like; our stdout is the harness's, keep it clean.
    os.dup2(2, 1)
    channel = Channel(args.sock)
    try:
        kernels = load_target(args.target)
    except DeclarationError as e:
        channel.send(protocol.hello_error(one_line(e)))
        return 2
    except Exception as e:
        channel.send(protocol.hello_error(f"{args.target}: cannot load: {describe_exception(e)}"))
        return 2
    channel.send(protocol.hello_ok(library_version(), kernels))
    return serve(channel, SharedMemory(args.shm), kernels)


if __name__ == "__main__":
    sys.exit(main())
