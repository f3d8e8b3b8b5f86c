// One case through one kernel: materialize, poison, run, oracle, verdict.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "harness/case/case.h"
#include "harness/case/materialize.h"
#include "harness/judge/verdict.h"
#include "harness/run/isolate.h"
#include "oracles/oracle.h"

namespace afz {

enum class OracleTier { Auto, Fast, Gpu, Boost, Mpfr };
std::optional<OracleTier> parse_oracle_tier(std::string_view s);

struct RunOptions {
  OracleTier oracle = OracleTier::Auto;  // auto: fast tier, undecided rows escalated to MPFR (Boost without it);
                                         // gpu: the fast tier's arithmetic on the GPU, escalated the same way
  int mpfr_bits = 256;
  bool check_determinism = false;        // run twice, compare bits
  bool isolate = false;                  // kernel in a child process
  double timeout_s = 60;
  RowSampling sampling;                  // off: every row is judged (harness/judge/row_sample.h)
};

struct Timing {
  double generate = 0, kernel = 0, oracle = 0, judge = 0;
};

struct CaseOutcome {
  Verdict verdict;
  Timing timing;
  bool reran = false;  // the kernel ran a second time to check its bits
};

class Runner {
 public:
  explicit Runner(RunOptions options);
  const RunOptions& options() const { return options_; }
  std::string oracle_name() const;

  // The oracle's result for a materialized case (shared by every kernel).
  OracleResult reference(const Materialized& m) const;
  // Runs kernel k on m and judges it against r (computed on demand if null).
  // With `rerun` (or RunOptions::check_determinism) a run that passes runs
  // again and must give identical output bits, unless the kernel declares
  // AFZ_CAP_NONDETERMINISTIC.
  CaseOutcome run(const afz_kernel& k, Materialized& m, OracleResult* r = nullptr, bool rerun = false) const;
  // From a case: materializes first; unbuildable cases become errors (throws
  // std::runtime_error with a one-line message).
  CaseOutcome run(const afz_kernel& k, const Case& c, bool rerun = false) const;
  // Whether run() with `rerun` runs kernel k twice.
  bool reruns(const afz_kernel& k, bool rerun) const;

 private:
  RunOptions options_;
  std::unique_ptr<Oracle> primary_, escalation_;
};

}  // namespace afz
