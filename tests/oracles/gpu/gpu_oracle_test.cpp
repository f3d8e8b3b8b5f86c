// The GPU oracle tier (oracles/gpu) against the CPU tiers, on CPU-built
// cases: the fuzz generators' (masks, windows and both alignments, softcap,
// GQA, varlen, padding and empty rows, every dtype) and hand-built extremes.
// Its own binary (attnfuzz_gpu_oracle_tests): the tier calls CUDA in the
// test process, which must not happen before attnfuzz_tests forks its GPU
// workers without exec (harness/run/gpu/gpu_run.h).
//
// Without a device every test but the error path skips with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>

#include "harness/case/generators.h"
#include "harness/case/materialize.h"
#include "harness/run/runner.h"
#include "kernels/registry.h"
#include "oracles/oracle.h"
#include "tests/oracles/problem_builder.h"

namespace afz {
namespace {

constexpr uint64_t kSeed = 1515;
constexpr int kGeneratedCases = 80;
// Work (multiply-adds, generators.h case_work) up to which a case is also
// checked against MPFR, and judged for every CPU kernel: the suite stays
// within a minute of CPU time on the H200's host.
constexpr int64_t kMpfrMaxWork = int64_t(1) << 20;
constexpr int64_t kKernelsMaxWork = int64_t(1) << 23;
constexpr int kVerdictCases = 24;
constexpr int64_t kFastMaxWork = int64_t(1) << 28;  // about a second of the CPU fast tier

std::unique_ptr<Oracle> gpu_or_skip_reason(std::string* why) { return make_gpu_oracle(why); }

#define GPU_ORACLE_OR_SKIP(name)                    \
  std::string why_##name;                           \
  auto name = gpu_or_skip_reason(&why_##name);      \
  if (!name) GTEST_SKIP() << why_##name

// |a - b| for two double-doubles, accurate when they are close.
double dd_distance(DD a, DD b) { return std::fabs((a.hi - b.hi) + (a.lo - b.lo)); }

// Both results within their own bounds of one exact value: |g - f| <= err_g + err_f.
// Against the fast tier (same_tier) the condition terms and bounds agree too,
// and so do the rows either one cannot resolve.
void expect_agree(const OracleResult& g, const OracleResult& f, const std::string& what, bool same_reference,
                  bool same_tier) {
  ASSERT_EQ(g.rows(), f.rows()) << what;
  ASSERT_EQ(g.dv, f.dv) << what;
  for (int64_t r = 0; r < g.rows(); ++r) {
    ASSERT_EQ(g.empty[r], f.empty[r]) << what << " row " << r;
    ASSERT_EQ(g.visible_keys[r], f.visible_keys[r]) << what << " row " << r;
    // Scores are computed bit for bit alike (only exp, log and tanh may
    // round differently), so without a softcap the reference key is the same.
    if (same_reference) {
      ASSERT_EQ(g.max_key[r], f.max_key[r]) << what << " row " << r;
    }
    if (f.empty[r]) {
      EXPECT_EQ(g.lse[r].hi, -std::numeric_limits<double>::infinity()) << what;
      for (int x = 0; x < g.dv; ++x) EXPECT_EQ(g.o[r * g.dv + x].hi, 0.0) << what;
      continue;
    }
    if (std::isfinite(g.lse_err[r]) && std::isfinite(f.lse_err[r])) {
      EXPECT_LE(dd_distance(g.lse[r], f.lse[r]), g.lse_err[r] + f.lse_err[r]) << what << " lse row " << r;
    }
    if (same_tier) {
      EXPECT_EQ(std::isfinite(g.lse_err[r]), std::isfinite(f.lse_err[r])) << what << " row " << r;
    }
    for (int x = 0; x < g.dv; ++x) {
      const int64_t e = r * g.dv + x;
      if (!std::isfinite(g.o_err[e]) || !std::isfinite(f.o_err[e])) continue;
      EXPECT_LE(dd_distance(g.o[e], f.o[e]), g.o_err[e] + f.o_err[e]) << what << " o row " << r << " x " << x;
      // The condition terms feed the verdict's bound: equal to a few ulps.
      EXPECT_NEAR(g.cond[e], f.cond[e], 1e-12 * f.cond[e] + 1e-300) << what;
      if (same_tier) {
        EXPECT_NEAR(g.o_err[e], f.o_err[e], 1e-6 * f.o_err[e] + 1e-300) << what;
      }
    }
  }
}

TEST(GpuOracle, AgreesWithTheFastAndMpfrTiersOnGeneratedCases) {
  GPU_ORACLE_OR_SKIP(gpu);
  const auto fast = make_fast_oracle();
  const auto precise = make_escalation_oracle();
  const GeneratorMix mix = GeneratorMix::defaults();
  int compared = 0;
  for (int n = 0; n < kGeneratedCases; ++n) {
    const GeneratedCase gc = generate_case(mix, kSeed, uint64_t(n));
    if (case_work(gc.c) > kFastMaxWork) continue;
    Materialized m(gc.c);
    const afz_problem& p = m.problem();
    const std::string what = std::string(gc.generator->name) + " case " + std::to_string(n);
    OracleResult rf, rg;
    try {
      rf = fast->compute(p);
    } catch (const std::invalid_argument& e) {
      // Non-finite inputs on a visible path: the GPU tier says the same.
      EXPECT_THROW(
          {
            try {
              gpu->compute(p);
            } catch (const std::invalid_argument& g) {
              EXPECT_EQ(std::string(g.what()), std::string(e.what())) << what;
              throw;
            }
          },
          std::invalid_argument)
          << what;
      continue;
    }
    rg = gpu->compute(p);
    expect_agree(rg, rf, what + " (gpu vs fast)", p.softcap == 0, true);
    // Against the multiprecision tier on small cases: the GPU bound holds.
    if (case_work(gc.c) <= kMpfrMaxWork) {
      const OracleResult rp = precise->compute(p);
      expect_agree(rg, rp, what + " (gpu vs " + precise->name() + ")", false, false);
    }
    ++compared;
  }
  EXPECT_GT(compared, kGeneratedCases / 4);
}

// Extremes the fast tier is built for: an additive mask of the lowest
// finite fp32 on every key, scores of 1e30, and one long row.
TEST(GpuOracle, AgreesOnHugeMasksScoresAndLongRows) {
  GPU_ORACLE_OR_SKIP(gpu);
  const auto fast = make_fast_oracle();
  test::Shape s;
  s.batch = 2;
  s.heads_q = 4;
  s.heads_kv = 2;
  s.d = 72;
  s.dv = 40;
  s.seqlens_q = {37, 5};
  s.seqlens_k = {4099, 3};
  test::TestProblem t(s);
  t.fill_uniform(9, 3.0, 3.0, 1.0);
  t.set_add_mask([](int, int, int i, int j) { return (i + j) % 5 == 0 ? -3.4028234663852886e38 : 0.0; });
  t.set_window(700, 3, AFZ_ALIGN_BOTTOM_RIGHT);
  afz_problem p = t.problem();
  expect_agree(gpu->compute(p), fast->compute(p), "masked long rows", true, true);
  p.scale = 1e28f;
  expect_agree(gpu->compute(p), fast->compute(p), "huge scores", true, true);
  p.softcap = 30.0f;
  expect_agree(gpu->compute(p), fast->compute(p), "huge scores, softcapped", false, true);
}

// The verdict from the GPU tier's reference: the same class and worst
// element as from the CPU tier's, for every CPU kernel and mutant (rows
// either leaves open escalate to MPFR in both).
TEST(GpuOracle, VerdictsMatchTheFastTiersOnEveryCpuKernel) {
  GPU_ORACLE_OR_SKIP(gpu);
  const auto fast = make_fast_oracle();
  const KernelRegistry reg = KernelRegistry::with_builtins();
  const Runner runner(RunOptions{});
  const GeneratorMix mix = GeneratorMix::defaults();
  int judged = 0;
  for (int n = 0; n < kVerdictCases; ++n) {
    const GeneratedCase gc = generate_case(mix, kSeed + 1, uint64_t(n));
    if (case_work(gc.c) > kKernelsMaxWork) continue;
    Materialized m(gc.c);
    OracleResult rf;
    try {
      rf = fast->compute(m.problem());
    } catch (const std::invalid_argument&) {
      continue;  // the error path is the test above
    }
    OracleResult rg = gpu->compute(m.problem());
    for (const KernelEntry& e : reg.entries()) {
      if ((e.kernel->caps.flags & AFZ_CAP_GPU) || e.origin == "faulty") continue;
      OracleResult rf_copy = rf, rg_copy = rg;  // escalation rewrites rows
      const CaseOutcome of = runner.run(*e.kernel, m, &rf_copy);
      const CaseOutcome og = runner.run(*e.kernel, m, &rg_copy);
      const std::string what = std::string(e.kernel->name) + " on " + gc.generator->name + " case " + std::to_string(n);
      ASSERT_EQ(verdict_name(og.verdict.cls), verdict_name(of.verdict.cls)) << what << ": " << og.verdict.detail;
      // Counts, and where the worst element is (its ratio to the bound may
      // differ in the last bits: the condition terms come from either tier's weights).
      auto where = [](const Verdict& v) {
        const WorstElement& w = v.worst;
        return std::make_tuple(v.failing, v.elements, w.valid, w.is_lse, w.b, w.h, w.i, w.x);
      };
      EXPECT_EQ(where(og.verdict), where(of.verdict)) << what << ": worst " << og.verdict.worst.format() << " vs "
                                                      << of.verdict.worst.format();
      ++judged;
    }
  }
  EXPECT_GT(judged, 0);
}

// Runs everywhere: with a device the tier is the runner's primary with MPFR
// (or Boost) behind it; without one the runner refuses with the reason.
TEST(GpuOracle, RunnerTierGpuIsTheGpuTierOrAOneLineRefusal) {
  std::string why;
  const bool have = make_gpu_oracle(&why) != nullptr;
  RunOptions o;
  o.oracle = OracleTier::Gpu;
  if (have) {
    EXPECT_EQ(Runner(o).oracle_name().rfind("gpu+", 0), 0u);
    return;
  }
  EXPECT_FALSE(why.empty());
  try {
    Runner r(o);
    ADD_FAILURE() << "a runner with --oracle gpu and no device";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  EXPECT_EQ(parse_oracle_tier("gpu"), OracleTier::Gpu);
}

}  // namespace
}  // namespace afz
