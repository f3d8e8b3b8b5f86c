// report.html: one self-contained page.  Nothing is fetched: the style is
// inline, the plots are gnuplot's SVG embedded inline, and the only script
// is none at all (commands are selectable with one click through CSS).
//
// Order, most important first: the overall verdict; the kernels; the
// adversarial classes; mutants and the audit matrix when the run has them;
// the error statistics and their plots; every failure with its minimized
// case, worst element and repro command; errors; the run's details.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <set>
#include <sstream>

#include "harness/report/plots.h"
#include "harness/report/report_views.h"

namespace afz {
namespace {

// Verdict classes a person needs explained once, in the legend.
struct VerdictText {
  VerdictClass cls;
  const char* meaning;
};
constexpr VerdictText kVerdictTexts[] = {
    {VerdictClass::Pass, "every element within its bound, conventions kept"},
    {VerdictClass::Unsupported, "the kernel declined the case (capabilities): never a failure"},
    {VerdictClass::NumericMismatch, "an element beyond its error bound"},
    {VerdictClass::NanInf, "NaN or Inf where the exact result is finite"},
    {VerdictClass::SemanticMismatch, "a masked row or an LSE against the declared convention"},
    {VerdictClass::Unwritten, "output poison survived: an element never written"},
    {VerdictClass::OutOfBounds, "a write outside the valid output"},
    {VerdictClass::Nondeterministic, "two runs gave different bits"},
    {VerdictClass::Crash, "the kernel failed, faulted or died"},
    {VerdictClass::Hang, "the kernel exceeded its time limit"},
};

constexpr const char* kStyle = R"css(
:root { --pass:#1a7f37; --pass-bg:#dafbe1; --fail:#b3261e; --fail-bg:#ffe1de; --unsup:#6e7781; --unsup-bg:#eaeef2;
        --line:#d0d7de; --muted:#57606a; }
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color:#1f2328; margin:0; background:#f6f8fa; }
main { max-width: 1360px; margin: 0 auto; padding: 16px 20px 40px; }
h1 { font-size: 22px; margin: 8px 0 12px; }
h2 { font-size: 18px; margin: 28px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 15px; margin: 18px 0 8px; }
.verdict { border-radius: 8px; padding: 14px 18px; font-size: 18px; border: 2px solid; }
.verdict.pass { background: var(--pass-bg); border-color: var(--pass); }
.verdict.fail { background: var(--fail-bg); border-color: var(--fail); }
.verdict strong { font-size: 26px; margin-right: 12px; }
.verdict.pass strong { color: var(--pass); } .verdict.fail strong { color: var(--fail); }
.verdict .facts { font-size: 14px; color: var(--muted); margin-top: 4px; }
table { border-collapse: collapse; background: #fff; margin: 6px 0 10px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f0f3f6; font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
td.pass, span.pass { background: var(--pass-bg); color: var(--pass); }
td.fail, span.fail { background: var(--fail-bg); color: var(--fail); font-weight: 600; }
td.unsupported, span.unsupported { background: var(--unsup-bg); color: var(--unsup); }
td.none { background: #fff; color: #bbb; }
span.badge { padding: 1px 7px; border-radius: 10px; font-size: 12px; font-weight: 600; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12.5px; }
pre { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; overflow-x: auto; margin: 6px 0; }
.cmd { user-select: all; -webkit-user-select: all; background: #1f2328; color: #f6f8fa; border-color: #1f2328;
       white-space: pre-wrap; word-break: break-all; }
.muted { color: var(--muted); }
.note { background: #fff8c5; border: 1px solid #d4a72c; border-radius: 6px; padding: 8px 12px; }
.plots { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 12px; }
figure.plot { margin: 0; background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 6px; }
figure.plot svg { width: 100%; height: auto; display: block; }
figure.plot figcaption { font-size: 12px; color: var(--muted); padding: 2px 4px; }
article.failure { background: #fff; border: 1px solid var(--line); border-left: 5px solid var(--fail); border-radius: 6px;
                  padding: 8px 14px; margin: 12px 0; }
article.failure h3 { margin-top: 4px; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 6px 0; }
dl.kv dt { color: var(--muted); } dl.kv dd { margin: 0; }
table.grid td { text-align: center; min-width: 42px; font-size: 12px; }
table.grid th.row { text-align: left; white-space: nowrap; }
table.grid th.col { writing-mode: vertical-rl; transform: rotate(180deg); white-space: nowrap; font-size: 12px; }
.legend span { margin-right: 10px; }
)css";

std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double x, int digits = 3) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "&infin;" : "&minus;&infin;";
  return fmt::format("{:.{}g}", x, digits);
}

std::string percent(int64_t part, int64_t whole) {
  if (whole <= 0) return "&ndash;";
  return fmt::format("{:.3g}%", 100.0 * double(part) / double(whole));
}

// Anchors of failures, by signature (audit cells and mutants link to them).
std::string failure_anchor(size_t i) { return fmt::format("failure-{}", i + 1); }

// The series in display order: O by dtype width, the LSE, then a backward
// kernel's gradients (each plotted on its own, error vs bound).
constexpr const char* kSeriesOrder[] = {"o.fp32", "o.bf16", "o.fp16", "o.e4m3", "lse", "dq", "dk", "dv"};
int series_rank(const std::string& s) {
  for (size_t i = 0; i < std::size(kSeriesOrder); ++i)
    if (s == kSeriesOrder[i]) return int(i);
  return int(std::size(kSeriesOrder));
}

std::string series_title(const std::string& s) {
  if (s == "lse") return "LSE (fp32)";
  if (s.starts_with("o.")) return "O in " + s.substr(2);
  if (s == "dq") return "dQ (backward, fp32)";
  if (s == "dk") return "dK (backward, fp32)";
  if (s == "dv") return "dV (backward, fp32)";
  return s;
}

class Page {
 public:
  Page(const Report& r, const HtmlOptions& o) : r_(r), options_(o) {
    for (size_t k = 0; k < r.kernels.size(); ++k) kernel_color_[r.kernels[k].name] = int(k);
    for (size_t i = 0; i < r.failures.size(); ++i) signature_anchor_.emplace(r.failures[i].signature, i);
    findings_ = group_findings(r.failures);
  }

  std::string render() {
    const std::string title = fmt::format("attnfuzz {} report: {}", r_.run.kind, r_.passed() ? "PASS" : "FAIL");
    out_ << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         << "<title>" << esc(title) << "</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n<main>\n";
    out_ << "<h1>" << esc(title) << "</h1>\n";
    verdict();
    kernels();
    classes();
    mutants();
    audits();
    statistics();
    findings();
    failures();
    errors();
    run_details();
    out_ << fmt::format("<p class=\"muted\">Written by attnfuzz {}; data: report.json (schema {} version {}); "
                        "CI views: junit.xml, results.sarif.</p>\n",
                        esc(r_.run.attnfuzz_version), kReportSchemaName, kReportSchemaVersion);
    out_ << "</main>\n</body>\n</html>\n";
    return out_.str();
  }

 private:
  // Sums of a kernel's cells.
  ReportCell kernel_total(const std::string& kernel) const {
    ReportCell t{kernel, "", 0, {}};
    for (const ReportCell& c : r_.cells)
      if (c.kernel == kernel) {
        t.cases += c.cases;
        for (size_t v = 0; v < t.by_verdict.size(); ++v) t.by_verdict[v] += c.by_verdict[v];
      }
    return t;
  }

  std::string status_cell(const ReportCell& c, bool with_counts) const {
    if (c.cases == 0) return "<td class=\"none\">&ndash;</td>";
    const int64_t run = c.cases - c.count(VerdictClass::Unsupported);
    if (c.failed() > 0)
      return fmt::format("<td class=\"fail n\" title=\"{}\">{} / {}</td>", esc(verdict_list(c)), c.failed(), run);
    if (run == 0) return fmt::format("<td class=\"unsupported n\">unsupported{}</td>", with_counts ? fmt::format(" ({})", c.cases) : "");
    return fmt::format("<td class=\"pass n\">0 / {}</td>", run);
  }

  // "numeric_mismatch 3, nan_inf 1"
  static std::string verdict_list(const ReportCell& c) {
    std::string s;
    for (int v = 0; v < kVerdictClassCount; ++v)
      if (is_failure(VerdictClass(v)) && c.by_verdict[size_t(v)])
        s += fmt::format("{}{} {}", s.empty() ? "" : ", ", verdict_name(VerdictClass(v)), c.by_verdict[size_t(v)]);
    return s;
  }

  void verdict() {
    const bool pass = r_.passed();
    int64_t kernel_runs = 0, failed_runs = 0;
    for (const ReportCell& c : r_.cells) {
      kernel_runs += c.cases;
      failed_runs += c.failed();
    }
    std::string headline;
    if (!r_.mutants.empty()) {
      const auto killed = std::count_if(r_.mutants.begin(), r_.mutants.end(), [](const ReportMutant& m) { return m.killed; });
      headline = fmt::format("{} of {} mutants killed", killed, r_.mutants.size());
    } else if (pass) {
      headline = fmt::format("no failures in {} cases on {} kernel{}", r_.run.cases, r_.kernels.size(),
                             r_.kernels.size() == 1 ? "" : "s");
    } else {
      headline = fmt::format("{} finding{} ({} failure signature{}: {} new, {} known) in {} failing case{}",
                             findings_.size(), findings_.size() == 1 ? "" : "s", r_.failures.size(),
                             r_.failures.size() == 1 ? "" : "s", r_.new_failures(), r_.known_failures(),
                             r_.failing_cases(), r_.failing_cases() == 1 ? "" : "s");
      if (!r_.errors.empty()) headline += fmt::format("; {} harness error{}", r_.errors.size(), r_.errors.size() == 1 ? "" : "s");
    }
    out_ << fmt::format("<div class=\"verdict {}\" id=\"verdict\"><strong>{}</strong>{}", pass ? "pass" : "fail",
                        pass ? "PASS" : "FAIL", esc(headline));
    out_ << fmt::format("<div class=\"facts\">{} {} &middot; {} cases &middot; {} kernel runs, {} failed &middot; seed {} "
                        "&middot; oracle {} &middot; {} s wall</div></div>\n",
                        esc(r_.run.kind), r_.run.started_utc.empty() ? "" : "started " + esc(r_.run.started_utc),
                        r_.run.cases, kernel_runs, failed_runs, r_.run.seed, esc(r_.run.oracle), num(r_.run.wall_s));
  }

  // The kernel's time, and where its library keeps a split, the compile share.
  static std::string kernel_time(const ReportKernel& k) {
    if (!k.split) return num(k.kernel_s);
    return fmt::format("{}<div class=\"muted\">compile {} ({} shapes), run {}, copies {}</div>", num(k.kernel_s),
                       num(k.split->compile_s), k.split->compile_calls, num(k.split->run_s), num(k.split->copy_s));
  }

  void kernels() {
    out_ << "<h2 id=\"kernels\">Kernels</h2>\n<table class=\"kernels\">\n<tr><th>kernel</th><th>origin</th>"
            "<th>conventions (masked row, empty LSE)</th><th class=\"n\">cases</th><th class=\"n\">pass</th>"
            "<th class=\"n\">unsupported</th><th class=\"n\">failed</th><th>failing verdicts</th>"
            "<th class=\"n\">signatures</th><th class=\"n\">max error / bound</th><th class=\"n\">kernel time (s)</th></tr>\n";
    for (const ReportKernel& k : r_.kernels) {
      const ReportCell t = kernel_total(k.name);
      const auto sigs = std::count_if(r_.failures.begin(), r_.failures.end(),
                                      [&](const ReportFailure& f) { return f.kernel == k.name; });
      double worst = 0;
      bool any_stats = false;
      for (const ReportErrorStats& e : r_.error_stats)
        if (e.kernel == k.name) {
          worst = std::isnan(e.stats.max_over_bound) ? e.stats.max_over_bound : std::max(worst, e.stats.max_over_bound);
          any_stats = true;
        }
      out_ << fmt::format("<tr><td><code>{}</code><div class=\"muted\">{}</div></td><td>{}</td><td>{}, {}</td>"
                          "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>{}<td>{}</td>"
                          "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
                          esc(k.name), esc(k.description), esc(k.origin), esc(k.masked_row_output), esc(k.empty_lse),
                          t.cases, t.count(VerdictClass::Pass), t.count(VerdictClass::Unsupported),
                          t.failed() ? fmt::format("<td class=\"fail n\">{}</td>", t.failed())
                                     : "<td class=\"pass n\">0</td>",
                          esc(verdict_list(t)), sigs, any_stats ? num(worst) : "&ndash;", kernel_time(k));
    }
    out_ << "</table>\n";
  }

  void classes() {
    out_ << "<h2 id=\"classes\">Adversarial classes</h2>\n<p class=\"muted\">Each cell: failing cases / cases the "
            "kernel ran (declined cases left out); hover a red cell for its verdicts.</p>\n<table class=\"classes\">\n"
            "<tr><th>class</th><th class=\"n\">weight</th><th class=\"n\">cases</th>";
    for (const ReportKernel& k : r_.kernels) out_ << "<th><code>" << esc(k.name) << "</code></th>";
    out_ << "</tr>\n";
    std::vector<std::pair<std::string, std::pair<int, int64_t>>> rows;
    std::set<std::string> named;
    for (const ReportGenerator& g : r_.generators) {
      rows.push_back({g.name, {g.weight, g.cases}});
      named.insert(g.name);
    }
    // Classes only the cells know (a replay's "corpus").
    for (const ReportCell& c : r_.cells)
      if (named.insert(c.generator).second) rows.push_back({c.generator, {0, -1}});
    for (const auto& [name, info] : rows) {
      int64_t cases = info.second;
      if (cases < 0) {
        cases = 0;
        for (const ReportCell& c : r_.cells)
          if (c.generator == name) cases = std::max(cases, c.cases);
      }
      out_ << fmt::format("<tr><th>{}</th><td class=\"n\">{}</td><td class=\"n\">{}</td>", esc(name),
                          info.first ? std::to_string(info.first) : "&ndash;", cases);
      for (const ReportKernel& k : r_.kernels) {
        const ReportCell* cell = nullptr;
        for (const ReportCell& c : r_.cells)
          if (c.kernel == k.name && c.generator == name) cell = &c;
        out_ << (cell ? status_cell(*cell, true) : "<td class=\"none\">&ndash;</td>");
      }
      out_ << "</tr>\n";
    }
    out_ << "</table>\n";
  }

  std::string failure_link(const std::string& signature, const std::string& text) const {
    auto it = signature_anchor_.find(signature);
    if (it == signature_anchor_.end()) return esc(text);
    return fmt::format("<a href=\"#{}\">{}</a>", failure_anchor(it->second), esc(text));
  }

  void mutants() {
    if (r_.mutants.empty()) return;
    out_ << "<h2 id=\"mutants\">Mutants</h2>\n<table class=\"mutants\">\n<tr><th>mutant</th><th>result</th>"
            "<th class=\"n\">cases run</th><th class=\"n\">cases to first kill</th><th class=\"n\">seconds to first kill</th>"
            "<th>verdict</th></tr>\n";
    for (const ReportMutant& m : r_.mutants) {
      out_ << fmt::format("<tr><td><code>{}</code></td>{}<td class=\"n\">{}</td><td class=\"n\">{}</td>"
                          "<td class=\"n\">{}</td><td>{}</td></tr>\n",
                          esc(m.kernel), m.killed ? "<td class=\"pass\">killed</td>" : "<td class=\"fail\">survived</td>",
                          m.cases, m.killed ? std::to_string(m.cases_to_kill) : "&ndash;",
                          m.killed ? num(m.seconds_to_kill) : "&ndash;",
                          m.killed ? failure_link(m.signature, std::string(verdict_name(m.verdict))) : "&ndash;");
    }
    out_ << "</table>\n";
  }

  void audits() {
    if (r_.audits.empty()) return;
    out_ << "<h2 id=\"audit\">Audit matrix</h2>\n<p class=\"legend\"><span class=\"badge pass\">pass</span>"
            "<span class=\"badge fail\">fail: verdict class</span><span class=\"badge unsupported\">unsupported</span>"
            " Rows: feature combinations; columns: adversarial classes; a failing cell links to its repro.</p>\n";
    for (const ReportAudit& a : r_.audits) {
      out_ << "<h3><code>" << esc(a.kernel) << "</code></h3>\n";
      if (!a.notes.empty()) {
        out_ << "<p>Notes (declared conventions that differ between the audited kernels; where the sweep "
                "stopped or skipped cells):</p>\n<ul class=\"notes\">";
        for (const std::string& note : a.notes) out_ << "<li>" << esc(note) << "</li>";
        out_ << "</ul>\n";
      }
      out_ << "<table class=\"grid audit\">\n<tr><th></th>";
      for (const std::string& col : a.columns) out_ << "<th class=\"col\">" << esc(col) << "</th>";
      out_ << "</tr>\n";
      std::map<std::pair<std::string, std::string>, const ReportAuditCell*> at;
      for (const ReportAuditCell& c : a.cells) at[{c.row, c.column}] = &c;
      for (const std::string& row : a.rows) {
        out_ << "<tr><th class=\"row\">" << esc(row) << "</th>";
        for (const std::string& col : a.columns) {
          auto it = at.find({row, col});
          if (it == at.end()) {
            out_ << "<td class=\"none\">&middot;</td>";
            continue;
          }
          const ReportAuditCell& c = *it->second;
          const std::string tip = fmt::format("{} x {}: {} ({} cases)", row, col, c.status, c.cases);
          if (c.status == "fail")
            out_ << fmt::format("<td class=\"fail\" title=\"{}\">{}</td>", esc(tip),
                                failure_link(c.signature, std::string(verdict_name(c.verdict))));
          else if (c.status == "pass")
            out_ << fmt::format("<td class=\"pass\" title=\"{}\">pass</td>", esc(tip));
          else
            out_ << fmt::format("<td class=\"unsupported\" title=\"{}\">&ndash;</td>", esc(tip));
        }
        out_ << "</tr>\n";
      }
      out_ << "</table>\n";
    }
  }

  // Median bin of a row histogram slice, as its centre (0 for exact zeros).
  static std::optional<double> median(const std::vector<int64_t>& counts) {
    int64_t total = 0;
    for (int64_t n : counts) total += n;
    if (total == 0) return std::nullopt;
    int64_t seen = 0;
    for (size_t b = 0; b < counts.size(); ++b) {
      seen += counts[b];
      if (2 * seen >= total) return kErrorAxis.center(int(b));
    }
    return std::nullopt;
  }

  void statistics() {
    out_ << "<h2 id=\"errors-stats\">Error statistics</h2>\n";
    if (r_.error_stats.empty()) {
      out_ << "<p class=\"muted\">This report carries no error statistics (no element was judged, or the run "
              "that wrote it did not collect them).</p>\n";
      return;
    }
    out_ << "<p class=\"muted\">Every judged element's error |kernel &minus; exact| in units of its own bound (a "
            "correct kernel stays below 1) and in ulps of the output dtype at the row's scale (its largest exact |o|; "
            "for the LSE the larger of |lse| and the row's largest |score|); for rows, the "
            "row's worst error / bound.</p>\n<table class=\"stats\">\n<tr><th>kernel</th><th>output</th>"
            "<th class=\"n\">elements</th><th class=\"n\">rows</th><th class=\"n\">exact</th>"
            "<th class=\"n\">&le; bound</th><th class=\"n\">max error / bound</th><th class=\"n\">max ulps (row scale)</th></tr>\n";
    std::vector<const ReportErrorStats*> sorted;
    for (const ReportErrorStats& e : r_.error_stats) sorted.push_back(&e);
    std::stable_sort(sorted.begin(), sorted.end(), [&](const ReportErrorStats* a, const ReportErrorStats* b) {
      return std::pair(series_rank(a->series), kernel_color_[a->kernel]) <
             std::pair(series_rank(b->series), kernel_color_[b->kernel]);
    });
    for (const ReportErrorStats* e : sorted) {
      const ErrorSeries& s = e->stats;
      int64_t within = 0;
      for (int b = 0; b < kErrorBins; ++b)
        if (kErrorAxis.upper(b) <= 1) within += s.over_bound[size_t(b)];
      out_ << fmt::format("<tr><td><code>{}</code></td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
                          "<td class=\"n\">{}</td><td class=\"n\">{}</td>{}<td class=\"n\">{}</td></tr>\n",
                          esc(e->kernel), esc(series_title(e->series)), s.elements, s.rows,
                          percent(s.over_bound[0], s.elements), percent(within, s.elements),
                          fmt::format("<td class=\"n {}\">{}</td>", s.max_over_bound > 1 ? "fail" : "pass",
                                      num(s.max_over_bound)),
                          num(s.max_ulps));
    }
    out_ << "</table>\n";
    plots(sorted);
  }

  void plots(const std::vector<const ReportErrorStats*>& sorted) {
    std::vector<std::string> series;
    for (const ReportErrorStats* e : sorted)
      if (std::find(series.begin(), series.end(), e->series) == series.end()) series.push_back(e->series);
    std::vector<Plot> plots;
    std::vector<std::string> captions;
    for (const std::string& s : series) {
      const std::string name = series_title(s);
      Plot bound{name + ": error in units of the bound", "error / bound (log)", "fraction of elements (log)",
                 true, true, 1.0, "bound", std::nullopt, {}};
      Plot ulps{name + ": error in ulps", "error in ulps of the output dtype at the row's scale (log)", "fraction of elements (log)",
                true, true, 1.0, "1 ulp", std::nullopt, {}};
      Plot position{name + ": row error vs position of the row maximum",
                    "position of the row's largest score among its visible keys (0 first, 1 last)",
                    "row's worst error / bound (log)", false, true, std::nullopt, "",
                    std::pair(0.0, 1.0), {}};
      Plot magnitude{name + ": row error vs score magnitude", "row's max |score| (log)",
                     "row's worst error / bound (log)", true, true, std::nullopt, "", std::nullopt, {}};
      for (const ReportErrorStats* e : sorted) {
        if (e->series != s) continue;
        const ErrorSeries& st = e->stats;
        const int color = kernel_color_[e->kernel];
        auto distribution = [&](const std::array<int64_t, kErrorBins>& h, Plot& plot) {
          PlotCurve c{fmt::format("{} ({} exact)", e->kernel, percent(h[0], st.elements)), {}, color, false};
          // percent() writes an HTML entity only for an empty series, never here.
          for (int b = 1; b < kErrorBins; ++b)
            if (h[size_t(b)]) c.points.push_back({kErrorAxis.center(b), double(h[size_t(b)]) / double(st.elements)});
          plot.curves.push_back(std::move(c));
        };
        distribution(st.over_bound, bound);
        distribution(st.ulps, ulps);
        PlotCurve pos_max{e->kernel + " max", {}, color, false}, pos_median{"", {}, color, true};
        for (int k = 0; k < kKeyPositionBins; ++k) {
          std::vector<int64_t> slice(kErrorBins, 0);
          for (int b = 0; b < kErrorBins; ++b) slice[size_t(b)] = st.key_position_count(k, b);
          const double x = (k + 0.5) / kKeyPositionBins;
          if (auto m = median(slice)) {
            pos_max.points.push_back({x, st.key_position_max[size_t(k)]});
            pos_median.points.push_back({x, *m});
          }
        }
        position.curves.push_back(std::move(pos_max));
        position.curves.push_back(std::move(pos_median));
        PlotCurve mag_max{e->kernel + " max", {}, color, false}, mag_median{"", {}, color, true};
        for (int k = 0; k < kScoreBins; ++k) {
          std::vector<int64_t> slice(kErrorBins, 0);
          for (int b = 0; b < kErrorBins; ++b) slice[size_t(b)] = st.score_count(k, b);
          if (auto m = median(slice)) {
            mag_max.points.push_back({kScoreAxis.center(k), st.score_max[size_t(k)]});
            mag_median.points.push_back({kScoreAxis.center(k), *m});
          }
        }
        magnitude.curves.push_back(std::move(mag_max));
        magnitude.curves.push_back(std::move(mag_median));
      }
      plots.push_back(std::move(bound));
      captions.push_back("Distribution of every judged element's error / bound; exact results (error 0) are "
                         "counted in the legend, not drawn. Right of the dashed line is a failure.");
      plots.push_back(std::move(ulps));
      captions.push_back(series_rank(s) > series_rank("lse")
                             ? "The same errors in ulps of fp32 at the element (gradients are fp32)."
                             : "The same errors in ulps of the output dtype at the row's scale.");
      // A gradient's series has no rows (a gradient element sums over rows
      // or keys): its error vs bound and ulps are the whole picture.
      if (std::find(kGradientNames.begin(), kGradientNames.end(), s) != kGradientNames.end()) continue;
      plots.push_back(std::move(position));
      captions.push_back("Rows binned by where their largest score sits (late maxima and partial last blocks on "
                         "the right); solid: worst row of the bin, dashed: median row.");
      plots.push_back(std::move(magnitude));
      captions.push_back("Rows binned by their largest |score| (exp overflow and cancellation on the right); "
                         "solid: worst row of the bin, dashed: median row.");
    }
    const PlotSet set = render_plots(plots, options_.gnuplot);
    out_ << "<h3 id=\"plots\">Plots</h3>\n";
    if (!set.error.empty()) {
      out_ << "<p class=\"note\" id=\"no-plots\">No plots: " << esc(set.error) << ". The numbers above are "
              "complete; `attnfuzz report render` draws the plots again where gnuplot is installed.</p>\n";
      return;
    }
    out_ << "<div class=\"plots\">\n";
    for (size_t i = 0; i < plots.size(); ++i) {
      out_ << "<figure class=\"plot\">";
      if (set.svgs[i].empty())
        out_ << "<p class=\"muted\">" << esc(plots[i].title) << ": nothing to draw (no nonzero values).</p>";
      else
        out_ << set.svgs[i];
      out_ << "<figcaption>" << esc(captions[i]) << "</figcaption></figure>\n";
    }
    out_ << "</div>\n";
  }

  void worst(const WorstElement& w) {
    if (!w.valid) {
      out_ << "<p class=\"muted\">No element was judged (the verdict came before any comparison).</p>\n";
      return;
    }
    out_ << "<table class=\"worst\"><tr><th>element</th><th>kernel</th><th>exact</th><th class=\"n\">error</th>"
            "<th class=\"n\">bound</th><th class=\"n\">ulps</th><th class=\"n\">error / bound</th></tr>\n";
    const std::string where = w.is_lse ? fmt::format("lse[b={} h={} i={}]", w.b, w.h, w.i)
                                       : fmt::format("o[b={} h={} i={} d={}]", w.b, w.h, w.i, w.x);
    out_ << fmt::format("<tr><td><code>{}</code></td><td><code>{}</code><br>{}</td><td><code>{}</code><br>{}</td>"
                        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
                        "<td class=\"n fail\">{}</td></tr>\n</table>\n",
                        where, fmt::format("{:a}", w.kernel), num(w.kernel, 9), fmt::format("{:a}", w.oracle),
                        num(w.oracle, 9), num(w.error), num(w.bound), num(w.ulps), num(w.over_bound));
  }

  // One row per distinct defect (findings.h): the summary a person reads
  // first; each links to its variants below.
  void findings() {
    if (findings_.empty()) return;
    out_ << "<h2 id=\"findings\">Findings</h2>\n<p class=\"muted\">Failure signatures grouped into distinct "
            "defects: per kernel, by the ingredients their minimized cases need (feature families, dtypes left "
            "out); verdicts, dtypes and size buckets are variants. The repro is the smallest variant's.</p>\n"
            "<table class=\"findings\">\n<tr><th>finding</th><th>kernel</th><th>status</th><th>verdicts</th>"
            "<th>needs</th><th class=\"n\">failing runs</th><th>variants</th><th class=\"n\">first case</th>"
            "<th>repro</th></tr>\n";
    for (const ReportFinding& g : findings_) {
      std::string variants;
      for (size_t i : g.failures)
        variants += fmt::format("{}<a href=\"#{}\">{}</a>", variants.empty() ? "" : " ", failure_anchor(i), i + 1);
      const ReportFailure& rep = r_.failures[g.representative];
      out_ << fmt::format("<tr><td><a href=\"#finding-{}\">{}</a></td><td><code>{}</code></td><td>{}</td>"
                          "<td class=\"fail\">{}</td><td>{}</td><td class=\"n\">{}</td><td>{}</td>"
                          "<td class=\"n\">{}</td><td>{}</td></tr>\n",
                          g.id, g.id, esc(g.kernel), esc(g.status), esc(verdicts_text(g)), esc(ingredients_text(g)),
                          g.occurrences, variants, g.first_case,
                          (rep.repro.empty() ? "&ndash;" : "<code>" + esc(rep.repro) + "</code>") +
                              (rep.alone.outcome.empty() ? "" : "<br>alone: " + esc(rep.alone.outcome)));
    }
    out_ << "</table>\n";
  }

  void failures() {
    out_ << "<h2 id=\"failures\">Failures</h2>\n";
    if (r_.failures.empty()) {
      out_ << "<p>None: every kernel run passed or was declined.</p>\n";
      return;
    }
    out_ << "<p class=\"muted\">One entry per failure signature (kernel, verdict, features, shape class), with "
            "the smallest repro found, under its finding; each finding's smallest variant is open. Click a command "
            "once to select all of it.</p>\n";
    for (const ReportFinding& g : findings_) {
      out_ << fmt::format("<h3 id=\"finding-{}\">{}: <code>{}</code> needs {}</h3>\n", g.id, g.id, esc(g.kernel),
                          esc(ingredients_text(g)));
      for (size_t i : g.failures) failure(i, i == g.representative);
    }
  }

  void failure(size_t i, bool open) {
    const ReportFailure& f = r_.failures[i];
    out_ << fmt::format("<article class=\"failure\" id=\"{}\">\n<h3>{}. <code>{}</code> &mdash; {} "
                        "<span class=\"badge fail\">{}</span></h3>\n",
                        failure_anchor(i), i + 1, esc(f.kernel), esc(verdict_name(f.verdict)), esc(f.status));
    out_ << "<dl class=\"kv\">";
    out_ << "<dt>detail</dt><dd>" << esc(f.detail) << "</dd>";
    out_ << "<dt>signature</dt><dd><code>" << esc(f.signature) << "</code></dd>";
    out_ << fmt::format("<dt>found</dt><dd>{} failing case{}; this repro from case {} of class {} (seed {})</dd>",
                        f.occurrences, f.occurrences == 1 ? "" : "s", f.case_index, esc(f.generator), f.seed);
    out_ << fmt::format("<dt>minimized</dt><dd>from {} to {} input elements in {} runs{}</dd>",
                        f.minimize.from_elements, f.minimize.to_elements, f.minimize.runs,
                        f.minimize.exhausted ? " (budget exhausted)" : "");
    if (!f.case_file.empty()) out_ << "<dt>case file</dt><dd><code>" << esc(f.case_file) << "</code></dd>";
    if (!f.alone.outcome.empty())
      out_ << fmt::format("<dt>alone</dt><dd class=\"{}\">{} ({:.1f} s, a fresh <code>attnfuzz repro</code>)</dd>",
                          f.alone.outcome == "fails" ? "fail" : "muted", esc(alone_summary(f.alone)), f.alone.seconds);
    out_ << "</dl>\n<div>worst element:</div>\n";
    worst(f.worst);
    out_ << "<div>reproduce:</div>\n";
    if (!f.repro.empty())
      out_ << "<pre class=\"cmd\">" << esc(f.repro) << "</pre>\n";
    else
      out_ << "<p class=\"muted\">No case file was saved (run with --corpus or --out); save the case below "
              "as a file and run <code>attnfuzz repro FILE</code>.</p>\n";
    out_ << "<details" << (open ? " open" : "") << "><summary>minimized case</summary>\n<pre class=\"case\">"
         << esc(f.case_text) << "</pre></details>\n</article>\n";
  }

  void errors() {
    if (r_.errors.empty()) return;
    out_ << "<h2 id=\"harness-errors\">Harness errors</h2>\n<p>Cases that could not be generated or run: a bug "
            "in attnfuzz or an unusable input, reported rather than hidden.</p>\n<ul>\n";
    for (const std::string& e : r_.errors) out_ << "<li><code>" << esc(e) << "</code></li>\n";
    out_ << "</ul>\n";
  }

  void run_details() {
    const ReportRun& run = r_.run;
    const ReportTiming& t = r_.timing;
    out_ << "<h2 id=\"run\">Run</h2>\n<dl class=\"kv\">";
    auto item = [&](const char* key, const std::string& value_html) {
      out_ << "<dt>" << key << "</dt><dd>" << value_html << "</dd>";
    };
    item("command", run.command.empty() ? "&ndash;" : "<pre class=\"cmd\">" + esc(run.command) + "</pre>");
    item("kind", esc(run.kind));
    item("seed", std::to_string(run.seed));
    item("cases", fmt::format("{} (indices {} to {}); limit {}; stopped by {}", run.cases, run.first_case,
                              run.first_case + run.cases - 1, run.case_limit >= 0 ? std::to_string(run.case_limit) : "none",
                              esc(run.stop_reason)));
    if (run.time_limit_s >= 0) item("time limit", num(run.time_limit_s) + " s");
    item("generator mix", "<code>" + esc(run.classes) + "</code>");
    item("oracle", esc(run.oracle));
    item("jobs", std::to_string(run.jobs));
    if (!run.corpus.empty()) item("corpus", "<code>" + esc(run.corpus) + "</code>");
    item("started", esc(run.started_utc));
    item("attnfuzz", esc(run.attnfuzz_version));
    out_ << "</dl>\n";
    out_ << fmt::format("<table class=\"timing\"><tr><th>generate (s)</th><th>oracle (s)</th><th>kernels (s)</th>"
                        "<th>judge (s)</th><th>minimize (s)</th><th>wall (s)</th><th>cases / s</th></tr>\n"
                        "<tr><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
                        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr></table>\n"
                        "<p class=\"muted\">Stage times are summed over worker threads; wall is elapsed time.</p>\n",
                        num(t.generate_s), num(t.oracle_s), num(t.kernel_s), num(t.judge_s), num(t.minimize_s),
                        num(t.wall_s), num(t.cases_per_second));
    out_ << "<h3>Verdict classes</h3>\n<table class=\"legend\">";
    for (const VerdictText& v : kVerdictTexts)
      out_ << "<tr><td><code>" << verdict_name(v.cls) << "</code></td><td>" << esc(v.meaning) << "</td></tr>";
    out_ << "</table>\n";
  }

  const Report& r_;
  const HtmlOptions& options_;
  std::ostringstream out_;
  std::map<std::string, int> kernel_color_;
  std::map<std::string, size_t> signature_anchor_;
  std::vector<ReportFinding> findings_;
};

}  // namespace

std::string report_to_html(const Report& r, const HtmlOptions& options) { return Page(r, options).render(); }

}  // namespace afz
