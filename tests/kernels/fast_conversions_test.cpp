// The kernels' hot-path conversions equal dtype.h's exact ones bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/abi/dtype.h"
#include "kernels/cpu/common.h"

namespace afz::cpu {
namespace {

TEST(FastConversions, Fp16AndBf16LoadsAreExactForEveryBitPattern) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const double f16 = decode_bits(kF16, h), bf16 = decode_bits(kBF16, h);
    const float fast16 = f16_to_float(uint16_t(h)), fastbf = bf16_to_float(uint16_t(h));
    if (std::isnan(f16)) {
      EXPECT_TRUE(std::isnan(fast16)) << std::hex << h;
    } else {
      ASSERT_EQ(bits_of(double(fast16)), bits_of(f16)) << std::hex << h;  // signed zeros included
    }
    if (std::isnan(bf16)) {
      EXPECT_TRUE(std::isnan(fastbf)) << std::hex << h;
    } else {
      ASSERT_EQ(bits_of(double(fastbf)), bits_of(bf16)) << std::hex << h;
    }
  }
}

void expect_same_rounding(float x) {
  const double want16 = round_to(AFZ_F16, double(x)), wantbf = round_to(AFZ_BF16, double(x));
  const float got16 = round_float_to_f16(x), gotbf = round_float_to_bf16(x);
  if (std::isnan(x)) {
    EXPECT_TRUE(std::isnan(got16) && std::isnan(gotbf));
    return;
  }
  ASSERT_EQ(bits_of(double(got16)), bits_of(want16)) << std::hexfloat << x;
  ASSERT_EQ(bits_of(double(gotbf)), bits_of(wantbf)) << std::hexfloat << x;
}

TEST(FastConversions, RoundingMatchesDtypeRoundToEverywhere) {
  // A stride through all 2^32 patterns (odd, so every residue of the low
  // bits is visited), then every fp32 within a few ulps of each fp16 and
  // bf16 midpoint and boundary.
  constexpr uint64_t kStride = 4093;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += kStride) expect_same_rounding(float_of(uint32_t(b)));
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    const float lo = float(decode_bits(kF16, h)), hi = float(decode_bits(kF16, h + 1));
    const float mid = float((double(lo) + double(hi)) / 2);  // exact: fp16 midpoints are fp32 values
    for (int k = -2; k <= 2; ++k) {
      const float x = float_of(bits_of(mid) + k);
      expect_same_rounding(x);
      expect_same_rounding(-x);
    }
  }
  for (uint32_t h = 0; h < 0x7f80u; h += 7) {
    const float mid = float_of((h << 16) | 0x8000u);
    for (int k = -2; k <= 2; ++k) expect_same_rounding(float_of(bits_of(mid) + k));
  }
  for (float x : {0.0f, -0.0f, 65504.0f, 65519.996f, 65520.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-14f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()})
    expect_same_rounding(x);
}

}  // namespace
}  // namespace afz::cpu
