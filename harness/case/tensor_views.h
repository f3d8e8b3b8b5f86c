// Where each tensor of a case lives in memory: strides, offsets and extents,
// as 64-bit element counts.
//
// A pure function of the case, so the index arithmetic of shapes past 2^31
// elements per tensor is testable without allocating them (every product of
// batch, heads, sequence and row is formed in int64_t: each factor fits in
// int32, their product does not).
#pragma once
#include <cstdint>

#include "harness/case/case.h"

namespace afz {

// A [b][h][s][d] view: physical strides in elements (0 broadcasts) and the
// element where it starts in its buffer.
struct View {
  int64_t stride[4] = {0, 0, 0, 0};
  int64_t offset = 0;
  // The element at logical (b, h, s, x), relative to the buffer's start.
  int64_t at(int64_t b, int64_t h, int64_t s, int64_t x) const {
    return offset + b * stride[0] + h * stride[1] + s * stride[2] + x * stride[3];
  }
};

// A view over dense rows of `row` elements ([b][s][h][row] for BSHD, else
// [b][h][s][row]).
View dense_view(Layout layout, int heads, int seq, int row);

struct TensorViews {
  View q, k, v, o;
  // Elements each buffer holds: one shared buffer for packed QKV (packed > 0,
  // q, k and v zero), otherwise one each; K and V hold a single head or
  // batch where they are broadcast.
  int64_t q_elements = 0, k_elements = 0, v_elements = 0, packed_elements = 0, o_elements = 0;
  // Rows each view spans per (b, h) slot in its buffer, and the (b, h)
  // slots a buffer holds (1 where broadcast).
  int q_extent = 0, kv_extent = 0;
  int kv_batch_slots = 0, kv_head_slots = 0;
  int64_t lse_stride[3] = {0, 0, 0};
  int64_t lse_elements = 0;
};

// Throws std::runtime_error for layouts the case cannot have (packed QKV
// with head_dim != head_dim_v or with broadcast K and V).
TensorViews tensor_views(const Case& c);

}  // namespace afz
