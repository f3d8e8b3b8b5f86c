#include "harness/judge/gpu_verdict.h"

#include <stdexcept>
#include <string>

namespace afz {

std::optional<Verdict> judge_on_gpu(const afz_kernel& k, const Materialized& m, OracleResult& r,
                                    const Oracle* escalate, const RowSampling& sampling, std::string* why) {
  try {
    const std::unique_ptr<RowJudge> rows = make_gpu_row_judge(k, m, r, why);
    if (!rows) return std::nullopt;
    return judge_by_rows(k, m, r, escalate, sampling, *rows);
  } catch (const std::runtime_error& e) {
    // A device error: escalated rows already in r are recomputed alike by
    // the CPU judge, so falling back changes nothing but the time.
    if (why) *why = std::string("gpu verdict: ") + e.what();
    return std::nullopt;
  }
}

}  // namespace afz
