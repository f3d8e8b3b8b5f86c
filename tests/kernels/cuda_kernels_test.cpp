// Our CUDA kernels on the GPU, through the worker and its device mirror:
// correct kernels pass cases covering every feature they claim, each GPU
// mutant fails a case aimed at its defect, and the three faulty kernels give
// out-of-bounds, crash and hang verdicts without ending the test process.
// Skipped (one line) on machines without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "harness/case/case.h"
#include "harness/run/gpu/gpu_run.h"
#include "harness/run/runner.h"
#include "kernels/registry.h"
#include "tests/harness/case_from_text.h"

namespace afz {
namespace {

#define SKIP_WITHOUT_GPU()                                                       \
  do {                                                                           \
    if (std::string why = gpu::gpu_unavailable_reason(); !why.empty())           \
      GTEST_SKIP() << "no GPU here: " << why;                                    \
    if (!KernelRegistry::with_builtins().find("gpu.fa2"))                        \
      GTEST_SKIP() << "built without CUDA";                                      \
  } while (0)

Case parse(const std::string& body) { return testing::case_from_text(body); }

const afz_kernel& kernel(const char* name) {
  static const KernelRegistry registry = KernelRegistry::with_builtins();
  const afz_kernel* k = registry.find(name);
  if (!k) throw std::runtime_error(std::string("no kernel ") + name);
  return *k;
}

CaseOutcome run(const char* name, const std::string& text, double timeout_s = 60, bool determinism = false) {
  RunOptions o;
  o.timeout_s = timeout_s;
  o.check_determinism = determinism;
  const Runner runner(o);
  return runner.run(kernel(name), parse(text));
}

// Every feature the correct kernels claim, with partial blocks everywhere.
const char* const kFeatureCases[] = {
    "batch 1\nheads 2\nseqlen_q 1\nseqlen_k 1\nhead_dim 64\nseed 1\n",
    "batch 2\nheads 4 2\nseqlen_q 100 65\nseqlen_k 130 64\nhead_dim 64\ndtype fp16\nseed 2\n",
    "batch 3\nheads 2 1\nseqlen_q 77 0 5\nseqlen_k 0 33 200\nhead_dim 128\ndtype bf16 fp32\nseed 3\n",
    "batch 1\nheads 3\nseqlen_q 150\nseqlen_k 97\nhead_dim 128\ncausal top_left\nseed 4\n",
    "batch 1\nheads 3\nseqlen_q 97\nseqlen_k 150\nhead_dim 64\ncausal bottom_right\ndtype fp16 bf16\nseed 5\n",
    "batch 2\nheads 2\nseqlen_q 200 129\nseqlen_k 300 1\nhead_dim 64\nwindow 17 5 bottom_right\nseed 6\n",
    "batch 1\nheads 2\nseqlen_q 190\nseqlen_k 190\nhead_dim 128\nwindow 3 40 top_left\nseed 7\n",
    "batch 2\nheads 4 2\nseqlen_q 70\nseqlen_k 90\nhead_dim 64\nlayout bshd\nrow_gap 3\nseed 8\n",
    "batch 2\nheads 2\nseqlen_q 70\nseqlen_k 70\nhead_dim 64\nlayout packed_qkv\ncausal\nseed 9\n",
    "batch 2\nheads 4 2\nseqlen_q 33\nseqlen_k 150\nhead_dim 128\nkv_broadcast heads\nseed 10\n",
    "batch 1\nheads 1\nseqlen_q 64\nseqlen_k 1000\nhead_dim 64\ntransform late_max count=5 boost=20\nseed 11\n",
    "batch 1\nheads 1\nseqlen_q 64\nseqlen_k 640\nhead_dim 64\ntransform growing_max block=64 step=3\nseed 12\n",
    "batch 1\nheads 1\nseqlen_q 64\nseqlen_k 300\nhead_dim 64\ntransform shift_scores offset=-10000\nseed 13\n",
    "batch 1\nheads 2\nseqlen_q 64\nseqlen_k 300\nhead_dim 64\ntransform row_contrast amp=100\nseed 14\n",
    // Packed GQA rows in the split kernel: a tile holds several heads' queries.
    "batch 2\nheads 8 2\nseqlen_q 37 20\nseqlen_k 300 129\nhead_dim 32\nwindow 30 0 bottom_right\nseed 15\n",
    "batch 1\nheads 6 3\nseqlen_q 50\nseqlen_k 80\nhead_dim 96\ncausal top_left\nlayout bshd\nseed 16\n",
};

TEST(CudaKernels, CorrectKernelsPassEveryFeature) {
  SKIP_WITHOUT_GPU();
  for (const char* name : {"gpu.fa2", "gpu.splitkv"})
    for (const char* text : kFeatureCases) {
      const CaseOutcome o = run(name, text, 60, /*determinism=*/true);
      EXPECT_EQ(o.verdict.cls, VerdictClass::Pass)
          << name << ": " << verdict_name(o.verdict.cls) << " " << o.verdict.detail << "\n  "
          << o.verdict.worst.format() << "\n" << text;
    }
}

TEST(CudaKernels, SplitKvDecodesOneQueryOver128KKeys) {
  SKIP_WITHOUT_GPU();
  const char* text = "batch 1\nheads 8 1\nseqlen_q 1\nseqlen_k 131072\nhead_dim 128\ncausal\n"
                     "transform late_max count=3 boost=8\nseed 21\n";
  for (const char* name : {"gpu.splitkv", "gpu.fa2"}) {
    const CaseOutcome o = run(name, text);
    EXPECT_EQ(o.verdict.cls, VerdictClass::Pass) << name << ": " << o.verdict.detail << " " << o.verdict.worst.format();
  }
}

struct Kill {
  const char* mutant;
  const char* text;  // a case aimed at the defect
};

const Kill kKills[] = {
    {"gpu.mutant.no_acc_rescale", "seqlen_q 64\nseqlen_k 500\nhead_dim 64\ntransform late_max count=5 boost=20\nseed 31\n"},
    {"gpu.mutant.m_init_zero", "seqlen_q 64\nseqlen_k 200\nhead_dim 64\ntransform shift_scores offset=-200\nseed 32\n"},
    {"gpu.mutant.no_empty_row_guard", "seqlen_q 128\nseqlen_k 256\nhead_dim 64\nwindow 8 0 bottom_right\nseed 33\n"},
    {"gpu.mutant.partial_block_unmasked", "seqlen_q 64\nseqlen_k 100\nhead_dim 64\nseed 34\n"},
    {"gpu.mutant.causal_off_by_one", "seqlen_q 100\nseqlen_k 100\nhead_dim 64\ncausal top_left\nseed 35\n"},
    {"gpu.mutant.splitkv_merge_no_rescale", "seqlen_q 1\nseqlen_k 1000\nhead_dim 64\ntransform late_max count=5 boost=20\nseed 36\n"},
};

TEST(CudaKernels, EveryGpuMutantFailsItsCaseWhichTheCorrectKernelPasses) {
  SKIP_WITHOUT_GPU();
  for (const Kill& kill : kKills) {
    const CaseOutcome bad = run(kill.mutant, kill.text);
    EXPECT_TRUE(is_failure(bad.verdict.cls)) << kill.mutant << " survived:\n" << kill.text;
    const char* correct = std::string(kill.mutant).find("splitkv") != std::string::npos ? "gpu.splitkv" : "gpu.fa2";
    const CaseOutcome good = run(correct, kill.text);
    EXPECT_EQ(good.verdict.cls, VerdictClass::Pass) << correct << ": " << good.verdict.detail << "\n" << kill.text;
  }
}

TEST(CudaKernels, FaultyKernelsGiveOutOfBoundsCrashAndHangWhileTheProcessCarriesOn) {
  SKIP_WITHOUT_GPU();
  const char* text = "batch 2\nheads 2\nseqlen_q 70 10\nseqlen_k 90\nhead_dim 64\nseed 41\n";
  const CaseOutcome oob = run("gpu.faulty.oob_write", text);
  EXPECT_EQ(oob.verdict.cls, VerdictClass::OutOfBounds) << oob.verdict.detail;
  EXPECT_NE(oob.verdict.detail.find("o guard margin"), std::string::npos) << oob.verdict.detail;

  const CaseOutcome crash = run("gpu.faulty.illegal_address", text);
  EXPECT_EQ(crash.verdict.cls, VerdictClass::Crash) << crash.verdict.detail;
  EXPECT_NE(crash.verdict.detail.find("cudaErrorIllegalAddress"), std::string::npos) << crash.verdict.detail;
  EXPECT_EQ(run("gpu.fa2", text).verdict.cls, VerdictClass::Pass) << "a fresh worker after the sticky fault";

  const CaseOutcome hang = run("gpu.faulty.endless_loop", text, /*timeout_s=*/3);
  EXPECT_EQ(hang.verdict.cls, VerdictClass::Hang) << hang.verdict.detail;
  EXPECT_EQ(run("gpu.fa2", text).verdict.cls, VerdictClass::Pass) << "a fresh worker after the hang";
}

}  // namespace
}  // namespace afz
