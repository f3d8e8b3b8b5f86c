// Findings: failure signatures grouped into distinct defects.
//
// One defect shows under many signatures: under two verdicts (an off-by-one
// causal mask gives wrong numbers on some rows and a wrongly non-empty row
// on others), in every input dtype, in several size buckets (a minimized
// case that could not lose its last query tile), and through every feature
// that produces the situation it mishandles (a missing guard for fully
// masked rows fails with a causal mask, a window, a boolean or an additive
// -inf mask alike).  A finding folds them.
//
// A signature's *ingredients* are the families (kFeatureFamilies in
// findings.cpp) of the features of its minimized case, the dtypes left out:
// minimization has already dropped every feature the failure does not need,
// and the family says what situation a feature creates (a fully masked row,
// a moved row maximum, a strided layout...).  Per kernel, signatures with
// the same ingredients are one finding; a finding whose ingredients contain
// another's joins it (the same defect with an extra ingredient the
// minimizer could not drop, possibly showing under another verdict), except
// that a plain-case finding (no ingredients, contained in every other) takes
// in only findings whose verdicts it also shows.
//
// Consequences, in the direction of fewer lines: two defects of one kernel
// whose ingredients contain one another are one finding whose variants list
// both (fix one, and the next campaign shows the other).
// Findings are a function of the failures list alone, so a merged report's
// findings are those of one run of the same cases.
#pragma once
#include <string>
#include <vector>

#include "harness/report/report.h"

namespace afz {

struct ReportFinding {
  std::string id;                      // "F1", "F2", ... in order of the first failure
  std::string kernel;
  std::vector<std::string> needs;      // ingredient families (empty: a plain case)
  std::vector<std::string> features;   // every non-dtype feature of its variants, sorted
  std::string status;                  // new if any variant is new, else smaller, else known
  std::vector<VerdictClass> verdicts;  // distinct, least severe first
  std::vector<size_t> failures;        // indices into Report::failures, in report order
  size_t representative = 0;           // the variant with the smallest repro (first on ties)
  int64_t occurrences = 0;             // failing kernel runs over every variant
  int64_t first_case = -1;             // the earliest case index of any variant (-1: none)
};

// The signature text's features without the dtypes: "k|v|a,dtype=fp16,b|q1.k16" -> {a, b}.
std::vector<std::string> signature_features(const std::string& signature);
// The family of a feature ("causal_tl" -> "mask"); unlisted features are their own family.
std::string feature_family(const std::string& feature);
// "mask (causal_br, window_tl) + layout (row_gap)", or "plain case".
std::string ingredients_text(const ReportFinding& f);

std::vector<ReportFinding> group_findings(const std::vector<ReportFailure>& failures);

// "numeric_mismatch+semantic_mismatch"
std::string verdicts_text(const ReportFinding& f);
// The finding on one line, as the campaign summary, JUnit and SARIF say it:
// "kernel verdicts needs INGREDIENTS: N failing runs, V variants, first case C"
// (the repro is the caller's to add).
std::string finding_line(const ReportFinding& f);
// A failure's repro run alone (--confirm-alone) in words, for HTML, JUnit
// and SARIF: "passes alone (torch.cudnn [bwd]: pass): it fails only after
// other cases ran in the same process"; "" when it was not run alone.
std::string alone_summary(const ReportAlone& a);

}  // namespace afz
