// The varlen packing of the torch adapters (kernels/torch/packed_tokens.h),
// on the CPU: the forward varlen adapter packs q, k, v this way and writes O
// back; the backward one also packs dO, O and the LSE and writes dQ, dK, dV
// back.  Every tensor here is a strided view with NaN padding, as the
// problem's buffers are: a packing that reads padding, or an unpacking that
// writes it, shows.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "packed_tokens.h"

namespace afz::torchk {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
// A ragged batch with an empty sequence in the middle.
const std::vector<int32_t> kLengths = {3, 0, 2};
constexpr int64_t kHeads = 2, kMaxLen = 4, kDim = 8;

// Element (b, h, s, x) holds a value naming it; padding rows hold NaN.  The
// memory is [B][S][H][D] viewed as [B][H][S][D] (BSHD strides).
at::Tensor labelled_bhsd() {
  at::Tensor bshd = at::full({int64_t(kLengths.size()), kMaxLen, kHeads, kDim}, kNaN);
  for (size_t b = 0; b < kLengths.size(); ++b)
    for (int64_t s = 0; s < kLengths[b]; ++s)
      for (int64_t h = 0; h < kHeads; ++h)
        for (int64_t x = 0; x < kDim; ++x) bshd[int64_t(b)][s][h][x] = float(1000 * b + 100 * s + 10 * h + x);
  return bshd.transpose(1, 2);
}

TEST(PackedTokens, CumulativeLengthsAsFlashAttentionsCuSeqlens) {
  const TokenPacking pk = token_packing(kLengths);
  EXPECT_EQ(pk.cumulative, (std::vector<int32_t>{0, 3, 3, 5}));
  EXPECT_EQ(pk.total(), 5);
  EXPECT_EQ(pk.max_length, 3);
  EXPECT_EQ(pk.start(2), 3);
  EXPECT_EQ(token_packing({0, 0}).total(), 0);
}

TEST(PackedTokens, PacksTheValidRowsTokenMajor) {
  const at::Tensor packed = pack_tokens(labelled_bhsd(), token_packing(kLengths));
  ASSERT_EQ(packed.sizes(), at::IntArrayRef({5, kHeads, kDim}));
  EXPECT_TRUE(packed.is_contiguous());
  EXPECT_FALSE(packed.isnan().any().item<bool>()) << "a padding row was packed";
  // Token 3 is sequence 2's first query.
  EXPECT_EQ(packed[3][1][4].item<float>(), 2000 + 0 + 10 + 4);
  EXPECT_EQ(packed[2][0][7].item<float>(), 0 + 200 + 0 + 7);
}

TEST(PackedTokens, UnpacksIntoTheValidRowsOnly) {
  const TokenPacking pk = token_packing(kLengths);
  const at::Tensor source = labelled_bhsd();
  const at::Tensor dst = at::full({int64_t(kLengths.size()), kMaxLen, kHeads, kDim}, kNaN).transpose(1, 2);
  ASSERT_EQ(unpack_tokens(pack_tokens(source, pk), dst, pk, "dq"), "");
  for (size_t b = 0; b < kLengths.size(); ++b) {
    const at::Tensor valid = dst.select(0, int64_t(b)).narrow(1, 0, kLengths[b]);
    EXPECT_TRUE(valid.equal(source.select(0, int64_t(b)).narrow(1, 0, kLengths[b]))) << "sequence " << b;
    const at::Tensor padding = dst.select(0, int64_t(b)).narrow(1, kLengths[b], kMaxLen - kLengths[b]);
    EXPECT_TRUE(padding.isnan().all().item<bool>()) << "sequence " << b << ": a padding row was written";
  }
}

TEST(PackedTokens, UnpackingAWrongShapeIsAMessage) {
  const TokenPacking pk = token_packing(kLengths);
  const at::Tensor dst = at::zeros({int64_t(kLengths.size()), kHeads, kMaxLen, kDim});
  EXPECT_EQ(unpack_tokens(at::zeros({5, kHeads + 1, kDim}), dst, pk, "dk"),
            "the operator returned dk of shape [5, 3, 8], expected [5, 2, 8]");
  EXPECT_EQ(unpack_tokens(at::Tensor(), dst, pk, "dv"), "the operator returned no dv");
  EXPECT_FALSE(dst.ne(0).any().item<bool>()) << "a refused result was written";
}

TEST(PackedTokens, LseAsHeadsByTokens) {
  // [B][H][S_max] with NaN padding, its heads strided apart.
  at::Tensor lse = at::full({int64_t(kLengths.size()), kMaxLen, kHeads}, kNaN).transpose(1, 2);
  for (size_t b = 0; b < kLengths.size(); ++b)
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t s = 0; s < kLengths[b]; ++s) lse[int64_t(b)][h][s] = float(100 * b + 10 * h + s);
  const at::Tensor packed = pack_lse_heads_by_tokens(lse, token_packing(kLengths));
  ASSERT_EQ(packed.sizes(), at::IntArrayRef({kHeads, 5}));
  EXPECT_TRUE(packed.is_contiguous());
  const at::Tensor expected = at::tensor({0.f, 1.f, 2.f, 200.f, 201.f, 10.f, 11.f, 12.f, 210.f, 211.f}).view({2, 5});
  EXPECT_TRUE(packed.equal(expected)) << packed;
}

TEST(PackedTokens, AnEmptyBatchPacksToNoTokens) {
  const TokenPacking pk = token_packing({0, 0});
  const at::Tensor x = at::full({2, kHeads, kMaxLen, kDim}, kNaN);
  EXPECT_EQ(pack_tokens(x, pk).sizes(), at::IntArrayRef({0, kHeads, kDim}));
  EXPECT_EQ(pack_lse_heads_by_tokens(at::full({2, kHeads, kMaxLen}, kNaN), pk).sizes(), at::IntArrayRef({kHeads, 0}));
}

}  // namespace
}  // namespace afz::torchk
