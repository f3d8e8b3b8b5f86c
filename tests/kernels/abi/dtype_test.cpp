#include "kernels/abi/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

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

// The inline normal-range path (round_normal) must agree with the general
// routine bit for bit: on every format, at the edges of its normal range, at
// exact ties and one double ulp either side of them, and on random doubles
// of every binade the generators reach.
TEST(Dtype, InlineRoundingMatchesGeneral) {
  std::vector<double> xs = {0.0, -0.0, 1.0, -1.0, 65504.0, 65519.99, 65520.0, 0x1.fep127, 0x1.ffp127,
                            0x1.fffffep127, 0x1.ffffffp127, 3.4028234663852886e38, 0x1p-14, 0x1.ffcp-15,
                            0x1p-126, 0x1.fffffcp-127, std::numeric_limits<double>::denorm_min(),
                            std::numeric_limits<double>::max(), std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::quiet_NaN()};
  for (int e = -160; e <= 130; ++e)
    for (int p : {8, 11, 24}) {
      const double tie = (1.0 + std::ldexp(1.0, -p)) * std::ldexp(1.0, e);  // halfway above 2^e
      const double odd_tie = (1.0 + 3 * std::ldexp(1.0, -p)) * std::ldexp(1.0, e);
      for (double x : {tie, odd_tie, std::nextafter(tie, 0.0), std::nextafter(tie, 1e300), odd_tie * 1.5})
        for (double sign : {1.0, -1.0}) xs.push_back(sign * x);
    }
  uint64_t state = 0x9e3779b97f4a7c15ULL;  // xorshift: any fixed sequence of doubles will do
  for (int n = 0; n < 200000; ++n) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    const int exponent = int(state % 300) - 160;  // binades from below f32's subnormals to past its max
    xs.push_back(double_of((state & 0x800fffffffffffffULL) | (uint64_t(exponent + 1023) << 52)));
  }
  for (const FloatFormat* f : {&kF16, &kBF16, &kF32, &kE4M3})
    for (double x : xs) {
      const uint32_t general = round_bits_general(*f, x, 0.0);
      ASSERT_EQ(round_bits(*f, x), general) << x << " precision " << f->precision;
      const double value = decode_bits(*f, general);
      uint64_t rounded;
      if (round_normal(*f, x, 0.0, &rounded)) ASSERT_EQ(double_of(rounded), value) << x;
    }
  for (afz_dtype t : {AFZ_F16, AFZ_BF16, AFZ_F32})
    for (double x : xs) {
      const double expect = decode_bits(format_of(t), round_bits_general(format_of(t), x, 0.0));
      const double got = round_to(t, x);
      ASSERT_TRUE(bits_of(got) == bits_of(expect) || (std::isnan(got) && std::isnan(expect))) << x;
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
