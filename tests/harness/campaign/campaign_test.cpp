#include "harness/campaign/campaign.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "harness/campaign/corpus.h"
#include "harness/case/case_file.h"
#include "harness/judge/signature.h"
#include "tests/harness/planted_kernel.h"
#include "tests/temp_dir.h"

namespace afz {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// Classes without the 8K-key flat rows, so a campaign of a few dozen cases
// takes well under a second.
constexpr const char* kQuickClasses = "shapes=2,late_max=2,magnitude=1,masking=2,layouts=1";

using testing::TempDir;

struct CampaignFixture : ::testing::Test {
  testing::PlantedKernel correct{"planted.correct"};
  testing::PlantedKernel broken{"planted.k37"};
  Runner runner{RunOptions{}};

  CampaignFixture() { broken.defect = testing::more_than_37_keys; }

  CampaignOptions options(int64_t cases, int jobs = 1) const {
    CampaignOptions o;
    o.kernels = {{&correct.k, "builtin"}, {&broken.k, "builtin"}};
    o.seed = 11;
    o.cases = cases;
    o.jobs = jobs;
    std::string error;
    o.mix = *GeneratorMix::parse(kQuickClasses, &error);
    // A run budget only: a time budget would make the result machine-dependent.
    o.minimize_options.max_runs = 150;
    o.minimize_options.max_seconds = 1e9;
    return o;
  }
};

// The report without what legitimately differs between runs.
Json comparable(const Report& r) {
  Json j = Json::parse(report_to_json(r));
  for (const char* k : {"command", "started_utc", "wall_s", "jobs"}) j["run"].erase(k);
  j.erase("timing");
  for (Json& k : j["kernels"]) k.erase("kernel_s");
  for (const char* list : {"failures", "raw_failures"})
    if (j.contains(list))
      for (Json& f : j[list]) {
        f["minimize"].erase("seconds");
        // Provenance carries the date the repro was found.
        std::string text = f["case_text"];
        const size_t at = text.find("# provenance: found by");
        if (at != std::string::npos) text.erase(at, text.find('\n', at) - at + 1);
        f["case_text"] = text;
      }
  return j;
}

TEST_F(CampaignFixture, SameSeedSameReportWhateverTheJobs) {
  const Report one = run_campaign(options(24, 1), runner);
  const Report again = run_campaign(options(24, 1), runner);
  const Report two = run_campaign(options(24, 2), runner);
  ASSERT_FALSE(one.failures.empty()) << "the planted defect must show in 24 cases";
  EXPECT_EQ(comparable(one).dump(1), comparable(again).dump(1));
  EXPECT_EQ(comparable(one).dump(1), comparable(two).dump(1));
  EXPECT_EQ(one.run.cases, 24);
  EXPECT_EQ(one.run.stop_reason, "cases");
  ASSERT_EQ(one.cases.size(), 24u);
  for (size_t i = 0; i < one.cases.size(); ++i) EXPECT_EQ(one.cases[i].index, int64_t(i));

  CampaignOptions other = options(24, 1);
  other.seed = 12;
  other.minimize = false;
  EXPECT_NE(comparable(run_campaign(other, runner))["cases"].dump(), comparable(one)["cases"].dump());
}

// The correct kernel never fails; the broken one fails exactly where a
// sequence has more than 37 keys; counts add up per kernel x class.
TEST_F(CampaignFixture, CountsVerdictsPerKernelAndClass) {
  CampaignOptions o = options(40);
  o.minimize = false;  // counting is the point here
  const Report r = run_campaign(o, runner);
  int64_t correct_cases = 0, broken_fails = 0;
  for (const ReportCell& c : r.cells) {
    int64_t sum = 0;
    for (int64_t n : c.by_verdict) sum += n;
    EXPECT_EQ(sum, c.cases) << c.kernel << " " << c.generator;
    if (c.kernel == "planted.correct") {
      EXPECT_EQ(c.failed(), 0) << c.generator;
      correct_cases += c.cases;
    } else {
      broken_fails += c.failed();
    }
  }
  EXPECT_EQ(correct_cases, 40);
  EXPECT_GT(broken_fails, 0);
  int64_t expected_fails = 0;
  for (const ReportCase& rc : r.cases) {
    const Case c = generate_case(*GeneratorMix::parse(kQuickClasses, nullptr), 11, uint64_t(rc.index)).c;
    bool long_seq = false;
    for (int b = 0; b < c.batch; ++b) long_seq |= c.seqlens_k[b] > 37 && c.seqlens_q[b] > 0;
    ASSERT_EQ(rc.verdicts.size(), 2u);
    EXPECT_EQ(rc.verdicts[0], VerdictClass::Pass) << rc.index;
    if (!long_seq) EXPECT_FALSE(is_failure(rc.verdicts[1])) << "case " << rc.index;
    expected_fails += is_failure(rc.verdicts[1]);
  }
  EXPECT_EQ(expected_fails, broken_fails);
  int64_t occurrences = 0;
  for (const ReportFailure& f : r.failures) {
    EXPECT_EQ(f.kernel, "planted.k37");
    EXPECT_EQ(f.status, "new");
    occurrences += f.occurrences;
  }
  EXPECT_EQ(occurrences, broken_fails) << "every failing case is one occurrence of one signature";
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
}

// A kernel that declines masks and windows is counted unsupported there,
// never failed, and the oracle is not computed for cases nobody takes.
TEST_F(CampaignFixture, RespectsCapabilities) {
  testing::PlantedKernel plain("planted.plain",
                               AFZ_CAP_VARLEN | AFZ_CAP_GQA | AFZ_CAP_LSE | AFZ_CAP_STRIDED | AFZ_CAP_DV_NE_D);
  CampaignOptions o = options(40);
  o.kernels = {{&plain.k, "builtin"}};
  const Report r = run_campaign(o, runner);
  int64_t unsupported = 0;
  for (const ReportCell& c : r.cells) {
    EXPECT_EQ(c.failed(), 0) << c.generator;
    unsupported += c.count(VerdictClass::Unsupported);
  }
  EXPECT_GT(unsupported, 0);
  EXPECT_TRUE(r.failures.empty());
}

// A failure is minimized and on disk, with its provenance, before the next
// case runs; re-running the file reproduces the verdict.
TEST_F(CampaignFixture, SavesMinimizedReprosWithProvenanceBeforeTheNextCase) {
  TempDir dir("afz-campaign-save");
  CampaignOptions o = options(16);
  o.corpus_dir = dir.str();
  int64_t last_case_consumed = -1;
  o.on_progress = [&](const ProgressSnapshot& s) { last_case_consumed = s.cases - 1; };
  std::vector<std::string> seen_on_disk;
  o.on_failure = [&](const ReportFailure& f) {
    EXPECT_EQ(last_case_consumed, f.case_index - 1) << "saved while its own case is consumed";
    std::string error;
    const std::optional<Case> c = load_case_file(f.case_file, &error);
    ASSERT_TRUE(c) << error;
    seen_on_disk.push_back(f.case_file);
  };
  const Report r = run_campaign(o, runner);
  ASSERT_FALSE(r.failures.empty());
  EXPECT_EQ(seen_on_disk.size(), r.failures.size());
  for (const ReportFailure& f : r.failures) {
    std::string error;
    const std::optional<Case> c = load_case_file(f.case_file, &error);
    ASSERT_TRUE(c) << error;
    EXPECT_EQ(c->kernel, "planted.k37");
    EXPECT_EQ(f.repro, "attnfuzz repro " + f.case_file);
    // The report has the file as first saved; later finds add seen-as lines.
    std::optional<Case> reported = parse_case(f.case_text, nullptr);
    ASSERT_TRUE(reported);
    EXPECT_EQ(reported->provenance, std::vector<std::string>(c->provenance.begin(),
                                                             c->provenance.begin() + long(reported->provenance.size())));
    reported->provenance = c->provenance;
    EXPECT_EQ(*reported, *c);
    auto has = [&](const std::string& prefix) {
      for (const std::string& p : c->provenance)
        if (p.starts_with(prefix)) return true;
      return false;
    };
    EXPECT_TRUE(has("found by attnfuzz " + std::string(kAttnfuzzVersion) + " fuzz on 20"));
    EXPECT_TRUE(has("kernel planted.k37"));
    EXPECT_TRUE(has("campaign seed 11 case " + std::to_string(f.case_index) + " class " + f.generator));
    EXPECT_TRUE(has("verdict numeric_mismatch"));
    EXPECT_TRUE(has("worst o[b=0 h=0 i=0 d=0]"));
    EXPECT_TRUE(has("signature " + f.signature));
    EXPECT_EQ(signature_of(c->kernel, f.verdict, *c).text(), f.signature);
    // Minimized: the defect needs one sequence of 38 keys and nothing else.
    EXPECT_EQ(c->batch, 1);
    EXPECT_EQ(c->seqlens_k, std::vector<int32_t>{38});
    EXPECT_EQ(c->seqlens_q, std::vector<int32_t>{1});
    Materialized m(*c);
    EXPECT_EQ(runner.run(broken.k, m).verdict.cls, f.verdict);
  }
}

TEST_F(CampaignFixture, StopsAfterFailuresOrTime) {
  CampaignOptions o = options(1000);
  o.stop_after_failures = 1;
  const Report first = run_campaign(o, runner);
  EXPECT_EQ(first.run.stop_reason, "failures");
  ASSERT_EQ(first.failures.size(), 1u);
  EXPECT_EQ(first.run.cases, first.failures[0].case_index + 1) << "stops right after the failing case";

  CampaignOptions t = options(-1, 2);
  t.time_s = 0.3;
  const Report timed = run_campaign(t, runner);
  EXPECT_EQ(timed.run.stop_reason, "time");
  EXPECT_GT(timed.run.cases, 0);
  EXPECT_EQ(int64_t(timed.cases.size()), timed.run.cases);
}

TEST_F(CampaignFixture, ShardsRunTheSameCases) {
  CampaignOptions all = options(30);
  all.minimize = false;  // verdicts are the point here
  const Report whole = run_campaign(all, runner);
  CampaignOptions tail = all;
  tail.cases = 10;
  tail.first_case = 20;
  const Report shard = run_campaign(tail, runner);
  ASSERT_EQ(shard.cases.size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(shard.cases[i].index, whole.cases[20 + i].index);
    EXPECT_EQ(shard.cases[i].generator, whole.cases[20 + i].generator);
    EXPECT_EQ(shard.cases[i].verdicts, whole.cases[20 + i].verdicts);
  }
}

TEST_F(CampaignFixture, RejectsUnusableOptions) {
  CampaignOptions none = options(10);
  none.kernels.clear();
  EXPECT_THROW(run_campaign(none, runner), std::runtime_error);
  CampaignOptions unbounded = options(-1);
  EXPECT_THROW(run_campaign(unbounded, runner), std::runtime_error);
}

TEST_F(CampaignFixture, ReportJsonRoundTrips) {
  const Report r = run_campaign(options(16), runner);
  const std::string text = report_to_json(r);
  std::string error;
  const std::optional<Report> back = report_from_json(text, &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(report_to_json(*back), text);
  const Json j = Json::parse(text);
  EXPECT_EQ(j["schema"], "attnfuzz-report");
  EXPECT_EQ(j["schema_version"], kReportSchemaVersion);
  EXPECT_EQ(j["run"]["cases"], 16);
  EXPECT_EQ(j["summary"]["verdict"], "fail");
  EXPECT_EQ(j["summary"]["new_failures"], int64_t(r.failures.size()));
  for (const Json& f : j["failures"]) {
    EXPECT_TRUE(f["worst"]["valid"].get<bool>());
    EXPECT_FALSE(f["case_text"].get<std::string>().empty());
  }
  EXPECT_FALSE(report_from_json("{\"schema\": \"attnfuzz-report\", \"schema_version\": 99}", &error));
  EXPECT_NE(error.find("schema_version 99"), std::string::npos) << error;
  EXPECT_FALSE(report_from_json("not json", &error));
}

}  // namespace
}  // namespace afz

