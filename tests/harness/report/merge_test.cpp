// `report merge`: the shards of a seeded campaign, merged, equal one run of
// the same cases; the raw-signature ledger is what makes failures exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "harness/campaign/minimize.h"
#include "harness/campaign/shard.h"
#include "harness/case/generators.h"
#include "tests/harness/report/report_fixture.h"

namespace afz {
namespace {

using Json = nlohmann::ordered_json;

// The report without what legitimately differs between runs: clocks, the
// command line, worker counts.
Json comparable(const Report& r) {
  Json j = Json::parse(report_to_json(r));
  for (const char* k : {"command", "started_utc", "wall_s", "jobs"}) j["run"].erase(k);
  j.erase("timing");
  for (Json& k : j["kernels"]) k.erase("kernel_s");
  // ... and the date in a repro's provenance line ("found by attnfuzz 0.1.0 fuzz on 2025-...Z").
  static const std::regex date(" on [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z");
  for (const char* list : {"failures", "raw_failures"})
    for (Json& f : j[list]) {
      f["minimize"].erase("seconds");
      f["case_text"] = std::regex_replace(f["case_text"].get<std::string>(), date, " on DATE");
    }
  return j;
}

void expect_same(const Json& a, const Json& b, const char* key) {
  EXPECT_EQ(a[key].dump(1), b[key].dump(1)) << "section '" << key << "' differs";
}

TEST(ReportMerge, ShardsOfASeededCampaignEqualOneRun) {
  constexpr int64_t kCases = 36;
  const Report single = testing::run_quick_campaign(0, kCases);
  // Uneven shards, one with two workers, handed over out of order.
  std::vector<Report> shards = {testing::run_quick_campaign(23, kCases - 23), testing::run_quick_campaign(0, 10),
                                testing::run_quick_campaign(10, 13, 2)};
  // The property is only interesting if the shards each found failures.
  for (const Report& s : shards) ASSERT_FALSE(s.failures.empty()) << "shard at " << s.run.first_case;
  std::string error;
  const std::optional<Report> merged = merge_reports(shards, &error);
  ASSERT_TRUE(merged) << error;

  const Json a = comparable(single), b = comparable(*merged);
  for (const char* key : {"schema", "schema_version", "run", "kernels", "generators", "counts", "cases", "errors",
                          "error_stats", "audits", "mutants"})
    expect_same(a, b, key);
  EXPECT_EQ(merged->failing_cases(), single.failing_cases());
  EXPECT_EQ(merged->timing.wall_s, std::max({shards[0].timing.wall_s, shards[1].timing.wall_s, shards[2].timing.wall_s}));
  ASSERT_FALSE(single.raw_failures.empty());
  ASSERT_TRUE(single.raw_failures_complete) << "past kRawSignatureLimit the merge is not exact";
  expect_same(a, b, "raw_failures");
  expect_same(a, b, "raw_failures_complete");
  expect_same(a, b, "failures");
  expect_same(a, b, "findings");
  expect_same(a, b, "summary");
}

// `fuzz --shard K/N --cases C` runs shard_range's part of the campaign;
// merging the N shard reports gives one run of the C cases.
TEST(ReportMerge, ShardFlagSplitMergesToOneRun) {
  constexpr int64_t kCases = 36;
  constexpr int kShards = 4;
  const Report single = testing::run_quick_campaign(0, kCases);
  std::vector<Report> shards;
  for (int k = kShards - 1; k >= 0; --k) {  // handed over in reverse
    const CaseRange r = shard_range({k, kShards}, 0, kCases);
    shards.push_back(testing::run_quick_campaign(r.first, r.cases));
  }
  std::string error;
  const std::optional<Report> merged = merge_reports(shards, &error);
  ASSERT_TRUE(merged) << error;
  const Json a = comparable(single), b = comparable(*merged);
  for (const char* key : {"run", "kernels", "generators", "counts", "cases", "errors", "error_stats", "raw_failures",
                          "raw_failures_complete", "failures", "findings", "summary"})
    expect_same(a, b, key);
}

// Cases of increasing size, as parseable case text.
std::vector<std::string> cases_by_size(int n) {
  std::vector<Case> cases;
  for (uint64_t i = 0; cases.size() < size_t(n) && i < 200; ++i) {
    Case c = generate_with(*find_generator("shapes"), 11, i);
    bool distinct = true;
    for (const Case& other : cases) distinct &= case_size(other) != case_size(c);
    if (distinct && case_is_buildable(c)) cases.push_back(std::move(c));
  }
  std::sort(cases.begin(), cases.end(), [](const Case& a, const Case& b) { return case_size(a) < case_size(b); });
  std::vector<std::string> texts;
  for (const Case& c : cases) texts.push_back(write_case(c));
  return texts;
}

ReportFailure raw(const std::string& raw_sig, int64_t index, const std::string& text, int64_t occurrences = 1) {
  ReportFailure f;
  f.kernel = "k";
  f.verdict = VerdictClass::NumericMismatch;
  f.signature = "k|numeric_mismatch|late|q1.k64";
  f.raw_signature = raw_sig;
  f.status = "new";
  f.case_index = index;
  f.occurrences = occurrences;
  f.case_text = text;
  return f;
}

// One run meets raw signature R first at case 3 (minimized to a mid-size
// case), again at case 10, and R' first at case 12 (smaller: it replaces).
// Sharded at 5, the second shard meets R first at case 10 and minimizes
// that instance to the smallest case of all, which one run never produced.
TEST(ReportMerge, LedgerKeepsWhatOneRunWouldKeep) {
  const std::vector<std::string> size = cases_by_size(3);  // [0] smallest
  ASSERT_EQ(size.size(), 3u);
  Report shard_a, shard_b;
  for (Report* s : {&shard_a, &shard_b}) {
    s->run.seed = 1;
    s->kernels.push_back({"k", "builtin", "", "zero", "-inf", 0});
  }
  shard_a.run.first_case = 0;
  shard_a.run.cases = 5;
  shard_a.raw_failures = {raw("R", 3, size[2])};
  shard_a.failures = consolidate_failures(shard_a.raw_failures, {"k"});
  shard_b.run.first_case = 5;
  shard_b.run.cases = 10;
  shard_b.raw_failures = {raw("R", 10, size[0]), raw("R'", 12, size[1])};
  shard_b.failures = consolidate_failures(shard_b.raw_failures, {"k"});
  ASSERT_EQ(shard_b.failures[0].case_text, size[0]);

  std::string error;
  const std::optional<Report> merged = merge_reports({shard_b, shard_a}, &error);
  ASSERT_TRUE(merged) << error;
  ASSERT_EQ(merged->failures.size(), 1u);
  EXPECT_EQ(merged->failures[0].raw_signature, "R'");
  EXPECT_EQ(merged->failures[0].case_index, 12);
  EXPECT_EQ(merged->failures[0].case_text, size[1]);
  EXPECT_EQ(merged->failures[0].occurrences, 3);
  ASSERT_EQ(merged->raw_failures.size(), 2u);
  EXPECT_EQ(merged->raw_failures[0].case_index, 3);  // R's first occurrence is the global one
  EXPECT_EQ(merged->raw_failures[0].occurrences, 2);
  EXPECT_TRUE(merged->raw_failures_complete);

  // A part whose ledger stopped growing (past kRawSignatureLimit raw
  // signatures) leaves the merge only the parts' own failures: the smallest
  // repro it was given, and a ledger that says it is not complete.
  shard_a.raw_failures_complete = false;
  const std::optional<Report> partial = merge_reports({shard_a, shard_b}, &error);
  ASSERT_TRUE(partial) << error;
  ASSERT_EQ(partial->failures.size(), 1u);
  EXPECT_EQ(partial->failures[0].case_text, size[0]);
  EXPECT_EQ(partial->failures[0].occurrences, 3);
  EXPECT_FALSE(partial->raw_failures_complete);

  // Without ledgers the merge can only keep the smallest repro it was given.
  shard_a.raw_failures.clear();
  shard_b.raw_failures.clear();
  shard_a.raw_failures_complete = true;
  const std::optional<Report> fallback = merge_reports({shard_a, shard_b}, &error);
  ASSERT_TRUE(fallback) << error;
  ASSERT_EQ(fallback->failures.size(), 1u);
  EXPECT_EQ(fallback->failures[0].case_text, size[0]);
  EXPECT_EQ(fallback->failures[0].occurrences, 3);
}

TEST(ReportMerge, RejectsPartsThatDoNotBelongTogether) {
  Report a, b;
  a.run.seed = b.run.seed = 5;
  a.run.cases = b.run.cases = 10;
  b.run.first_case = 5;
  std::string error;
  EXPECT_FALSE(merge_reports({a, b}, &error));
  EXPECT_NE(error.find("overlap"), std::string::npos) << error;
  b.run.first_case = 10;
  b.run.seed = 6;
  EXPECT_FALSE(merge_reports({a, b}, &error));
  EXPECT_NE(error.find("seeds 5 and 6"), std::string::npos) << error;
  b.run.seed = 5;
  b.run.kind = "replay";
  EXPECT_FALSE(merge_reports({a, b}, &error));
  EXPECT_NE(error.find("replay"), std::string::npos) << error;
  EXPECT_FALSE(merge_reports({}, &error));
  b.run.kind = "campaign";
  EXPECT_TRUE(merge_reports({a, b}, &error)) << error;
}

// Audit shards each record up to kCaseRecordLimit cases, all numbered from
// their first cell: the merge keeps one run's bound (the H200 audits of run 4
// merged to 192 records, which the schema rejects).
TEST(ReportMerge, AuditShardsKeepTheCaseRecordBound) {
  std::vector<Report> shards(3);
  for (Report& r : shards) {
    r.run.kind = "audit";
    r.run.seed = 1;
    r.run.cases = int64_t(kCaseRecordLimit);
    for (size_t i = 0; i < kCaseRecordLimit; ++i) r.cases.push_back({int64_t(i), "shapes", {}});
  }
  std::string error;
  const std::optional<Report> merged = merge_reports(shards, &error);
  ASSERT_TRUE(merged) << error;
  EXPECT_EQ(merged->cases.size(), kCaseRecordLimit);
  EXPECT_EQ(merged->run.cases, 3 * int64_t(kCaseRecordLimit));
}

TEST(ReportMerge, ErrorStatisticsAddUpExactly) {
  const Runner runner(RunOptions{});
  Report all, first, second;
  for (uint64_t i = 0; i < 8; ++i) {
    const Case c = generate_with(*find_generator("late_max"), 21, i);
    const Verdict v = runner.run(testing::mutant_kernel(), c).verdict;
    all.add_error_stats("m", v);
    (i < 3 ? first : second).add_error_stats("m", v);
  }
  first.run.cases = 3;
  second.run.first_case = 3;
  second.run.cases = 5;
  std::string error;
  const std::optional<Report> merged = merge_reports({second, first}, &error);
  ASSERT_TRUE(merged) << error;
  ASSERT_FALSE(all.error_stats.empty());
  EXPECT_EQ(Json::parse(report_to_json(*merged))["error_stats"], Json::parse(report_to_json(all))["error_stats"]);
  const ErrorSeries& s = all.error_stats[0].stats;
  int64_t binned = 0;
  for (int64_t n : s.over_bound) binned += n;
  EXPECT_EQ(binned, s.elements);
  EXPECT_GT(s.rows, 0);
}

TEST(ReportFolder, WritesAllFourFilesAndRendersAgain) {
  const std::string dir = testing::temp_folder("folder");
  const Report r = testing::run_quick_campaign(0, 8);
  std::string error;
  ASSERT_TRUE(write_report_folder(r, dir, &error)) << error;
  for (const char* f : {kReportJsonFile, kReportHtmlFile, kJunitFile, kSarifFile})
    EXPECT_GT(std::filesystem::file_size(std::filesystem::path(dir) / f), 100u) << f;
  std::filesystem::remove(std::filesystem::path(dir) / kJunitFile);
  ASSERT_TRUE(render_report_folder(dir, &error)) << error;
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(dir) / kJunitFile));
  EXPECT_FALSE(render_report_folder(dir + "/nowhere", &error));
  EXPECT_NE(error.find("report.json"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace afz
