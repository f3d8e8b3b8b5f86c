// The tiers against each other: MPFR and Boost agree to at least 100 bits
// (oracle_test_util.h says relative to what), and the fast tier stays inside
// its own a-priori bound, on random and adversarial problems: scores of
// +-1e4, rows whose scores all lie below -1000, additive masks of -inf, the
// lowest finite fp32 and -1e4, softcap, GQA, and seqlen_k = 4096.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "harness/case/rng.h"
#include "kernels/abi/dtype.h"
#include "oracles/oracle.h"
#include "tests/oracles/oracle_test_util.h"
#include "tests/oracles/problem_builder.h"

namespace afz::test {
namespace {

constexpr int kAgreementBits = 100;
constexpr double kU = 0x1p-53;
// The fast tier's bound on ordinary rows is about 11 u (cond + |o|); it must
// stay useful, or every row would escalate.  A softcap costs more: tanh in
// double is good to a few ulps of cap tanh(.), i.e. ~5u |cap| absolute in
// every score, hence the factor (1 + |cap|) below.
constexpr double kUsefulFastBound = 64 * kU;

struct Adversary {
  const char* name;
  Shape shape;
  std::function<void(TestProblem&)> setup;
  bool fast_bound_useful;  // the fast tier should decide these rows itself
};

Shape make_shape(int hq, int hkv, int d, int dv, int sq, int sk, afz_dtype t = AFZ_F32) {
  Shape s;
  s.heads_q = hq, s.heads_kv = hkv, s.d = d, s.dv = dv, s.seqlens_q = {sq}, s.seqlens_k = {sk}, s.dtype = t;
  return s;
}

std::vector<Adversary> adversaries() {
  return {
      {"random fp32, GQA, causal bottom-right", make_shape(4, 2, 16, 16, 6, 24),
       [](TestProblem& t) {
         t.fill_uniform(101, 1, 1, 1);
         t.set_scale(0.25f);
         t.set_window(-1, 0, AFZ_ALIGN_BOTTOM_RIGHT);
       },
       true},
      {"random bf16, softcap 30, additive -1e4 band", make_shape(2, 1, 32, 8, 5, 40, AFZ_BF16),
       [](TestProblem& t) {
         t.fill_uniform(102, 8, 8, 2);
         t.set_softcap(30.0f);
         t.set_add_mask([](int, int, int i, int j) { return std::abs(i - j) > 6 ? -1e4 : 0.0; });
       },
       true},
      {"scores of +-1e4 with near ties at the top", make_shape(1, 1, 8, 8, 4, 64),
       [](TestProblem& t) {
         // q = 141, k_j = +-25 (1 + small), scale = fp32(1/sqrt(8)):
         // scores = 8 * 141 * 25 * 0.354 (1 + ...) ~ +-1e4, and the scale
         // product is inexact, so the scores' low parts matter.
         t.fill_uniform(103, 1, 1, 1);
         t.set_scale(float(1 / std::sqrt(8.0)));
         for (int i = 0; i < 4; ++i)
           for (int x = 0; x < 8; ++x) t.set_q(0, 0, i, x, 141.0);
         const CounterRng rng(103, 9);
         for (int j = 0; j < 64; ++j)
           for (int x = 0; x < 8; ++x) {
             const double sign = (j % 2) ? -1.0 : 1.0;
             t.set_k(0, 0, j, x, sign * 25.0 * (1 + 0x1p-12 * rng.symmetric(j * 8 + x)));
           }
       },
       true},
      {"every score below -1000", make_shape(2, 2, 4, 8, 5, 48),
       [](TestProblem& t) {
         t.fill_uniform(104, 1, 1, 1);
         for (int h = 0; h < 2; ++h)
           for (int i = 0; i < 5; ++i)
             for (int x = 0; x < 4; ++x) t.set_q(0, h, i, x, 16.0);
         const CounterRng rng(104, 9);
         for (int h = 0; h < 2; ++h)
           for (int j = 0; j < 48; ++j)
             for (int x = 0; x < 4; ++x) t.set_k(0, h, j, x, -16.0 - 2 * (1 + rng.symmetric(h * 1000 + j * 4 + x)));
         // scores = 16 * sum_x k_x in [-1280, -1024]
       },
       true},
      {"every key at the lowest finite fp32 mask (a constant shift of -3.4e38)", make_shape(1, 1, 8, 8, 4, 32),
       [](TestProblem& t) {
         t.fill_uniform(105, 2, 2, 1);
         t.set_add_mask([](int, int, int, int) { return double(lowest_finite(AFZ_F32)); });
       },
       true},
      {"mixed masks: -inf, lowest finite, -1e4, 0", make_shape(2, 2, 8, 8, 6, 32),
       [](TestProblem& t) {
         t.fill_uniform(106, 2, 2, 1);
         t.set_add_mask([](int, int h, int i, int j) {
           switch ((i + j + h) % 5) {
             case 0: return -std::numeric_limits<double>::infinity();
             case 1: return double(lowest_finite(AFZ_F32));
             case 2: return -1e4;
             default: return 0.0;
           }
         });
       },
       true},
      {"weights in double's subnormal range (shifts of -700 to -760)", make_shape(1, 1, 4, 4, 2, 64),
       [](TestProblem& t) {
         t.fill_uniform(108, 0.5, 0.5, 1000);
         t.set_add_mask([](int, int, int, int j) { return j == 0 ? 0.0 : -700.0 - j; });
       },
       true},
      {"softcap 50 over raw scores of 1e4 (saturated tanh)", make_shape(1, 1, 8, 4, 3, 32),
       [](TestProblem& t) {
         t.fill_uniform(109, 40, 40, 1);
         t.set_softcap(50.0f);
       },
       true},
      {"bf16 inputs near 2^50: scores of ~1e30", make_shape(1, 1, 4, 4, 3, 16, AFZ_BF16),
       [](TestProblem& t) {
         // Huge, nearly equal scores: differences of order 1e30 / 2^8 make
         // one key win outright, and the double-double's 1e30 * 2^-106 ~ 0.01
         // absolute resolution is not enough to be sure: the fast tier must
         // report a large (or infinite) bound, MPFR and Boost must agree.
         t.fill_uniform(107, 1, 1, 1);
         for (int i = 0; i < 3; ++i)
           for (int x = 0; x < 4; ++x) t.set_q(0, 0, i, x, 0x1p50 * (1 + 0.125 * x));
         const CounterRng rng(107, 9);
         for (int j = 0; j < 16; ++j)
           for (int x = 0; x < 4; ++x) t.set_k(0, 0, j, x, 0x1p48 * (1 + rng.symmetric(j * 4 + x)));
       },
       false},
  };
}

TEST(OracleAgreement, MpfrAndBoostAgreeTo100BitsAndFastStaysInsideItsBound) {
  const auto boost = make_boost_oracle();
  const auto mpfr = make_mpfr_oracle();
  const auto fast = make_fast_oracle();
  for (const Adversary& a : adversaries()) {
    SCOPED_TRACE(a.name);
    TestProblem t(a.shape);
    a.setup(t);
    const afz_problem p = t.problem();
    const OracleResult rb = boost->compute(p), rf = fast->compute(p);
    expect_no_nan(rb, "boost");
    expect_no_nan(rf, "fast");
    const OracleResult* precise = &rb;
    OracleResult rm;
    if (mpfr) {
      rm = mpfr->compute(p);
      expect_no_nan(rm, "mpfr");
      expect_agree_bits(rm, rb, kAgreementBits, std::string(a.name) + " mpfr vs boost");
      for (int64_t ri = 0; ri < rm.rows(); ++ri) EXPECT_EQ(rm.max_key[ri], rb.max_key[ri]) << "row " << ri;
      expect_same_condition_terms(rm, rb, 1e-12, std::string(a.name) + " mpfr vs boost");
      precise = &rm;
    }
    expect_within_bound(rf, *precise, std::string(a.name) + " fast vs precise");
    if (a.fast_bound_useful) expect_same_condition_terms(rf, *precise, 1e-10, std::string(a.name) + " fast vs precise");
    if (!a.fast_bound_useful) continue;
    const double cap_factor = 1 + std::fabs(p.softcap);
    for (int64_t ri = 0; ri < rf.rows(); ++ri) {
      if (rf.empty[ri]) continue;
      for (int x = 0; x < rf.dv; ++x) {
        const int64_t e = ri * rf.dv + x;
        const double useful = kUsefulFastBound * cap_factor * (rf.cond[e] + std::fabs(rf.o[e].hi)) + 1e-300;
        EXPECT_LE(rf.o_err[e], useful) << "row " << ri << " x " << x;
      }
      EXPECT_LE(rf.lse_err[ri], kUsefulFastBound * cap_factor * std::max(1.0, std::fabs(rf.lse[ri].hi)))
          << "row " << ri;
    }
  }
}

// The same constant added to every score of a row leaves o unchanged and
// moves the lse by exactly that constant.  -3.4e38 wipes out every digit of
// the dot products in a plain double (or long double) sum; the tiers must
// keep them.
TEST(OracleAgreement, ShiftByLowestFiniteMaskLeavesOutputUnchanged) {
  const Shape s = make_shape(2, 1, 16, 8, 4, 20);
  TestProblem plain(s), shifted(s);
  plain.fill_uniform(201, 1.5, 1.5, 1);
  shifted.fill_uniform(201, 1.5, 1.5, 1);
  const double shift = lowest_finite(AFZ_F32);
  shifted.set_add_mask([&](int, int, int, int) { return shift; });
  const afz_problem pp = plain.problem(), ps = shifted.problem();
  for (auto& tier : all_tiers()) {
    const OracleResult a = tier.oracle->compute(pp), b = tier.oracle->compute(ps);
    for (size_t e = 0; e < a.o.size(); ++e)
      EXPECT_LE(std::fabs(dd_diff(a.o[e], b.o[e])), a.o_err[e] + b.o_err[e] + 0x1p-100 * a.cond[e])
          << tier.name << " element " << e;
    for (int64_t ri = 0; ri < a.rows(); ++ri) {
      // lse_b - lse_a = shift: compare (lse_b - shift) with lse_a in DD.
      const double hi = b.lse[ri].hi - shift;  // exact: both near -3.4e38 (Sterbenz)
      const double moved = hi + b.lse[ri].lo;
      EXPECT_LE(std::fabs(moved - (a.lse[ri].hi + a.lse[ri].lo)), a.lse_err[ri] + b.lse_err[ri] + 1e-300)
          << tier.name << " row " << ri;
      EXPECT_LT(b.lse_err[ri], 1e-6 * std::fabs(shift)) << tier.name << ": bound useless";
    }
  }
}

// Huge scores whose difference is exactly 1: q = (X, 1), k0 = (X, 0),
// k1 = (X, 1) with X = 2^127 (a bf16 near its maximum), so s_1 - s_0 = 1
// under scores of 2^254 ~ 2.9e76.  o = (v_0 + e v_1) / (1 + e) in closed
// form.  MPFR raises its score precision and gets it; the others must
// either get it or say they cannot (a bound covering the error).
TEST(OracleAgreement, ScoresOf1e76DifferingByOne) {
  Shape s = make_shape(1, 1, 2, 2, 1, 2, AFZ_BF16);
  TestProblem t(s);
  const double X = 0x1p127;
  t.set_q(0, 0, 0, 0, X), t.set_q(0, 0, 0, 1, 1);
  t.set_k(0, 0, 0, 0, X), t.set_k(0, 0, 0, 1, 0);
  t.set_k(0, 0, 1, 0, X), t.set_k(0, 0, 1, 1, 1);
  t.set_v(0, 0, 0, 0, 1), t.set_v(0, 0, 0, 1, -3);
  t.set_v(0, 0, 1, 0, 2), t.set_v(0, 0, 1, 1, 5);
  const afz_problem p = t.problem();
  const long double w1 = 1.0L / (1.0L + expl(-1.0L));  // e / (1 + e)
  const long double expect[2] = {1 + w1 * (2 - 1), -3 + w1 * (5 + 3)};
  for (auto& tier : all_tiers()) {
    const OracleResult r = tier.oracle->compute(p);
    expect_no_nan(r, tier.name);
    for (int x = 0; x < 2; ++x) {
      const double err = std::fabs(double((long double)r.o[x].hi + r.o[x].lo - expect[x]));
      EXPECT_LE(err, r.o_err[x] + 1e-18) << tier.name << " x " << x;
      if (tier.name == "mpfr") {
        EXPECT_LE(r.o_err[x], 1e-30) << "MPFR must resolve this row";
      }
    }
  }
}

// seqlen_k = 4096 at d = 64: the fast tier over a few rows, the precise
// tiers on two of them (compute_rows keeps the test fast).
TEST(OracleAgreement, LongRowsOf4096Keys) {
  Shape s = make_shape(2, 1, 64, 64, 3, 4096, AFZ_F16);
  TestProblem t(s);
  t.fill_uniform(301, 2, 2, 1);
  t.set_scale(0.125f);
  t.set_window(-1, 0, AFZ_ALIGN_BOTTOM_RIGHT);
  t.set_add_mask([](int, int h, int i, int j) {
    return (j * 7 + i + h) % 97 == 0 ? -std::numeric_limits<double>::infinity() : (j % 13 == 0 ? -1e4 : 0.0);
  });
  const afz_problem p = t.problem();
  const OracleResult rf = make_fast_oracle()->compute(p);
  expect_no_nan(rf, "fast");
  const std::vector<int64_t> rows = {rf.row_index(0, 0, 2), rf.row_index(0, 1, 0)};
  OracleResult rb = rf, rm = rf;
  make_boost_oracle()->compute_rows(p, rows, rb);
  EXPECT_GT(rb.visible_keys[rows[0]], 4000);
  if (auto mpfr = make_mpfr_oracle()) {
    mpfr->compute_rows(p, rows, rm);
    expect_agree_bits(rm, rb, kAgreementBits, "4096 keys mpfr vs boost", rows);
  } else {
    rm = rb;
  }
  expect_within_bound(rf, rm, "4096 keys fast vs precise", rows);
  for (int64_t ri : rows)
    for (int x = 0; x < rf.dv; ++x) {
      const int64_t e = ri * rf.dv + x;
      EXPECT_LE(rf.o_err[e], kUsefulFastBound * (rf.cond[e] + std::fabs(rf.o[e].hi)));
    }
}

// Many small random problems over dtypes, head dims, GQA and softcap.
TEST(OracleAgreement, RandomProblems) {
  const auto boost = make_boost_oracle();
  const auto mpfr = make_mpfr_oracle();
  const auto fast = make_fast_oracle();
  const afz_dtype dtypes[] = {AFZ_F32, AFZ_F16, AFZ_BF16};
  for (uint64_t seed = 0; seed < 12; ++seed) {
    const CounterRng pick(seed, 77);
    Shape s = make_shape(2 + int(pick.below(0, 2)), 1, 1 + int(pick.below(1, 24)), 1 + int(pick.below(2, 12)),
                         1 + int(pick.below(3, 5)), 1 + int(pick.below(4, 40)), dtypes[seed % 3]);
    s.heads_kv = s.heads_q / (1 + int(pick.below(5, 2)) * (s.heads_q % 2 == 0));
    TestProblem t(s);
    t.fill_uniform(seed, 1 + pick.below(6, 8), 1 + pick.below(7, 8), 4);
    if (seed % 4 == 1) t.set_softcap(5.0f);
    if (seed % 3 == 2) t.set_window(int(pick.below(8, 4)), 0, AFZ_ALIGN_BOTTOM_RIGHT);
    const afz_problem p = t.problem();
    const OracleResult rb = boost->compute(p), rf = fast->compute(p);
    const std::string what = "seed " + std::to_string(seed);
    expect_no_nan(rf, what);
    if (mpfr) {
      const OracleResult rm = mpfr->compute(p);
      expect_agree_bits(rm, rb, kAgreementBits, what);
      expect_within_bound(rf, rm, what);
    } else {
      expect_within_bound(rf, rb, what);
    }
  }
}

}  // namespace
}  // namespace afz::test
