// GPU kernels on a machine without a GPU (or after the GPU was lost):
// nothing that did not run may read as a pass.  `repro` of a GPU case says
// the case was not run and exits 2 (a script must not take it for "fixed");
// `audit`/`fuzz` of GPU kernels only stop with one line and exit 2; a mixed
// run goes on with the CPU kernels.  Skipped where a GPU is present.
#include <gtest/gtest.h>

#include "harness/run/gpu/gpu_run.h"
#include "tests/harness/cli/cli_process.h"

namespace afz {
namespace {

using testing::run_attnfuzz;

// A committed case that names a GPU kernel.
const std::string kGpuCase = std::string(ATTNFUZZ_SOURCE_DIR) + "/tests/kernels/cudnn/cases/bwd_d128_bf16_gqa.case";

struct NoDevice : ::testing::Test {
  void SetUp() override {
    if (gpu::gpu_unavailable_reason().empty()) GTEST_SKIP() << "a GPU is present";
    gpu::stop_worker();
  }
};

TEST_F(NoDevice, ReproOfAGpuCaseIsNotRunAndExits2) {
  const auto r = run_attnfuzz("repro --pass fwd --kernel gpu.fa2 " + kGpuCase);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("gpu.fa2: unsupported (no CUDA device"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 of 1 case file(s) not run: no GPU"), std::string::npos) << r.output;
}

TEST_F(NoDevice, AuditOfGpuKernelsOnlyStopsWithOneLine) {
  const std::string out = ::testing::TempDir() + "no_device_audit";
  for (const std::string& command :
       {"audit --kernel gpu.fa2,gpu.splitkv --time 1 --out " + out, std::string("fuzz --kernel gpu.fa2 --cases 5")}) {
    const auto r = run_attnfuzz(command);
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.output;
    EXPECT_NE(r.output.find("no CUDA device"), std::string::npos) << command << ": " << r.output;
    EXPECT_NE(r.output.find("every kernel asked for runs on the GPU (gpu.fa2"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << command << ": one line";
  }
}

TEST_F(NoDevice, AMixedRunGoesOnWithTheCpuKernels) {
  const auto r = run_attnfuzz("fuzz --kernel cpu.tiled,gpu.fa2 --cases 5 --jobs 1", /*merge_stderr=*/false);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace afz
