// `attnfuzz run|repro --jobs J`: files run J at a time, yet the output is
// the same text in the same (file) order as with one job, and the exit code
// still says whether anything failed.
#include <gtest/gtest.h>

#include "tests/harness/cli/cli_process.h"

namespace afz {
namespace {

using testing::run_attnfuzz;

const std::string kMutantCorpus = std::string(ATTNFUZZ_SOURCE_DIR) + "/corpora/mutants/*.case";

TEST(ReproJobs, OutputAndExitCodeDoNotDependOnJobs) {
  const auto one = run_attnfuzz("repro " + kMutantCorpus, /*merge_stderr=*/false);
  ASSERT_EQ(one.exit_code, 1) << "the mutants' saved failures fail again";
  ASSERT_NE(one.output.find("repro: attnfuzz repro"), std::string::npos);
  for (const char* jobs : {"2", "5"}) {
    const auto many = run_attnfuzz("repro --jobs " + std::string(jobs) + " " + kMutantCorpus, false);
    EXPECT_EQ(many.exit_code, 1) << jobs;
    EXPECT_EQ(many.output, one.output) << jobs;
  }
}

TEST(ReproJobs, ABadFileAmongManyIsItsOwnLineAndExit2) {
  const auto r = run_attnfuzz("repro -j 3 " + kMutantCorpus + " no_such_file.case");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("no_such_file.case: cannot open the file\n"), std::string::npos);
}

TEST(ReproJobs, ZeroJobsIsBadInput) {
  const auto r = run_attnfuzz("repro -j 0 " + kMutantCorpus);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "attnfuzz: --jobs: must be at least 1\n");
}

}  // namespace
}  // namespace afz
