// `attnfuzz bench validation`'s bad input: one line and exit 2, before any
// GPU work (the benchmark itself runs on the H200: reports/gpu_oracle).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace {

struct Result {
  int exit_code;
  std::string output;
};

Result attnfuzz(const std::string& args) {
  const std::string command = std::string(ATTNFUZZ_BINARY_DIR) + "/attnfuzz " + args + " 2>&1";
  Result r{-1, ""};
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return r;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) r.output += buf;
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(BenchCommand, UnknownKernelIsOneLineAndExit2) {
  const Result r = attnfuzz("bench validation --kernel no.such.kernel");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "attnfuzz: bench: unknown kernel 'no.such.kernel'\n");
}

TEST(BenchCommand, CpuKernelIsRefused) {
  const Result r = attnfuzz("bench validation --kernel cpu.tiled");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "attnfuzz: bench: cpu.tiled is no GPU kernel\n");
}

TEST(BenchCommand, RepetitionsMustBePositive) {
  const Result r = attnfuzz("bench validation --reps 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "attnfuzz: bench: --reps and --validations must be at least 1\n");
}

}  // namespace
