// `audit --skip-covered` (harness/campaign/audit_coverage.h): a sweep given
// earlier report folders runs only the cells they lack, and the two reports
// together hold the matrix one sweep gives; reports that cannot vouch for a
// cell (another seed, no audit, unreadable) are refused in one line.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>

#include "harness/campaign/audit.h"
#include "harness/campaign/audit_coverage.h"
#include "harness/report/report_views.h"
#include "tests/harness/report/report_fixture.h"
#include "tests/temp_dir.h"

namespace afz {
namespace {

// One dtype and head dim: a matrix small enough to sweep whole in a test.
afz_kernel narrow_correct_kernel() {
  afz_kernel k = testing::correct_kernel();
  k.name = "correct.narrow";
  k.caps.in_dtypes = k.caps.out_dtypes = 1u << AFZ_BF16;
  k.caps.min_head_dim = k.caps.max_head_dim = 64;
  return k;
}

constexpr uint64_t kSeed = 3;

AuditOptions sweep(const afz_kernel& k, int64_t first, int64_t end) {
  AuditOptions o;
  o.kernels = {{&k, "builtin"}};
  o.seed = kSeed;
  o.time_s = 0;  // the sweep only
  o.first_cell = first;
  o.end_cell = end;
  return o;
}

using CellNames = std::set<std::pair<std::string, std::string>>;
CellNames names_of(const Report& r) {
  CellNames out;
  for (const ReportAuditCell& c : r.audits.at(0).cells) out.insert({c.row, c.column});
  return out;
}

TEST(AuditCoverage, ASweepRunsOnlyTheCellsEarlierReportsLack) {
  const afz_kernel k = narrow_correct_kernel();
  const Runner runner(RunOptions{});
  constexpr int64_t kCut = 40, kEnd = 100;
  testing::TempDir dir("audit-coverage");
  std::string error;
  const Report first = run_audit(sweep(k, 0, kCut), runner);
  ASSERT_TRUE(write_report_folder(first, dir.str(), &error)) << error;

  AuditOptions rest = sweep(k, 0, kEnd);
  std::optional<CoveredCells> covered = read_covered_cells({dir.str()}, kSeed, &error);
  ASSERT_TRUE(covered) << error;
  rest.covered = std::move(*covered);
  const std::vector<SweepCell> plan = audit_sweep_cells(rest);
  EXPECT_EQ(int64_t(plan.size()), kEnd - kCut);
  const Report second = run_audit(rest, runner);
  EXPECT_EQ(second.run.cases, kEnd - kCut);
  const std::vector<std::string>& notes = second.audits.at(0).notes;
  EXPECT_NE(std::find(notes.begin(), notes.end(),
                      "40 of the range's 100 cells skipped: earlier reports cover them (--skip-covered)"),
            notes.end());

  // The two parts are disjoint and make up the whole range's matrix.
  const CellNames a = names_of(first), b = names_of(second), whole = names_of(run_audit(sweep(k, 0, kEnd), runner));
  for (const auto& cell : b) EXPECT_FALSE(a.count(cell)) << cell.first << " x " << cell.second << " ran twice";
  CellNames joined = a;
  joined.insert(b.begin(), b.end());
  EXPECT_EQ(joined, whole);
  // The plan names the cells the sweep ran.
  CellNames planned;
  for (const SweepCell& c : plan) planned.insert({c.row, c.column});
  EXPECT_EQ(planned, b);
}

TEST(AuditCoverage, ACellIsCoveredOnlyWhenEveryKernelHasIt) {
  CoveredCells c;
  c.by_kernel["a"].insert({"bf16 d64", "shapes"});
  c.by_kernel["b"].insert({"bf16 d64", "late_max"});
  EXPECT_TRUE(c.covers({"a"}, "bf16 d64", "shapes"));
  EXPECT_FALSE(c.covers({"a", "b"}, "bf16 d64", "shapes")) << "b never ran it";
  EXPECT_FALSE(c.covers({"c"}, "bf16 d64", "shapes"));
  EXPECT_FALSE(c.covers({}, "bf16 d64", "shapes"));
}

TEST(AuditCoverage, ReportsThatCannotVouchForACellAreRefused) {
  const afz_kernel k = narrow_correct_kernel();
  const Runner runner(RunOptions{});
  testing::TempDir audit_dir("audit-coverage-seed"), campaign_dir("audit-coverage-campaign");
  std::string error;
  ASSERT_TRUE(write_report_folder(run_audit(sweep(k, 0, 5), runner), audit_dir.str(), &error)) << error;
  EXPECT_FALSE(read_covered_cells({audit_dir.str()}, kSeed + 1, &error));
  EXPECT_NE(error.find("seed 3, this one has seed 4"), std::string::npos) << error;
  ASSERT_TRUE(write_report_folder(testing::run_quick_campaign(0, 3), campaign_dir.str(), &error)) << error;
  EXPECT_FALSE(read_covered_cells({campaign_dir.str()}, kSeed, &error));
  EXPECT_NE(error.find("not of an audit"), std::string::npos) << error;
  EXPECT_FALSE(read_covered_cells({audit_dir.str() + "/nothing-here"}, kSeed, &error));
  EXPECT_NE(error.find("--skip-covered " + audit_dir.str() + "/nothing-here"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << "one line: " << error;
}

}  // namespace
}  // namespace afz
