// The split verdict (verdict_summary.h) with its rows judged on this CPU by
// the steps the GPU runs (HostRowJudge) gives judge()'s Verdict bit for bit,
// for every CPU kernel and mutant on generated cases with planted defects,
// with escalated rows, and with sampled rows.
#include "harness/judge/verdict_summary.h"

#include <gtest/gtest.h>

#include <limits>

#include "harness/judge/verdict_compare.h"
#include "kernels/abi/dtype.h"
#include "tests/harness/judge/verdict_cases.h"

namespace afz {
namespace {

constexpr uint64_t kSeed = 1516;
constexpr int kCases = 16;
constexpr int64_t kMaxWork = int64_t(1) << 18;  // MPFR escalates whole rows of these on the CPU
TEST(VerdictSummary, HostRowsGiveJudgesVerdictForEveryCpuKernel) {
  const auto fast = make_fast_oracle();
  const auto precise = make_escalation_oracle();
  int escalated = 0;
  const int judged = testing::for_each_judged_case(
      *fast, kSeed, kCases, kMaxWork,
      [&](const afz_kernel& k, const Materialized& m, const OracleResult& r, const std::string& what) {
        for (bool force_escalation : {false, true}) {
          OracleResult want_r = r, got_r = r;
          if (force_escalation) testing::loosen(want_r), testing::loosen(got_r);
          const Verdict want = judge(k, m, want_r, precise.get());
          HostRowJudge rows(k, m, got_r);
          const Verdict got = judge_by_rows(k, m, got_r, precise.get(), {}, rows);
          testing::expect_same_verdict(got, want, what + (force_escalation ? " escalated" : ""));
          escalated += got.escalated_rows > 0;
        }
      });
  EXPECT_GT(judged, 100);
  EXPECT_GT(escalated, 0);
}

TEST(VerdictSummary, SampledRowsGiveJudgesVerdict) {
  const auto fast = make_fast_oracle();
  RowSampling sampling;
  sampling.max_rows = 5;
  sampling.tile_rows = 4;
  sampling.seed = 7;
  int sampled = 0;
  testing::for_each_judged_case(
      *fast, kSeed + 1, kCases, kMaxWork,
      [&](const afz_kernel& k, const Materialized& m, const OracleResult& r, const std::string& what) {
        OracleResult want_r = r, got_r = r;
        const Verdict want = judge(k, m, want_r, nullptr, sampling);
        HostRowJudge rows(k, m, got_r);
        const Verdict got = judge_by_rows(k, m, got_r, nullptr, sampling, rows);
        testing::expect_same_verdict(got, want, what + " sampled");
        sampled += got.coverage.sampled;
      });
  EXPECT_GT(sampled, 0);
}

// The bit steps the device runs (dtype.h, bits_steps): over every fp16 and
// bf16 pattern, decode inverts round_bits and ulp is the gap to the next
// value away from zero.
TEST(VerdictSummary, BitStepsDecodeEveryHalfPattern) {
  for (afz_dtype t : {AFZ_F16, AFZ_BF16}) {
    const FloatFormat& f = format_of(t);
    for (uint32_t bits = 0; bits < (1u << 16); ++bits) {
      const double v = bits_steps::decode(f, bits);
      if (std::isnan(v)) {
        EXPECT_EQ(round_bits(f, v) & 0x7fffu, quiet_nan_bits(t) & 0x7fffu) << bits;
        continue;
      }
      EXPECT_EQ(round_bits(f, v), bits) << dtype_name(t) << " " << bits;  // decode is round_bits' inverse
      if (std::isfinite(v) && v != 0) {
        // ulp is the gap to the next value away from zero.
        const double next = bits_steps::decode(f, bits + 1);
        if (std::isfinite(next)) EXPECT_EQ(ulp(t, v), std::fabs(next - v)) << bits;
      }
    }
  }
}

// The comparison the GPU tests and benchmark rely on sees a change in any
// field judge_by_rows assembles.
TEST(VerdictSummary, VerdictDifferenceNamesTheFieldThatDiffers) {
  Verdict a;
  a.cls = VerdictClass::NumericMismatch;
  a.detail = "o[b=0 h=0 i=1 d=2] beyond its bound";
  a.worst.valid = true;
  a.worst.over_bound = 3;
  a.o_stats.add_element(3, 1);
  EXPECT_EQ(verdict_difference(a, a), "");
  Verdict b = a;
  b.worst.i = 2;
  EXPECT_NE(verdict_difference(a, b).find("worst"), std::string::npos);
  b = a;
  b.max_over_bound = -0.0;  // equal as doubles, not as bits
  EXPECT_NE(verdict_difference(a, b).find("max over bound"), std::string::npos);
  b = a;
  b.o_stats.add_row(3, 0, 1);
  EXPECT_NE(verdict_difference(a, b).find("o_stats"), std::string::npos);
  b = a;
  b.detail += ".";
  EXPECT_NE(verdict_difference(a, b).find("detail"), std::string::npos);
}

}  // namespace
}  // namespace afz
