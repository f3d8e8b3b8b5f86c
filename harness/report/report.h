// The report data model: everything a campaign, a mutant run, a replay or
// an audit learned, independent of how it is shown.  report.json is its
// direct serialization (report_json.cpp); the HTML page, JUnit XML, SARIF
// and `report merge` are further views of the same struct.
//
// Size: a report is bounded by what was found, not by how long the run
// took.  A case is a function of (seed, index), so the report records
// occurrences by case index and count, never by case text: per-case verdicts
// for the first kCaseRecordLimit cases only, the raw-signature ledger up to
// kRawSignatureLimit entries without case texts, and one case text per
// failure signature (reports/README.md states the bound; campaign_test
// checks it).
//
// report.json, schema "attnfuzz-report" version 2 (kReportSchemaVersion):
//   schema:     "attnfuzz-report"
//   schema_version: 2 (readers also take 1)
//   run:        kind (campaign | replay | mutants | audit), command, attnfuzz_version,
//               started_utc, seed, first_case, cases, case_limit (-1: none),
//               time_limit_s (-1: none), stop_reason (cases | time | corpus | kills | failures |
//               running: a checkpoint written while the campaign runs |
//               signal: SIGINT or SIGTERM asked it to stop, stop_request.h),
//               jobs, oracle, classes ("name=weight,..."), corpus, wall_s,
//               determinism {share, reruns} (version 2: 1 in `share` cases, chosen by
//               (seed, index), ran twice and had to give identical bits; reruns counts them)
//   kernels:    [{name, origin, description, conventions {masked_row_output: zero|nan,
//               empty_lse: -inf|+inf|nan}, kernel_s, split (optional: {calls, compile_calls,
//               compile_s, run_s, copy_s}, the library's own split of kernel_s, e.g. the Python
//               bridge's first calls per shape, compilation included), pass (optional: "bwd"
//               for a backward kernel's dQ, dK, dV, named "NAME [bwd]")}]
//   generators: [{name, weight, cases}]
//   counts:     [{kernel, generator, cases, pass, unsupported, failed,
//               by_verdict {VERDICT: n, ...}}]  one per kernel x class that ran
//   failures:   [{kernel, verdict, pass (optional: "bwd"), gradient (optional: dq | dk | dv, the
//               backward failure's gradient), signature, raw_signature, status (new | smaller | known),
//               generator, seed, case_index, occurrences, detail, worst {...},
//               case_file, repro, case_text, minimize {from_elements, to_elements,
//               runs, seconds, exhausted}, alone (optional: --confirm-alone) {outcome (fails |
//               fails_differently | passes | unsupported | not_run), line, seconds}}]  one per
//               failure signature
//   findings:   [{id, kernel, needs [family, ...], features [..], status, verdicts [..],
//               occurrences, first_case, signatures [..], representative}]  (version 2) the failures
//               grouped into distinct defects (findings.h); a function of `failures`
//   timing:     {generate_s, oracle_s, kernel_s, judge_s, minimize_s, wall_s, cases_per_second}
//   cases:      [{i, g, v: [VERDICT per kernel, in the order of `kernels`]}]  the first
//               kCaseRecordLimit cases (an audit records only its failing sweep cases: its
//               matrix and counts hold the rest)
//   errors:     ["one line", ...]   cases that could not be generated or run
//   summary:    {verdict: pass | fail, new_failures, known_failures, failing_cases, findings}
// Added in version 1 (optional; absent in older files):
//   raw_failures: [failure, ...]  the raw-signature ledger: one per raw signature (of the case
//               as generated), its first occurrence minimized, with occurrences counting that
//               raw signature only; at most kRawSignatureLimit entries (version 2).  `failures`
//               is a function of this list (consolidate_failures in report_views.h) while it is
//               complete, which is what makes merging shards exact.
//   raw_failures_complete: false once a raw signature was left out of raw_failures (version 2)
//   error_stats: {axes {error {lo_exp, hi_exp}, score {lo_exp, hi_exp}, key_position_bins},
//               series: [{kernel, series (o.fp16 | o.bf16 | o.fp32 | o.e4m3 | lse, or a backward
//               kernel's dq | dk | dv: per element only, rows 0), elements, rows,
//               max_over_bound, max_ulps, over_bound [[bin, n]], ulps [[bin, n]],
//               by_key_position [[key_bin, error_bin, n]], key_position_max [[key_bin, max]],
//               by_score [[score_bin, error_bin, n]], score_max [[score_bin, max]]}]}
//               sparse histograms (zero counts left out) on the axes of error_stats.h;
//               a maximum that is not finite is the string "inf" or "nan".  Ulps are
//               taken at the row's scale (version 2; at the exact element in version 1).
//   audits:     [{kernel, rows [..], columns [..], cells [{row, column, status (pass | fail |
//               unsupported), verdict, cases, signature}], notes ["one line", ...]}]   the audit
//               matrix; notes (optional): where the audited kernels' declared conventions differ
//               ("conventions differ: ..."), where the sweep stopped or skipped cells
//   mutants:    [{kernel, killed, cases, cases_to_kill, seconds_to_kill, verdict, signature}]
// Verdict names are verdict_name()'s.  Floating-point values that must stay
// exact or may be non-finite (worst element values) are written twice:
// as a JSON number (null when not finite) and as a C99 hex string.
// Readers must ignore keys they do not know; a change that removes or
// retypes a key bumps schema_version.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/case/case_features.h"
#include "harness/judge/verdict.h"

