#include "harness/campaign/minimize_saved.h"

#include <fmt/format.h>

#include "harness/campaign/corpus.h"
#include "harness/judge/signature.h"

namespace afz {
namespace {

// Provenance lines that describe one verdict of one case: the minimized
// case gets its own, and the corpus writes its signature lines itself.
// Earlier "minimized ..." lines stay: the history of the repro.
bool describes_the_old_verdict(const std::string& line) {
  for (std::string_view key : {"verdict ", "worst ", "pass "})
    if (line.starts_with(key)) return true;
  return line.starts_with(kProvSignature) || line.starts_with(kProvSeenAs) || line.starts_with(kProvSeenAsMore);
}

}  // namespace

MinimizedFailure minimize_saved_failure(const CampaignKernel& slot, const Runner& runner, const Case& start,
                                        const Verdict& first, const std::string& source,
                                        const MinimizeOptions& options) {
  const VerdictClass cls = first.cls;
  const std::string gradient = failure_gradient(slot, first);
  // A nondeterministic verdict shows only when the case runs twice.
  const bool rerun = runner.options().check_determinism || cls == VerdictClass::Nondeterministic;
  MinimizedFailure out;
  out.verdict = first;
  auto still_fails = [&](const Case& cand) {
    const CaseOutcome o = run_campaign_kernel(slot, runner, cand, rerun);
    if (!same_failure(slot, first, o.verdict)) return false;
    out.verdict = o.verdict;  // the verdict of the case minimize keeps
    return true;
  };
  out.minimized = minimize_case(start, still_fails, options);

  Case& best = out.repro;
  best = out.minimized.best;
  stamp_failure_case(slot, best);
  std::erase_if(best.provenance, describes_the_old_verdict);
  const MinimizeResult& m = out.minimized;
  ReportFailure f;  // what the campaign's provenance lines read
  f.kernel = slot.kernel->name;
  f.verdict = cls;
  f.pass = slot.backward ? "bwd" : "";
  f.gradient = gradient;
  f.detail = out.verdict.detail;
  f.worst = out.verdict.worst;
  f.minimize = {m.from.elements, m.to.elements, m.runs, m.seconds, m.exhausted};
  std::vector<std::string> lines = verdict_provenance(f);
  if (m.exhausted) lines.back() += " (budget spent)";  // the "minimized from" line, last
  best.provenance.push_back(fmt::format("minimized by attnfuzz {} repro --minimize on {} from {}", kAttnfuzzVersion,
                                        utc_now(), source));
  best.provenance.insert(best.provenance.end(), lines.begin(), lines.end());

  out.signature = signature_of(slot.kernel->name, cls, best, gradient).text();
  out.raw_signature = signature_of(slot.kernel->name, cls, start, gradient).text();
  return out;
}

}  // namespace afz
