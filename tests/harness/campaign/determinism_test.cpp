// Determinism without a flag: a default campaign reruns a seeded share of
// its cases, so a kernel whose reruns differ fails it, unless the kernel
// declares AFZ_CAP_NONDETERMINISTIC.
#include "harness/campaign/determinism.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "harness/campaign/campaign.h"
#include "tests/harness/planted_kernel.h"

namespace afz {
namespace {

constexpr const char* kQuickClasses = "shapes=2,late_max=2,masking=1";
constexpr int64_t kCases = 32;

CampaignOptions default_campaign(const afz_kernel& k) {
  CampaignOptions o;  // rerun_share left at its default: no flag asks for reruns
  o.kernels = {{&k, "builtin"}};
  o.seed = 5;
  o.cases = kCases;
  std::string error;
  o.mix = *GeneratorMix::parse(kQuickClasses, &error);
  o.minimize_options.max_runs = 40;
  o.minimize_options.max_seconds = 1e9;
  return o;
}

TEST(Determinism, ShareIsAFunctionOfSeedAndIndex) {
  constexpr uint64_t kIndices = 8000;
  int64_t chosen = 0, differ = 0;
  for (uint64_t i = 0; i < kIndices; ++i) {
    const bool a = reruns_case(1, i, kDefaultRerunShare);
    EXPECT_EQ(a, reruns_case(1, i, kDefaultRerunShare));
    chosen += a;
    differ += a != reruns_case(2, i, kDefaultRerunShare);
    EXPECT_TRUE(reruns_case(1, i, 1));
    EXPECT_FALSE(reruns_case(1, i, 0));
  }
  // About 1 in kDefaultRerunShare (1000 of 8000; binomial sd about 30).
  EXPECT_NEAR(double(chosen), double(kIndices) / kDefaultRerunShare, 150.0);
  EXPECT_GT(differ, 0) << "another seed chooses other cases";
}

TEST(Determinism, DefaultCampaignCatchesAKernelWhoseRerunsDiffer) {
  testing::PlantedKernel jittery("planted.jitter");
  jittery.jitter = true;
  const Runner runner{RunOptions{}};  // no --determinism
  const Report r = run_campaign(default_campaign(jittery.k), runner);
  EXPECT_EQ(r.run.rerun_share, kDefaultRerunShare);
  int64_t chosen = 0;
  for (int64_t i = 0; i < kCases; ++i) chosen += reruns_case(5, uint64_t(i), kDefaultRerunShare);
  ASSERT_GT(chosen, 0);
  EXPECT_GT(r.run.reruns, 0);
  EXPECT_LE(r.run.reruns, chosen);  // a case the kernel declines runs nothing
  ASSERT_FALSE(r.failures.empty());
  for (const ReportFailure& f : r.failures) {
    EXPECT_EQ(f.verdict, VerdictClass::Nondeterministic) << f.detail;
    EXPECT_TRUE(reruns_case(5, uint64_t(f.case_index), kDefaultRerunShare)) << "case " << f.case_index;
  }
  // Its repro reruns the case too, or it would pass.
  CampaignOptions o = default_campaign(jittery.k);
  o.corpus_dir = (std::filesystem::temp_directory_path() / ("afz-determinism-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(o.corpus_dir);
  const Report with_corpus = run_campaign(o, runner);
  std::filesystem::remove_all(o.corpus_dir);
  ASSERT_FALSE(with_corpus.failures.empty());
  EXPECT_NE(with_corpus.failures[0].repro.find("--determinism"), std::string::npos) << with_corpus.failures[0].repro;
}

TEST(Determinism, NondeterministicKernelsAndShareZeroAreNotRerun) {
  testing::PlantedKernel declared("planted.atomics",
                                  ~uint32_t(AFZ_CAP_GPU));  // declares AFZ_CAP_NONDETERMINISTIC
  declared.jitter = true;
  const Runner runner{RunOptions{}};
  const Report r = run_campaign(default_campaign(declared.k), runner);
  EXPECT_TRUE(r.failures.empty()) << r.failures[0].detail;
  EXPECT_EQ(r.run.reruns, 0);

  testing::PlantedKernel jittery("planted.jitter");
  jittery.jitter = true;
  CampaignOptions o = default_campaign(jittery.k);
  o.rerun_share = 0;
  const Report unchecked = run_campaign(o, runner);
  EXPECT_TRUE(unchecked.failures.empty()) << "with no reruns the jitter is invisible";
  EXPECT_EQ(unchecked.run.reruns, 0);
}

}  // namespace
}  // namespace afz
