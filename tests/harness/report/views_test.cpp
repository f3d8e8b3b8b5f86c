// junit.xml, results.sarif and report.html from a real campaign: each parses
// back, has the structure CI tools read, carries the repro commands, and
// survives hostile strings.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "harness/report/plots.h"
#include "tests/harness/report/report_fixture.h"
#include "tests/harness/report/xml_check.h"

namespace afz {
namespace {

using Json = nlohmann::json;
using testing::XmlElement;
using testing::XmlReader;

// A campaign whose failures were saved to a corpus: every failure has a
// case file and a repro command.
const Report& saved_report() {
  static const Report r = [] {
    const std::string corpus = testing::temp_folder("views-corpus");
    return testing::run_quick_campaign(0, 12, 1, corpus);
  }();
  return r;
}

// Strings that break naive XML, JSON and HTML writers.
Report hostile_report() {
  Report r = saved_report();
  r.kernels[0].description = "a <b> & \"c\" 'd' \x01\x7f";
  r.failures.at(0).detail = "o[...] </failure> & <![CDATA[ ]]> \x02 \"quoted\"";
  r.failures.at(0).repro = "attnfuzz repro 'dir with <angle> & quote\".case'";
  r.errors.push_back("case 3 (shapes): bad <input> & \x03");
  return r;
}

std::unique_ptr<XmlElement> parse_xml(const std::string& text) {
  std::string error;
  auto root = XmlReader::parse(text, &error);
  EXPECT_TRUE(root) << error;
  return root;
}

TEST(JunitXml, OneTestcasePerKernelAndClassWithReproOnFailure) {
  const Report& r = saved_report();
  ASSERT_FALSE(r.failures.empty());
  const auto root = parse_xml(report_to_junit(r));
  ASSERT_TRUE(root);
  EXPECT_EQ(root->name, "testsuites");
  size_t testcases = 0, failures = 0;
  for (const XmlElement* suite : root->all("testsuite")) {
    const auto cases = suite->all("testcase");
    EXPECT_EQ(suite->attributes.at("tests"), std::to_string(cases.size()));
    size_t suite_failures = 0;
    for (const XmlElement* c : cases) {
      ++testcases;
      for (const XmlElement* f : c->all("failure")) {
        ++suite_failures;
        EXPECT_NE(f->attributes.at("message").find("repro: attnfuzz"), std::string::npos) << f->attributes.at("message");
        EXPECT_NE(f->text.find("repro: attnfuzz"), std::string::npos);
        EXPECT_NE(f->text.find(".case"), std::string::npos);
      }
    }
    EXPECT_EQ(suite->attributes.at("failures"), std::to_string(suite_failures));
    failures += suite_failures;
  }
  // One testcase per kernel x class, and one per finding in attnfuzz.findings.
  const size_t findings = group_findings(r.failures).size();
  ASSERT_GT(findings, 0u);
  EXPECT_EQ(testcases, r.cells.size() + findings);
  EXPECT_EQ(root->attributes.at("failures"), std::to_string(failures));
  size_t failing_cells = 0;
  for (const ReportCell& c : r.cells) failing_cells += c.failed() > 0;
  EXPECT_EQ(failures, failing_cells + findings);
}

// A mutant run: a kill is a passing testcase, a survivor the failure, a
// mutant that declined every case a skip.
TEST(JunitXml, MutantRunCountsSurvivorsAsFailures) {
  Report r;
  r.run.kind = "mutants";
  r.mutants.push_back({"m.killed", true, 10, 3, 0.5, VerdictClass::NumericMismatch, "sig"});
  r.mutants.push_back({"m.survived", false, 2000, -1, -1, VerdictClass::Pass, ""});
  r.mutants.push_back({"m.untested", false, 0, -1, -1, VerdictClass::Pass, ""});
  const auto root = parse_xml(report_to_junit(r));
  ASSERT_TRUE(root);
  EXPECT_EQ(root->attributes.at("tests"), "3");
  EXPECT_EQ(root->attributes.at("failures"), "1");
  EXPECT_EQ(root->attributes.at("skipped"), "1");
  const auto cases = root->all("testsuite").at(0)->all("testcase");
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_TRUE(cases[0]->all("failure").empty());
  EXPECT_EQ(cases[1]->all("failure").size(), 1u);
  EXPECT_EQ(cases[2]->all("skipped").size(), 1u);
}

TEST(JunitXml, HostileStringsStayWellFormed) {
  const std::string xml = report_to_junit(hostile_report());
  const auto root = parse_xml(xml);
  ASSERT_TRUE(root);
  // Harness errors make the run red: an <error> in a suite of its own.
  bool error_seen = false;
  for (const XmlElement* suite : root->all("testsuite"))
    for (const XmlElement* c : suite->all("testcase")) error_seen |= !c->all("error").empty();
  EXPECT_TRUE(error_seen);
  // Cross-check with libxml2 where it is installed.
  if (std::system("command -v xmllint > /dev/null 2>&1") == 0) {
    const std::string path = testing::temp_folder("junit") + "/junit.xml";
    std::ofstream(path) << xml;
    EXPECT_EQ(std::system(("xmllint --noout " + path).c_str()), 0);
  }
}

TEST(JunitXml, CheckerRejectsMalformedXml) {
  std::string error;
  for (const char* bad : {"<a><b></a></b>", "<a x=1/>", "<a>&nope;</a>", "<a>1 < 2</a>", "<a x='1' x='2'/>", "<a>",
                          "<a/><b/>", "<a>\x01</a>"})
    EXPECT_FALSE(XmlReader::parse(bad, &error)) << bad;
  EXPECT_TRUE(XmlReader::parse("<?xml version=\"1.0\"?>\n<a x=\"&lt;&#10;\"><b/>t&amp;t</a>\n", &error)) << error;
}

TEST(Sarif, OneResultPerFindingWithReproAndCaseFiles) {
  const Report& r = saved_report();
  const Json s = Json::parse(report_to_sarif(r));
  EXPECT_EQ(s["version"], "2.1.0");
  EXPECT_EQ(s["$schema"], "https://json.schemastore.org/sarif-2.1.0.json");
  ASSERT_EQ(s["runs"].size(), 1u);
  const Json& run = s["runs"][0];
  EXPECT_EQ(run["tool"]["driver"]["name"], "attnfuzz");
  const Json& rules = run["tool"]["driver"]["rules"];
  const Json& results = run["results"];
  const std::vector<ReportFinding> findings = group_findings(r.failures);
  ASSERT_EQ(results.size(), findings.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const Json& res = results[i];
    const ReportFinding& g = findings[i];
    const ReportFailure& f = r.failures[g.representative];
    // SARIF 2.1.0: ruleIndex points at the rule whose id is ruleId.
    EXPECT_EQ(rules[res["ruleIndex"].get<size_t>()]["id"], res["ruleId"]);
    EXPECT_EQ(res["ruleId"], std::string(verdict_name(g.verdicts.back())));
    EXPECT_TRUE(res["message"]["text"].is_string());
    EXPECT_NE(res["message"]["text"].get<std::string>().find(f.repro), std::string::npos);
    ASSERT_FALSE(f.case_file.empty());
    EXPECT_EQ(res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], f.case_file);
    EXPECT_EQ(res["partialFingerprints"]["attnfuzzFinding/v1"].get<std::string>().find(g.kernel), 0u);
    EXPECT_EQ(res["properties"]["repro"], f.repro);
    // Every variant is a related location.
    ASSERT_EQ(res["relatedLocations"].size(), g.failures.size());
    for (size_t v = 0; v < g.failures.size(); ++v)
      EXPECT_EQ(res["relatedLocations"][v]["physicalLocation"]["artifactLocation"]["uri"],
                r.failures[g.failures[v]].case_file);
  }
  EXPECT_EQ(run["invocations"][0]["executionSuccessful"], r.errors.empty());
}

TEST(Sarif, HostileStringsRoundTrip) {
  const Report r = hostile_report();
  const Json s = Json::parse(report_to_sarif(r));
  EXPECT_EQ(s["runs"][0]["results"][0]["properties"]["repro"], r.failures[0].repro);
  EXPECT_EQ(s["runs"][0]["invocations"][0]["executionSuccessful"], false);
}

TEST(Html, SelfContainedWithEverySection) {
  const Report r = hostile_report();
  const std::string html = report_to_html(r);
  // Nothing fetched: no external resources, no script at all.
  for (const char* banned : {"<script", "<link", "src=", "@import", "url(http", "<iframe"}) EXPECT_EQ(html.find(banned), std::string::npos) << banned;
  for (const char* section : {"id=\"verdict\"", "id=\"kernels\"", "id=\"classes\"", "id=\"failures\"", "id=\"run\"",
                              "id=\"harness-errors\"", "class=\"cmd\""})
    EXPECT_NE(html.find(section), std::string::npos) << section;
  // The verdict comes first, before any table.
  EXPECT_LT(html.find("id=\"verdict\""), html.find("<table"));
  // Hostile text is escaped, never markup.
  EXPECT_EQ(html.find("<angle>"), std::string::npos);
  EXPECT_NE(html.find("&lt;angle&gt;"), std::string::npos);
  EXPECT_EQ(html.find("</failure> &"), std::string::npos);
  // Every failure's repro command is on the page.
  for (const ReportFailure& f : saved_report().failures) EXPECT_NE(html.find(f.case_file), std::string::npos);
}

TEST(Html, AuditMatrixAndMutantsAsColouredGrids) {
  Report r = saved_report();
  ASSERT_FALSE(r.failures.empty());
  const std::string sig = r.failures[0].signature;
  ReportAudit a{"k", {"bf16 d64 causal", "fp16 d128 gqa"}, {"late_max", "masking"}, {}};
  a.cells.push_back({"bf16 d64 causal", "late_max", "fail", VerdictClass::NanInf, 4, sig});
  a.cells.push_back({"bf16 d64 causal", "masking", "pass", VerdictClass::Pass, 3, ""});
  a.cells.push_back({"fp16 d128 gqa", "late_max", "unsupported", VerdictClass::Unsupported, 2, ""});
  r.audits.push_back(a);
  r.mutants.push_back({"m.killed", true, 10, 3, 0.5, VerdictClass::NumericMismatch, sig});
  r.mutants.push_back({"m.survived", false, 2000, -1, -1, VerdictClass::Pass, ""});
  const std::string html = report_to_html(r, HtmlOptions{"/nonexistent/gnuplot"});
  EXPECT_NE(html.find("id=\"audit\""), std::string::npos);
  EXPECT_NE(html.find("<table class=\"grid audit\">"), std::string::npos);
  // The failing cell names its verdict and links to the failure's repro.
  EXPECT_NE(html.find("<td class=\"fail\" title=\"bf16 d64 causal x late_max: fail (4 cases)\"><a href=\"#failure-1\">nan_inf</a></td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"pass\" title=\"bf16 d64 causal x masking: pass (3 cases)\">pass</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"unsupported\" title=\"fp16 d128 gqa x late_max"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"none\">&middot;</td>"), std::string::npos);  // a cell that never ran
  EXPECT_NE(html.find("1 of 2 mutants killed"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"fail\">survived</td>"), std::string::npos);
}

TEST(Html, PassingRunSaysPass) {
  Report r = saved_report();
  r.failures.clear();
  r.errors.clear();
  const std::string html = report_to_html(r, HtmlOptions{"/nonexistent/gnuplot"});
  EXPECT_NE(html.find("<div class=\"verdict pass\" id=\"verdict\"><strong>PASS</strong>"), std::string::npos);
  EXPECT_NE(html.find("<p>None: every kernel run passed or was declined.</p>"), std::string::npos);
}

TEST(Html, SaysSoWhenGnuplotIsMissing) {
  const std::string html = report_to_html(saved_report(), HtmlOptions{"/nonexistent/gnuplot"});
  EXPECT_NE(html.find("id=\"no-plots\""), std::string::npos);
  EXPECT_NE(html.find("gnuplot was not found"), std::string::npos);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
}

TEST(Html, PlotsAreGnuplotSvgInline) {
  if (find_gnuplot("").empty()) GTEST_SKIP() << "gnuplot is not installed (.ci/install-deps.sh installs gnuplot-nox)";
  const std::string html = report_to_html(saved_report());
  size_t svgs = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++svgs;
  EXPECT_GE(svgs, 4u);
  EXPECT_NE(html.find("Produced by GNUPLOT"), std::string::npos);
  EXPECT_EQ(html.find("<?xml"), std::string::npos);      // prolog stripped for inline use
  EXPECT_EQ(html.find("<!DOCTYPE svg"), std::string::npos);
  EXPECT_EQ(html.find("id=\"no-plots\""), std::string::npos);
}

}  // namespace
}  // namespace afz
