// `attnfuzz report confirm DIR`: the repros a run left unconfirmed (no
// --confirm-alone, or its --confirm-time ran out) run alone afterwards,
// from the folder's own saved cases, wherever the folder moved.  The stale
// plugin kernel fails in a campaign and passes alone; a mutant fails alone.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/harness/cli/cli_files.h"
#include "tests/harness/cli/cli_process.h"
#include "tests/harness/report/json_schema.h"
#include "tests/temp_dir.h"

namespace afz {
namespace {

namespace fs = std::filesystem;
using testing::read_json;
using testing::read_text;
using testing::run_attnfuzz;
using Json = nlohmann::json;

void write_json(const fs::path& path, const Json& j) { std::ofstream(path) << j.dump(2); }

void expect_valid(const Json& report) {
  const Json schema = Json::parse(read_text(std::string(ATTNFUZZ_SOURCE_DIR) + "/reports/schema/report.schema.json"));
  const std::vector<std::string> problems = testing::SchemaValidator(schema).validate(report);
  EXPECT_TRUE(problems.empty()) << problems.front();
}

// A campaign's report folder, failures and saved cases under `dir`, nothing
// run alone.
void campaign(const std::string& args, const fs::path& dir) {
  const auto r = run_attnfuzz(args + " --progress off -o " + dir.string() + " --corpus " + (dir / "corpus").string());
  ASSERT_EQ(r.exit_code, 1) << r.output;
  const Json report = read_json(dir / "report.json");
  ASSERT_FALSE(report["failures"].empty()) << r.output;
  for (const Json& f : report["failures"]) ASSERT_FALSE(f.contains("alone"));
}

TEST(ReportConfirmCli, AMovedFolderIsConfirmedFromItsOwnSavedCases) {
  const testing::TempDir tmp("report-confirm-stale");
  const fs::path ran = tmp.path / "ran", moved = tmp.path / "moved";
  campaign(std::string("--kernel-lib ") + ATTNFUZZ_PLUGIN_STALE + " fuzz -k example.naive_fp32 --cases 200 -j 1", ran);
  // As when a device's report folder is copied home: the case_file paths
  // in the report no longer exist.
  fs::rename(ran, moved);
  const auto r = run_attnfuzz("--kernel-lib " + std::string(ATTNFUZZ_PLUGIN_STALE) + " report confirm " + moved.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;  // each one passes alone: none fails there
  EXPECT_NE(r.output.find(": passes (example.naive_fp32: pass"), std::string::npos) << r.output;
  const Json report = read_json(moved / "report.json");
  EXPECT_NE(r.output.find(std::to_string(report["failures"].size()) + " passes"), std::string::npos) << r.output;
  for (const Json& f : report["failures"]) {
    ASSERT_TRUE(f.contains("alone")) << f.dump();
    EXPECT_EQ(f["alone"]["outcome"], "passes");
    const fs::path saved = moved / "corpus" / fs::path(f["case_file"].get<std::string>()).filename();
    EXPECT_NE(read_text(saved).find("# provenance: alone: passes ("), std::string::npos) << saved;
  }
  expect_valid(report);
  EXPECT_NE(read_text(moved / "junit.xml").find("it fails only after other cases ran in the same process"),
            std::string::npos);
}

// The plugin the report names is not on this machine (built elsewhere):
// without --kernel-lib the repros cannot load it and give no verdict; with
// it, they load this one and run, and those not_run go again.
TEST(ReportConfirmCli, KernelLibReplacesALibraryThatIsNotHere) {
  const testing::TempDir tmp("report-confirm-origin");
  const fs::path dir = tmp.path / "run";
  campaign(std::string("--kernel-lib ") + ATTNFUZZ_PLUGIN_STALE + " fuzz -k example.naive_fp32 --cases 200 -j 1", dir);
  Json report = read_json(dir / "report.json");
  for (Json& k : report["kernels"]) k["origin"] = (tmp.path / "elsewhere" / "libattnfuzz_plugin.so").string();
  write_json(dir / "report.json", report);

  auto r = run_attnfuzz("report confirm " + dir.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;  // nothing fails alone: nothing ran
  for (const Json& f : read_json(dir / "report.json")["failures"]) EXPECT_EQ(f["alone"]["outcome"], "not_run");

  r = run_attnfuzz("--kernel-lib " + std::string(ATTNFUZZ_PLUGIN_STALE) + " report confirm " + dir.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const Json& f : read_json(dir / "report.json")["failures"]) EXPECT_EQ(f["alone"]["outcome"], "passes");
}

TEST(ReportConfirmCli, OnlyTheUnconfirmedRunUnlessAgain) {
  const testing::TempDir tmp("report-confirm-mutant");
  const fs::path dir = tmp.path / "run";
  campaign("fuzz -k cpu.mutant.acc_not_rescaled --cases 100 -j 2", dir);
  auto r = run_attnfuzz("report confirm --confirm-jobs 2 " + dir.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;  // they fail alone
  Json report = read_json(dir / "report.json");
  const size_t n = report["failures"].size();
  EXPECT_NE(r.output.find(std::to_string(n) + " of " + std::to_string(n) + " failure repro(s) to run alone"),
            std::string::npos) << r.output;
  for (const Json& f : report["failures"]) EXPECT_EQ(f["alone"]["outcome"], "fails") << f["alone"].dump();
  expect_valid(report);

  // A repro killed before its verdict, and one never run: only those two go again.
  report["failures"][0]["alone"] = {{"outcome", "not_run"}, {"line", "killed after 5 s without a verdict"}, {"seconds", 5}};
  if (n > 1) report["failures"][1].erase("alone");
  write_json(dir / "report.json", report);
  const size_t waiting = n > 1 ? 2 : 1;
  r = run_attnfuzz("report confirm " + dir.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(std::to_string(waiting) + " of " + std::to_string(n) + " failure repro(s)"),
            std::string::npos) << r.output;
  for (const Json& f : read_json(dir / "report.json")["failures"]) EXPECT_EQ(f["alone"]["outcome"], "fails");

  r = run_attnfuzz("report confirm " + dir.string());
  EXPECT_NE(r.output.find("0 of " + std::to_string(n) + " failure repro(s)"), std::string::npos) << r.output;
  r = run_attnfuzz("report confirm --again " + dir.string());
  EXPECT_NE(r.output.find(std::to_string(n) + " of " + std::to_string(n) + " failure repro(s)"), std::string::npos)
      << r.output;
}

TEST(ReportConfirmCli, BackwardFailuresKeepTheirPass) {
  const testing::TempDir tmp("report-confirm-bwd");
  const fs::path dir = tmp.path / "run";
  campaign("fuzz --pass bwd -k cpu.bwd.mutant.ds_no_scale --cases 40 -j 2", dir);
  const auto r = run_attnfuzz("report confirm " + dir.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(": fails (cpu.bwd.mutant.ds_no_scale [bwd]: "), std::string::npos) << r.output;
}

TEST(ReportConfirmCli, AFolderWithoutAReportIsBadInput) {
  const testing::TempDir tmp("report-confirm-missing");
  const auto r = run_attnfuzz("report confirm " + (tmp.path / "nothing").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("report.json"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace afz
