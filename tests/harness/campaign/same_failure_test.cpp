// What minimization keeps of a failure (same_failure): the verdict class,
// the failing gradient and, for a crash, its kind; on the H200 a minimizer
// that took any crash walked from a misaligned-address fault to a
// segfault of a worker whose CUDA context that fault had broken.
#include <gtest/gtest.h>

#include "harness/campaign/campaign.h"
#include "kernels/cpu/backward_kernels.h"

namespace afz {
namespace {

Verdict verdict(VerdictClass cls, std::string detail, std::string tensor = "") {
  Verdict v;
  v.cls = cls;
  v.detail = std::move(detail);
  v.worst.valid = !tensor.empty();
  v.worst.tensor = std::move(tensor);
  return v;
}

TEST(CrashKind, NamesTheCudaErrorOrTheSignal) {
  EXPECT_EQ(crash_kind("kernel error: CUDA error after the kernel: cudaErrorMisalignedAddress: misaligned address"),
            "cudaErrorMisalignedAddress");
  EXPECT_EQ(crash_kind("kernel error: worker process died of signal 11 (Segmentation fault)"), "signal 11");
  EXPECT_EQ(crash_kind("kernel error: worker process died of signal 6 (Aborted)"), "signal 6");
}

TEST(CrashKind, OtherwiseTheDetailWithItsNumbersBlanked) {
  EXPECT_EQ(crash_kind("kernel hung: no answer in 60 s"), "kernel hung: no answer in # s");
  EXPECT_EQ(crash_kind("CUDA out of memory. Tried to allocate 2.00 MiB"), crash_kind("CUDA out of memory. Tried to allocate 512.50 MiB"));
}

TEST(SameFailure, ACrashOfAnotherKindIsAnotherFailure) {
  const CampaignKernel fwd;  // a forward slot: no gradient
  const Verdict fault = verdict(VerdictClass::Crash, "kernel error: CUDA error after the kernel: cudaErrorMisalignedAddress: misaligned address");
  EXPECT_TRUE(same_failure(fwd, fault, fault));
  EXPECT_FALSE(same_failure(fwd, fault, verdict(VerdictClass::Crash, "kernel error: worker process died of signal 11 (Segmentation fault)")));
  EXPECT_FALSE(same_failure(fwd, fault, verdict(VerdictClass::NanInf, fault.detail)));
}

TEST(SameFailure, AValueFailureKeepsItsClassAndGradient) {
  const CampaignKernel bwd = backward_campaign_kernel(*find_backward_kernel("cpu.bwd.mutant.ds_no_scale"), "builtin");
  const Verdict dq = verdict(VerdictClass::NumericMismatch, "dq beyond its bound", "dq");
  EXPECT_TRUE(same_failure(bwd, dq, verdict(VerdictClass::NumericMismatch, "another detail", "dq")));
  EXPECT_FALSE(same_failure(bwd, dq, verdict(VerdictClass::NumericMismatch, "dk beyond its bound", "dk")));
  EXPECT_FALSE(same_failure(bwd, dq, verdict(VerdictClass::NanInf, "dq = nan", "dq")));
}

}  // namespace
}  // namespace afz
