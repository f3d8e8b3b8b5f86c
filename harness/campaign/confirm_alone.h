// --confirm-alone: every failure's repro run by itself in a fresh process.
//
// A campaign's or audit's worker process runs thousands of cases, and a
// library keeps state across them: cached plans and graphs, the memory its
// caching allocator hands back.  A case can fail there and pass alone.  On
// the H200, torch.cudnn's backward left dQ unwritten for keyless sequences,
// which read as garbage after other work and as the right zeros in a fresh
// process, and one of its cases segfaulted only after others
// (reports/backward/README.md).  A kernel team acts on a repro that fails
// when they paste it, so each failure's repro is run as that command
// (`attnfuzz [--kernel-lib ...] repro FILE`) in a child process, and the
// report and the saved case say what it gave.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "harness/campaign/campaign.h"
#include "harness/process/child_process.h"

namespace afz {

struct ConfirmAloneOptions {
  std::string executable;             // the attnfuzz binary ("/proc/self/exe")
  std::vector<std::string> run_args;  // global options given before the repro's own (--timeout N)
  double timeout_s = 0;               // one repro process, its plugin's load included (<= 0: none)
  double budget_s = 0;                // all of them; past it the rest are not run (<= 0: no limit)
  // Repros run at once, each its own process.  Each GPU repro holds a CUDA
  // context, and a faulting kernel's context beside others lost the GPU
  // (gpu_run.h, limit_workers; exclusive_gate.h): the repro of a failure
  // that may_fault runs with no other beside it, whatever `jobs` says.
  int jobs = 1;
  // Failures whose repro already gave a verdict alone (an outcome other than
  // not_run) are run again only with `again`: `attnfuzz report confirm`
  // finishes what a run's --confirm-time left.
  bool again = false;
  // Where a saved case is looked for when its case_file is not there (the
  // report folder's corpus/ after the folder moved machines): "" none.
  std::string corpus_dir;
  std::function<void(const ReportFailure&)> on_confirmed;  // after each one
  // After each outcome is recorded in the report (and before the next), so
  // that a caller can save what is done: a kill then loses only the repros
  // in flight.
  std::function<void(const Report&)> on_recorded;
};

// Kernel label ("NAME" or "NAME [bwd]") -> origin ("builtin" or the
// --kernel-lib spec its repro loads), from a run's kernels or a report's.
using KernelOrigins = std::map<std::string, std::string>;
KernelOrigins kernel_origins(const std::vector<CampaignKernel>& kernels);
KernelOrigins kernel_origins(const Report& r);

// Whether failure f's repro may fault its GPU context again (a crash or a
// hang): it then runs with no other repro beside it.
bool may_fault(const ReportFailure& f);

// Whether failure f waits for a repro alone: never run alone, or run
// without a verdict (not_run: killed, could not start).
bool awaits_alone(const ReportFailure& f);

// What a repro's run says of failure f: the verdict line that `attnfuzz
// repro` printed for f's kernel on case_path, judged against f's verdict.
ReportAlone alone_outcome(const ReportFailure& f, const std::string& case_path, const ChildRun& run);

// The case text with a provenance line for `alone` after its leading
// provenance lines (replacing an earlier one of a run before).
std::string with_alone_provenance(const std::string& case_text, const ReportAlone& alone);

// The order the failures are run alone in: each finding's representative
// (the smallest variant, whose repro the summary prints) first, in finding
// order, then the other variants in report order.  A budget then covers
// every distinct defect before a second variant of any (an H200 sweep of
// torch.cudnn [bwd] meets a thousand signatures, a handful of findings).
std::vector<size_t> alone_order(const std::vector<ReportFailure>& failures);

// Runs the repro of every failure of r that awaits one (every failure with
// o.again) from its saved case file, or its case text in a temporary file,
// and records the outcome in the failure, its raw ledger entry and its
// saved case file.  `origins` give each failure's --kernel-lib ("builtin"
// when its kernel is not there), `run` the flags its repro needs.  The
// outcomes do not depend on o.jobs without a budget (the order they are
// recorded in does).  Returns the failures left unconfirmed for want of budget.
int64_t confirm_failures_alone(Report& r, const KernelOrigins& origins, const RunOptions& run,
                               const ConfirmAloneOptions& o);

}  // namespace afz
