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
#include "kernels/abi/tensor_span.h"

namespace afz::gpu {

// A tensor beside the problem's own slots (the backward pass's dO, O, LSE
// inputs and dQ, dK, dV outputs), carried the same way: its span, its bytes
// for an input, poison for an output.
struct ExtraTensor {
  const char* name = "";  // in out-of-bounds messages ("dq")
  TensorRef ref;
  bool output = false;
};
struct WireExtra {
  std::string name;
  TensorRef ref;  // ref.data is meaningless on the receiving side
  Span span;
  bool output = false;
  std::vector<uint8_t> bytes;  // span contents; outputs start poisoned
  uint8_t* data() { return bytes.data() - span.lo_bytes(); }
};

// The worker's copy of a problem: p's pointers point into `bytes`.
struct WireProblem {
  std::string kernel_name;     // registry name
  std::string kernel_library;  // plugin path, empty for built-in kernels
  afz_problem p{};
  std::vector<int32_t> seqlens_q, seqlens_k;
  std::array<TensorRef, kSlotCount> ref{};
  std::array<Span, kSlotCount> span{};
  std::array<std::vector<uint8_t>, kSlotCount> bytes;  // span contents; outputs start poisoned
  std::vector<WireExtra> extra;

  WireProblem() = default;
  WireProblem(const WireProblem&) = delete;
  WireProblem& operator=(const WireProblem&) = delete;
  uint8_t* data(int slot) { return bytes[slot].data() - span[slot].lo_bytes(); }
};

void encode_problem(WireWriter& w, const std::string& kernel_name, const std::string& kernel_library,
                    const afz_problem& p, const std::vector<ExtraTensor>& extra = {});
// Throws WireError on a malformed message.
void decode_problem(WireReader& r, WireProblem* out);

// Pointers of a problem rebuilt onto new tensor bases (host copy or device mirror).
void rebase(afz_problem& p, const std::array<uint8_t*, kSlotCount>& data);

}  // namespace afz::gpu
