// --confirm-alone on fuzz and audit: each failure's repro run alone, in a
// fresh `attnfuzz repro` process (harness/campaign/confirm_alone.h).
#include <fmt/core.h>

#include "harness/campaign/confirm_alone.h"
#include "harness/cli/commands.h"

namespace afz::cli {
namespace {

// What a repro process costs besides its kernel runs (each within
// --timeout): starting, loading a plugin (libtorch takes seconds), a CUDA
// context, the oracle of an unminimized case.
constexpr double kReproOverheadS = 120;

}  // namespace

void add_confirm_alone_options(CLI::App* sub, ConfirmAloneArgs& a) {
  sub->add_flag("--confirm-alone", a.enabled,
                "run each failure's repro alone in a fresh `attnfuzz repro` process and record what it gives "
                "(fails, fails_differently, passes, unsupported, not_run) in the report and the saved case: a "
                "failure that passes alone depends on what ran before it in the same process");
  add_confirm_limit_options(sub, a);
}

void add_confirm_limit_options(CLI::App* sub, ConfirmAloneArgs& a) {
  sub->add_option("--confirm-time", a.budget_s,
                  "seconds for all the repros run alone together; past it the rest are not run (0: no limit)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--confirm-jobs", a.jobs,
                  "repros run alone at once, each its own process (and GPU context); a crash's or hang's repro "
                  "runs with none beside it, since faulting contexts side by side can leave a GPU needing a reset")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
}

ConfirmAloneOptions confirm_alone_options(const Globals& g, const ConfirmAloneArgs& a) {
  ConfirmAloneOptions o;
  o.executable = "/proc/self/exe";
  o.run_args = {"--timeout", fmt::format("{}", g.timeout_s)};
  o.timeout_s = 2 * g.timeout_s + kReproOverheadS;  // a determinism check runs the kernel twice
  o.budget_s = a.budget_s;
  o.jobs = a.jobs;
  o.on_confirmed = [](const ReportFailure& f) {
    fmt::print("  {}: {} ({}, {:.1f} s)\n", failure_label(f), f.alone.outcome, f.alone.line, f.alone.seconds);
    std::fflush(stdout);
  };
  return o;
}

void confirm_alone_if_asked(const ConfirmAloneArgs& a, const Globals& g, const RunOptions& run,
                            const std::vector<CampaignKernel>& kernels, Report& r) {
  if (!a.enabled || r.failures.empty()) return;
  fmt::print("\nconfirm alone: {} failure repro(s), each in a fresh `attnfuzz repro` process, {} at a time\n",
             r.failures.size(), a.jobs);
  std::fflush(stdout);
  const int64_t left = confirm_failures_alone(r, kernel_origins(kernels), run, confirm_alone_options(g, a));
  if (left > 0) fmt::print("  {} failure(s) not run alone: --confirm-time {} s spent\n", left, a.budget_s);
}

}  // namespace afz::cli
