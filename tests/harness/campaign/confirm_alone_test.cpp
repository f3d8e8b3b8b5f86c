// What a repro's run alone says of a failure (alone_outcome), and the
// provenance line it leaves in the saved case.
#include "harness/campaign/confirm_alone.h"

#include <gtest/gtest.h>

#include <set>

#include "harness/report/findings.h"

namespace afz {
namespace {

ReportFailure failure(VerdictClass v, const std::string& detail = "") {
  ReportFailure f;
  f.kernel = "torch.cudnn [bwd]";
  f.verdict = v;
  f.detail = detail;
  return f;
}

ChildRun printed(const std::string& output, int exit_code) {
  ChildRun r;
  r.started = true;
  r.exit_code = exit_code;
  r.output = output;
  r.seconds = 1.5;
  return r;
}

TEST(AloneOutcome, TheSameVerdictFails) {
  const ReportAlone a = alone_outcome(
      failure(VerdictClass::NanInf),
      "c.case", printed("c.case: torch.cudnn [bwd]: nan_inf (dq[b=0 h=0 s=0 x=0] = nan)\n  worst dq[...]\n", 1));
  EXPECT_EQ(a.outcome, "fails");
  EXPECT_EQ(a.line, "torch.cudnn [bwd]: nan_inf (dq[b=0 h=0 s=0 x=0] = nan)");
  EXPECT_EQ(a.seconds, 1.5);
}

TEST(AloneOutcome, PassUnsupportedAndAnotherVerdict) {
  const ReportFailure f = failure(VerdictClass::NanInf);
  EXPECT_EQ(alone_outcome(f, "c.case", printed("c.case: torch.cudnn [bwd]: pass\n", 0)).outcome, "passes");
  EXPECT_EQ(alone_outcome(f, "c.case", printed("c.case: torch.cudnn [bwd]: unsupported (s_q = s_kv = 1)\n", 0)).outcome,
            "unsupported");
  EXPECT_EQ(alone_outcome(f, "c.case", printed("c.case: torch.cudnn [bwd]: numeric_mismatch (dq ...)\n", 1)).outcome,
            "fails_differently");
}

// The segfault an audit's worker met is not the misaligned address a fresh
// process meets: a crash fails alone only as the same kind of crash.
TEST(AloneOutcome, ACrashOfAnotherKindFailsDifferently) {
  const ReportFailure f = failure(VerdictClass::Crash, "kernel error: worker process died of signal 11 (Segmentation fault)");
  const std::string same = "c.case: torch.cudnn [bwd]: crash (kernel error: worker process died of signal 11 (Segmentation fault))\n";
  const std::string other = "c.case: torch.cudnn [bwd]: crash (CUDA error: misaligned address (cudaErrorMisalignedAddress))\n";
  EXPECT_EQ(alone_outcome(f, "c.case", printed(same, 1)).outcome, "fails");
  EXPECT_EQ(alone_outcome(f, "c.case", printed(other, 1)).outcome, "fails_differently");
}

// Only the line of this file and this kernel counts: a forward verdict of
// the same name, or another file, is not the failure's.
TEST(AloneOutcome, OnlyThisKernelsLineOfThisFile) {
  const ReportFailure f = failure(VerdictClass::NanInf);
  const std::string out = "c.case: torch.cudnn: nan_inf (o ...)\nd.case: torch.cudnn [bwd]: nan_inf (dq)\n"
                          "c.case: torch.cudnn [bwd]: pass\n";
  EXPECT_EQ(alone_outcome(f, "c.case", printed(out, 1)).outcome, "passes");
}

TEST(AloneOutcome, NoVerdictSaysWhy) {
  const ReportFailure f = failure(VerdictClass::NanInf);
  ReportAlone a = alone_outcome(f, "c.case", printed("attnfuzz: --kernel-lib x.so: cannot open\n", 2));
  EXPECT_EQ(a.outcome, "not_run");
  EXPECT_EQ(a.line, "no verdict (exit 2): attnfuzz: --kernel-lib x.so: cannot open");
  ChildRun hung = printed("", -1);
  hung.timed_out = true;
  hung.seconds = 180;
  EXPECT_EQ(alone_outcome(f, "c.case", hung).line, "killed after 180 s without a verdict");
  ChildRun missing;
  missing.error = "/x: No such file or directory";
  EXPECT_EQ(alone_outcome(f, "c.case", missing).line, "could not start: /x: No such file or directory");
}

// Two findings of one kernel (different verdicts and needs), the second's
// smaller variant listed last: representatives first, then the rest.
TEST(AloneOrder, EachFindingsRepresentativeFirst) {
  std::vector<ReportFailure> fs(4);
  const char* signatures[] = {"k|nan_inf|bool_mask:random,dtype=bf16|q128.k128", "k|crash|row_gap|q16.k16",
                              "k|nan_inf|bool_mask:random,dtype=bf16|q1.k1", "k|crash|row_gap|q1.k1"};
  for (size_t i = 0; i < fs.size(); ++i) {
    fs[i] = failure(i % 2 ? VerdictClass::Crash : VerdictClass::NanInf);
    fs[i].kernel = "k";
    fs[i].signature = fs[i].raw_signature = signatures[i];
    fs[i].case_text = std::string("attnfuzz-case 1\nbatch 1\nseqlen_q ") + (i < 2 ? "16" : "1") + "\nseqlen_k " +
                      (i < 2 ? "16" : "1") + "\n";
  }
  const std::vector<size_t> order = alone_order(fs);
  ASSERT_EQ(order.size(), 4u);
  const std::vector<ReportFinding> findings = group_findings(fs);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].representative, 2u);  // the smaller variants: not the report order
  EXPECT_EQ(findings[1].representative, 3u);
  EXPECT_EQ(order[0], findings[0].representative);
  EXPECT_EQ(order[1], findings[1].representative);
  EXPECT_EQ(std::set<size_t>(order.begin(), order.end()).size(), 4u);  // each once
}

