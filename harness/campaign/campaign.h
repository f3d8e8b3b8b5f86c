// The fuzz campaign: generate cases, run every kernel on each against one
// shared oracle result, count verdicts per kernel x generator class, and
// turn each new failure into a minimized repro in the corpus.
//
// Determinism: case i is generate_case(mix, seed, i) and nothing else, and
// results are consumed strictly in index order (workers may run ahead by a
// bounded window), so the counts, the failures, their minimized cases and
// the report are the same for any --jobs.  With a case limit the whole run
// is reproducible; with a time limit, the prefix that ran is.
//
// Passes: each kernel slot (CampaignKernel) is a forward or a backward
// kernel; `fuzz --pass both` gives every case to both slots of a name.
//
// Durability: a new failure is minimized and saved to the corpus (atomic
// write) before the next case is consumed; reopening the corpus resumes
// (signatures already saved are recognised and not minimized again).
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "harness/campaign/determinism.h"
#include "harness/campaign/minimize.h"
#include "harness/campaign/progress.h"
#include "harness/case/generators.h"
#include "harness/report/report.h"
#include "harness/run/runner.h"
#include "kernels/registry.h"

namespace afz {

// The exact command that re-runs a saved failure of a kernel from `origin`
// (a plugin path is loaded again with --kernel-lib) under `run`'s options;
// a nondeterministic verdict needs --determinism to show again.
std::string repro_command_line(const std::string& origin, const RunOptions& run, const std::string& path,
                               VerdictClass verdict = VerdictClass::Pass);
// The same command's arguments after the program name, one per element
// (what --confirm-alone runs).
std::vector<std::string> repro_arguments(const std::string& origin, const RunOptions& run, const std::string& path,
                                         VerdictClass verdict = VerdictClass::Pass);

// One kernel slot of a campaign or audit: a forward kernel, or (with
// `backward` set) a backward kernel, judged on dQ, dK, dV.  A backward
// slot's `kernel` is a view of the backward kernel (its caps, conventions
// and description) named "NAME [bwd]" and never run itself: counts, audit
// matrices, signatures and reports then keep it apart from a forward kernel
// of the same name, as replay does.
struct CampaignKernel {
  const afz_kernel* kernel = nullptr;
  std::string origin;
  const afz_backward_kernel* backward = nullptr;
  std::shared_ptr<const afz_kernel> backward_view;  // owns `kernel` for a backward slot
  Pass pass() const { return backward ? Pass::Bwd : Pass::Fwd; }
};

// The backward slot of a backward kernel from `origin`.
CampaignKernel backward_campaign_kernel(const afz_backward_kernel& k, const std::string& origin);
// "NAME [bwd]": how reports name a backward kernel.
std::string backward_label(const std::string& name);

// Case c through slot k: a forward kernel through the runner on `m` (the
// case's materialized inputs) against `reference` (computed when null); a
// backward kernel through run_backward_case, with the run's backward
// oracles.  `rerun` asks for the determinism check (the runner's
// --determinism asks for it on every case).  A case whose exact gradients
// do not exist (non-finite inputs) is Unsupported for a backward slot,
// with the oracle's reason.  Throws std::runtime_error for unbuildable cases.
CaseOutcome run_campaign_kernel(const CampaignKernel& k, const Runner& runner, const Case& c, Materialized& m,
                                OracleResult* reference, bool rerun);
// The same from the case alone (materialized here: minimization, resumes).
CaseOutcome run_campaign_kernel(const CampaignKernel& k, const Runner& runner, const Case& c, bool rerun);
// What a failure of slot k adds to its signature: the failing gradient of
// a backward verdict ("dq", "dk", "dv"), "" for a forward kernel.
std::string failure_gradient(const CampaignKernel& k, const Verdict& v);
// What kind of crash a crash verdict's detail names: the CUDA error
// ("cudaErrorMisalignedAddress"), the signal a worker died of ("signal 11"),
// else the detail with its numbers blanked (sizes and addresses vary).
std::string crash_kind(std::string_view detail);
// Whether `candidate` is the failure `first` is, for minimization: the same
// verdict class and failing gradient and, for a crash, the same crash kind.
// Any crash is not enough: a misaligned-address fault leaves its worker's
// CUDA context broken, and a minimizer that takes every crash walks from
// the fault to the next case's segfault (H200, reports/backward/run12).
bool same_failure(const CampaignKernel& k, const Verdict& first, const Verdict& candidate);
// A lost GPU (harness/run/gpu/gpu_run.h, gpu_lost_reason()): campaigns and
// audits stop at their next case boundary as on a stop request, with this
// stop reason and a note (gpu_lost_note); outcomes that were `unsupported`
// only because the device was gone (lost_to_gpu) are not counted as run.
inline constexpr const char* kGpuLostStopReason = "gpu lost";
bool lost_to_gpu(const CaseOutcome& out);
// "stopped: the GPU was lost after N <unit>: REASON; the <unit> since then were not run".
std::string gpu_lost_note(int64_t done, const std::string& unit);
// The case as saved for a failure of slot k: named after the kernel (the
// backward kernel's own name) and recording the pass that failed.
void stamp_failure_case(const CampaignKernel& k, Case& c);

struct CampaignOptions {
  std::vector<CampaignKernel> kernels;
  uint64_t seed = 1;
  int64_t first_case = 0;       // shards: [first_case, first_case + cases)
  int64_t cases = -1;           // -1: until the time limit
  double time_s = -1;           // -1: until the case limit
  int jobs = 1;
  GeneratorMix mix = GeneratorMix::defaults();
  std::string corpus_dir;       // "": failures are reported, not saved
  bool minimize = true;
  MinimizeOptions minimize_options;
  bool keep_case_records = true;  // per-case verdicts in the report
  int64_t stop_after_failures = -1;  // stop once this many signatures are recorded (-1: never)
  int rerun_share = kDefaultRerunShare;  // 1 in this many cases runs twice (determinism.h); 0: none
  std::string command;          // for the report's run info

