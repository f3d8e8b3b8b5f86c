// `attnfuzz report merge DIR... --out DIR` combines report folders (shards
// of one campaign, or runs on several machines) into one;
// `attnfuzz report render DIR` rewrites a folder's report.html, junit.xml
// and results.sarif from its report.json (after an upgrade, or where
// gnuplot is installed and the run's machine had none).
#include <fmt/core.h>

#include "harness/cli/commands.h"
#include "harness/report/report_views.h"

namespace afz::cli {
namespace {

struct ReportArgs {
  std::vector<std::string> merge_dirs;
  std::string out;
  std::vector<std::string> render_dirs;
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

}  // namespace

Action add_report_command(CLI::App& app, Globals& g) {
  auto* sub = app.add_subcommand("report", "combine and re-render report folders");
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
  return [&g, a, merge, render]() {
    if (merge->parsed()) return run_merge(g, *a);
    if (render->parsed()) return run_render(*a);
    return kExitBadInput;
  };
}

}  // namespace afz::cli
