// The memory a strided ABI tensor reaches, slot by slot: what a process
// boundary must carry for a kernel to see the problem exactly (padding, row
// gaps and their poison included).  Shared by the GPU worker's wire format
// (harness/run/gpu/problem_wire.h) and the Python bridge (kernels/python).
#pragma once
#include <cstdint>

#include "kernels/abi/attnfuzz_kernel.h"

namespace afz {

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
// Any ABI tensor [e0][e1][e2][e3] (the backward's dO, O, gradients).
TensorRef tensor_ref_of(const afz_tensor& t, int64_t e0, int64_t e1, int64_t e2, int64_t e3);

// The elements a tensor's strides reach, relative to its data pointer:
// [lo, hi) in elements, lo <= 0 (negative strides reach below the pointer).
struct Span {
  int64_t lo = 0, hi = 0;
  int elem_bytes = 1;
  int64_t bytes() const { return (hi - lo) * elem_bytes; }
  int64_t lo_bytes() const { return lo * elem_bytes; }
};
Span tensor_span(const TensorRef& t);

}  // namespace afz
