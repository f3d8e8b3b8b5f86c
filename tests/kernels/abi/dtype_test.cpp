#include "kernels/abi/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace afz {
namespace {

TEST(Dtype, HalfBitPatterns) {
  EXPECT_EQ(round_bits(kF16, 1.0), 0x3c00u);
  EXPECT_EQ(round_bits(kF16, -2.0), 0xc000u);
  EXPECT_EQ(round_bits(kF16, 65504.0), 0x7bffu);
  EXPECT_EQ(round_bits(kF16, 65520.0), 0x7c00u);       // halfway to 2^16: ties to even = inf
  EXPECT_EQ(round_bits(kF16, 65519.99), 0x7bffu);
  EXPECT_EQ(round_bits(kF16, 0x1p-24), 0x0001u);       // smallest subnormal
  EXPECT_EQ(round_bits(kF16, 0x1p-25), 0x0000u);       // half of it: tie to even (0)
  EXPECT_EQ(round_bits(kF16, 0x1.8p-25), 0x0001u);
  EXPECT_EQ(round_bits(kF16, 0x1p-14), 0x0400u);       // smallest normal
  EXPECT_EQ(round_bits(kF16, std::numeric_limits<double>::infinity()), 0x7c00u);
  EXPECT_EQ(round_bits(kF16, -0.0), 0x8000u);
}

TEST(Dtype, NoDoubleRounding) {
  // 1 + 2^-11 + 2^-30 rounds up in one step; via float it would first become
  // 1 + 2^-11 (a tie) and then round to even, down to 1.0.
  const double x = 1.0 + 0x1p-11 + 0x1p-30;
  EXPECT_EQ(round_bits(kF16, x), 0x3c01u);
  const float via_float = float(x);
  EXPECT_EQ(round_bits(kF16, double(via_float)), 0x3c00u);
  // bf16: 1 + 2^-8 + 2^-40
  EXPECT_EQ(round_bits(kBF16, 1.0 + 0x1p-8 + 0x1p-40), 0x3f81u);
  EXPECT_EQ(round_bits(kBF16, 1.0 + 0x1p-8), 0x3f80u);
}

TEST(Dtype, DoubleDoubleBreaksTies) {
  EXPECT_EQ(round_bits(kF16, 1.0 + 0x1p-11, 0x1p-80), 0x3c01u);
  EXPECT_EQ(round_bits(kF16, 1.0 + 0x1p-11, -0x1p-80), 0x3c00u);
  EXPECT_EQ(round_bits(kF16, -(1.0 + 0x1p-11), -0x1p-80), 0xbc01u);
  EXPECT_EQ(round_bits(kF16, 1.0 + 0x1p-11), 0x3c00u);  // true tie: even
  // Subnormal tie broken by lo.
  EXPECT_EQ(round_bits(kF16, 0x1p-25, 0x1p-90), 0x0001u);
}

TEST(Dtype, Float32MatchesHardwareRounding) {
  // Hardware double->float conversion is correctly rounded; compare bit for bit.
  const double samples[] = {1.0 / 3, 0x1.fffffefffffffp-127, 0x1p-149, 0x1.8p-150, 3.4028235677973366e38,
                            3.4028234663852886e38, -1e-45, 123456.789, 0x1.000001p0};
  for (double x : samples) EXPECT_EQ(round_bits(kF32, x), bits_of(float(x))) << x;
}

TEST(Dtype, DecodeRoundTripsEveryHalfAndBf16) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    for (const FloatFormat* f : {&kF16, &kBF16}) {
      const double v = decode_bits(*f, b);
      if (std::isnan(v)) continue;
      EXPECT_EQ(round_bits(*f, v), b);
    }
  }
}

TEST(Dtype, E4M3) {
  EXPECT_EQ(decode_bits(kE4M3, 0x7e), 448.0);
  EXPECT_TRUE(std::isnan(decode_bits(kE4M3, 0x7f)));
  EXPECT_EQ(round_bits(kE4M3, 448.0), 0x7eu);
  EXPECT_EQ(decode_bits(kE4M3, 0x01), 0x1p-9);
}

TEST(Dtype, UlpAndLimits) {
  EXPECT_EQ(ulp(AFZ_F16, 1.0), 0x1p-10);
  EXPECT_EQ(ulp(AFZ_BF16, 1.0), 0x1p-7);
  EXPECT_EQ(ulp(AFZ_F32, 0.0), 0x1p-149);
  EXPECT_EQ(max_finite(AFZ_F16), 65504.0);
  EXPECT_EQ(max_finite(AFZ_BF16), 0x1.fep127);
  EXPECT_EQ(unit_roundoff(AFZ_F32), 0x1p-24);
}

}  // namespace
}  // namespace afz
