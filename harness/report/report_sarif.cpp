// results.sarif: SARIF 2.1.0 for code-scanning views.  One rule per
// verdict class, one result per failure signature: its message names the
// kernel, the detail and the repro command; its location is the saved case
// file (the artifact a person opens and `attnfuzz repro` runs); the
// signature is the result's fingerprint, so a scanner tracks the same bug
// across runs.
#include <nlohmann/json.hpp>

#include "harness/report/report_views.h"

namespace afz {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kSarifSchema = "https://json.schemastore.org/sarif-2.1.0.json";
constexpr const char* kSarifVersion = "2.1.0";
// A finding is (kernel, ingredients): stable across runs while the defect
// lasts, so a scanner tracks one bug whatever variants a run met.
constexpr const char* kFingerprintKey = "attnfuzzFinding/v1";

struct RuleText {
  VerdictClass cls;
  const char* description;
};
// Unsupported and pass are not findings; the rest, most severe last.
constexpr RuleText kRules[] = {
    {VerdictClass::NumericMismatch, "An output element differs from the exact result by more than its error bound."},
    {VerdictClass::NanInf, "An output is NaN or Inf where the exact result is finite."},
    {VerdictClass::SemanticMismatch, "A fully masked row or an LSE does not follow the kernel's declared convention."},
    {VerdictClass::Unwritten, "An output element was never written (the poison value survived)."},
    {VerdictClass::OutOfBounds, "The kernel wrote outside the valid output region."},
    {VerdictClass::Nondeterministic, "Two runs of the same case gave different bits."},
    {VerdictClass::Crash, "The kernel reported an error, faulted or died."},
    {VerdictClass::Hang, "The kernel exceeded its per-case time limit."},
};

// Relative case-file paths are relative to where the run started.
Json location(const ReportFailure& f) {
  Json logical = Json::array({{{"name", f.kernel}, {"kind", "function"}}});
  if (f.case_file.empty()) return {{"logicalLocations", logical}};
  Json artifact = {{"uri", f.case_file}};
  if (!f.case_file.starts_with("/")) artifact["uriBaseId"] = "%SRCROOT%";
  return {{"physicalLocation", {{"artifactLocation", artifact}}}, {"logicalLocations", logical}};
}

}  // namespace

std::string report_to_sarif(const Report& r) {
  Json rules = Json::array();
  for (const RuleText& t : kRules)
    rules.push_back({{"id", verdict_name(t.cls)},
                     {"name", verdict_name(t.cls)},
                     {"shortDescription", {{"text", t.description}}},
                     {"defaultConfiguration", {{"level", "error"}}}});
  auto rule_index = [](VerdictClass v) {
    for (size_t i = 0; i < std::size(kRules); ++i)
      if (kRules[i].cls == v) return int(i);
    return -1;
  };
  // One result per finding (findings.h); its variants are related locations.
  Json results = Json::array();
  for (const ReportFinding& g : group_findings(r.failures)) {
    const ReportFailure& f = r.failures[g.representative];
    const VerdictClass worst_verdict = g.verdicts.back();  // least severe first
    std::string text = g.id + ": " + finding_line(g) + ". Smallest variant: " + std::string(verdict_name(f.verdict)) +
                       (f.detail.empty() ? "" : ": " + f.detail);
    if (f.worst.valid) text += "; worst " + f.worst.format();
    text += ". Reproduce: " + (f.repro.empty() ? std::string("save the case text from report.json and run `attnfuzz repro FILE`")
                                               : f.repro);
    if (!f.alone.outcome.empty()) text += ". Alone: " + alone_summary(f.alone);
    std::string fingerprint = g.kernel;
    for (const std::string& n : g.needs) fingerprint += "|" + n;
    Json related = Json::array(), signatures = Json::array();
    for (size_t i : g.failures) {
      const ReportFailure& v = r.failures[i];
      signatures.push_back(v.signature);
      Json at = location(v);
      at["id"] = int(related.size());
      at["message"] = {{"text", v.signature + " (" + std::to_string(v.occurrences) + " failing cases)"}};
      related.push_back(std::move(at));
    }
    Json result = {{"ruleId", verdict_name(worst_verdict)},
                   {"level", "error"},
                   {"message", {{"text", text}}},
                   {"locations", Json::array({location(f)})},
                   {"relatedLocations", std::move(related)},
                   {"partialFingerprints", {{kFingerprintKey, fingerprint}}},
                   {"properties",
                    {{"finding", g.id},
                     {"kernel", g.kernel},
                     {"needs", g.needs},
                     {"signatures", std::move(signatures)},
                     {"signature", f.signature},
                     {"status", g.status},
                     {"occurrences", g.occurrences},
                     {"generator", f.generator},
                     {"seed", f.seed},
                     {"caseIndex", f.case_index},
                     {"repro", f.repro},
                     {"caseText", f.case_text}}}};
    // A backward kernel's finding: the pass, and the gradient it is in
    // (findings of different gradients are different findings).
    if (!f.pass.empty()) result["properties"]["pass"] = f.pass;
    if (!f.gradient.empty()) result["properties"]["gradient"] = f.gradient;
    if (!f.alone.outcome.empty()) result["properties"]["alone"] = f.alone.outcome;
    if (const int i = rule_index(worst_verdict); i >= 0) result["ruleIndex"] = i;
    results.push_back(std::move(result));
  }
  Json invocation = {{"executionSuccessful", r.errors.empty()}};
  if (!r.run.command.empty()) invocation["commandLine"] = r.run.command;
  if (!r.run.started_utc.empty()) invocation["startTimeUtc"] = r.run.started_utc;
  if (!r.errors.empty()) {
    Json notes = Json::array();
    for (const std::string& e : r.errors) notes.push_back({{"level", "error"}, {"message", {{"text", e}}}});
    invocation["toolExecutionNotifications"] = notes;
  }
  Json sarif = {{"$schema", kSarifSchema},
                {"version", kSarifVersion},
                {"runs",
                 Json::array({{{"tool",
                                {{"driver",
                                  {{"name", "attnfuzz"},
                                   {"version", r.run.attnfuzz_version},
                                   {"rules", rules}}}}},
                               {"invocations", Json::array({invocation})},
                               {"results", results},
                               {"properties", {{"kind", r.run.kind}, {"seed", r.run.seed}, {"cases", r.run.cases}}}}})}};
  return sarif.dump(2) + "\n";
}

}  // namespace afz
