// `attnfuzz mutants`: the mutant gate (harness/campaign/mutant_gate.h).  One row per
// mutant as it finishes, then the median and worst time to kill; exit 1 when
// a mutant survives its budget.
#include <fmt/core.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <memory>

#include "harness/campaign/mutant_gate.h"
#include "harness/cli/commands.h"
#include "harness/report/report.h"
#include "harness/report/report_views.h"
#include "harness/run/backward_runner.h"
#include "kernels/mutants/mutants.h"

namespace afz::cli {
namespace {

constexpr const char* kDefaultMutantCorpus = "corpora/mutants";

struct MutantsArgs {
  int64_t budget_cases = MutantGateOptions{}.budget_cases;
  std::string time_per_mutant = "30";
  uint64_t seed = 1;
  std::string out, corpus = kDefaultMutantCorpus, classes = "all";
  std::vector<std::string> only;
  int jobs = 1;
  int minimize_runs = MinimizeOptions{}.max_runs;
  double minimize_time = MinimizeOptions{}.max_seconds;
  bool no_corpus = false;
  std::string pass = "fwd";
};

// "90", "90s", "5m" -> seconds; bad input is a one-line error.
double parse_seconds(const std::string& s) {
  double value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  const std::string unit(end, s.data() + s.size());
  const double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : 0;
  if (ec != std::errc() || scale == 0 || !(value > 0))
    throw BadInput{"--time-per-mutant: expected a positive duration such as 10, 10s or 2m, got '" + s + "'"};
  return value * scale;
}

// The zoo (registry entries of origin "mutant"), or the kernels named with
// --only (any registered kernel: a correct one must survive, which is how
// the gate's own failure path is exercised).
std::vector<CampaignKernel> pick_mutants(const KernelRegistry& reg, const std::vector<std::string>& only) {
  std::vector<CampaignKernel> out;
  if (only.empty()) {
    for (const KernelEntry& e : reg.entries())
      if (e.origin == kMutantOrigin) out.push_back({e.kernel, e.origin});
    if (out.empty()) throw BadInput{"mutants: no mutant kernels are registered"};
    return out;
  }
  for (const std::string& name : only) {
    const KernelEntry* found = nullptr;
    for (const KernelEntry& e : reg.entries())
      if (name == e.kernel->name) found = &e;
    if (!found) throw BadInput{"--only: unknown kernel '" + name + "' (see `attnfuzz kernels`)"};
    out.push_back({found->kernel, found->origin});
  }
  return out;
}

constexpr const char* kRowFormat = "{:<34} {:<8} {:>6} {:>8}  {:<18} {}\n";

void print_header() {
  fmt::print(kRowFormat, "mutant", "result", "cases", "seconds", "verdict", "minimized killing case");
}

void print_row(const MutantRow& row) {
  if (row.untested) {
    fmt::print(kRowFormat, row.kernel, "untested", "-", "-", "-", row.untested_reason);
  } else if (row.killed) {
    const ReportFailure& f = *row.kill;
    const std::string where = f.case_file.empty() ? "(not saved)" : f.case_file;
    fmt::print(kRowFormat, row.kernel, "killed", row.cases, fmt::format("{:.3f}", row.seconds),
               verdict_name(f.verdict), where);
    fmt::print("{:<34} {:<8} {:>6} {:>8}  {:<18} {}\n", "", "", "", "", "", row.case_summary);
  } else {
    fmt::print(kRowFormat, row.kernel, "SURVIVED", row.cases, fmt::format("{:.3f}", row.seconds), "-",
               "(" + row.stop_reason + " budget spent)");
  }
  std::fflush(stdout);
}

void print_totals(const MutantGateResult& r, double wall_s) {
  fmt::print("\n{} mutants: {} killed, {} survived{}; {:.1f} s wall\n", r.rows.size(), r.killed, r.survived,
             r.untested ? fmt::format(", {} untested", r.untested) : "", wall_s);
  if (r.median_s)
    fmt::print("time to kill: median {:.3f} s, worst {:.3f} s ({})\n", *r.median_s, *r.worst_s, r.worst_kernel);
  // Cases the harness itself could not build or judge: not a verdict on any
  // mutant, but a harness bug worth a look (they are in the report too).
  for (const MutantRow& row : r.rows)
    for (const std::string& e : row.campaign.errors) fmt::print("harness error ({}): {}\n", row.kernel, e);
  if (r.killed == 0 && r.survived == 0) fmt::print("no mutant could be tested here: the gate fails\n");
  for (const MutantRow& row : r.rows)
    if (!row.killed && !row.untested)
      fmt::print("survivor: {} ran {} cases without a failure: the generators have a blind spot\n", row.kernel,
                 row.cases);
}

// The backward gate: each backward mutant against generated cases until its
// first failure; one row each, exit 1 if any expected kill survives.
int run_backward_mutants(const MutantsArgs& a) {
  std::string error;
  const auto mix = GeneratorMix::parse(a.classes, &error, Pass::Bwd);
  if (!mix) throw BadInput{"--classes: " + error};
  fmt::print("attnfuzz mutants --pass bwd: seed {}, budget {} cases each, classes {}\n", a.seed, a.budget_cases,
             mix->describe());
  fmt::print("{:<34} {:<9} {:>6}  {}\n", "mutant", "result", "cases", "verdict");
  bool passed = true;
  for (const BackwardGateRow& row : run_backward_gate(a.seed, a.budget_cases, *mix)) {
    const bool survived = !row.killed && row.expected_kill;
    passed &= !survived;
    fmt::print("{:<34} {:<9} {:>6}  {}\n", row.kernel, row.killed ? "killed" : survived ? "SURVIVED" : "survived*",
               row.cases, row.killed ? row.verdict + " (" + row.detail + ")" : "");
  }
  return passed ? kExitOk : kExitFailuresFound;
}

int run_mutants(const Globals& g, const MutantsArgs& a) {
  if (a.pass == "bwd") return run_backward_mutants(a);
  if (a.pass != "fwd") throw BadInput{"--pass: expected fwd or bwd, got '" + a.pass + "'"};
  const KernelRegistry reg = g.registry();
  MutantGateOptions o;
  o.seed = a.seed;
  o.budget_cases = a.budget_cases;
  o.time_per_mutant_s = parse_seconds(a.time_per_mutant);
  o.jobs = a.jobs;
  std::string error;
  auto mix = GeneratorMix::parse(a.classes, &error);
  if (!mix) throw BadInput{"--classes: " + error};
  o.mix = *mix;
  o.corpus_dir = a.no_corpus ? "" : a.corpus;
  o.minimize_options.max_runs = a.minimize_runs;
  o.minimize_options.max_seconds = a.minimize_time;
  o.command = g.command_line;
  o.on_row = print_row;
  const std::vector<CampaignKernel> mutants = pick_mutants(reg, a.only);

  const Runner runner(g.run_options());
  fmt::print("attnfuzz mutants: {} mutants, seed {}, budget {} cases / {} s each, oracle {}, corpus {}\n",
             mutants.size(), o.seed, o.budget_cases, o.time_per_mutant_s, runner.oracle_name(),
             o.corpus_dir.empty() ? "(none)" : o.corpus_dir);
  print_header();
  const auto t0 = std::chrono::steady_clock::now();
  MutantGateResult result;
  try {
    result = run_mutant_gate(mutants, o, runner);
  } catch (const std::runtime_error& e) {
    throw BadInput{e.what()};
  }
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  print_totals(result, wall_s);
  if (!a.out.empty()) {
    const Report report = mutant_gate_report(result, o, runner.oracle_name(), wall_s);
    if (!write_report_folder(report, a.out, &error)) throw BadInput{error};
    fmt::print("report: {}/report.json, {}/report.html\n", a.out, a.out);
  }
  return result.passed() ? kExitOk : kExitFailuresFound;
}

}  // namespace

Action add_mutants_command(CLI::App& app, Globals& g) {
  auto* sub = app.add_subcommand(
      "mutants", "the mutant gate: a campaign against each planted-defect kernel; exit 1 if any survives");
  auto a = std::make_shared<MutantsArgs>();
  sub->add_option("--budget-cases,-n", a->budget_cases, "cases per mutant before it counts as a survivor")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--time-per-mutant,-t", a->time_per_mutant, "time per mutant (minimization excluded): 30, 30s, 2m")
      ->capture_default_str();
  sub->add_option("--seed,-s", a->seed, "campaign seed, the same for every mutant")->capture_default_str();
  sub->add_option("--out,-o", a->out, "report folder (report.json, run.kind \"mutants\")");
  auto* corpus = sub->add_option("--corpus", a->corpus, "where the minimized kills are saved, with provenance")
                     ->capture_default_str();
  sub->add_flag("--no-corpus", a->no_corpus, "minimize the kills but save nothing")->excludes(corpus);
  sub->add_option("--only", a->only, "gate these kernels instead of the zoo (repeatable)");
  sub->add_option("--classes", a->classes,
                  "generator classes and weights, e.g. late_max=3,masking=1, or all (the default mix; the opt-in "
                  "scale class only by name: scale)")
      ->capture_default_str();
  sub->add_option("--jobs,-j", a->jobs, "worker threads per campaign")->capture_default_str()->check(CLI::Range(1, 256));
  sub->add_option("--minimize-runs", a->minimize_runs, "kernel runs per minimization")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  sub->add_option("--minimize-time", a->minimize_time, "seconds per minimization")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--pass", a->pass, "which pass's mutants: fwd (forward zoo) or bwd (backward zoo)")
      ->capture_default_str();
  return [&g, a]() { return run_mutants(g, *a); };
}

}  // namespace afz::cli
