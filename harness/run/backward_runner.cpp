#include "harness/run/backward_runner.h"

#include <stdexcept>

#include "harness/case/backward_problem.h"
#include "harness/case/case_io.h"
#include "harness/case/generators.h"
#include "harness/judge/backward_verdict.h"
#include "kernels/cpu/backward_kernels.h"
#include "kernels/registry.h"

namespace afz {

BackwardOutcome run_backward_case(const afz_backward_kernel& k, const Case& c, const BackwardOracle& oracle,
                                  const BackwardOracle* escalate) {
  BackwardOutcome out;
  Materialized m(c);
  BackwardMaterialized bm(m);
  // Caps decide support exactly as for a forward kernel with the same caps.
  afz_kernel as_forward{};
  as_forward.name = k.name;
  as_forward.caps = k.caps;
  if (std::string why = unsupported_reason(as_forward, m.problem()); !why.empty()) {
    out.verdict.cls = VerdictClass::Unsupported;
    out.verdict.detail = why;
    return out;
  }
  char reason[256] = {};
  if (k.supports && k.supports(&k, &bm.problem(), reason, sizeof reason) != 0) {
    out.verdict.cls = VerdictClass::Unsupported;
    out.verdict.detail = reason;
    return out;
  }
  GradResult r;
  try {
    r = oracle.compute(*bm.problem().fwd, bm.dout());
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("backward oracle: ") + e.what());
  }
  out.oracle = oracle.name();
  bm.set_forward_outputs(r);
  bm.poison_outputs();
  char error[512] = {};
  if (const int rc = k.run(&k, &bm.problem(), error, sizeof error); rc == AFZ_RUN_UNSUPPORTED) {
    out.verdict.cls = VerdictClass::Unsupported;
    out.verdict.detail = error[0] ? error : "the library refused the problem (no reason given)";
    return out;
  } else if (rc == AFZ_RUN_HANG) {
    out.verdict.cls = VerdictClass::Hang;
    out.verdict.detail = error[0] ? error : "the kernel's own watchdog gave up (no reason given)";
    return out;
  } else if (rc != 0) {
    out.verdict.cls = VerdictClass::Crash;
    out.verdict.detail = std::string("kernel error: ") + error;
    return out;
  }
  out.verdict = judge_backward(k, bm, r, escalate);
  if (out.verdict.escalated_rows) out.oracle = escalate->name();
  return out;
}

std::vector<BackwardGateRow> run_backward_gate(uint64_t seed, int64_t budget, const GeneratorMix& mix) {
  const auto fast = make_fast_backward_oracle();
  const auto precise = make_escalation_backward_oracle();
  std::vector<BackwardGateRow> rows;
  for (const BackwardMutantInfo& mutant : cpu_backward_mutants()) {
    BackwardGateRow row;
    row.kernel = mutant.kernel.name;
    row.expected_kill = mutant.expected_kill;
    for (int64_t n = 0; n < budget && !row.killed; ++n) {
      const Case c = generate_case(mix, seed, uint64_t(n)).c;
      ++row.cases;
      BackwardOutcome o;
      try {
        o = run_backward_case(mutant.kernel, c, *fast, precise.get());
      } catch (const std::exception&) {
        continue;  // a case the backward cannot be built for (non-finite inputs): no verdict
      }
      if (is_failure(o.verdict.cls)) {
        row.killed = true;
        row.verdict = std::string(verdict_name(o.verdict.cls));
        row.detail = o.verdict.detail;
        row.case_text = write_case(c);
      }
    }
    rows.push_back(row);
  }
  return rows;
}

}  // namespace afz
