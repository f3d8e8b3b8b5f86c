// `attnfuzz audit`: the systematic sweep of every feature combination x
// adversarial class, then a focused fuzz phase (harness/campaign/audit.h); writes
// the report folder and a corpus of minimized repros of the failing cells.
#include <fmt/core.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "harness/campaign/audit.h"
#include "harness/campaign/progress.h"
#include "harness/campaign/shard.h"
#include "harness/campaign/stop_request.h"
#include "harness/cli/commands.h"
#include "harness/report/report_views.h"
#include "harness/run/gpu/gpu_run.h"

namespace afz::cli {
namespace {

// The whole audit's default time: the sweep of one CPU kernel (19,200
// cells) takes about 85 s of it on two busy cores; the fuzz phase gets the rest.
constexpr const char* kDefaultAuditTime = "120";
// A sweep progress line every this many cells on a plain log.
constexpr int64_t kSweepProgressEvery = 500;

struct AuditArgs {
  std::vector<std::string> kernels;
  std::string pass = "fwd";
  std::string time = kDefaultAuditTime;
  std::string sweep_time;
  int cases_per_cell = 1;
  uint64_t seed = 1;
  std::string out, corpus, shard, cells, rows;
  std::vector<std::string> skip_covered;  // report folders of earlier audits
  bool list_cells = false;
  int jobs = 0;
  int minimize_runs = MinimizeOptions{}.max_runs;
  double minimize_time = MinimizeOptions{}.max_seconds;
  double minimize_budget = 0;
  ConfirmAloneArgs confirm_alone;
};

int run_audit_command(const Globals& g, const AuditArgs& a) {
  const KernelRegistry reg = g.registry();
  AuditOptions o;
  o.kernels = resolve_pass_kernels(reg, a.kernels, parse_pass_flag(a.pass).value_or(Pass::Fwd));
  o.seed = a.seed;
  o.time_s = parse_duration(a.time);
  if (!a.sweep_time.empty()) o.sweep_time_s = parse_duration(a.sweep_time);
  o.cases_per_cell = a.cases_per_cell;
  o.jobs = a.jobs > 0 ? a.jobs : int(std::max(1u, std::thread::hardware_concurrency()));
  o.corpus_dir = !a.corpus.empty() ? a.corpus : a.out + "/corpus";
  o.in_flight_path = a.out + "/in_flight.txt";
  o.in_flight_history_path = a.out + "/in_flight_history.txt";
  o.minimize_options.max_runs = a.minimize_runs;
  o.minimize_options.max_seconds = a.minimize_time;
  o.minimize_budget_s = a.minimize_budget;
  o.command = g.command_line;
  o.rows_regex = a.rows;
  if (!a.shard.empty()) {
    std::string error;
    const std::optional<ShardSpec> s = parse_shard(a.shard, &error);
    if (!s) throw BadInput{error};
    o.shard = s->index;
    o.shards = s->count;
  }
  if (!a.cells.empty()) {
    std::string error;
    const std::optional<CellRange> r = parse_cell_range(a.cells, &error);
    if (!r) throw BadInput{error};
    if (!a.shard.empty()) throw BadInput{"audit: --cells and --shard both pick the cells: give one"};
    o.first_cell = r->first;
    o.end_cell = r->end;
  }
  if (!a.skip_covered.empty()) {
    std::string error;
    std::optional<CoveredCells> covered = read_covered_cells(a.skip_covered, o.seed, &error);
    if (!covered) throw BadInput{error};
    o.covered = std::move(*covered);
  }
  if (a.list_cells) {  // the plan only: no kernel runs, so no device is needed
    const std::vector<SweepCell> cells = audit_sweep_cells(o);
    for (const SweepCell& c : cells) fmt::print("{}\t{}\t{}\n", c.cell, c.row, c.column);
    fmt::print(stderr, "{} cells to sweep\n", cells.size());
    return 0;
  }
  require_device_if_all_gpu(o.kernels);
  // The in-flight record is written from the first case on.
  std::error_code made;
  std::filesystem::create_directories(a.out, made);

  // SIGINT/SIGTERM (a CI timeout) ends the run at a case boundary with its report written.
  install_stop_handlers();
  std::vector<const afz_kernel*> kernels;
  for (const CampaignKernel& k : o.kernels) kernels.push_back(k.kernel);
  const size_t rows = audit_rows(kernels).size(), classes = audit_classes(o.kernels).size();
  fmt::print("attnfuzz audit: {} kernel(s), {} feature rows x {} classes = {} cells, {} case(s) each, seed {}, "
             "{:.0f} s in all, corpus {}\n",
             kernels.size(), rows, classes, rows * classes, o.cases_per_cell, o.seed, o.time_s, o.corpus_dir);
  std::fflush(stdout);
  const auto started = std::chrono::steady_clock::now();
  o.on_sweep_progress = [&](int64_t done, int64_t total) {
    if (done % kSweepProgressEvery != 0 && done != total) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    fmt::print("sweep: {}/{} cells, {:.1f} s\n", done, total, s);
    std::fflush(stdout);
  };
  ProgressLine progress(stdout, ProgressLine::detect(stdout));
  o.on_fuzz_progress = [&](const ProgressSnapshot& s) { progress.update(s); };
  o.on_failure = [&](const ReportFailure& f) {
    progress.message(fmt::format("{} failure: {} (class {}){}", f.status, failure_label(f), f.generator,
                                 f.repro.empty() ? "" : "\n  repro: " + f.repro));
  };
  // Before a release every case runs twice and must give identical bits,
  // unless the kernel declares itself nondeterministic (AFZ_CAP_NONDETERMINISTIC).
  RunOptions run_options = g.run_options();
  run_options.check_determinism = true;
  const Runner runner(run_options);
  Report r;
  try {
    r = run_audit(o, runner);
  } catch (const std::runtime_error& e) {
    throw BadInput{e.what()};
  }
  progress.finish();
  confirm_alone_if_asked(a.confirm_alone, g, runner.options(), o.kernels, r);
  std::string error;
  if (!write_report_folder(r, a.out, &error)) throw BadInput{error};
  print_summary(r, a.out);
  fmt::print("\naudit matrix:\n");
  for (const std::string& line : audit_summary(r)) fmt::print("{}\n", line);
  // A lost GPU: the audit could not do what was asked (exit 2), unless it
  // had found failures first (exit 1: a finding is never lost).
  if (r.run.stop_reason == kGpuLostStopReason) {
    fmt::print("\naudit stopped: the GPU was lost: {}; the report covers the cells run before\n",
               gpu::gpu_lost_reason());
    if (r.failures.empty()) return kExitBadInput;
  }
  // Any failing cell fails the audit, known or not: the matrix is the verdict.
  return r.passed() ? kExitOk : kExitFailuresFound;
}

}  // namespace

Action add_audit_command(CLI::App& app, Globals& g) {
  auto* sub = app.add_subcommand(
      "audit", "sweep every feature combination x adversarial class, then fuzz, every case run twice (determinism); "
              "exit 1 when a cell fails");
  auto a = std::make_shared<AuditArgs>();
  sub->add_option("--kernel,-k", a->kernels, "kernel name or comma list (conventions are compared across them)")
      ->required();
  sub->add_option("--pass", a->pass,
                  "fwd, bwd (the backward kernels of the same names: dQ, dK, dV; their supports() decides "
                  "unsupported cells) or both")
      ->capture_default_str();
  sub->add_option("--time,-t", a->time, "the whole audit's time: the sweep always completes, the fuzz phase gets "
                                        "the rest but at least a quarter (120, 90s, 5m, 1.5h)")
      ->capture_default_str();
  sub->add_option("--sweep-time", a->sweep_time,
                  "stop the sweep past this time (a safety valve for kernels that compile per shape); the matrix "
                  "notes the cells not run");
  sub->add_option("--cases-per-cell,-n", a->cases_per_cell, "cases per matrix cell")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  sub->add_option("--seed,-s", a->seed, "audit seed: every cell's cases are a function of it")->capture_default_str();
  sub->add_option("--out,-o", a->out, "report folder (report.json, report.html, junit.xml, results.sarif)")
      ->required();
  sub->add_option("--corpus", a->corpus, "where the failing cells' minimized repros are saved (default OUT/corpus)");
  sub->add_option("--shard", a->shard, "K/N: sweep only the K-th (from 0) of N contiguous parts of the cells");
  sub->add_option("--cells", a->cells,
                  "A-B: sweep only the cells [A, B) in shard order (to resume a sweep a time limit cut)");
  sub->add_option("--rows", a->rows,
                  "REGEX (ECMAScript): sweep only the rows whose names it finds, e.g. 'row_gap3' or "
                  "'^(?!.*row_gap3)' for the rest");
  sub->add_flag("--list-cells", a->list_cells,
                "print the cells the sweep would run (matrix index, row, class), in its order, and exit");
  sub->add_option("--skip-covered", a->skip_covered,
                  "DIR...: skip the cells that every audited kernel already has in these report folders (earlier "
                  "audits of the same seed: resume cut sweeps, fill holes)");
  sub->add_option("--jobs,-j", a->jobs, "worker threads (0: one per core); results do not depend on it")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
  sub->add_option("--minimize-runs", a->minimize_runs, "kernel runs per minimization")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  sub->add_option("--minimize-time", a->minimize_time, "seconds per minimization")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--minimize-budget", a->minimize_budget,
                  "seconds for all the sweep's minimizations together (they hold the sweep); past it, new "
                  "failures keep their cases as generated (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  add_confirm_alone_options(sub, a->confirm_alone);
  return [&g, a]() { return run_audit_command(g, *a); };
}

}  // namespace afz::cli
