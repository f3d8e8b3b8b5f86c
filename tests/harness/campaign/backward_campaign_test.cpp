// The campaign through the backward pass (fuzz --pass bwd|both): a backward
// mutant is found in its gradient, deduplicated by pass and gradient,
// minimized without changing either, and saved as a case recording
// `pass bwd` that fails again as `attnfuzz repro` runs it; the reference
// backward kernel passes; determinism reruns hold backward kernels to
// identical bits unless they declare AFZ_CAP_NONDETERMINISTIC; every
// report view carries the pass and the gradient.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "harness/campaign/campaign.h"
#include "harness/case/case_file.h"
#include "harness/report/report_views.h"
#include "harness/run/backward_runner.h"
#include "kernels/cpu/backward_kernels.h"
#include "tests/harness/planted_kernel.h"
#include "tests/harness/report/json_schema.h"
#include "tests/harness/report/report_fixture.h"
#include "tests/temp_dir.h"

namespace afz {
namespace {

using Json = nlohmann::json;

// dQ and dK miss the softmax scale: dV is right, so its failures are in dq or dk.
constexpr const char* kScaleMutant = "cpu.bwd.mutant.ds_no_scale";
constexpr const char* kReference = "cpu.bwd.fa2";

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The report tests' quick campaign (no 8K-key flat rows, budgets by runs
// only) over the given slots.
CampaignOptions quick(std::vector<CampaignKernel> kernels, int64_t cases) {
  CampaignOptions o = testing::quick_campaign(0, cases);
  o.kernels = std::move(kernels);
  o.command = "backward campaign test";
  return o;
}

CampaignKernel slot(const char* name) {
  const afz_backward_kernel* k = find_backward_kernel(name);
  EXPECT_NE(k, nullptr) << name;
  return backward_campaign_kernel(*k, "builtin");
}

TEST(BackwardCampaign, FindsTheMutantInItsGradientAndSavesARepro) {
  const testing::TempDir corpus("afz-bwd-corpus"), out("afz-bwd-report");
  CampaignOptions o = quick({slot(kScaleMutant)}, 8);
  o.corpus_dir = corpus.str();
  o.minimize_options.max_runs = 20;
  const Runner runner{RunOptions{}};
  const Report r = run_campaign(o, runner);
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  ASSERT_FALSE(r.failures.empty()) << "a missing softmax scale shows on nearly every case";
  ASSERT_EQ(r.kernels.size(), 1u);
  EXPECT_EQ(r.kernels[0].name, std::string(kScaleMutant) + " [bwd]");
  EXPECT_EQ(r.kernels[0].pass, "bwd");
  const afz_backward_kernel& mutant = *find_backward_kernel(kScaleMutant);
  const auto oracle = make_fast_backward_oracle();
  const auto precise = make_escalation_backward_oracle();
  for (const ReportFailure& f : r.failures) {
    EXPECT_EQ(f.kernel, r.kernels[0].name);
    EXPECT_EQ(f.pass, "bwd");
    EXPECT_TRUE(f.gradient == "dq" || f.gradient == "dk") << f.gradient << ": dV does not use the scale";
    EXPECT_NE(f.signature.find("grad:" + f.gradient), std::string::npos) << f.signature;
    EXPECT_NE(f.raw_signature.find("grad:" + f.gradient), std::string::npos) << f.raw_signature;
    EXPECT_EQ(f.repro, "attnfuzz repro " + f.case_file);
    // What `attnfuzz repro FILE` does: the file names the backward kernel
    // and the pass, and fails again in the same gradient.
    std::string error;
    const std::optional<Case> saved = load_case_file(f.case_file, &error);
    ASSERT_TRUE(saved) << error;
    EXPECT_EQ(saved->kernel, kScaleMutant);
    EXPECT_EQ(saved->pass, Pass::Bwd);
    EXPECT_NE(slurp(f.case_file).find("\npass bwd\n"), std::string::npos);
    const BackwardOutcome again = run_backward_case(mutant, *saved, *oracle, precise.get());
    EXPECT_EQ(again.verdict.cls, f.verdict) << f.case_file;
    EXPECT_EQ(failing_gradient(again.verdict), f.gradient) << f.case_file;
    EXPECT_LE(f.minimize.to_elements, f.minimize.from_elements);
  }

  // Every view names the pass (and JSON and SARIF the gradient).
  std::string error;
  ASSERT_TRUE(write_report_folder(r, out.str(), &error)) << error;
  const Json j = Json::parse(slurp(out.str() + "/report.json"));
  EXPECT_EQ(j["kernels"][0]["pass"], "bwd");
  EXPECT_EQ(j["failures"][0]["pass"], "bwd");
  EXPECT_EQ(j["failures"][0]["gradient"], r.failures[0].gradient);
  if (r.failures[0].worst.valid) EXPECT_EQ(j["failures"][0]["worst"]["tensor"], r.failures[0].worst.tensor);
  const Json schema = Json::parse(slurp(std::string(ATTNFUZZ_SOURCE_DIR) + "/reports/schema/report.schema.json"));
  const std::vector<std::string> problems = testing::SchemaValidator(schema).validate(j);
  EXPECT_TRUE(problems.empty()) << problems.front();
  const Report back = *report_from_json(slurp(out.str() + "/report.json"), &error);
  EXPECT_EQ(back.failures[0].pass, "bwd");
  EXPECT_EQ(back.failures[0].gradient, r.failures[0].gradient);
  EXPECT_EQ(back.failures[0].worst.tensor, r.failures[0].worst.tensor);
  const std::string junit = slurp(out.str() + "/junit.xml");
  EXPECT_NE(junit.find("classname=\"attnfuzz." + std::string(kScaleMutant) + " [bwd]\""), std::string::npos);
  EXPECT_NE(junit.find("pass: bwd, gradient " + r.failures[0].gradient), std::string::npos);
  const Json sarif = Json::parse(slurp(out.str() + "/results.sarif"));
  const Json& result = sarif["runs"][0]["results"][0];
  EXPECT_EQ(result["properties"]["pass"], "bwd");
  EXPECT_TRUE(result["properties"]["gradient"] == "dq" || result["properties"]["gradient"] == "dk");
  // The HTML page lists the gradients' error series (plots need gnuplot).
  const std::string html = slurp(out.str() + "/report.html");
  EXPECT_NE(html.find("dQ (backward, fp32)"), std::string::npos);

  // Reopening the corpus resumes: the same failures are known, not minimized again.
  const Report resumed = run_campaign(o, runner);
  EXPECT_EQ(resumed.failures.size(), r.failures.size());
  EXPECT_EQ(resumed.new_failures(), 0);
}

TEST(BackwardCampaign, ReferenceBackwardFindsNothing) {
  const Runner runner{RunOptions{}};
  CampaignOptions o = quick({slot(kReference)}, 40);
  o.rerun_share = 1;  // every case twice: the reference is deterministic
  const Report r = run_campaign(o, runner);
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_TRUE(r.failures.empty()) << r.failures.front().signature << ": " << r.failures.front().detail;
  EXPECT_EQ(r.run.reruns, r.run.cases - [&] {
    int64_t unsupported = 0;
    for (const ReportCell& c : r.cells) unsupported += c.count(VerdictClass::Unsupported);
    return unsupported;
  }());
  // The gradients' error statistics, one series each.
  for (const char* series : {"dq", "dk", "dv"}) {
    const auto it = std::find_if(r.error_stats.begin(), r.error_stats.end(),
                                 [&](const ReportErrorStats& e) { return e.series == series; });
    ASSERT_NE(it, r.error_stats.end()) << series;
    EXPECT_GT(it->stats.elements, 0) << series;
    EXPECT_LE(it->stats.max_over_bound, 1.0) << series;
  }
}

TEST(BackwardCampaign, BothPassesRunEveryCase) {
  const Runner runner{RunOptions{}};
  testing::PlantedKernel forward{"planted.correct"};
  const Report r = run_campaign(quick({{&forward.k, "builtin"}, slot(kReference)}, 10), runner);
  ASSERT_EQ(r.kernels.size(), 2u);
  EXPECT_EQ(r.kernels[0].pass, "");
  EXPECT_EQ(r.kernels[1].pass, "bwd");
  int64_t forward_cases = 0, backward_cases = 0;
  for (const ReportCell& c : r.cells) (c.kernel == r.kernels[1].name ? backward_cases : forward_cases) += c.cases;
  EXPECT_EQ(forward_cases, 10);
  EXPECT_EQ(backward_cases, 10);
  EXPECT_TRUE(r.failures.empty());
}

// The reference with its last dQ bit flipped on every other call: within
// the bound, but not the same bits twice.
int flaky_calls = 0;
int flaky_run(const afz_backward_kernel* self, const afz_backward_problem* p, char* error, size_t len) {
  const afz_backward_kernel& reference = *find_backward_kernel(kReference);
  const int rc = reference.run(&reference, p, error, len);
  if (rc == 0 && ++flaky_calls % 2 == 0) {
    auto* first = static_cast<uint32_t*>(p->dq.data);
    if (p->fwd->seqlens_q[0] > 0) *first ^= 1u;  // element [0][0][0][0]: written whenever the row exists
  }
  (void)self;
  return rc;
}

TEST(BackwardCampaign, DeterminismRerunsUnlessDeclaredNondeterministic) {
  const Runner runner{RunOptions{}};
  afz_backward_kernel flaky = *find_backward_kernel(kReference);
  flaky.name = "test.bwd.flaky";
  flaky.run = flaky_run;
  CampaignOptions o = quick({backward_campaign_kernel(flaky, "builtin")}, 8);
  o.rerun_share = 1;
  o.minimize = false;
  const Report caught = run_campaign(o, runner);
  ASSERT_FALSE(caught.failures.empty());
  EXPECT_EQ(caught.failures[0].verdict, VerdictClass::Nondeterministic);

  flaky.caps.flags |= AFZ_CAP_NONDETERMINISTIC;
  o.kernels = {backward_campaign_kernel(flaky, "builtin")};
  EXPECT_TRUE(run_campaign(o, runner).failures.empty()) << "declared nondeterministic: no rerun";
}

}  // namespace
}  // namespace afz
