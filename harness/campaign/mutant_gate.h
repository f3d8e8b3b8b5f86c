// The mutant gate (`attnfuzz mutants`): the harness's own quality check.
//
// Each mutant (a reference kernel with one planted defect, kernels/mutants)
// gets a campaign of its own: the default generator mix, a fixed seed, a
// case budget and a time budget, stopped at the first failure.  A mutant is
// killed when some case fails it (any failure verdict); the failure is
// minimized and saved to the corpus exactly as `attnfuzz fuzz` would.  A
// mutant that survives its budget is a blind spot of the generators or of
// the verdicts, and the gate fails.
//
// Time to kill is the wall time from the start of the mutant's campaign to
// the end of the killing case (generation, oracle, kernel, judgement of every
// case up to it), minimization and saving excluded: what a campaign pays to
// notice the bug.  Cases to kill counts the killing case.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "harness/campaign/campaign.h"
#include "harness/campaign/minimize.h"
#include "harness/case/generators.h"
#include "harness/report/report.h"
#include "harness/run/runner.h"

namespace afz {

struct MutantGateOptions {
  uint64_t seed = 1;
  int64_t budget_cases = 2000;     // per mutant
  double time_per_mutant_s = 30;   // per mutant, minimization excluded
  int jobs = 1;
  GeneratorMix mix = GeneratorMix::defaults();
  std::string corpus_dir;          // "": kills are minimized but not saved
  MinimizeOptions minimize_options;
  std::string command;             // for the report
  // Called once per mutant as soon as its row is final.
  std::function<void(const struct MutantRow&)> on_row;
};

struct MutantRow {
  std::string kernel;
  std::string origin;
  bool killed = false;
  // Not tested at all: a GPU mutant without a device, or a kernel that
  // declined every case.  Neither killed nor a survivor (no blind spot of
  // the generators), and not in the report's `mutants`.
  bool untested = false;
  std::string untested_reason;
  int64_t cases = 0;            // to the kill (inclusive), else cases run
  double seconds = 0;           // to the kill (see above), else the campaign's wall time
  std::string stop_reason;      // "kill", "cases" or "time"
  std::optional<ReportFailure> kill;  // the minimized killing case (case_file, case_text, verdict...)
  std::string case_summary;     // one line describing the minimized killing case
  Report campaign;              // the mutant's own campaign report
};

struct MutantGateResult {
  std::vector<MutantRow> rows;
  int killed = 0, survived = 0, untested = 0;
  // Over killed mutants; nullopt when none was killed.
  std::optional<double> median_s, worst_s;
  std::string worst_kernel;
  // No survivor, and at least one mutant was actually tested.
  bool passed() const { return survived == 0 && killed > 0; }
};

// Runs the gate over `mutants` in order.  Throws std::runtime_error with a
// one-line message for unusable options (no mutants, budgets not positive,
// an unwritable corpus).
MutantGateResult run_mutant_gate(const std::vector<CampaignKernel>& mutants, const MutantGateOptions& options,
                                 const Runner& runner);

// The gate as one report (run.kind "mutants"): every mutant's kernel entry,
// counts and kill merged, per-generator cases summed, one `mutants` entry
// per row.  run.stop_reason is "kills" when every mutant was killed, else
// the first survivor's reason ("cases" or "time").
Report mutant_gate_report(const MutantGateResult& result, const MutantGateOptions& options,
                          const std::string& oracle, double wall_s);

// One line naming what a case holds: "b2 hq4/hkv2 q=1,3 k=65,40 d=64 bf16 causal(br) t:late_max".
std::string case_summary(const Case& c);

// The median of `values` (mean of the middle two for an even count); 0 for none.
double median_of(std::vector<double> values);

}  // namespace afz
