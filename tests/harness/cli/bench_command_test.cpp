// `attnfuzz bench validation`'s bad input: one line and exit 2, before any
// GPU work (the benchmark itself runs on the H200: reports/gpu_oracle).
#include <gtest/gtest.h>

#include "tests/harness/cli/cli_process.h"

namespace afz {
namespace {

using testing::run_attnfuzz;

TEST(BenchCommand, UnknownKernelIsOneLineAndExit2) {
  const auto r = run_attnfuzz("bench validation --kernel no.such.kernel");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "attnfuzz: bench: unknown kernel 'no.such.kernel'\n");
}

TEST(BenchCommand, CpuKernelIsRefused) {
  const auto r = run_attnfuzz("bench validation --kernel cpu.tiled");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "attnfuzz: bench: cpu.tiled is no GPU kernel\n");
}

TEST(BenchCommand, RepetitionsMustBePositive) {
  const auto r = run_attnfuzz("bench validation --reps 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "attnfuzz: bench: --reps and --validations must be at least 1\n");
}

}  // namespace
}  // namespace afz