namespace afz {
namespace {

TEST(Progress, LineShowsRateFailuresClassesAndTimeLeft) {
  ProgressSnapshot s;
  s.elapsed_s = 10;
  s.cases = 500;
  s.time_limit_s = 30;
  s.new_failures = 2;
  s.failing_cases = 7;
  s.unsupported = 3;
  s.per_class = {{"shapes", 300}, {"flat", 200}};
  EXPECT_EQ(format_progress(s), "10.0s  500 cases  50/s  fail 2 new (7 cases)  unsup 3  left 20.0s | shapes 300 flat 200");
  s.time_limit_s = -1;
  s.case_limit = 1000;  // 500 more at 50/s
  EXPECT_NE(format_progress(s).find("left 10.0s"), std::string::npos) << format_progress(s);
}

// Plain mode (not a terminal): whole lines, rate-limited, no escapes.
TEST(Progress, PlainModePrintsPeriodicLines) {
  std::FILE* f = std::tmpfile();
  ASSERT_TRUE(f);
  {
    ProgressLine line(f, ProgressLine::Mode::Plain);
    ProgressSnapshot s;
    for (int i = 1; i <= 200; ++i) {
      s.elapsed_s = 0.1 * i;  // 20 s in all: lines at 0.1 s and 10.1 s, then finish's
      s.cases = i;
      line.update(s);
    }
  }
  std::rewind(f);
  std::string text(4096, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), f));
  std::fclose(f);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << text;
  EXPECT_EQ(text.find('\033'), std::string::npos);
  EXPECT_NE(text.find("progress: 10.1s  101 cases"), std::string::npos) << text;
  EXPECT_NE(text.find("progress: 20.0s  200 cases"), std::string::npos) << text;
}

}  // namespace
}  // namespace afz

namespace afz {
namespace {

// --checkpoint: the report so far, after each case once the interval has
// passed (0: every case), marked as running; the final report is unchanged.
TEST_F(CampaignFixture, CheckpointsHandOverTheReportSoFar) {
  CampaignOptions o = options(6);
  o.minimize = false;
  std::vector<int64_t> cases_seen;
  o.checkpoint_s = 0;
  o.on_checkpoint = [&](const Report& r) {
    EXPECT_EQ(r.run.stop_reason, "running");
    EXPECT_EQ(r.kernels.size(), 2u);
    cases_seen.push_back(r.run.cases);
  };
  const Report final_report = run_campaign(o, runner);
  EXPECT_EQ(cases_seen, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(final_report.run.stop_reason, "cases");
  EXPECT_EQ(final_report.kernels.size(), 2u);
}

}  // namespace
}  // namespace afz
