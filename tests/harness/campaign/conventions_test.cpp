#include "harness/campaign/conventions.h"

#include <gtest/gtest.h>

#include "kernels/registry.h"

namespace afz {
namespace {

const ConventionCell& cell(const ConventionTable& t, const std::string& probe, size_t kernel) {
  for (size_t p = 0; p < t.probes.size(); ++p)
    if (t.probes[p]->name == probe) return t.cells[p][kernel];
  throw std::logic_error("no probe " + probe);
}

TEST(Conventions, ObservedBehaviourAndDisagreementsAreNamed) {
  const KernelRegistry reg = KernelRegistry::with_builtins();
  RunOptions o;
  o.oracle = OracleTier::Boost;
  const Runner runner(o);
  const ConventionTable t =
      probe_conventions({{reg.find("cpu.direct"), "builtin"}, {reg.find("cpu.mutant.no_mref_guard"), "mutant"}}, runner);
  ASSERT_EQ(t.probes.size(), convention_probes().size());
  // The reference kernel: O = 0 and LSE = -inf on every kind of empty row,
  // as the exact function.
  for (const char* p : {"causal_br_empty_rows", "window_empty_row", "bool_mask_empty_row", "add_mask_neg_inf_row",
                        "empty_key_sequence"}) {
    EXPECT_EQ(cell(t, p, 0).o, "0") << p;
    EXPECT_EQ(cell(t, p, 0).lse, "-inf") << p;
    EXPECT_EQ(cell(t, p, 0).verdict, "pass") << p;
  }
  // fp32 scores cannot hold s + finfo(bf16).min apart: equal weights, within
  // the declared precision (the additive mask's rounding is in the bound).
  EXPECT_EQ(cell(t, "add_mask_lowest_row", 0).o, "mean of V");
  EXPECT_EQ(cell(t, "add_mask_lowest_row", 0).verdict, "pass");
  EXPECT_EQ(cell(t, "causal_bottom_right", 0).o, "≈exact");
  // The mutant without the empty-row guard: NaN, and a disagreement line.
  EXPECT_EQ(cell(t, "bool_mask_empty_row", 1).o, "NaN");
  EXPECT_EQ(cell(t, "bool_mask_empty_row", 1).verdict, "semantic_mismatch");
  bool named = false;
  for (const std::string& line : t.disagreements())
    named = named || (line.rfind("bool_mask_empty_row:", 0) == 0 &&
                      line.find("O NaN, LSE NaN (cpu.mutant.no_mref_guard)") != std::string::npos);
  EXPECT_TRUE(named);
  EXPECT_NE(t.markdown().find("| `causal_top_left`"), std::string::npos);
}

}  // namespace
}  // namespace afz
