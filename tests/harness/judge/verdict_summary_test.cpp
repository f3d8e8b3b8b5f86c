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
constexpr int kCases = 40;
constexpr int64_t kMaxWork = int64_t(1) << 21;  // a few seconds for every kernel and plant, judged twice
// The verdict under test: the rows judged by HostRowJudge.
void expect_host_rows_equal_judge(const afz_kernel& k, const Materialized& m, const OracleResult& r,
                                  const Oracle* escalate, const RowSampling& sampling, bool loosen,
                                  const std::string& what, int* escalated) {
  auto host_rows = [](const afz_kernel& k, const Materialized& m, OracleResult& r, const Oracle* escalate,
                      const RowSampling& sampling) {
    HostRowJudge rows(k, m, r);
    return judge_by_rows(k, m, r, escalate, sampling, rows);
  };
  testing::expect_equals_judge(host_rows, k, m, r, escalate, sampling, loosen, what, escalated);
}

TEST(VerdictSummary, HostRowsGiveJudgesVerdictForEveryCpuKernel) {
  const auto fast = make_fast_oracle();
  const auto precise = make_escalation_oracle();
  int escalated = 0;
  const int judged = testing::for_each_judged_case(
      *fast, kSeed, kCases, kMaxWork, testing::kPlants,
      [&](const afz_kernel& k, const Materialized& m, const OracleResult& r, const std::string& what) {
        expect_host_rows_equal_judge(k, m, r, precise.get(), {}, false, what, &escalated);
      });
  EXPECT_GT(judged, 100);
}

// A third of the rows escalated to MPFR and judged on the host, merged
// with the rest (small cases: MPFR recomputes those rows for each kernel).
TEST(VerdictSummary, EscalatedRowsMergeIntoJudgesVerdict) {
  const auto fast = make_fast_oracle();
  const auto precise = make_escalation_oracle();
  int escalated = 0;
  testing::for_each_judged_case(
      *fast, kSeed + 2, kCases, testing::kEscalationMaxWork, testing::kEscalationPlants,
      [&](const afz_kernel& k, const Materialized& m, const OracleResult& r, const std::string& what) {
        expect_host_rows_equal_judge(k, m, r, precise.get(), {}, true, what + " escalated", &escalated);
      });
  EXPECT_GT(escalated, 0);
}

// Sampled rows, a third of them escalated.
TEST(VerdictSummary, SampledRowsGiveJudgesVerdict) {
  const auto fast = make_fast_oracle();
  const auto precise = make_escalation_oracle();
  int escalated = 0, sampled = 0;
  testing::for_each_judged_case(
      *fast, kSeed + 1, kCases, testing::kSampledMaxWork, testing::kPlants,
      [&](const afz_kernel& k, const Materialized& m, const OracleResult& r, const std::string& what) {
        expect_host_rows_equal_judge(k, m, r, precise.get(), testing::kSampling, true, what + " sampled", &escalated);
        sampled += checked_rows(m.problem(), testing::kSampling, nullptr).size() < size_t(r.rows());
      });
  EXPECT_GT(sampled, 0);
  EXPECT_GT(escalated, 0);
}

TEST(VerdictSummary, TiedRowsGiveTheFirstRowAsJudgeDoes) {
  const auto precise = make_escalation_oracle();
  int escalated = 0;
  const int first = testing::tied_rows_at_first_row(
      [&](const afz_kernel& k, const Materialized& m, const OracleResult& r, const std::string& what) {
        expect_host_rows_equal_judge(k, m, r, nullptr, {}, false, what, &escalated);
        expect_host_rows_equal_judge(k, m, r, precise.get(), {}, true, what + " escalated", &escalated);
      });
  EXPECT_GT(first, 0);
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
