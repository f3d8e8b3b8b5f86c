#include "harness/judge/verdict.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "harness/run/runner.h"
#include "tests/harness/test_kernels.h"

namespace afz {
namespace {

using testing::FakeKernel;

Case base_case() {
  Case c;
  c.batch = 2;
  c.heads_q = 2;
  c.heads_kv = 1;
  c.seqlens_q = {9, 4};
  c.seqlens_k = {33, 17};
  c.head_dim = 16;
  c.head_dim_v = 16;
  c.seed = 7;
  c.bool_mask = MaskPattern{"rows_every", {4, 1}};  // some fully masked rows
  return c;
}

struct Fixture {
  Case c = base_case();
  Materialized m{c};
  std::unique_ptr<Oracle> oracle = make_boost_oracle();
  OracleResult r = oracle->compute(m.problem());
  FakeKernel fake{c.in_dtype, c.out_dtype};
  Fixture() { fake.oracle = &r; }
  Verdict judge_fake() {
    m.poison_outputs();
    char err[64];
    EXPECT_EQ(fake.k.run(&fake.k, &m.problem(), err, sizeof err), 0);
    return judge(fake.k, m, r, nullptr);
  }
};

TEST(Verdict, CorrectlyRoundedOutputPasses) {
  Fixture f;
  const Verdict v = f.judge_fake();
  EXPECT_EQ(v.cls, VerdictClass::Pass) << v.detail;
  EXPECT_GT(v.elements, 0);
  EXPECT_LT(v.max_over_bound, 1.0);
}

TEST(Verdict, AnElementFarOffIsANumericMismatch) {
  Fixture f;
  f.fake.o_value = [](int b, int h, int i, int x, double e) { return (b == 1 && h == 1 && i == 2 && x == 5) ? e + 0.25 : e; };
  const Verdict v = f.judge_fake();
  EXPECT_EQ(v.cls, VerdictClass::NumericMismatch);
  EXPECT_EQ(v.failing, 1);
  EXPECT_EQ(v.worst.b, 1);
  EXPECT_EQ(v.worst.i, 2);
  EXPECT_EQ(v.worst.x, 5);
  EXPECT_GT(v.worst.over_bound, 1.0);
}

TEST(Verdict, NaNWhereTheOracleIsFinite) {
  Fixture f;
  f.fake.o_value = [](int, int, int i, int x, double e) {
    return (i == 0 && x == 0) ? std::numeric_limits<double>::quiet_NaN() : e;
  };
  EXPECT_EQ(f.judge_fake().cls, VerdictClass::NanInf);
}

TEST(Verdict, MaskedRowMustFollowTheConvention) {
  Fixture f;
  // Row 1 of every sequence is fully masked: a kernel writing 0/0 there.
  f.fake.o_value = [](int, int, int i, int, double e) {
    return i % 4 == 1 ? std::numeric_limits<double>::quiet_NaN() : e;
  };
  EXPECT_EQ(f.judge_fake().cls, VerdictClass::SemanticMismatch);
  // Declared: masked rows give NaN.  Now the NaN is right.
  f.fake.k.conventions.masked_row_output = AFZ_MASKED_ROW_NAN;
  EXPECT_EQ(f.judge_fake().cls, VerdictClass::Pass);
}

TEST(Verdict, EmptyLseConvention) {
  Fixture f;
  f.fake.lse_value = [](int, int, int i, double e) { return i % 4 == 1 ? std::numeric_limits<double>::infinity() : e; };
  EXPECT_EQ(f.judge_fake().cls, VerdictClass::SemanticMismatch);
  f.fake.k.conventions.empty_lse = AFZ_EMPTY_LSE_POS_INF;
  EXPECT_EQ(f.judge_fake().cls, VerdictClass::Pass);
}

TEST(Verdict, Log2LseIsNamed) {
  Fixture f;
  constexpr double kLog2e = 0x1.71547652b82fep0;
  f.fake.lse_value = [](int, int, int, double e) { return e * kLog2e; };
  const Verdict v = f.judge_fake();
  EXPECT_EQ(v.cls, VerdictClass::SemanticMismatch);
  EXPECT_NE(v.detail.find("log2"), std::string::npos) << v.detail;
}

TEST(Verdict, UnwrittenElement) {
  Fixture f;
  f.fake.skip = [](int b, int h, int i, int x) { return b == 0 && h == 1 && i == 8 && x == 15; };
  EXPECT_EQ(f.judge_fake().cls, VerdictClass::Unwritten);
}

TEST(Runner, CrashAndHangBecomeVerdicts) {
  Fixture f;
  RunOptions o;
  o.isolate = true;
  o.timeout_s = 1;
  o.oracle = OracleTier::Boost;
  Runner runner(o);
  f.fake.before = [] { std::abort(); return 0; };
  EXPECT_EQ(runner.run(f.fake.k, f.m, &f.r).verdict.cls, VerdictClass::Crash);
  f.fake.before = [] { volatile int* p = nullptr; return *p; };
  EXPECT_EQ(runner.run(f.fake.k, f.m, &f.r).verdict.cls, VerdictClass::Crash);
  f.fake.before = [] { for (volatile bool spin = true; spin;) {} return 0; };
  EXPECT_EQ(runner.run(f.fake.k, f.m, &f.r).verdict.cls, VerdictClass::Hang);
  f.fake.before = [] { return 7; };
  const Verdict v = runner.run(f.fake.k, f.m, &f.r).verdict;
  EXPECT_EQ(v.cls, VerdictClass::Crash);
  f.fake.before = nullptr;
  EXPECT_EQ(runner.run(f.fake.k, f.m, &f.r).verdict.cls, VerdictClass::Pass) << "isolated run sends outputs back";
}

// A plugin whose own watchdog gave up (the Python bridge) returns
// AFZ_RUN_HANG: a hang verdict with its message, in process and isolated.
TEST(Runner, APluginsHangCodeIsAHangVerdict) {
  for (const bool isolate : {false, true}) {
    Fixture f;
    RunOptions o;
    o.isolate = isolate;
    o.oracle = OracleTier::Boost;
    Runner runner(o);
    f.fake.before = [] { return AFZ_RUN_HANG; };
    f.fake.error = "no result after 2.0 s: worker killed";
    const Verdict v = runner.run(f.fake.k, f.m, &f.r).verdict;
    EXPECT_EQ(v.cls, VerdictClass::Hang) << (isolate ? "isolated" : "in process");
    EXPECT_EQ(v.detail, f.fake.error);
  }
}

TEST(Runner, NondeterminismIsCaught) {
  Fixture f;
  RunOptions o;
  o.check_determinism = true;
  o.oracle = OracleTier::Boost;
  Runner runner(o);
  int calls = 0;
  f.fake.before = [&calls] { ++calls; return 0; };
  // The second call differs in one element, by much less than the bound.
  f.fake.o_value = [&calls](int, int, int i, int x, double e) { return (calls > 1 && i == 0 && x == 0) ? e * (1 + 0x1p-7) : e; };
  EXPECT_EQ(runner.run(f.fake.k, f.m, &f.r).verdict.cls, VerdictClass::Nondeterministic);
}

TEST(Runner, DeclaredNondeterministicKernelIsNotHeldToIdenticalBits) {
  Fixture f;
  RunOptions o;
  o.check_determinism = true;
  o.oracle = OracleTier::Boost;
  Runner runner(o);
  int calls = 0;
  f.fake.k.caps.flags |= AFZ_CAP_NONDETERMINISTIC;
  f.fake.before = [&calls] { ++calls; return 0; };
  f.fake.o_value = [&calls](int, int, int i, int x, double e) { return (calls > 1 && i == 0 && x == 0) ? e * (1 + 0x1p-7) : e; };
  EXPECT_EQ(runner.run(f.fake.k, f.m, &f.r).verdict.cls, VerdictClass::Pass);
  EXPECT_EQ(calls, 1);  // no rerun at all
}

// The ABI's promise: a kernel without AFZ_CAP_LSE is handed lse = NULL,
// in process and isolated alike; the harness's buffer is back afterwards.
TEST(Runner, KernelWithoutLseCapabilityGetsNoLseBuffer) {
  for (bool isolate : {false, true}) {
    Fixture f;
    RunOptions o;
    o.isolate = isolate;
    o.oracle = OracleTier::Boost;
    Runner runner(o);
    f.fake.k.caps.flags &= ~uint32_t(AFZ_CAP_LSE);
    const float* const harness_lse = f.m.problem().lse;
    f.fake.before = [&f] { return f.m.problem().lse == nullptr ? 0 : 1; };
    f.fake.error = "the kernel was handed an LSE buffer";
    const CaseOutcome out = runner.run(f.fake.k, f.m, &f.r);
    EXPECT_EQ(out.verdict.cls, VerdictClass::Pass) << out.verdict.detail << (isolate ? " (isolated)" : "");
    EXPECT_EQ(f.m.problem().lse, harness_lse);
  }
}

// A library that refuses a configuration at run time (AFZ_RUN_UNSUPPORTED)
// gives `unsupported` with its own reason, in process and isolated alike.
TEST(Runner, LibraryRefusalAtRunTimeIsUnsupportedWithItsReason) {
  for (bool isolate : {false, true}) {
    Fixture f;
    RunOptions o;
    o.isolate = isolate;
    o.oracle = OracleTier::Boost;
    Runner runner(o);
    f.fake.before = [] { return AFZ_RUN_UNSUPPORTED; };
    f.fake.error = "head_dim 72 is not supported by this engine";
    const CaseOutcome out = runner.run(f.fake.k, f.m, &f.r);
    EXPECT_EQ(out.verdict.cls, VerdictClass::Unsupported) << (isolate ? "isolated" : "in process");
    EXPECT_EQ(out.verdict.detail, "head_dim 72 is not supported by this engine");
  }
}

}  // namespace
}  // namespace afz

