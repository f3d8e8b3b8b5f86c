// The verdict on the GPU (harness/judge/gpu_verdict.h) against judge() on
// the same cases: every CPU kernel and mutant on generated cases with
// planted defects (unwritten elements, NaN, a log2 LSE, a poisoned LSE; the
// generators give fully masked and padding rows), with the fast tier's
// undecided rows escalated and with rows forced to escalate, with sampled
// rows, and with the GPU oracle's own result.  Bit for bit: the device runs
// the host's steps on the host's row factors (verdict_steps.h).
//
// In attnfuzz_gpu_oracle_tests (the tier calls CUDA in the test process:
// see gpu_oracle_test.cpp).  Without a device every test skips with the reason.
#include "harness/judge/gpu_verdict.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "harness/run/runner.h"
#include "tests/harness/judge/verdict_cases.h"

namespace afz {
namespace {

constexpr uint64_t kSeed = 1517;
constexpr int kCases = 24;
constexpr int64_t kMaxWork = int64_t(1) << 20;  // every kernel and plant judged twice: about a minute on the H200 host

// The reason there is no GPU verdict here (make_gpu_row_judge asks the
// same question), or "" where there is one.
std::string no_device() {
  std::string why;
  return make_gpu_oracle(&why) ? "" : why;
}

#define GPU_OR_SKIP()                                  \
  if (const std::string why = no_device(); !why.empty()) \
  GTEST_SKIP() << why

Verdict on_gpu(const afz_kernel& k, const Materialized& m, OracleResult& r, const Oracle* escalate,
               const RowSampling& sampling) {
  std::string why;
  std::optional<Verdict> v = judge_on_gpu(k, m, r, escalate, sampling, &why);
  if (!v) ADD_FAILURE() << "no GPU verdict: " << why;
  return v.value_or(Verdict{});
}

TEST(GpuVerdict, EqualsJudgeForEveryCpuKernel) {
  GPU_OR_SKIP();
  const auto fast = make_fast_oracle();
  const auto precise = make_escalation_oracle();
  int escalated = 0;
  const int judged = testing::for_each_judged_case(
      *fast, kSeed, kCases, kMaxWork, testing::kPlants,
      [&](const afz_kernel& k, const Materialized& m, const OracleResult& r, const std::string& what) {
        testing::expect_equals_judge(on_gpu, k, m, r, precise.get(), {}, false, what, &escalated);
      });
  EXPECT_GT(judged, 100);
}

// A third of the rows escalated to MPFR and judged on the host, merged
// with the GPU's summary of the rest.
TEST(GpuVerdict, EscalatedRowsMergeIntoJudgesVerdict) {
  GPU_OR_SKIP();
  const auto fast = make_fast_oracle();
  const auto precise = make_escalation_oracle();
  int escalated = 0;
  testing::for_each_judged_case(
      *fast, kSeed + 1, kCases, testing::kEscalationMaxWork, testing::kEscalationPlants,
      [&](const afz_kernel& k, const Materialized& m, const OracleResult& r, const std::string& what) {
        testing::expect_equals_judge(on_gpu, k, m, r, precise.get(), {}, true, what + " escalated", &escalated);
      });
  EXPECT_GT(escalated, 0);
}

// Sampled rows, a third of them escalated.
TEST(GpuVerdict, EqualsJudgeOnSampledRows) {
  GPU_OR_SKIP();
  const auto fast = make_fast_oracle();
  const auto precise = make_escalation_oracle();
  int escalated = 0, sampled = 0;
  testing::for_each_judged_case(
      *fast, kSeed + 2, kCases, testing::kSampledMaxWork, testing::kPlants,
      [&](const afz_kernel& k, const Materialized& m, const OracleResult& r, const std::string& what) {
        testing::expect_equals_judge(on_gpu, k, m, r, precise.get(), testing::kSampling, true, what + " sampled",
                                     &escalated);
        sampled += checked_rows(m.problem(), testing::kSampling, nullptr).size() < size_t(r.rows());
      });
  EXPECT_GT(sampled, 0);
  EXPECT_GT(escalated, 0);
}

TEST(GpuVerdict, TiedRowsGiveTheFirstRowAsJudgeDoes) {
  GPU_OR_SKIP();
  const auto precise = make_escalation_oracle();
  int escalated = 0;
  const int first = testing::tied_rows_at_first_row(
      [&](const afz_kernel& k, const Materialized& m, const OracleResult& r, const std::string& what) {
        testing::expect_equals_judge(on_gpu, k, m, r, nullptr, {}, false, what, &escalated);
        testing::expect_equals_judge(on_gpu, k, m, r, precise.get(), {}, true, what + " escalated", &escalated);
      });
  EXPECT_GT(first, 0);
}

// The configuration --oracle gpu runs: the GPU tier's result, the Runner's
// choice of judge.  The Runner's verdict equals judge() on a copy of the
// same reference.
TEST(GpuVerdict, RunnerWithTheGpuTierEqualsJudge) {
  GPU_OR_SKIP();
  std::string why;
  const auto gpu = make_gpu_oracle(&why);
  ASSERT_TRUE(gpu) << why;
  RunOptions o;
  o.oracle = OracleTier::Gpu;
  const Runner runner(o);
  const auto precise = make_escalation_oracle();
  const KernelRegistry reg = KernelRegistry::with_builtins();
  const GeneratorMix mix = GeneratorMix::defaults();
  int judged = 0;
  for (int n = 0; n < kCases; ++n) {
    const GeneratedCase gc = generate_case(mix, kSeed + 3, uint64_t(n));
    if (case_work(gc.c) > kMaxWork) continue;
    Materialized m(gc.c);
    OracleResult r;
    try {
      r = gpu->compute(m.problem());
    } catch (const std::invalid_argument&) {
      continue;
    }
    for (const KernelEntry& e : reg.entries()) {
      if ((e.kernel->caps.flags & AFZ_CAP_GPU) || e.origin == "faulty") continue;
      OracleResult run_r = r;
      const CaseOutcome out = runner.run(*e.kernel, m, &run_r);
      if (out.verdict.cls == VerdictClass::Unsupported) continue;
      OracleResult want_r = r;
      const Verdict want = judge(*e.kernel, m, want_r, precise.get());
      testing::expect_same_verdict(out.verdict, want, std::string(e.kernel->name) + " case " + std::to_string(n));
      ++judged;
    }
  }
  EXPECT_GT(judged, 0);
}

// Runs everywhere: the answer is a verdict or a one-line reason, never a
// crash, and without an answer r is left as it was (the CPU judge follows).
TEST(GpuVerdict, WithoutADeviceSaysWhyInOneLine) {
  if (no_device().empty()) GTEST_SKIP() << "a device is present";
  const Materialized m(testing::tied_rows_case());
  const auto fast = make_fast_oracle();
  OracleResult r = fast->compute(m.problem());
  const std::vector<DD> before = r.o;
  const KernelRegistry reg = KernelRegistry::with_builtins();
  const afz_kernel& k = *reg.entries().front().kernel;
  std::string why;
  EXPECT_FALSE(judge_on_gpu(k, m, r, make_escalation_oracle().get(), {}, &why).has_value());
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  EXPECT_TRUE(std::equal(before.begin(), before.end(), r.o.begin(),
                         [](const DD& a, const DD& b) { return a.hi == b.hi && a.lo == b.lo; }));
}

}  // namespace
}  // namespace afz
