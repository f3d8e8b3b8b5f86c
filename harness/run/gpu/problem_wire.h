// An afz_problem as a message: its scalars, its seqlens, and for every tensor
// the span of memory its strides reach.  The harness sends the input spans'
// bytes to the GPU worker (padding and row gaps included, poison and all) and
// gets the output spans back, so the worker's copy is the problem exactly.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/run/gpu/wire.h"
#include "kernels/abi/attnfuzz_kernel.h"

namespace afz::gpu {

enum Slot : int { kQ, kK, kV, kBoolMask, kAddMask, kO, kLse, kSlotCount };
const char* slot_name(int slot);
inline bool is_output(int slot) { return slot == kO || slot == kLse; }

// A strided tensor as data pointer, dtype, 4 strides and 4 extents (the LSE
// is [1][b][h][i]); absent when its pointer is null.
struct TensorRef {
  bool present = false;
  void* data = nullptr;
  afz_dtype dtype = AFZ_F32;
  int64_t stride[4] = {0, 0, 0, 0};
  int64_t extent[4] = {0, 0, 0, 0};
};
TensorRef tensor_ref(const afz_problem& p, int slot);

// The elements a tensor's strides reach, relative to its data pointer:
// [lo, hi) in elements, lo <= 0 (negative strides reach below the pointer).
struct Span {
  int64_t lo = 0, hi = 0;
  int elem_bytes = 1;
  int64_t bytes() const { return (hi - lo) * elem_bytes; }
  int64_t lo_bytes() const { return lo * elem_bytes; }
};
Span tensor_span(const TensorRef& t);

// The worker's copy of a problem: p's pointers point into `bytes`.
struct WireProblem {
  std::string kernel_name;     // registry name
  std::string kernel_library;  // plugin path, empty for built-in kernels
  afz_problem p{};
  std::vector<int32_t> seqlens_q, seqlens_k;
  std::array<TensorRef, kSlotCount> ref{};
  std::array<Span, kSlotCount> span{};
  std::array<std::vector<uint8_t>, kSlotCount> bytes;  // span contents; outputs start poisoned

  WireProblem() = default;
  WireProblem(const WireProblem&) = delete;
  WireProblem& operator=(const WireProblem&) = delete;
  uint8_t* data(int slot) { return bytes[slot].data() - span[slot].lo_bytes(); }
};

void encode_problem(WireWriter& w, const std::string& kernel_name, const std::string& kernel_library,
                    const afz_problem& p);
// Throws WireError on a malformed message.
void decode_problem(WireReader& r, WireProblem* out);

// Pointers of a problem rebuilt onto new tensor bases (host copy or device mirror).
void rebase(afz_problem& p, const std::array<uint8_t*, kSlotCount>& data);

}  // namespace afz::gpu