// A crash (a misaligned address, a segfault) or a hang may fault its GPU
// context again alone: such a repro runs with no other beside it.
TEST(AloneGate, CrashesAndHangsRunWithNoOtherBeside) {
  EXPECT_TRUE(may_fault(failure(VerdictClass::Crash, "kernel error: cudaErrorMisalignedAddress")));
  EXPECT_TRUE(may_fault(failure(VerdictClass::Hang)));
  for (const VerdictClass v : {VerdictClass::NumericMismatch, VerdictClass::NanInf, VerdictClass::SemanticMismatch,
                               VerdictClass::Unwritten, VerdictClass::OutOfBounds, VerdictClass::Nondeterministic})
    EXPECT_FALSE(may_fault(failure(v)));
}

TEST(AloneProvenance, AfterTheProvenanceLinesAndReplacingAnEarlierOne) {
  const std::string text = "# provenance: found by attnfuzz\n# provenance: kernel k\nattnfuzz-case 1\nkernel k\n";
  const std::string once = with_alone_provenance(text, {"passes", "k: pass", 0});
  EXPECT_EQ(once,
            "# provenance: found by attnfuzz\n# provenance: kernel k\n# provenance: alone: passes (k: pass)\n"
            "attnfuzz-case 1\nkernel k\n");
  const std::string twice = with_alone_provenance(once, {"fails", "k: nan_inf", 0});
  EXPECT_EQ(twice,
            "# provenance: found by attnfuzz\n# provenance: kernel k\n# provenance: alone: fails (k: nan_inf)\n"
            "attnfuzz-case 1\nkernel k\n");
  EXPECT_EQ(with_alone_provenance("attnfuzz-case 1\n", {"fails", "k: crash", 0}),
            "# provenance: alone: fails (k: crash)\nattnfuzz-case 1\n");
}

}  // namespace
}  // namespace afz
