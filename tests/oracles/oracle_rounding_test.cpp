// Narrowing the oracle's double-double to fp16, bf16 and fp32 with
// afz::round_bits(fmt, hi, lo) is correctly rounded, on hand-made problems
// whose exact output sits on a rounding midpoint of the target format or a
// hair (2^-54 relative and less) away from it.  The hi part alone would
// round those ties to even; only lo tells which side the exact value is on.
//
// Construction: two keys, d = 1, q = 1, k_0 = 0, k_1 = eps, so s_0 = 0 and
// s_1 = eps; then w_1 = 1 / (1 + e^-eps) = 1/2 + eps/4 + O(eps^3) and
// o = v_0 + w_1 (v_1 - v_0) = mid + (v_1 - v_0) eps / 4 + ..., with
// mid = (v_0 + v_1) / 2 the midpoint of two neighbours v_0, v_1 of the format.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/abi/dtype.h"
#include "oracles/oracle.h"
#include "tests/oracles/oracle_test_util.h"
#include "tests/oracles/problem_builder.h"

namespace afz::test {
namespace {

struct TieCase {
  const char* name;
  afz_dtype out;      // format the output is narrowed to
  double v0, v1;      // neighbours in `out`
  double eps;         // score of key 1; 0 gives an exact tie
  uint32_t expected;  // correctly rounded bits of the exact o
};

// kF16: 1 = 0x3c00, ulp 2^-10.  kBF16: 1 = 0x3f80, ulp 2^-7.  kF32: 1 =
// 0x3f800000, ulp 2^-23.  The deviation (v1 - v0) eps / 4 is chosen below
// half an ulp of double at mid, so the correctly rounded hi IS the midpoint.
const TieCase kTieCases[] = {
    {"fp16 exact tie rounds to even (down)", AFZ_F16, 1.0, 1.0 + 0x1p-10, 0.0, 0x3c00},
    {"fp16 just above the tie rounds up", AFZ_F16, 1.0, 1.0 + 0x1p-10, 0x1p-42, 0x3c01},
    {"fp16 just below the tie rounds down", AFZ_F16, 1.0, 1.0 + 0x1p-10, -0x1p-42, 0x3c00},
    {"fp16 exact tie rounds to even (up)", AFZ_F16, 1.0 + 0x1p-10, 1.0 + 0x1p-9, 0.0, 0x3c02},
    {"fp16 just below an up-tie rounds down", AFZ_F16, 1.0 + 0x1p-10, 1.0 + 0x1p-9, -0x1p-42, 0x3c01},
    {"fp16 negative, just above in magnitude", AFZ_F16, -1.0, -1.0 - 0x1p-10, 0x1p-42, 0xbc01},
    {"fp16 subnormal tie to even", AFZ_F16, 0x1p-24, 0x1p-23, 0.0, 0x0002},
    {"fp16 subnormal just below the tie", AFZ_F16, 0x1p-24, 0x1p-23, -0x1p-60, 0x0001},
    {"fp16 half of the smallest subnormal rounds to 0", AFZ_F16, 0.0, 0x1p-24, 0.0, 0x0000},
    {"fp16 just above half of the smallest subnormal", AFZ_F16, 0.0, 0x1p-24, 0x1p-60, 0x0001},
    {"bf16 exact tie rounds to even", AFZ_BF16, 1.0, 1.0 + 0x1p-7, 0.0, 0x3f80},
    {"bf16 just above the tie rounds up", AFZ_BF16, 1.0, 1.0 + 0x1p-7, 0x1p-50, 0x3f81},
    {"bf16 subnormal just above the tie", AFZ_BF16, 0x1p-133, 0x1p-132, 0x1p-60, 0x0002},
    {"bf16 subnormal just below the tie", AFZ_BF16, 0x1p-133, 0x1p-132, -0x1p-60, 0x0001},
    {"fp32 exact tie rounds to even", AFZ_F32, 1.0, 1.0 + 0x1p-23, 0.0, 0x3f800000},
    {"fp32 just above the tie rounds up", AFZ_F32, 1.0, 1.0 + 0x1p-23, 0x1p-30, 0x3f800001},
    {"fp32 subnormal tie to even", AFZ_F32, 0x1p-149, 0x1p-148, 0.0, 0x00000002},
    {"fp32 subnormal just below the tie", AFZ_F32, 0x1p-149, 0x1p-148, -0x1p-60, 0x00000001},
};

OracleResult run_tie(const Oracle& oracle, const TieCase& c, TestProblem& t) {
  t.set_q(0, 0, 0, 0, 1.0);
  t.set_k(0, 0, 0, 0, 0.0);
  EXPECT_EQ(t.set_k(0, 0, 1, 0, c.eps), c.eps) << c.name << ": eps not representable";
  EXPECT_EQ(t.set_v(0, 0, 0, 0, c.v0), c.v0) << c.name;
  EXPECT_EQ(t.set_v(0, 0, 1, 0, c.v1), c.v1) << c.name;
  return oracle.compute(t.problem());
}

Shape tie_shape() {
  Shape s;
  s.d = 1, s.dv = 1, s.seqlens_q = {1}, s.seqlens_k = {2}, s.dtype = AFZ_F32;
  return s;
}

TEST(OracleRounding, MultiprecisionTiersRoundTiesCorrectly) {
  std::vector<NamedOracle> tiers;
  tiers.push_back({"boost", make_boost_oracle()});
  if (auto m = make_mpfr_oracle()) tiers.push_back({"mpfr", std::move(m)});
  for (const TieCase& c : kTieCases) {
    const FloatFormat& f = format_of(c.out);
    const double mid = (c.v0 + c.v1) / 2;  // exact in double
    for (auto& tier : tiers) {
      TestProblem t(tie_shape());
      const OracleResult r = run_tie(*tier.oracle, c, t);
      const DD o = r.o[0];
      const std::string what = std::string(c.name) + " [" + tier.name + "]";
      // The construction puts the correctly rounded hi on the midpoint and
      // the side in lo's sign.
      EXPECT_EQ(o.hi, mid) << what;
      if (c.eps == 0) {
        EXPECT_EQ(o.lo, 0.0) << what;
      } else {
        EXPECT_EQ(o.lo > 0, (c.eps > 0) == (c.v1 > c.v0)) << what << " lo " << o.lo;
      }
      EXPECT_EQ(round_bits(f, o.hi, o.lo), c.expected) << what;
      // And off an exact tie, the oracle's own bound is far below the gap it decides.
      if (c.eps != 0) {
        EXPECT_LT(r.o_err[0], std::fabs(o.lo) / 2) << what;
      }
    }
  }
}

// The fast tier cannot see a 2^-54 relative deviation: its bound (~1e-15
// relative) must then straddle the midpoint, which is what makes the verdict
// escalate such rows instead of trusting the fast tier's rounding.
TEST(OracleRounding, FastTierBoundStraddlesTheMidpoint) {
  const auto fast = make_fast_oracle();
  for (const TieCase& c : kTieCases) {
    if (c.eps == 0) continue;
    TestProblem t(tie_shape());
    const OracleResult r = run_tie(*fast, c, t);
    const double mid = (c.v0 + c.v1) / 2;
    EXPECT_LE(std::fabs(dd_diff(r.o[0], DD{mid, 0.0})), r.o_err[0]) << c.name;
  }
}

// Rounding through fp32 first (the double-rounding trap): 1 + 2^-11 + 2^-30
// becomes the fp16 tie 1 + 2^-11 in fp32 and then rounds to even, 1.0,
// while the exact value rounds up.  eps = 2^-18 puts o at about that value.
TEST(OracleRounding, NarrowingFromTheDoubleDoubleAvoidsDoubleRounding) {
  TieCase c{"fp16 via fp32 would round twice", AFZ_F16, 1.0, 1.0 + 0x1p-10, 0x1p-18, 0x3c01};
  const auto oracle = make_escalation_oracle();
  TestProblem t(tie_shape());
  const OracleResult r = run_tie(*oracle, c, t);
  const DD o = r.o[0];
  EXPECT_GT(o.hi, 1.0 + 0x1p-11);
  EXPECT_LT(o.hi, 1.0 + 0x1p-11 + 0x1p-24);            // inside fp32's half-ulp of the tie
  EXPECT_EQ(round_bits(kF16, o.hi, o.lo), c.expected);  // correct
  const double via_fp32 = round_to(AFZ_F32, o.hi, o.lo);
  EXPECT_EQ(via_fp32, 1.0 + 0x1p-11);
  EXPECT_EQ(round_bits(kF16, via_fp32), 0x3c00u);      // what rounding twice would give
}

}  // namespace
}  // namespace afz::test
