"""The bridge's wire format (PROTOCOL.md): frames on a Unix stream socket,
tensors in a shared memory file.  Both ends run on one machine, so numbers
travel in native byte order and alignment-free ('=' in struct terms)."""

import struct

VERSION = 1
HELLO_MAGIC = 0x41465A59    # "AFZY": worker -> plugin, once
REQUEST_MAGIC = 0x41465A51  # "AFZQ": plugin -> worker, one case
REPLY_MAGIC = 0x41465A41    # "AFZA": worker -> plugin, its result

# Reply status: what became of the call.
OK = 0
UNSUPPORTED = 1   # the kernel declined (attnfuzz.Unsupported): an `unsupported` verdict
EXCEPTION = 2     # the kernel raised: a crash verdict with the exception as detail
FATAL = 3         # as EXCEPTION, and the worker exits after replying (a CUDA error
                  # poisons the context): the plugin starts a fresh worker

# Tensor slots, in request order; the LSE is [1][b][h][i].
SLOTS = ("q", "k", "v", "bool_mask", "add_mask", "o", "lse")
OUTPUT_SLOTS = ("o", "lse")

FRAME_HEADER = struct.Struct("=I")
HELLO_HEAD = struct.Struct("=IIB")            # magic, version, ok
KERNEL_NUMBERS = struct.Struct("=IIIiiiiiiifiiii")
# flags, in_dtypes, out_dtypes, min_head_dim, max_head_dim, head_dim_multiple, max_seqlen,
# score_dtype, p_dtype, acc_dtype, exp_ulps, flush_subnormals, l_from_unrounded_p,
# masked_row_output, empty_lse
REQUEST_HEAD = struct.Struct("=IIQiiiiiiiffiiii")
# magic, kernel index, shared memory size, batch, heads_q, heads_kv, head_dim, head_dim_v,
# max_seqlen_q, max_seqlen_k, scale, softcap, window_left, window_right, has_window, align
SLOT = struct.Struct("=BB4q4qQ")  # present, dtype, shape, strides (elements), byte offset of [0,0,0,0]
REPLY_HEAD = struct.Struct("=IB")     # magic, status
REPLY_TAIL = struct.Struct("=dddB")   # call_s, copy_in_s, copy_out_s, first call of its shape key
STR_LEN = struct.Struct("=Q")  # a string: u64 length, UTF-8 bytes
COUNT = struct.Struct("=I")


def put_str(text):
    data = text.encode("utf-8", "replace")
    return STR_LEN.pack(len(data)) + data


def get_str(buf, at):
    (n,) = STR_LEN.unpack_from(buf, at)
    at += STR_LEN.size
    return bytes(buf[at:at + n]).decode("utf-8", "replace"), at + n


def hello_ok(library_version, kernels):
    out = [HELLO_HEAD.pack(HELLO_MAGIC, VERSION, 1), put_str(library_version),
           COUNT.pack(len(kernels))]
    for k in kernels:
        c, p, v = k.caps, k.precision, k.conventions
        out += [put_str(k.name), put_str(k.description),
                KERNEL_NUMBERS.pack(c["flags"], c["in_dtypes"], c["out_dtypes"], c["min_head_dim"],
                                    c["max_head_dim"], c["head_dim_multiple"], c["max_seqlen"],
                                    p["score_dtype"], p["p_dtype"], p["acc_dtype"], p["exp_ulps"],
                                    p["flush_subnormals"], p["l_from_unrounded_p"],
                                    v["masked_row_output"], v["empty_lse"])]
    return b"".join(out)


def hello_error(message):
    return HELLO_HEAD.pack(HELLO_MAGIC, VERSION, 0) + put_str(message)


def reply(status, message, call_s=0.0, copy_in_s=0.0, copy_out_s=0.0, first_of_shape=False):
    return (REPLY_HEAD.pack(REPLY_MAGIC, status) + put_str(message) +
            REPLY_TAIL.pack(call_s, copy_in_s, copy_out_s, int(first_of_shape)))
