// The subcommands of `attnfuzz`; each registers itself on the CLI11 app.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "harness/campaign/campaign.h"
#include "harness/campaign/confirm_alone.h"
#include "harness/run/runner.h"
#include "kernels/registry.h"

namespace afz::cli {

// Exit codes shared by every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailuresFound = 1;
inline constexpr int kExitBadInput = 2;

struct Globals {
  std::vector<std::string> kernel_libs;
  std::string oracle = "auto";
  int mpfr_bits = 256;
  bool isolate = false;
  bool determinism = false;
  double timeout_s = 60;
  int gpu_workers = 0;  // --gpu-workers: 0 = one GPU worker per job
  RowSampling sampling;  // --check-rows, --row-tile, --sample-seed
  std::string command_line;  // argv joined, for reports

  // Built lazily after parsing; errors are one line on stderr and exit 2.
  KernelRegistry registry() const;
  RunOptions run_options() const;
};

// Each returns the callback that runs the command after parsing.
using Action = std::function<int()>;
Action add_kernels_command(CLI::App& app, Globals& g);
Action add_run_command(CLI::App& app, Globals& g);
Action add_repro_command(CLI::App& app, Globals& g);
Action add_fuzz_command(CLI::App& app, Globals& g);    // cmd_fuzz.cpp
Action add_replay_command(CLI::App& app, Globals& g);  // cmd_fuzz.cpp
Action add_report_command(CLI::App& app, Globals& g);  // cmd_report.cpp
Action add_mutants_command(CLI::App& app, Globals& g);  // cmd_mutants.cpp
Action add_audit_command(CLI::App& app, Globals& g);    // cmd_audit.cpp
Action add_conventions_command(CLI::App& app, Globals& g);  // cmd_conventions.cpp
Action add_bench_command(CLI::App& app, Globals& g);        // cmd_bench.cpp

// Shared by fuzz and audit (cmd_fuzz.cpp).
// "all" (every non-mutant kernel), a name, or a comma list of both.
std::vector<CampaignKernel> resolve_kernels(const KernelRegistry& reg, const std::vector<std::string>& specs);
// The same specs as backward kernel names ('all': every non-mutant one);
// names that are no backward kernel are skipped, or BadInput if all_must_exist.
std::vector<std::string> resolve_backward_kernels(const KernelRegistry& reg, const std::vector<std::string>& specs,
                                                  bool all_must_exist);
// The kernel slots of fuzz and audit under --pass: the named forward
// kernels (fwd), the backward kernels of the same names (bwd: 'all' is every
// non-mutant backward kernel; a name without a backward kernel is BadInput),
// or both (a name that is only a backward kernel runs the backward alone).
std::vector<CampaignKernel> resolve_pass_kernels(const KernelRegistry& reg, const std::vector<std::string>& specs,
                                                 Pass pass);
// A run whose every kernel needs the GPU, where no worker finds one, has
// nothing to run: BadInput with the reason (one line, exit 2), not a
// matrix of `unsupported` and exit 0.  Mixed runs go on (CPU kernels run).
void require_device_if_all_gpu(const std::vector<CampaignKernel>& kernels);
// "NAME [bwd] numeric_mismatch in dq": a failure as progress lines name it.
std::string failure_label(const ReportFailure& f);
// --pass: nullopt when not given, else fwd | bwd | both; BadInput otherwise.
std::optional<Pass> parse_pass_flag(const std::string& flag);
// "90", "90s", "5m", "1.5h" -> seconds; BadInput otherwise.
double parse_duration(const std::string& s);
// The end-of-run table of kernel x class counts, failures and timings.
void print_summary(const Report& r, const std::string& report_dir);

// --confirm-alone and --confirm-time, shared by fuzz and audit
// (confirm_alone_options.cpp; harness/campaign/confirm_alone.h).
struct ConfirmAloneArgs {
  bool enabled = false;
  double budget_s = 0;  // 0: no limit
  int jobs = 1;
};
void add_confirm_alone_options(CLI::App* sub, ConfirmAloneArgs& a);
// --confirm-time and --confirm-jobs alone (`report confirm`, which always confirms).
void add_confirm_limit_options(CLI::App* sub, ConfirmAloneArgs& a);
// The repro processes' options from the global flags (--timeout) and a's.
ConfirmAloneOptions confirm_alone_options(const Globals& g, const ConfirmAloneArgs& a);
// When asked: each failure's repro run alone (a line printed for each),
// before the report is written.  `run` is the run's options (its repros' flags).
void confirm_alone_if_asked(const ConfirmAloneArgs& a, const Globals& g, const RunOptions& run,
                            const std::vector<CampaignKernel>& kernels, Report& r);

// Thrown for bad input; main prints the message and exits 2.
struct BadInput {
  std::string message;
};

}  // namespace afz::cli
