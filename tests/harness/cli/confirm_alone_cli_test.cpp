// `fuzz --confirm-alone` and `audit --confirm-alone`: each failure's repro
// runs in a fresh `attnfuzz repro` process.  A kernel that goes stale after
// a few calls in one process (the plugin example's stale build) fails in the
// campaign and passes alone, and the report, the summary and the saved case
// say so; a deterministic mutant fails alone, forward and backward.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/harness/cli/cli_files.h"
#include "tests/harness/cli/cli_process.h"
#include "tests/temp_dir.h"

namespace afz {
namespace {

using testing::read_json;
using testing::read_text;
using testing::run_attnfuzz;

// Every failure of the report run alone, with the given outcome, and its
// saved case carrying the same outcome as a provenance line.
void expect_alone(const nlohmann::json& report, const std::string& outcome) {
  ASSERT_FALSE(report["failures"].empty());
  for (const nlohmann::json& f : report["failures"]) {
    ASSERT_TRUE(f.contains("alone")) << f.dump();
    EXPECT_EQ(f["alone"]["outcome"], outcome) << f["alone"].dump();
    const std::string saved = read_text(f["case_file"].get<std::string>());
    EXPECT_NE(saved.find("# provenance: alone: " + outcome + " ("), std::string::npos) << saved;
  }
}

TEST(ConfirmAloneCli, AStaleKernelFailsInTheCampaignAndPassesAlone) {
  const testing::TempDir dir("confirm-alone-stale");
  const auto r = run_attnfuzz(std::string("--kernel-lib ") + ATTNFUZZ_PLUGIN_STALE +
                              " fuzz -k example.naive_fp32 --cases 200 -j 1 --progress off --confirm-alone -o " +
                              dir.str());
  EXPECT_EQ(r.exit_code, 1) << r.output;  // the campaign found it: still a failure of the run
  EXPECT_NE(r.output.find("confirm alone: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(": passes (example.naive_fp32: pass"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("; alone: passes"), std::string::npos) << r.output;
  expect_alone(read_json(dir.str() + "/report.json"), "passes");
  // Every report format says it.
  EXPECT_NE(read_text(dir.str() + "/junit.xml").find("it fails only after other cases ran in the same process"),
            std::string::npos);
  EXPECT_NE(read_text(dir.str() + "/results.sarif").find("\"alone\": \"passes\""), std::string::npos);
  EXPECT_NE(read_text(dir.str() + "/report.html").find("<dt>alone</dt>"), std::string::npos);
}

TEST(ConfirmAloneCli, TheSameKernelWithoutStaleStateFailsAlone) {
  const testing::TempDir dir("confirm-alone-mutant");
  const auto r = run_attnfuzz("fuzz -k cpu.mutant.acc_not_rescaled --cases 100 -j 2 --progress off --confirm-alone -o " +
                              dir.str());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  expect_alone(read_json(dir.str() + "/report.json"), "fails");
}

TEST(ConfirmAloneCli, BackwardFailuresFailAloneWithTheirPass) {
  const testing::TempDir dir("confirm-alone-bwd");
  const auto r = run_attnfuzz("fuzz --pass bwd -k cpu.bwd.mutant.ds_no_scale --cases 40 -j 2 --progress off "
                              "--confirm-alone -o " + dir.str());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(": fails (cpu.bwd.mutant.ds_no_scale [bwd]: "), std::string::npos) << r.output;
  expect_alone(read_json(dir.str() + "/report.json"), "fails");
}

TEST(ConfirmAloneCli, AnAuditRecordsItToo) {
  const testing::TempDir dir("confirm-alone-audit");
  const auto r = run_attnfuzz(std::string("--kernel-lib ") + ATTNFUZZ_PLUGIN_STALE +
                              " audit -k example.naive_fp32 --rows '^fp32 d64 nomask mha fixed bhsd$' --time 1 -j 1 "
                              "--confirm-alone -o " + dir.str());
  EXPECT_EQ(r.exit_code, 1) << r.output;  // the matrix failed; the note says how
  expect_alone(read_json(dir.str() + "/report.json"), "passes");
}

// --confirm-jobs runs the repros side by side; what each gives does not
// depend on it (the stale kernel passes alone whatever the jobs).
TEST(ConfirmAloneCli, JobsDoNotChangeTheOutcomes) {
  std::vector<std::vector<std::string>> outcomes;
  for (const char* jobs : {"1", "3"}) {
    const testing::TempDir dir(std::string("confirm-alone-jobs") + jobs);
    const auto r = run_attnfuzz(std::string("--kernel-lib ") + ATTNFUZZ_PLUGIN_STALE +
                                " fuzz -k example.naive_fp32,cpu.mutant.acc_not_rescaled --cases 150 -j 2 "
                                "--progress off --confirm-alone --confirm-jobs " + jobs + " -o " + dir.str());
    EXPECT_NE(r.output.find(std::string(", ") + jobs + " at a time"), std::string::npos) << r.output;
    std::vector<std::string> mine;
    const nlohmann::json report = read_json(dir.str() + "/report.json");  // kept: the loop reads into it
    for (const nlohmann::json& f : report["failures"])
      mine.push_back(f["kernel"].get<std::string>() + " " + f["alone"]["outcome"].get<std::string>());
    outcomes.push_back(mine);
  }
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[0], outcomes[1]);
  EXPECT_NE(std::find(outcomes[0].begin(), outcomes[0].end(), "example.naive_fp32 passes"), outcomes[0].end());
  EXPECT_NE(std::find(outcomes[0].begin(), outcomes[0].end(), "cpu.mutant.acc_not_rescaled fails"), outcomes[0].end());
}

// Without the flag nothing runs alone and the report has no `alone` key.
TEST(ConfirmAloneCli, OnlyWhenAsked) {
  const testing::TempDir dir("confirm-alone-off");
  const auto r = run_attnfuzz("fuzz -k cpu.mutant.acc_not_rescaled --cases 100 -j 2 --progress off -o " + dir.str());
  EXPECT_EQ(r.output.find("confirm alone"), std::string::npos) << r.output;
  const nlohmann::json report = read_json(dir.str() + "/report.json");
  ASSERT_FALSE(report["failures"].empty());
  for (const nlohmann::json& f : report["failures"]) EXPECT_FALSE(f.contains("alone"));
}

}  // namespace
}  // namespace afz
