// Views of a Report (report.h) and operations on report folders.
//
// A report folder holds four files, all written from one Report:
//   report.json    the data (report_json.cpp), the input of everything else
//   report.html    one self-contained page for a person (report_html.cpp)
//   junit.xml      one testcase per kernel x generator class (report_junit.cpp)
//   results.sarif  SARIF 2.1.0, one result per failure signature (report_sarif.cpp)
// `attnfuzz report render DIR` rewrites the last three from report.json;
// `attnfuzz report merge DIR... --out DIR` combines folders (report_merge.cpp).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "harness/report/findings.h"
#include "harness/report/report.h"

namespace afz {

inline constexpr const char* kReportJsonFile = "report.json";
inline constexpr const char* kReportHtmlFile = "report.html";
inline constexpr const char* kJunitFile = "junit.xml";
inline constexpr const char* kSarifFile = "results.sarif";

struct HtmlOptions {
  // The gnuplot program: "" finds `gnuplot` on PATH (or the one named by the
  // environment variable ATTNFUZZ_GNUPLOT); a path that does not run leaves
  // the plots out and the page says why.
  std::string gnuplot;
};

std::string report_to_html(const Report& r, const HtmlOptions& options = {});
std::string report_to_junit(const Report& r);
std::string report_to_sarif(const Report& r);

// Writes report.json, report.html, junit.xml and results.sarif into dir
// (created if needed; each file atomically).  The one call every campaign,
// mutant run, replay and audit makes at its end.
bool write_report_folder(const Report& r, const std::string& dir, std::string* error,
                         const HtmlOptions& options = {});
// Reads dir/report.json.
std::optional<Report> read_report_folder(const std::string& dir, std::string* error);
// Rewrites report.html, junit.xml and results.sarif of dir from its report.json.
bool render_report_folder(const std::string& dir, std::string* error, const HtmlOptions& options = {});

// The size the campaign compares repros by: that of the failure's case
// text (a text that no longer parses, written by another version, counts
// by its element count).
CaseSize repro_size(const ReportFailure& f);

// The per-signature failures from the raw-signature ledger: for each raw
// signature its first occurrence (lowest case index; ties in kernel order),
// and for each signature, among its raw signatures' first occurrences taken
// in case order, the first of the smallest minimized cases (repro_size);
// occurrences add up and the status is the first's.  This is the campaign's
// own rule, so consolidating merged shards gives what one run of the same
// cases gives.
std::vector<ReportFailure> consolidate_failures(std::vector<ReportFailure> raw,
                                                const std::vector<std::string>& kernel_order);

// Combines reports of shards or machines into one.  Campaign shards must
// share seed, generator mix, oracle and kernels and cover disjoint cases.
// Counts, per-case verdicts, error statistics and audit cells add up;
// failures are consolidated per signature (exactly, from raw_failures, when
// every part's ledger is complete; otherwise the smallest repro per signature
// is kept and occurrences add up); timings add up except wall times, which are the longest part's.
// nullopt and a one-line *error for parts that do not belong together.
std::optional<Report> merge_reports(std::vector<Report> parts, std::string* error);

}  // namespace afz
