// Declining before the inputs are built: scale cases on host kernels and on
// the CPU oracle are `unsupported` with a one-line reason, at once (a huge
// K/V case would need 64 GiB if it were built), while every default-class
// case is declined by nothing.
#include "harness/run/case_budget.h"

#include <gtest/gtest.h>

#include <chrono>

#include "harness/campaign/campaign.h"
#include "harness/case/case_io.h"
#include "harness/case/materialize.h"
#include "harness/case/scale_generator.h"
#include "harness/run/runner.h"
#include "tests/harness/planted_kernel.h"

namespace afz {
namespace {

constexpr uint64_t kSeed = 31;
constexpr int kScaleCases = 40;
// A declined case returns at once; building a huge one takes minutes.
constexpr double kDeclineSeconds = 5.0;

const GeneratorDef& scale_class() { return *find_generator("scale"); }

// The first scale case whose K/V pass 2^31 elements.
Case huge_case() {
  for (uint64_t i = 0;; ++i) {
    Case c = generate_with(scale_class(), kSeed, i);
    if (int64_t(c.batch) * c.heads_kv * c.max_seqlen_k() * c.head_dim > kElements2p31) return c;
  }
}

// The first scale case past the host work budget (a long row).
Case long_case() {
  for (uint64_t i = 0;; ++i) {
    Case c = generate_with(scale_class(), kSeed, i);
    if (case_work(c) > kHostWorkLimit) return c;
  }
}

// A GPU kernel's caps on the planted kernel (never run here).
struct GpuCaps {
  testing::PlantedKernel planted{"planted.gpu_caps", AFZ_CAP_GPU | AFZ_CAP_CAUSAL_TOP_LEFT |
                                                          AFZ_CAP_CAUSAL_BOTTOM_RIGHT | AFZ_CAP_WINDOW |
                                                          AFZ_CAP_VARLEN | AFZ_CAP_GQA | AFZ_CAP_LSE};
};

TEST(CaseBudget, HostKernelsDeclineEveryScaleCaseBeforeBuildingIt) {
  testing::PlantedKernel host{"planted.host"};
  host.jitter = true;  // counts every run (runs)
  const Runner runner{RunOptions{}};
  for (int i = 0; i < kScaleCases; ++i) {
    const Case c = generate_with(scale_class(), kSeed, uint64_t(i));
    const std::string why = runner.declined_before_inputs(host.k, c);
    if (case_work(c) <= kHostWorkLimit && largest_tensor(c) <= kHostTensorLimit) {
      EXPECT_EQ(why, "") << i;  // a small threshold case: a host kernel may take it
      continue;
    }
    EXPECT_NE(why.find("a host kernel is given per"), std::string::npos) << i << ": " << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const CaseOutcome o = runner.run(host.k, huge_case());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), kDeclineSeconds);
  EXPECT_EQ(o.verdict.cls, VerdictClass::Unsupported);
  EXPECT_NE(o.verdict.detail.find("past the 2147483648 a host kernel is given per tensor"), std::string::npos)
      << o.verdict.detail;
  EXPECT_EQ(host.runs.load(), 0u);
}

// A GPU kernel's case past the CPU oracle's budget needs --oracle gpu, or
// row sampling that brings the CPU oracle's rows within it.
TEST(CaseBudget, TheCpuOracleDeclinesWhatOnlyTheGpuOracleAffords) {
  GpuCaps gpu;
  const Case c = long_case();
  BudgetQuery q;
  const std::string why = budget_reason(gpu.planted.k, c, q);
  EXPECT_NE(why.find("the CPU oracle would spend"), std::string::npos) << why;
  EXPECT_NE(why.find("--oracle gpu"), std::string::npos) << why;
  q.gpu_oracle = true;
  EXPECT_EQ(budget_reason(gpu.planted.k, c, q), "");
  // The backward oracles are CPU tiers whatever --oracle says.
  q.backward = true;
  EXPECT_NE(budget_reason(gpu.planted.k, c, q).find("CPU backward oracle"), std::string::npos);
  // Sampling: the CPU oracle computes the checked rows only.
  q = BudgetQuery{};
  q.sampling.max_rows = 8;
  q.sampling.tile_rows = kKeys2p15;  // few tile edges: the checked rows are a handful
  EXPECT_LT(cpu_oracle_work(c, q.sampling), case_work(c));
  EXPECT_LE(cpu_oracle_work(c, q.sampling), kHostWorkLimit) << write_case(c);
  EXPECT_EQ(budget_reason(gpu.planted.k, c, q), "");
}

TEST(CaseBudget, MemoryShortOfTheInputsDeclines) {
  GpuCaps gpu;
  const Case c = huge_case();
  // K and V: a double and the stored element each, plus the GPU worker's copies.
  const int64_t kv = 2 * kElements2p31;
  EXPECT_GT(host_bytes(c, false), kv * int64_t(sizeof(double) + 2));
  EXPECT_GT(host_bytes(c, true), host_bytes(c, false));
  BudgetQuery q;
  q.gpu_oracle = true;
  q.memory_bytes = int64_t{16} << 30;
  const std::string why = budget_reason(gpu.planted.k, c, q);
  EXPECT_NE(why.find("GiB of host memory"), std::string::npos) << why;
  q.memory_bytes = int64_t{1} << 40;
  EXPECT_EQ(budget_reason(gpu.planted.k, c, q), "");
  EXPECT_GE(physical_memory_bytes(), 0);
}

// The sampled rows' edges as checked_rows counts them.
TEST(CaseBudget, EdgeRowsAgreeWithTheRowSampler) {
  Case c;
  c.batch = 2;
  c.heads_q = c.heads_kv = 3;
  c.seqlens_q = {130, 1};
  c.seqlens_k = {7, 7};
  const Materialized m(c);
  RowSampling s;
  s.max_rows = 1;
  RowCoverage cov;
  checked_rows(m.problem(), s, &cov);
  EXPECT_EQ(cov.edge_rows, 3 * (sequence_edge_rows(130, s.tile_rows) + sequence_edge_rows(1, s.tile_rows)));
  // 130 rows, tile 64: rows 0, 63, 64, 127, 128, 129; one row is its own first and last.
  EXPECT_EQ(sequence_edge_rows(130, 64), 6);
  EXPECT_EQ(sequence_edge_rows(1, 64), 1);
  EXPECT_EQ(sequence_edge_rows(0, 64), 0);
}

// The default classes are untouched: nothing in them reaches a budget.
TEST(CaseBudget, NoDefaultClassCaseIsDeclined) {
  testing::PlantedKernel host{"planted.host"};
  const Runner runner{RunOptions{}};
  const GeneratorMix mix = GeneratorMix::defaults(Pass::Both);
  for (uint64_t i = 0; i < 500; ++i) {
    const GeneratedCase g = generate_case(mix, kSeed, i);
    EXPECT_EQ(runner.declined_before_inputs(host.k, g.c, g.c.pass == Pass::Bwd), "") << g.generator->name << " " << i;
  }
}

// `fuzz --classes scale` on a host kernel, over a seed whose first cases
// are all past the host budget: every case unsupported, none built or run.
TEST(CaseBudget, AScaleCampaignOnAHostKernelDeclinesEveryCaseQuickly) {
  constexpr int kCampaignCases = 4;
  auto all_past = [&](uint64_t seed) {
    for (int i = 0; i < kCampaignCases; ++i)
      if (case_work(generate_with(scale_class(), seed, uint64_t(i))) <= kHostWorkLimit) return false;  // may run
    return true;
  };
  uint64_t seed = kSeed;
  while (!all_past(seed)) ++seed;
  testing::PlantedKernel host{"planted.host"};
  host.jitter = true;  // counts every run (runs)
  const Runner runner{RunOptions{}};
  CampaignOptions o;
  o.kernels = {{&host.k, "builtin"}};
  o.seed = seed;
  o.cases = kCampaignCases;
  std::string error;
  o.mix = *GeneratorMix::parse("scale", &error);
  const auto t0 = std::chrono::steady_clock::now();
  const Report r = run_campaign(o, runner);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), kDeclineSeconds);
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_TRUE(r.failures.empty());
  ASSERT_EQ(r.cells.size(), 1u);
  EXPECT_EQ(r.cells[0].generator, "scale");
  EXPECT_EQ(r.cells[0].count(VerdictClass::Unsupported), kCampaignCases);
  EXPECT_EQ(host.runs.load(), 0u);
}

}  // namespace
}  // namespace afz