namespace afz {
namespace {

// Ulps in the error statistics are taken at the row's scale: an output
// whose exact value is tiny next to the rest of its row, written as 0 (an
// error inside the bound), is a fraction of an ulp off, not a significand's
// worth (2^23 ulps for fp32 outputs).
TEST(Verdict, UlpStatisticsAreAtTheRowScale) {
  Fixture f;
  int64_t tiny = -1;
  double smallest = std::numeric_limits<double>::infinity();
  for (int64_t e = 0; e < int64_t(f.r.o.size()); ++e) {
    const double v = std::fabs(f.r.o[size_t(e)].hi);
    if (v > 0 && v < smallest) smallest = v, tiny = e;
  }
  ASSERT_GE(tiny, 0);
  const int64_t tiny_row = tiny / f.r.dv;
  const int tiny_x = int(tiny % f.r.dv);
  f.fake.o_value = [&](int b, int h, int i, int x, double e) {
    return f.r.row_index(b, h, i) == tiny_row && x == tiny_x ? 0.0 : e;
  };
  const Verdict v = f.judge_fake();
  ASSERT_EQ(v.cls, VerdictClass::Pass) << v.detail << " (exact " << smallest << ")";
  EXPECT_LT(v.o_stats.max_ulps, 1.0) << "exact " << smallest;
  // At the element's own exact value the same error is a whole significand:
  // about 2^(precision - 1) ulps, which is what the old statistic said.
  const double at_element = smallest / ulp(f.c.out_dtype, smallest);
  EXPECT_GT(at_element, 64.0);
  EXPECT_GT(at_element, 100 * v.o_stats.max_ulps);
}

}  // namespace
}  // namespace afz
