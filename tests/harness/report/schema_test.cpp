// report.json against reports/schema/report.schema.json: a real campaign's
// report validates, broken ones do not, every key round-trips, and the
// schema, report.h's comment and reports/README.md name the same keys.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "harness/campaign/campaign.h"
#include "harness/case/generators.h"
#include "tests/harness/report/json_schema.h"
#include "tests/harness/report/report_fixture.h"

namespace afz {
namespace {

using Json = nlohmann::json;
using testing::SchemaValidator;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Json schema() {
  static const Json s = Json::parse(slurp(std::string(ATTNFUZZ_SOURCE_DIR) + "/reports/schema/report.schema.json"));
  return s;
}

// A real campaign's report with every optional section filled: error
// statistics from judging generated cases, an audit matrix, mutant rows.
const Report& full_report() {
  static const Report r = [] {
    Report rep = testing::run_quick_campaign(0, 16);
    const Runner runner(RunOptions{});
    for (uint64_t i = 0; i < 6; ++i) {
      const Case c = generate_with(*find_generator("late_max"), 3, i);
      for (const afz_kernel* k : {&testing::correct_kernel(), &testing::mutant_kernel()})
        rep.add_error_stats(k->name, runner.run(*k, c).verdict);
    }
    ReportAudit a{"test.no_acc_rescale", {"bf16 d64 causal", "fp16 d128"}, {"late_max", "masking"}, {}};
    a.cells.push_back({"bf16 d64 causal", "late_max", "fail", VerdictClass::NumericMismatch, 4,
                       rep.failures.empty() ? "" : rep.failures[0].signature});
    a.cells.push_back({"bf16 d64 causal", "masking", "pass", VerdictClass::Pass, 3, ""});
    a.cells.push_back({"fp16 d128", "late_max", "unsupported", VerdictClass::Unsupported, 2, ""});
    rep.audits.push_back(a);
    rep.mutants.push_back({"test.no_acc_rescale", true, 16, 3, 0.25, VerdictClass::NumericMismatch,
                           rep.failures.empty() ? "" : rep.failures[0].signature});
    return rep;
  }();
  return r;
}

TEST(ReportSchema, ValidatorRejectsWhatItShould) {
  SchemaValidator v(Json::parse(R"({"type": "object", "required": ["a"], "properties": {
      "a": {"type": "integer", "minimum": 0}, "b": {"enum": ["x", "y"]},
      "c": {"type": "array", "items": {"type": "string"}, "maxItems": 1}}})"));
  EXPECT_TRUE(v.validate(Json::parse(R"({"a": 1, "b": "x", "c": ["s"]})")).empty());
  EXPECT_FALSE(v.validate(Json::parse(R"({"b": "x"})")).empty());            // missing a
  EXPECT_FALSE(v.validate(Json::parse(R"({"a": -1})")).empty());             // below minimum
  EXPECT_FALSE(v.validate(Json::parse(R"({"a": "1"})")).empty());            // wrong type
  EXPECT_FALSE(v.validate(Json::parse(R"({"a": 1, "b": "z"})")).empty());    // not in enum
  EXPECT_FALSE(v.validate(Json::parse(R"({"a": 1, "c": [1]})")).empty());    // item type
  EXPECT_FALSE(v.validate(Json::parse(R"({"a": 1, "c": ["s", "t"]})")).empty());  // too many
  // A keyword the validator does not implement is an error, not a pass.
  SchemaValidator unknown(Json::parse(R"({"multipleOf": 2})"));
  EXPECT_FALSE(unknown.validate(Json(4)).empty());
}

TEST(ReportSchema, RealCampaignReportValidates) {
  const Report& r = full_report();
  ASSERT_FALSE(r.failures.empty()) << "the mutant should fail some of the campaign's cases";
  ASSERT_FALSE(r.error_stats.empty());
  const Json doc = Json::parse(report_to_json(r));
  SchemaValidator v(schema());
  const std::vector<std::string> problems = v.validate(doc);
  for (const std::string& p : problems) ADD_FAILURE() << p;
  EXPECT_TRUE(doc.contains("error_stats") && doc.contains("audits") && doc.contains("mutants"));
}

// A failure run alone (--confirm-alone): its `alone` object validates and
// reads back; an outcome outside the list does not validate.
TEST(ReportSchema, AloneOutcomeValidatesAndReads) {
  Report r = full_report();
  ASSERT_FALSE(r.failures.empty());
  r.failures[0].alone = {"passes", "cpu.mutant.x: pass", 2.5};
  const std::string text = report_to_json(r);
  SchemaValidator v(schema());
  for (const std::string& p : v.validate(Json::parse(text))) ADD_FAILURE() << p;
  std::string error;
  const std::optional<Report> back = report_from_json(text, &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->failures[0].alone.outcome, "passes");
  EXPECT_EQ(back->failures[0].alone.line, "cpu.mutant.x: pass");
  EXPECT_EQ(back->failures[0].alone.seconds, 2.5);
  EXPECT_TRUE(back->failures[1 % back->failures.size()].alone.outcome.empty() || back->failures.size() == 1);
  Json bad = Json::parse(text);
  bad["failures"][0]["alone"]["outcome"] = "maybe";
  EXPECT_FALSE(v.validate(bad).empty());
}

// A replay of a saved backward failure: its kernel entry carries pass
// "bwd", which the schema takes and the reader reads back.
TEST(ReportSchema, BackwardReplayReportValidatesAndReads) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("afz-schema-bwd-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ReplayOptions o;
  o.dirs = {dir.string()};
  o.backward_kernels = {"cpu.bwd.mutant.lse_log2"};
  std::ofstream(dir / "a.case") << "attnfuzz-case 1\npass bwd\nheads 2 1\nseqlen_q 5\nseqlen_k 9\nhead_dim 8\n"
                                   "dtype bf16\nseed 3\n";
  const ReplayResult res =
      replay_corpus(o, KernelRegistry::with_builtins(), Runner{RunOptions{}}, nullptr, nullptr);
  fs::remove_all(dir);
  ASSERT_EQ(res.failed, 1);
  const std::string text = report_to_json(res.report);
  SchemaValidator v(schema());
  for (const std::string& p : v.validate(Json::parse(text))) ADD_FAILURE() << p;
  std::string error;
  const std::optional<Report> back = report_from_json(text, &error);
  ASSERT_TRUE(back) << error;
  ASSERT_EQ(back->kernels.size(), 1u);
  EXPECT_EQ(back->kernels[0].pass, "bwd");
}

// The committed example (reports/examples/campaign) stays readable and valid.
TEST(ReportSchema, CommittedExampleValidatesAndReads) {
  const std::string text = slurp(std::string(ATTNFUZZ_SOURCE_DIR) + "/reports/examples/campaign/report.json");
  ASSERT_FALSE(text.empty());
  SchemaValidator v(schema());
  for (const std::string& p : v.validate(Json::parse(text))) ADD_FAILURE() << p;
  std::string error;
  const std::optional<Report> r = report_from_json(text, &error);
  ASSERT_TRUE(r) << error;
  EXPECT_FALSE(r->failures.empty());
  EXPECT_FALSE(r->error_stats.empty());
}

// Every committed report (examples, the H200 runs) validates: version 1
// files under version 1's rules, version 2 files within their size bounds.
TEST(ReportSchema, EveryCommittedReportValidates) {
  namespace fs = std::filesystem;
  SchemaValidator v(schema());
  int checked = 0;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(std::string(ATTNFUZZ_SOURCE_DIR) + "/reports")) {
    if (e.path().filename() != "report.json") continue;
    ++checked;
    for (const std::string& p : v.validate(Json::parse(slurp(e.path().string())))) ADD_FAILURE() << e.path() << ": " << p;
  }
  EXPECT_GE(checked, 3);
}

