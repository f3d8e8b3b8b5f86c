// `attnfuzz report merge DIR... --out DIR` combines report folders (shards
// of one campaign, or runs on several machines) into one;
// `attnfuzz report render DIR` rewrites a folder's report.html, junit.xml
// and results.sarif from its report.json (after an upgrade, or where
// gnuplot is installed and the run's machine had none);
// `attnfuzz report confirm DIR` runs alone the repros of the failures a
// folder's run did not (its --confirm-time ran out, or it had no
// --confirm-alone) and records what they gave there.
#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include "harness/cli/commands.h"
#include "harness/report/report_views.h"

namespace afz::cli {
namespace {

struct ReportArgs {
  std::vector<std::string> merge_dirs;
  std::string out;
  std::vector<std::string> render_dirs;
  std::vector<std::string> confirm_dirs;
  ConfirmAloneArgs confirm;
  bool again = false;
};

int run_merge(const Globals& g, const ReportArgs& a) {
  std::vector<Report> parts;
  for (const std::string& dir : a.merge_dirs) {
    std::string error;
    std::optional<Report> r = read_report_folder(dir, &error);
    if (!r) throw BadInput{error};
    parts.push_back(std::move(*r));
  }
  std::string error;
  std::optional<Report> merged = merge_reports(std::move(parts), &error);
  if (!merged) throw BadInput{error};
  merged->run.command = g.command_line;
  if (!write_report_folder(*merged, a.out, &error)) throw BadInput{error};
  const size_t findings = group_findings(merged->failures).size();
  fmt::print("merged {} report{} into {}: {} cases, {} finding{} ({} failure signature{}, {} new), {} failing cases\n",
             a.merge_dirs.size(), a.merge_dirs.size() == 1 ? "" : "s", a.out, merged->run.cases, findings,
             findings == 1 ? "" : "s", merged->failures.size(), merged->failures.size() == 1 ? "" : "s",
             merged->new_failures(), merged->failing_cases());
  return merged->new_failures() > 0 || !merged->errors.empty() ? kExitFailuresFound : kExitOk;
}

int run_render(const ReportArgs& a) {
  for (const std::string& dir : a.render_dirs) {
    std::string error;
    if (!render_report_folder(dir, &error)) throw BadInput{error};
    fmt::print("{}: wrote {}, {}, {}\n", dir, kReportHtmlFile, kJunitFile, kSarifFile);
  }
  return kExitOk;
}

// Each kernel's origin as the report records it, but where a --kernel-lib
// of this command loads a kernel of the same name, that library: the
// plugin's path on this machine, or another build of it.
KernelOrigins confirm_origins(const Globals& g, const Report& r) {
  KernelOrigins origins = kernel_origins(r);
  if (g.kernel_libs.empty()) return origins;
  const KernelRegistry registry = g.registry();
  for (const KernelEntry& e : registry.entries())
    if (!is_builtin_origin(e.origin) && origins.count(e.kernel->name)) origins[e.kernel->name] = e.origin;
  for (const BackwardKernelEntry& e : registry.backward_entries()) {
    const std::string label = backward_label(e.kernel->name);
    if (!is_builtin_origin(e.origin) && origins.count(label)) origins[label] = e.origin;
  }
  return origins;
}

constexpr std::chrono::seconds kSaveEvery{60};

int run_confirm(const Globals& g, const ReportArgs& a) {
  bool failing = false;
  for (const std::string& dir : a.confirm_dirs) {
    std::string error;
    std::optional<Report> r = read_report_folder(dir, &error);
    if (!r) throw BadInput{error};
    size_t waiting = 0;
    for (const ReportFailure& f : r->failures) waiting += a.again || awaits_alone(f);
    fmt::print("{}: {} of {} failure repro(s) to run alone, each in a fresh `attnfuzz repro` process, {} at a time\n",
               dir, waiting, r->failures.size(), a.confirm.jobs);
    std::fflush(stdout);
    ConfirmAloneOptions o = confirm_alone_options(g, a.confirm);
    o.again = a.again;
    o.corpus_dir = (std::filesystem::path(dir) / "corpus").string();
    // The folder rewritten now and then while they run: a kill (a device
    // call's deadline) loses only the repros in flight.
    auto saved_at = std::chrono::steady_clock::now();
    o.on_recorded = [&](const Report& so_far) {
      const auto now = std::chrono::steady_clock::now();
      if (now - saved_at < kSaveEvery) return;
      saved_at = now;
      std::string why;
      if (!write_report_folder(so_far, dir, &why)) fmt::print(stderr, "{}: not saved yet: {}\n", dir, why);
    };
    // The repros' flags: this command's (--determinism, --isolate); a
    // nondeterministic verdict's repro checks determinism whatever they are.
    const int64_t left = confirm_failures_alone(*r, confirm_origins(g, *r), g.run_options(), o);
    if (!write_report_folder(*r, dir, &error)) throw BadInput{error};
    std::map<std::string, size_t> outcomes;
    for (const ReportFailure& f : r->failures) {
      ++outcomes[f.alone.outcome.empty() ? "not run alone" : f.alone.outcome];
      failing = failing || f.alone.outcome == "fails" || f.alone.outcome == "fails_differently";
    }
    std::string counts;
    for (const auto& [outcome, n] : outcomes) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, outcome);
    fmt::print("{}: {} failure signature(s) alone: {}{}\n", dir, r->failures.size(), counts,
               left > 0 ? fmt::format(" ({} left: --confirm-time {} s spent)", left, a.confirm.budget_s) : "");
  }
  return failing ? kExitFailuresFound : kExitOk;
}

}  // namespace

Action add_report_command(CLI::App& app, Globals& g) {
  auto* sub = app.add_subcommand("report", "combine, re-render and confirm report folders");
  sub->require_subcommand(1);
  auto a = std::make_shared<ReportArgs>();
  auto* merge = sub->add_subcommand(
      "merge", "combine report folders (shards of one campaign, or several machines) into one; exit 1 when "
               "the merged report has new failures");
  merge->add_option("dirs", a->merge_dirs, "report folders (each with a report.json)")->required();
  merge->add_option("--out,-o", a->out, "folder for the merged report.json, report.html, junit.xml, results.sarif")
      ->required();
  auto* render = sub->add_subcommand("render", "rewrite report.html, junit.xml and results.sarif from report.json");
  render->add_option("dirs", a->render_dirs, "report folders")->required();
  auto* confirm = sub->add_subcommand(
      "confirm", "run alone, each in a fresh `attnfuzz repro` process, the repros of a folder's failures that were "
                 "not (or gave no verdict), and record the outcomes in its report and saved cases; exit 1 when one "
                 "fails alone");
  confirm->add_option("dirs", a->confirm_dirs, "report folders (each with a report.json; saved cases in corpus/)")
      ->required();
  add_confirm_limit_options(confirm, a->confirm);
  confirm->add_flag("--again", a->again, "run every failure's repro alone, also those that gave a verdict before");
  return [&g, a, merge, render, confirm]() {
    if (merge->parsed()) return run_merge(g, *a);
    if (render->parsed()) return run_render(*a);
    if (confirm->parsed()) return run_confirm(g, *a);
    return kExitBadInput;
  };
}

}  // namespace afz::cli
