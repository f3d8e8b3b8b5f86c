// Findings: signatures of one defect fold into one line; different defects,
// kernels or ingredients stay apart.
#include "harness/report/findings.h"

#include <gtest/gtest.h>

#include "harness/campaign/campaign.h"
#include "kernels/mutants/mutants.h"

namespace afz {
namespace {

ReportFailure failure(const std::string& kernel, VerdictClass v, const std::string& features, const std::string& shape,
                      int64_t case_index, int64_t occurrences = 1, const std::string& status = "new") {
  ReportFailure f;
  f.kernel = kernel;
  f.verdict = v;
  f.signature = kernel + "|" + std::string(verdict_name(v)) + "|" + features + "|" + shape;
  f.status = status;
  f.case_index = case_index;
  f.occurrences = occurrences;
  f.minimize.to_elements = case_index;  // no case text: sizes by element count, so smaller index = smaller repro
  return f;
}

constexpr VerdictClass kNum = VerdictClass::NumericMismatch, kSem = VerdictClass::SemanticMismatch,
                       kNan = VerdictClass::NanInf;

TEST(Findings, OneDefectThroughSeveralMasksVerdictsDtypesAndShapesIsOneFinding) {
  const std::vector<ReportFailure> f = {
      failure("k", kNum, "causal_tl,dtype=fp32", "q1.k16", 17, 30),
      failure("k", kSem, "causal_br,dtype=bf16", "q128.k64", 19, 5, "known"),
      failure("k", kNum, "dtype=fp16,window_tl", "q1.k64", 54, 2),
      failure("k", kSem, "bool_mask:cols_every,dtype=fp32", "q1.k16", 9, 1),
  };
  const std::vector<ReportFinding> g = group_findings(f);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].id, "F1");
  EXPECT_EQ(g[0].needs, std::vector<std::string>{"mask"});
  EXPECT_EQ(g[0].features, (std::vector<std::string>{"bool_mask:cols_every", "causal_br", "causal_tl", "window_tl"}));
  EXPECT_EQ(g[0].verdicts, (std::vector<VerdictClass>{kNum, kSem}));
  EXPECT_EQ(g[0].failures.size(), 4u);
  EXPECT_EQ(g[0].occurrences, 38);
  EXPECT_EQ(g[0].first_case, 9);
  EXPECT_EQ(g[0].representative, 3u);  // the smallest repro
  EXPECT_EQ(g[0].status, "new");
  EXPECT_EQ(ingredients_text(g[0]), "mask (bool_mask:cols_every, causal_br, causal_tl, window_tl)");
  EXPECT_EQ(finding_line(g[0]),
            "k numeric_mismatch+semantic_mismatch needs mask (bool_mask:cols_every, causal_br, causal_tl, window_tl): "
            "38 failing runs, 4 variants, first case 9");
}

TEST(Findings, KernelsAndIngredientsStayApart) {
  const std::vector<ReportFailure> f = {
      failure("a", kSem, "causal_tl,dtype=fp32", "q1.k16", 1),
      failure("b", kSem, "causal_tl,dtype=fp32", "q1.k16", 2),          // another kernel
      failure("a", kNum, "dtype=fp32,softcap", "q1.k16", 3),            // another ingredient
      failure("a", kSem, "causal_tl,dtype=fp32,row_gap", "q1.k16", 4),  // + layout: joins a's mask
      failure("a", kNan, "causal_tl,dtype=fp32,gqa", "q1.k16", 5),      // + heads, another verdict: joins too
  };
  const std::vector<ReportFinding> g = group_findings(f);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].kernel, "a");
  EXPECT_EQ(g[0].failures, (std::vector<size_t>{0, 3, 4}));
  EXPECT_EQ(g[0].needs, std::vector<std::string>{"mask"});
  EXPECT_EQ(g[0].verdicts, (std::vector<VerdictClass>{kNan, kSem}));
  EXPECT_EQ(g[1].kernel, "b");
  EXPECT_EQ(g[2].needs, std::vector<std::string>{"softcap"});
}

// A plain-case finding is contained in every other: it takes in only the
// variants whose verdicts it shows itself.
TEST(Findings, PlainCaseTakesInOnlyItsOwnVerdicts) {
  const std::vector<ReportFailure> f = {
      failure("k", kNum, "dtype=fp32", "q1.k128", 1),
      failure("k", kNan, "causal_br,dtype=fp32", "q1.k16", 2),
      failure("k", kNum, "causal_br,dtype=fp16", "q1.k16", 3),
  };
  const std::vector<ReportFinding> g = group_findings(f);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_TRUE(g[0].needs.empty());
  EXPECT_EQ(g[1].needs, std::vector<std::string>{"mask"});
  EXPECT_EQ(g[1].failures, (std::vector<size_t>{1, 2}));  // same ingredients: one finding, both verdicts
}

TEST(Findings, PlainCaseDefectAbsorbsItsVariantsWithExtraIngredients) {
  const std::vector<ReportFailure> f = {
      failure("k", kNum, "dtype=fp32", "q1.k128", 24),
      failure("k", kNum, "dtype=bf16,t:late_max", "q128.k128", 66),
      failure("k", kNum, "dtype=fp16,gqa,layout:bshd", "q128.k512", 80),
  };
  const std::vector<ReportFinding> g = group_findings(f);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_TRUE(g[0].needs.empty());
  EXPECT_EQ(ingredients_text(g[0]), "plain case");
  EXPECT_EQ(g[0].failures.size(), 3u);
}

// The real pipeline: two single-defect mutants of the zoo, each failing
// under several masks and verdicts, give one finding each.
TEST(Findings, EachMutantOfACampaignIsOneFinding) {
  CampaignOptions o;
  for (const char* name : {"cpu.mutant.causal_off_by_one", "cpu.mutant.no_mref_guard"})
    o.kernels.push_back({&find_mutant(name)->kernel, std::string(kMutantOrigin)});
  o.seed = 1;
  o.cases = 120;
  std::string error;
  o.mix = *GeneratorMix::parse("masking=3,add_mask=1", &error);
  o.minimize_options.max_runs = 60;
  o.minimize_options.max_seconds = 1e9;
  const Report r = run_campaign(o, Runner{RunOptions{}});
  const std::vector<ReportFinding> g = group_findings(r.failures);
  ASSERT_GT(r.failures.size(), g.size()) << "the premise: more signatures than defects";
  ASSERT_EQ(g.size(), 2u);
  EXPECT_NE(g[0].kernel, g[1].kernel);
}

}  // namespace
}  // namespace afz