// The schema's size bounds are report.h's, so a validator elsewhere checks the same ones.
TEST(ReportSchema, SchemaStatesTheSizeBounds) {
  const Json bounds = schema()["then"]["properties"];
  EXPECT_EQ(bounds["cases"]["maxItems"], kCaseRecordLimit);
  EXPECT_EQ(bounds["raw_failures"]["maxItems"], kRawSignatureLimit);
}

TEST(ReportSchema, BrokenReportsFailValidation) {
  const Json good = Json::parse(report_to_json(full_report()));
  SchemaValidator v(schema());
  auto broken = [&](auto edit) {
    Json doc = good;
    edit(doc);
    return !v.validate(doc).empty();
  };
  EXPECT_TRUE(broken([](Json& d) { d["run"].erase("kind"); }));
  EXPECT_TRUE(broken([](Json& d) { d["schema_version"] = "1"; }));
  EXPECT_TRUE(broken([](Json& d) { d["summary"]["verdict"] = "ok"; }));
  EXPECT_TRUE(broken([](Json& d) { d["counts"][0]["by_verdict"]["bogus"] = 1; }));
  EXPECT_TRUE(broken([](Json& d) { d["cases"][0]["v"][0] = "fine"; }));
  EXPECT_TRUE(broken([](Json& d) { d["failures"][0]["worst"]["kernel_hex"] = "1.5"; }));
  EXPECT_TRUE(broken([](Json& d) { d["failures"][0]["worst"].erase("line"); }));
  EXPECT_TRUE(broken([](Json& d) { d["error_stats"]["series"][0]["over_bound"][0] = Json::array({1}); }));
  EXPECT_TRUE(broken([](Json& d) { d["error_stats"]["series"][0]["max_ulps"] = "big"; }));
  EXPECT_TRUE(broken([](Json& d) { d["audits"][0]["cells"][0]["status"] = "maybe"; }));
  EXPECT_TRUE(broken([](Json& d) { d.erase("findings"); }));
  EXPECT_TRUE(broken([](Json& d) { d["findings"][0]["verdicts"] = Json::array(); }));
  // Version 2 keeps its size bounds (report.h: kCaseRecordLimit, kRawSignatureLimit).
  EXPECT_TRUE(broken([](Json& d) {
    while (d["cases"].size() <= kCaseRecordLimit) d["cases"].push_back(d["cases"][0]);
  }));
  EXPECT_TRUE(broken([](Json& d) {
    while (d["raw_failures"].size() <= kRawSignatureLimit) d["raw_failures"].push_back(d["raw_failures"][0]);
  }));
}