namespace afz {

inline constexpr int kReportSchemaVersion = 2;
inline constexpr const char* kReportSchemaName = "attnfuzz-report";
inline constexpr const char* kAttnfuzzVersion = "0.1.0";
// The bounds that keep a report's size a function of what was found: per-case
// verdicts of the first cases only (the counts hold every case), and a
// raw-signature ledger that stops growing once a run has met this many raw
// signatures (each entry a failure record of a kilobyte or two; merging
// shards stays exact while no part exceeds it).
inline constexpr size_t kCaseRecordLimit = 64;
inline constexpr size_t kRawSignatureLimit = 32;
// VerdictClass runs from Pass to Hang (the most severe, last).
inline constexpr int kVerdictClassCount = int(VerdictClass::Hang) + 1;

struct ReportRun {
  std::string kind = "campaign";
  std::string command;
  std::string attnfuzz_version = kAttnfuzzVersion;
  std::string started_utc;      // ISO 8601, e.g. 2025-01-31T12:00:00Z
  uint64_t seed = 0;
  int64_t first_case = 0;
  int64_t cases = 0;            // cases run
  int64_t case_limit = -1;
  double time_limit_s = -1;
  std::string stop_reason;
  int jobs = 1;
  std::string oracle;
  std::string classes;
  std::string corpus;
  double wall_s = 0;
  // Determinism without a flag: 1 in `rerun_share` cases (0: none) ran twice
  // per kernel; `reruns` counts those kernel runs (determinism.h).
  int rerun_share = 0;
  int64_t reruns = 0;
};

// A library's own split of a kernel's time over the run (afz_kernel_timing):
// calls compiled for a new shape apart from the others, and the copies.
struct ReportKernelSplit {
  int64_t calls = 0, compile_calls = 0;
  double compile_s = 0, run_s = 0, copy_s = 0;
};

struct ReportKernel {
  std::string name, origin, description;
  std::string masked_row_output;  // "zero" | "nan"
  std::string empty_lse;          // "-inf" | "+inf" | "nan"
  double kernel_s = 0;
  std::optional<ReportKernelSplit> split;  // only from libraries that keep one
  // "bwd": a backward kernel's dQ, dK, dV (its name then reads "NAME [bwd]",
  // so it stays apart from a forward kernel of the same name); "" forward.
  std::string pass;
};

// The split over a run: the library's totals at its end less those at its start.
std::optional<ReportKernelSplit> split_between(const std::optional<afz_kernel_timing>& start,
                                               const std::optional<afz_kernel_timing>& end);

struct ReportGenerator {
  std::string name;
  int weight = 0;
  int64_t cases = 0;
};

// Verdict counts of one kernel over one generator class.
struct ReportCell {
  std::string kernel, generator;
  int64_t cases = 0;
  std::array<int64_t, kVerdictClassCount> by_verdict{};
  int64_t count(VerdictClass c) const { return by_verdict[size_t(c)]; }
  int64_t failed() const;
};

struct ReportMinimize {
  int64_t from_elements = 0, to_elements = 0;
  int runs = 0;
  double seconds = 0;
  bool exhausted = false;
};

// One failure signature: its minimized repro and how it was found.
// A failure's repro run by itself (--confirm-alone): `attnfuzz repro` in a
// fresh process, so no earlier case's state (a library's cached plans, the
// memory its allocator hands back) is there.  A failure that does not fail
// alone is state-dependent: real, but not yet a one-line repro.
struct ReportAlone {
  // "" (not run alone) | fails (the same verdict; a crash of the same kind)
  // | fails_differently | passes | unsupported | not_run (no verdict: see line)
  std::string outcome;
  std::string line;   // the repro's verdict line, or why it gave none
  double seconds = 0;
};

struct ReportFailure {
  std::string kernel;
  VerdictClass verdict = VerdictClass::Pass;
  std::string pass;             // "bwd": a backward kernel's ("NAME [bwd]"); "" forward
  std::string gradient;         // a backward failure's gradient: "dq", "dk", "dv" ("" when none is named)
  std::string signature;        // of the minimized case
  std::string raw_signature;    // of the case as generated
  std::string status;           // new | smaller | known
  std::string generator;
  uint64_t seed = 0;
  int64_t case_index = -1;      // -1: not from this run's generator (replay)
  int64_t occurrences = 0;      // failing cases of this run with this signature
  std::string detail;
  WorstElement worst;
  std::string case_file;        // where the repro is saved ("" if nowhere)
  std::string repro;            // the exact command
  std::string case_text;        // the minimized case file
  ReportMinimize minimize;
  ReportAlone alone;
  bool is_new() const { return status == "new"; }
};

// Per-case verdicts, the raw material of counts and of merging shards.
struct ReportCase {
  int64_t index = 0;
  std::string generator;
  std::vector<VerdictClass> verdicts;  // per kernel, in Report::kernels order
};

// Error statistics of one kernel over one output series, summed over every
// judged case.
struct ReportErrorStats {
  std::string kernel;
  std::string series;  // "o.<dtype>" for O in its output dtype, "lse" for the fp32 LSE
  ErrorSeries stats;
};

// One cell of an audit matrix: a feature combination (row) under an
// adversarial class (column).
struct ReportAuditCell {
  std::string row, column;
  std::string status;  // pass | fail | unsupported
  VerdictClass verdict = VerdictClass::Pass;  // the most severe seen
  int64_t cases = 0;
  std::string signature;  // the failure's (failures[].signature) when status is fail
};

struct ReportAudit {
  std::string kernel;
  std::vector<std::string> rows, columns;  // display order
  std::vector<ReportAuditCell> cells;
  // One line each: where the audited kernels' declared conventions differ
  // ("conventions differ: ...", the same lines in every kernel's matrix of
  // one audit), and where the sweep stopped, skipped cells or spent a budget.
  std::vector<std::string> notes;
  // Why the kernel declined cases: reason -> cases, the most frequent
  // kMaxUnsupportedReasons kept (the rest counted under kOtherReasons), so a
  // matrix's "unsupported" says which capability or library check cut it.
  std::map<std::string, int64_t> unsupported_reasons;
  static constexpr size_t kMaxUnsupportedReasons = 16;
  static constexpr const char* kOtherReasons = "(other reasons)";
  void count_unsupported(const std::string& reason);
};

// One mutant of a mutant run: killed or survived.
struct ReportMutant {
  std::string kernel;
  bool killed = false;
  int64_t cases = 0;             // cases run against it
  int64_t cases_to_kill = -1;    // cases up to and including the first kill; -1: survived
  double seconds_to_kill = -1;
  VerdictClass verdict = VerdictClass::Pass;  // of the first kill
  std::string signature;         // of the first kill
};

struct ReportTiming {
  double generate_s = 0, oracle_s = 0, kernel_s = 0, judge_s = 0, minimize_s = 0, wall_s = 0;
  double cases_per_second = 0;
};

struct Report {
  ReportRun run;
  std::vector<ReportKernel> kernels;
  std::vector<ReportGenerator> generators;
  std::vector<ReportCell> cells;
  std::vector<ReportFailure> failures;
  ReportTiming timing;
  std::vector<ReportCase> cases;
  std::vector<std::string> errors;
  std::vector<ReportFailure> raw_failures;  // the ledger, at most kRawSignatureLimit entries
  bool raw_failures_complete = true;        // false once a raw signature was left out
  // Cases with at least one failing kernel, when `cases` does not hold them
  // all (a campaign past kCaseRecordLimit cases, a merge); else counted there.
  std::optional<int64_t> failing_case_count;
  std::vector<ReportErrorStats> error_stats;  // sorted by (kernel, series)
  std::vector<ReportAudit> audits;
  std::vector<ReportMutant> mutants;