  // Called from the consuming thread after each case (rate limiting is the
  // callee's business) and once per failure signature found.
  std::function<void(const ProgressSnapshot&)> on_progress;
  std::function<void(const ReportFailure&)> on_failure;
  // Called from the consuming thread at most every checkpoint_s seconds
  // with the report so far (run.stop_reason "running"): a long campaign
  // that is killed still leaves a recent report.json.
  double checkpoint_s = -1;  // -1: never
  std::function<void(const Report&)> on_checkpoint;
};

// Runs the campaign.  Throws std::runtime_error with a one-line message
// for unusable options (no kernels, no limit, an unwritable corpus).
Report run_campaign(const CampaignOptions& options, const Runner& runner);

// Replay: every case file of corpus folders against the given kernels (or
// against the kernel each file records, looked up in `registry`): the
// regression mode for CI.  A corpus case that fails again is reported as a
// failure with its repro command.
struct ReplayOptions {
  std::vector<std::string> dirs;
  std::vector<CampaignKernel> kernels;  // empty: each file's own kernel
  // The backward kernels of a file's backward pass, by name; empty: the one
  // named like the file's kernel.
  std::vector<std::string> backward_kernels;
  std::optional<Pass> pass;             // overrides the pass each file records
  bool verbose = false;                 // print passes too, not only failures
  std::string command;
};

struct ReplayResult {
  Report report;
  int64_t files = 0, runs = 0, passed = 0, unsupported = 0, failed = 0;
  bool bad_input = false;  // an unreadable folder, a malformed file, an unknown kernel
  // The CLI's exit code: 2 for bad input, else 1 if anything failed, else 0.
  int exit_code() const { return bad_input ? 2 : failed ? 1 : 0; }
};

// Messages go to `out` (verdicts) and `err` (bad input); null silences them.
ReplayResult replay_corpus(const ReplayOptions& options, const KernelRegistry& registry, const Runner& runner,
                           std::FILE* out, std::FILE* err);

// The provenance lines of a saved failure.
std::vector<std::string> failure_provenance(const ReportFailure& f, const std::string& date_utc);
// Those of them that describe its verdict (pass, verdict, worst element,
// minimization): what an audit or a later minimization writes under its own
// "found by" lines.
std::vector<std::string> verdict_provenance(const ReportFailure& f);

// The current UTC time as ISO 8601 ("2025-01-31T12:00:00Z").
std::string utc_now();

// Conventions as report strings.
std::string masked_row_name(afz_masked_row_output c);
std::string empty_lse_name(afz_empty_lse c);

}  // namespace afz