TEST(ReportSchema, EveryKeyRoundTrips) {
  const std::string text = report_to_json(full_report());
  std::string error;
  const std::optional<Report> back = report_from_json(text, &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(report_to_json(*back), text);
}

TEST(ReportSchema, ReaderRejectsHistogramsOffTheAxes) {
  Json doc = Json::parse(report_to_json(full_report()));
  std::string error;
  Json bad_bin = doc;
  bad_bin["error_stats"]["series"][0]["over_bound"].push_back({kErrorBins, 1});
  EXPECT_FALSE(report_from_json(bad_bin.dump(), &error));
  EXPECT_NE(error.find("out of range"), std::string::npos) << error;
  Json other_axes = doc;
  other_axes["error_stats"]["axes"]["error"]["lo_exp"] = -30;
  EXPECT_FALSE(report_from_json(other_axes.dump(), &error));
  EXPECT_NE(error.find("axes"), std::string::npos) << error;
}

// The schema documents the keys; report.h's comment and the README must
// name each top-level key it has, so the three cannot drift apart silently.
TEST(ReportSchema, DocumentationNamesEveryTopLevelKey) {
  const std::string header = slurp(std::string(ATTNFUZZ_SOURCE_DIR) + "/harness/report/report.h");
  const std::string readme = slurp(std::string(ATTNFUZZ_SOURCE_DIR) + "/reports/README.md");
  const Json s = schema();
  for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) {
    EXPECT_NE(header.find("//   " + it.key() + ":"), std::string::npos) << it.key() << " missing in report.h";
    EXPECT_NE(readme.find("`" + it.key() + "`"), std::string::npos) << it.key() << " missing in reports/README.md";
  }
}

}  // namespace
}  // namespace afz
