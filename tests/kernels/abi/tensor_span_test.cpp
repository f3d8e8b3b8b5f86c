// Spans of tensors past 2^31 elements (the scale class's huge K/V): what the
// GPU worker's wire and guarded mirror carry must be counted in 64 bits.
// The data pointer is never dereferenced: tensor_span reads strides alone.
#include "kernels/abi/tensor_span.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace afz {
namespace {

constexpr int64_t kElements2p31 = int64_t{1} << 31;

// A dense BHSD tensor's strides for [b][h][s][d].
afz_tensor dense(int64_t h, int64_t s, int64_t d) {
  afz_tensor t{};
  t.data = reinterpret_cast<void*>(uintptr_t{1} << 40);  // never read
  t.dtype = AFZ_BF16;
  t.stride[0] = h * s * d;
  t.stride[1] = s * d;
  t.stride[2] = d;
  t.stride[3] = 1;
  return t;
}

TEST(TensorSpan, CountsPastTwoToThe31ElementsIn64Bits) {
  // 16 sequences x 8 heads x (2^17 + 63) keys x 128: just past 2^31.
  const int64_t b = 16, h = 8, s = (int64_t{1} << 17) + 63, d = 128;
  const TensorRef k = tensor_ref_of(dense(h, s, d), b, h, s, d);
  const Span span = tensor_span(k);
  EXPECT_EQ(span.lo, 0);
  EXPECT_EQ(span.hi, b * h * s * d);
  EXPECT_GT(span.hi, kElements2p31);
  EXPECT_EQ(span.bytes(), 2 * b * h * s * d);  // past 2^32 bytes
}

TEST(TensorSpan, ANegativeStridePastTwoToThe31ReachesBelowThePointer) {
  const int64_t b = 17, h = 8, s = (int64_t{1} << 17) + 63, d = 128;
  afz_tensor t = dense(h, s, d);
  t.stride[0] = -t.stride[0];  // batches stored last to first
  const Span span = tensor_span(tensor_ref_of(t, b, h, s, d));
  EXPECT_EQ(span.lo, -(b - 1) * h * s * d);
  EXPECT_LT(span.lo, -kElements2p31);
  EXPECT_EQ(span.hi - span.lo, b * h * s * d);
  EXPECT_EQ(span.lo_bytes(), 2 * span.lo);
}

}  // namespace
}  // namespace afz