  ReportCell& cell(const std::string& kernel, const std::string& generator);
  // Adds a judged case's statistics to the kernel's series.
  void add_error_stats(const std::string& kernel, const Verdict& v);
  // Per-case verdicts up to kCaseRecordLimit; later cases are left out (the
  // recorder sets failing_case_count).
  void record_case(ReportCase c);
  // The ledger of raw signatures: the first occurrence of each, minimized
  // (occurrences 1), then one count per later occurrence.  Past
  // kRawSignatureLimit entries a new raw signature is left out and the
  // ledger is incomplete.
  void note_raw_failure(const ReportFailure& f);
  void count_raw_occurrence(const std::string& raw_signature);
  // Appends another run's ledger (a mutant run's campaigns, an audit's fuzz
  // phase), within the same limit.
  void append_raw_failures(const Report& other);
  int64_t new_failures() const;
  int64_t known_failures() const;
  int64_t failing_cases() const;  // cases where at least one kernel failed
  // A mutant run (run.kind "mutants") is the other way round: its failures
  // are the kills it wants, and it passes when every mutant was killed.
  bool passed() const {
    if (run.kind == "mutants") {
      for (const ReportMutant& m : mutants)
        if (!m.killed) return false;
      return !mutants.empty() && errors.empty();
    }
    return failures.empty() && errors.empty();
  }
};

std::optional<VerdictClass> parse_verdict_name(std::string_view name);

// report.json text (2-space indented, keys in schema order).
std::string report_to_json(const Report& r);
// Reads report.json back (for merge and tests).  nullopt and a one-line
// *error for malformed text, another schema or a newer schema version.
std::optional<Report> report_from_json(std::string_view text, std::string* error);
// Writes DIR/report.json atomically, creating DIR.
bool write_report_json(const Report& r, const std::string& dir, std::string* error);

}  // namespace afz
