// Minimizing a saved failure after the fact (repro --minimize): a large
// backward case failing a mutant shrinks to a small one that fails the same
// way (verdict class and gradient), stamped with the kernel and pass, its
// provenance naming the source file and the new verdict; the same start
// gives the same bits twice.
#include "harness/campaign/minimize_saved.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "harness/case/case_features.h"
#include "harness/run/backward_runner.h"
#include "kernels/cpu/backward_kernels.h"

namespace afz {
namespace {

// dQ and dK miss the softmax scale: every backward case with a key fails.
constexpr const char* kScaleMutant = "cpu.bwd.mutant.ds_no_scale";

// Three ragged bf16 sequences, 4 heads, d 64, causal: 91,648 input elements.
constexpr char kLargeCase[] =
    "attnfuzz-case 1\nkernel cpu.bwd.mutant.ds_no_scale\npass bwd\nbatch 3\nheads 4\nseqlen_q 70 33 9\n"
    "seqlen_k 71 40 12\nhead_dim 64\ndtype bf16\ncausal bottom_right\n# provenance: found by hand\n"
    "# provenance: verdict numeric_mismatch: stale\n";

Case large_case() {
  ParseError e;
  std::optional<Case> c = parse_case(kLargeCase, &e);
  EXPECT_TRUE(c) << e.message;
  return *c;
}

bool has_line_starting(const Case& c, const std::string& prefix) {
  return std::any_of(c.provenance.begin(), c.provenance.end(),
                     [&](const std::string& p) { return p.starts_with(prefix); });
}

struct Fixture {
  CampaignKernel slot = backward_campaign_kernel(*find_backward_kernel(kScaleMutant), "builtin");
  Runner runner{RunOptions{}};
  Case start = large_case();
  Verdict first = run_campaign_kernel(slot, runner, start, false).verdict;
};

TEST(MinimizeSaved, ShrinksABackwardFailureKeepingVerdictAndGradient) {
  Fixture f;
  ASSERT_EQ(f.first.cls, VerdictClass::NumericMismatch) << f.first.detail;
  const std::string gradient = failing_gradient(f.first);
  ASSERT_FALSE(gradient.empty());

  const MinimizedFailure m = minimize_saved_failure(f.slot, f.runner, f.start, f.first, "big.case", MinimizeOptions{});
  EXPECT_LT(case_size(m.repro).elements, case_size(f.start).elements / 100);
  EXPECT_EQ(m.minimized.from.elements, case_size(f.start).elements);
  EXPECT_EQ(m.repro.kernel, kScaleMutant);
  EXPECT_EQ(m.repro.pass, Pass::Bwd);

  // The saved case fails again, the same way, when run on its own.
  const Verdict again = run_campaign_kernel(f.slot, f.runner, m.repro, false).verdict;
  EXPECT_EQ(again.cls, f.first.cls);
  EXPECT_EQ(failing_gradient(again), gradient);
  EXPECT_EQ(m.verdict.cls, f.first.cls);

  // Provenance: the old verdict line goes, the source and the new verdict come.
  EXPECT_TRUE(has_line_starting(m.repro, "found by hand"));
  EXPECT_FALSE(has_line_starting(m.repro, "verdict numeric_mismatch: stale"));
  EXPECT_TRUE(has_line_starting(m.repro, "pass bwd gradient " + gradient));
  EXPECT_TRUE(has_line_starting(m.repro, "verdict numeric_mismatch: "));
  const bool names_source = std::any_of(m.repro.provenance.begin(), m.repro.provenance.end(), [](const std::string& p) {
    return p.starts_with("minimized by attnfuzz ") && p.ends_with(" from big.case");
  });
  EXPECT_TRUE(names_source);
  EXPECT_NE(m.signature, m.raw_signature) << "the minimized case is another shape than the start";
}

TEST(MinimizeSaved, TheSameStartGivesTheSameCase) {
  Fixture f;
  const MinimizedFailure a = minimize_saved_failure(f.slot, f.runner, f.start, f.first, "x", MinimizeOptions{});
  const MinimizedFailure b = minimize_saved_failure(f.slot, f.runner, f.start, f.first, "x", MinimizeOptions{});
  Case ca = a.repro, cb = b.repro;
  ca.provenance.clear();  // they hold the time of day
  cb.provenance.clear();
  EXPECT_EQ(write_case(ca), write_case(cb));
  EXPECT_EQ(a.signature, b.signature);
}

TEST(MinimizeSaved, ARunBudgetStopsItAndSaysSo) {
  Fixture f;
  MinimizeOptions tight;
  tight.max_runs = 2;
  const MinimizedFailure m = minimize_saved_failure(f.slot, f.runner, f.start, f.first, "x", tight);
  EXPECT_LE(m.minimized.runs, 2);
  EXPECT_TRUE(m.minimized.exhausted);
  EXPECT_TRUE(has_line_starting(m.repro, "minimized from "));
  const bool says_budget = std::any_of(m.repro.provenance.begin(), m.repro.provenance.end(),
                                       [](const std::string& p) { return p.ends_with("(budget spent)"); });
  EXPECT_TRUE(says_budget);
}

}  // namespace
}  // namespace afz
