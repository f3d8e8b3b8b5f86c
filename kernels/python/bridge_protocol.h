// The Python bridge's messages (python/attnfuzz/PROTOCOL.md; the Python side
// is python/attnfuzz/protocol.py): frames of [u32 length][payload] on a Unix
// stream socket, numbers in native byte order, tensors in a shared memory
// file whose layout each request describes.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/abi/attnfuzz_kernel.h"
#include "kernels/abi/tensor_span.h"

namespace afz::python {

inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr uint32_t kHelloMagic = 0x41465a59;    // "AFZY"
inline constexpr uint32_t kRequestMagic = 0x41465a51;  // "AFZQ"
inline constexpr uint32_t kReplyMagic = 0x41465a41;    // "AFZA"
// Frames bigger than this are a broken peer, not a message.
inline constexpr uint32_t kMaxFrameBytes = 64u << 20;
// Each tensor span starts at this alignment in the shared memory (any dtype
// view, and torch's and numpy's vectorized loops, are happy with it).
inline constexpr uint64_t kSpanAlignment = 256;

// One declared kernel, as the worker's hello describes it.
struct Declaration {
  std::string name, description;
  afz_caps caps{};
  afz_precision precision{};
  afz_conventions conventions{};
};

struct Hello {
  bool ok = false;
  std::string error;            // one line, when !ok
  std::string library_version;  // "Python 3.12.3, numpy 2.1.0, torch 2.11.0"
  std::vector<Declaration> kernels;
};

enum class ReplyStatus : uint8_t { Ok = 0, Unsupported = 1, Exception = 2, Fatal = 3 };

struct Reply {
  ReplyStatus status = ReplyStatus::Ok;
  std::string message;
  double call_s = 0, copy_in_s = 0, copy_out_s = 0;
  bool first_of_shape = false;  // the first call of its shape key: compilation included
};

// Where each tensor's span lies in the shared memory.
struct Layout {
  std::array<TensorRef, kSlotCount> ref{};
  std::array<Span, kSlotCount> span{};
  std::array<uint64_t, kSlotCount> offset{};  // byte offset of the span's first byte
  uint64_t bytes = 0;                         // the shared memory the case needs
};

Layout layout_of(const afz_problem& p);
std::vector<uint8_t> encode_request(uint32_t kernel_index, uint64_t shm_size, const afz_problem& p,
                                    const Layout& layout);
// Both throw std::runtime_error (one line) on a malformed frame.
Hello decode_hello(const std::vector<uint8_t>& frame);
Reply decode_reply(const std::vector<uint8_t>& frame);

}  // namespace afz::python
