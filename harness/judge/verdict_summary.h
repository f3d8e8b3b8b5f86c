// judge() split where the data may live elsewhere (the GPU verdict,
// gpu_verdict.h): a RowJudge runs verdict_steps over every checked row and
// returns only a summary (counts, the statistics, the largest error / bound,
// and for each class and for that maximum the lowest row that has it); the
// host escalates the rows the RowJudge finds undecided, judges those on the
// CPU, and rebuilds the detail line and the worst element by re-judging the
// one or two rows that hold them.  The result equals judge()'s Verdict: the
// rows are judged by the same steps on the same doubles (the row terms that
// need libm are computed here, on the host), the statistics are integer
// counts and maxima (order-free), and every "first" is the lowest row, which
// is judge()'s iteration order.
#pragma once
#include <cstdint>
#include <vector>

#include "harness/judge/row_summary.h"
#include "harness/judge/verdict.h"

namespace afz {

// Where verdict_steps runs over the rows.
class RowJudge {
 public:
  virtual ~RowJudge() = default;
  // The rows (ascending) whose elements the oracle's own error leaves open.
  virtual std::vector<int64_t> undecided(const RowModel& model) = 0;
  // Every row of the model except `skip` (ascending).
  virtual VerdictSummary summarize(const RowModel& model, const std::vector<int64_t>& skip) = 0;
};

// verdict_steps on this CPU, one row after the other: what the GPU does,
// for tests on machines without one.
class HostRowJudge final : public RowJudge {
 public:
  HostRowJudge(const afz_kernel& k, const Materialized& m, const OracleResult& r) : k_(k), m_(m), r_(r) {}
  std::vector<int64_t> undecided(const RowModel& model) override;
  VerdictSummary summarize(const RowModel& model, const std::vector<int64_t>& skip) override;

 private:
  const afz_kernel& k_;
  const Materialized& m_;
  const OracleResult& r_;
};

// judge(), its rows judged by `rows_on`.
Verdict judge_by_rows(const afz_kernel& k, const Materialized& m, OracleResult& r, const Oracle* escalate,
                      const RowSampling& sampling, RowJudge& rows_on);

}  // namespace afz
