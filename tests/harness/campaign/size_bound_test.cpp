// A campaign's report and corpus are bounded by what it found, not by how
// long it ran (reports/README.md, "Size"): against a kernel that fails most
// cases, a run four times longer writes a report.json and case files of
// about the same size, all under fixed bounds.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include "harness/campaign/campaign.h"
#include "harness/campaign/corpus.h"
#include "harness/report/report_views.h"
#include "tests/harness/planted_kernel.h"

namespace afz {
namespace {

namespace fs = std::filesystem;

// The bounds reports/README.md states for one kernel with one defect:
// report.json within kReportBytes, every case file within kCaseFileBytes.
constexpr uintmax_t kReportBytes = 256 * 1024;
constexpr uintmax_t kCaseFileBytes = 4 * 1024;
// The longer run may add a signature or two the shorter did not meet, never
// anything per case or per occurrence.
constexpr double kGrowth = 1.15;

constexpr int64_t kShortCases = 80;
constexpr int64_t kLongCases = 4 * kShortCases;

struct Outputs {
  Report report;
  uintmax_t report_bytes = 0, largest_case_file = 0;
  size_t case_files = 0;
};

Outputs run_campaign_to_disk(const afz_kernel& k, int64_t cases, const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  CampaignOptions o;
  o.kernels = {{&k, "builtin"}};
  o.seed = 3;
  o.cases = cases;
  std::string error;
  o.mix = *GeneratorMix::parse("shapes=2,late_max=2,masking=1,add_mask=1", &error);
  o.corpus_dir = (dir / "corpus").string();
  o.minimize_options.max_runs = 20;
  o.minimize_options.max_seconds = 1e9;
  Outputs r;
  r.report = run_campaign(o, Runner{RunOptions{}});
  EXPECT_TRUE(write_report_folder(r.report, dir.string(), &error, {"/nonexistent/gnuplot"})) << error;
  r.report_bytes = fs::file_size(dir / kReportJsonFile);
  const std::optional<std::vector<std::string>> files = list_case_files(o.corpus_dir, &error);
  EXPECT_TRUE(files) << error;
  for (const std::string& f : files.value_or(std::vector<std::string>{})) {
    ++r.case_files;
    r.largest_case_file = std::max(r.largest_case_file, fs::file_size(f));
  }
  fs::remove_all(dir);
  return r;
}

TEST(SizeBound, LongerCampaignAgainstABrokenKernelDoesNotGrowTheReport) {
  testing::PlantedKernel broken("planted.always");
  broken.defect = [](const afz_problem&, int) { return true; };
  const Outputs short_run = run_campaign_to_disk(broken.k, kShortCases, "afz-size-short");
  const Outputs long_run = run_campaign_to_disk(broken.k, kLongCases, "afz-size-long");
  for (const Outputs* r : {&short_run, &long_run}) {
    // The premise: most cases fail, under many raw signatures.
    EXPECT_GT(r->report.failing_cases() * 10, r->report.run.cases * 9);
    EXPECT_LE(r->report_bytes, kReportBytes) << r->report.run.cases << " cases";
    EXPECT_LE(r->largest_case_file, kCaseFileBytes) << r->report.run.cases << " cases";
    std::printf("%lld cases: report.json %ju bytes, %zu case files, the largest %ju bytes, %zu signatures\n",
                (long long)r->report.run.cases, r->report_bytes, r->case_files, r->largest_case_file,
                r->report.failures.size());
  }
  EXPECT_FALSE(long_run.report.raw_failures_complete) << "the long run meets more raw signatures than the ledger keeps";
  EXPECT_LE(double(long_run.report_bytes), kGrowth * double(short_run.report_bytes));
  EXPECT_LE(long_run.case_files, short_run.case_files + 2);
}

}  // namespace
}  // namespace afz
