#include "harness/campaign/minimize.h"

#include <gtest/gtest.h>

#include "harness/case/case_io.h"
#include "harness/case/materialize.h"
#include "harness/run/runner.h"
#include "tests/harness/planted_kernel.h"

namespace afz {
namespace {

// A case with every feature the minimizer can take away.
Case cluttered_case() {
  Case c;
  c.batch = 3;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.seqlens_q = {5, 20, 7};
  c.seqlens_k = {10, 50, 64};
  c.head_dim = 64;
  c.head_dim_v = 32;
  c.in_dtype = AFZ_BF16;
  c.out_dtype = AFZ_F32;
  c.has_window = true;
  c.window_left = -1;
  c.window_right = 0;
  c.align = AFZ_ALIGN_BOTTOM_RIGHT;
  c.bool_mask = MaskPattern{"rows_every", {3, 1}};
  c.layout = Layout::BSHD;
  c.row_gap = 2;
  c.values_v = {"uniform", 2};
  c.transforms.push_back({"late_max", {{"count", 3}, {"boost", 8}}});
  c.seed = 99;
  return c;
}

struct PlantedFixture : ::testing::Test {
  testing::PlantedKernel kernel{"planted.k37"};
  Runner runner{RunOptions{}};
  PlantedFixture() { kernel.defect = testing::more_than_37_keys; }

  // As the campaign judges candidates: one that cannot be built or judged
  // (the oracle may refuse a case with no query at all) does not fail.
  VerdictClass verdict(const Case& c) const {
    try {
      Materialized m(c);
      return runner.run(kernel.k, m).verdict.cls;
    } catch (const std::exception&) {
      return VerdictClass::Pass;
    }
  }
  StillFails same_verdict(VerdictClass cls) const {
    return [this, cls](const Case& c) { return verdict(c) == cls; };
  }
};

TEST_F(PlantedFixture, ShrinksToTheMinimalFailingCase) {
  const Case start = cluttered_case();
  ASSERT_EQ(verdict(start), VerdictClass::NumericMismatch);
  const MinimizeResult r = minimize_case(start, same_verdict(VerdictClass::NumericMismatch), MinimizeOptions{});
  const Case& c = r.best;
  EXPECT_FALSE(r.exhausted) << "reached a fixed point within the budget";
  EXPECT_EQ(c.batch, 1);
  EXPECT_EQ(c.heads_q, 1);
  EXPECT_EQ(c.heads_kv, 1);
  EXPECT_EQ(c.seqlens_q, std::vector<int32_t>{1});
  EXPECT_EQ(c.seqlens_k, std::vector<int32_t>{38}) << "the smallest length the defect needs";
  EXPECT_EQ(c.head_dim, 1);
  EXPECT_EQ(c.head_dim_v, 1);
  EXPECT_FALSE(c.has_window);
  EXPECT_FALSE(c.bool_mask);
  EXPECT_EQ(c.layout, Layout::BHSD);
  EXPECT_EQ(c.row_gap, 0);
  EXPECT_EQ(c.in_dtype, AFZ_F32) << "the canonical dtype, since the defect does not need another";
  EXPECT_EQ(c.out_dtype, AFZ_F32);
  EXPECT_TRUE(c.transforms.empty());
  EXPECT_EQ(c.values_v, Distribution{});
  EXPECT_EQ(verdict(c), VerdictClass::NumericMismatch);
  EXPECT_LT(r.to, r.from);
  EXPECT_EQ(r.to, case_size(c));
  EXPECT_EQ(r.to.elements, 38 * 2 + 1);
  EXPECT_LE(r.runs, 200) << "geometric shrinking, not one key at a time";
}

TEST_F(PlantedFixture, StopsAtTheRunBudget) {
  MinimizeOptions o;
  o.max_runs = 5;
  const MinimizeResult r = minimize_case(cluttered_case(), same_verdict(VerdictClass::NumericMismatch), o);
  EXPECT_TRUE(r.exhausted);
  EXPECT_EQ(r.runs, 5);
  EXPECT_EQ(verdict(r.best), VerdictClass::NumericMismatch) << "whatever it kept still fails";
}

TEST(Minimize, KeepsTheStartWhenNothingSmallerFails) {
  const Case start = cluttered_case();
  int calls = 0;
  const MinimizeResult r = minimize_case(start, [&](const Case&) { ++calls; return false; }, MinimizeOptions{});
  EXPECT_EQ(r.best, start);
  EXPECT_EQ(r.accepted, 0);
  EXPECT_EQ(r.runs, calls);
  EXPECT_GT(calls, 0);
  EXPECT_FALSE(r.exhausted);
}

// Only valid, strictly smaller candidates ever reach the predicate.
TEST(Minimize, OffersOnlyValidSmallerCandidates) {
  const Case start = cluttered_case();
  CaseSize last = case_size(start);
  bool all_ok = true;
  minimize_case(start, [&](const Case& c) {
    all_ok &= case_is_buildable(c) && case_size(c) < last;
    // Accept everything with a long second dimension: forces a long walk.
    const bool keep = c.max_seqlen_k() > 20;
    if (keep) last = case_size(c);
    return keep;
  }, MinimizeOptions{});
  EXPECT_TRUE(all_ok);
}

TEST(Minimize, SizeOrdersElementsThenFeatures) {
  Case a;
  a.seqlens_q = {4};
  a.seqlens_k = {4};
  a.head_dim = a.head_dim_v = 8;
  Case b = a;
  b.has_window = true;
  b.window_left = -1;
  b.window_right = 0;
  EXPECT_LT(case_size(a), case_size(b)) << "same elements, one feature more";
  Case fp32 = a;
  fp32.in_dtype = fp32.out_dtype = AFZ_F32;
  EXPECT_LT(case_size(fp32), case_size(a)) << "fp32 is the canonical dtype";
  Case c = a;
  c.seqlens_k = {5};
  EXPECT_LT(case_size(b), case_size(c)) << "elements count first";
  EXPECT_EQ(case_size(a).elements, 4 * 8 + 4 * 16);
}

}  // namespace
}  // namespace afz
