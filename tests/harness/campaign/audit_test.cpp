// The audit: every feature row x class cell is a valid case with the row's
// features; declined cells are unsupported, never failures; failing cells
// get minimized repros in the corpus that fail again as they are; the
// matrix does not depend on --jobs; conventions that differ are noted.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "harness/campaign/audit.h"
#include "harness/campaign/corpus.h"
#include "harness/case/case_file.h"
#include "harness/report/report_views.h"
#include "harness/run/backward_runner.h"
#include "kernels/cpu/backward_kernels.h"
#include "tests/harness/report/json_schema.h"
#include "tests/harness/report/report_fixture.h"
#include "tests/temp_dir.h"

namespace afz {
namespace {

// A kernel like `base` that claims only bf16 and head dim 64: its sweep has
// 1 x 1 x 8 masks x 2 x 2 x 5 layouts = 160 rows, 1280 cells.
afz_kernel narrow(const afz_kernel& base, const char* name, uint32_t drop_flags = 0) {
  afz_kernel k = base;
  k.name = name;
  k.caps.in_dtypes = k.caps.out_dtypes = 1u << AFZ_BF16;
  k.caps.min_head_dim = k.caps.max_head_dim = 64;
  k.caps.flags &= ~drop_flags;
  return k;
}

constexpr size_t kNarrowRows = 160;
constexpr int kShards = 32;  // 5 rows x every class each
constexpr int kNoMaskShard = 0;     // rows 0-4: nomask mha fixed, every layout
constexpr int kAddNegInfShard = 20; // rows 100-104: add_-inf mha fixed

AuditOptions slot_options(std::vector<CampaignKernel> kernels, int shard, const std::string& corpus = "") {
  AuditOptions o;
  o.kernels = std::move(kernels);
  o.seed = 3;
  o.time_s = 0;  // the sweep only: no fuzz phase
  o.shard = shard;
  o.shards = kShards;
  o.corpus_dir = corpus;
  o.minimize_options.max_runs = 30;  // by runs only: the result must not depend on the machine
  o.minimize_options.max_seconds = 1e9;
  o.command = "audit tests";
  o.interleave_cells = false;  // shards of known rows
  return o;
}

AuditOptions options(std::vector<const afz_kernel*> kernels, int shard, const std::string& corpus = "") {
  std::vector<CampaignKernel> slots;
  for (const afz_kernel* k : kernels) slots.push_back({k, "builtin"});
  return slot_options(std::move(slots), shard, corpus);
}

TEST(AuditRows, CrossEveryAxisTheKernelsClaim) {
  const afz_kernel& full = testing::correct_kernel();  // fp32/fp16/bf16, head dims 1..1024
  const std::vector<AuditRow> rows = audit_rows({&full});
  // 3 dtypes x (8, 64, 128, 256, 33) x 8 masks x gqa x varlen x 5 layouts.
  EXPECT_EQ(rows.size(), 3u * 5 * 8 * 2 * 2 * 5);
  std::vector<std::string> names;
  for (const AuditRow& r : rows) names.push_back(r.name());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::unique(names.begin(), names.end()), names.end()) << "row names must be unique";
  EXPECT_NE(std::find(names.begin(), names.end(), "bf16 d33 causal_br gqa varlen kv_stride0"), names.end());

  const afz_kernel k = narrow(full, "narrow");
  EXPECT_EQ(audit_rows({&k}).size(), kNarrowRows);
  // Multiples of 8 from 8 to 256: the odd size is 72, not 33.
  afz_kernel eights = full;
  eights.caps.head_dim_multiple = 8;
  eights.caps.max_head_dim = 256;
  const std::vector<AuditRow> e = audit_rows({&eights});
  EXPECT_TRUE(std::any_of(e.begin(), e.end(), [](const AuditRow& r) { return r.head_dim == 72; }));
  EXPECT_FALSE(std::any_of(e.begin(), e.end(), [](const AuditRow& r) { return r.head_dim == 33; }));
}

// Every cell's case validates, carries its row's features and fits the
// sweep's budget, for every class.
TEST(AuditRows, CellCasesCarryTheirRowsFeatures) {
  const afz_kernel& full = testing::correct_kernel();
  const std::vector<AuditRow> rows = audit_rows({&full});
  // Every 7th row (7 is prime to every axis length): all values of every axis.
  size_t checked = 0;
  for (size_t r = 0; r < rows.size(); r += 7) {
    const AuditRow& row = rows[r];
    for (const GeneratorDef& g : generator_table()) {
      const Case c = audit_cell_case(5, r, row, g, 0, 1);
      SCOPED_TRACE(row.name() + " x " + g.name);
      const std::optional<ParseError> bad = validate_case(c);
      ASSERT_FALSE(bad) << bad->field << ": " << bad->message;
      EXPECT_EQ(c.in_dtype, row.dtype);
      EXPECT_EQ(c.head_dim, row.head_dim);
      EXPECT_EQ(c.heads_q != c.heads_kv, row.gqa);
      EXPECT_EQ(c.batch > 1, row.varlen);
      EXPECT_EQ(c.has_window, row.mask == MaskKind::CausalTopLeft || row.mask == MaskKind::CausalBottomRight ||
                                  row.mask == MaskKind::Window);
      EXPECT_EQ(c.bool_mask.has_value(), row.mask == MaskKind::Bool);
      EXPECT_EQ(c.add_mask.has_value(), row.mask >= MaskKind::AddNegInf);
      EXPECT_EQ(c.layout == Layout::PackedQKV, row.layout == LayoutKind::PackedQkv);
      EXPECT_EQ(c.layout == Layout::BSHD, row.layout == LayoutKind::Bshd);
      EXPECT_EQ(c.row_gap > 0, row.layout == LayoutKind::RowGaps);
      EXPECT_EQ(c.kv_broadcast != KvBroadcast::None, row.layout == LayoutKind::KvBroadcast);
      EXPECT_LE(case_work(c), std::string_view(g.name) == "flat" ? int64_t{1} << 20 : int64_t{1} << 18);
      ++checked;
    }
  }
  EXPECT_EQ(checked, (rows.size() + 6) / 7 * generator_table().size());
}

TEST(Audit, DeclinedCellsAreUnsupportedNeverFailures) {
  const afz_kernel no_add = narrow(testing::mutant_kernel(), "mutant.no_add_mask", AFZ_CAP_ADD_MASK);
  const Runner runner(RunOptions{});
  const Report r = run_audit(options({&no_add}, kAddNegInfShard), runner);
  ASSERT_EQ(r.audits.size(), 1u);
  EXPECT_EQ(r.audits[0].rows.size(), kNarrowRows);
  ASSERT_EQ(r.audits[0].cells.size(), kNarrowRows * generator_table().size() / kShards);
  for (const ReportAuditCell& c : r.audits[0].cells) {
    EXPECT_EQ(c.status, "unsupported") << c.row << " x " << c.column;
    EXPECT_NE(c.row.find("add_-inf"), std::string::npos);
  }
  EXPECT_TRUE(r.failures.empty());
  EXPECT_TRUE(r.passed());
  // Each declined case is tallied under its reason, and the summary names it.
  const std::map<std::string, int64_t> expected_reasons{
      {"additive mask (AFZ_CAP_ADD_MASK)", int64_t(r.audits[0].cells.size())}};
  EXPECT_EQ(r.audits[0].unsupported_reasons, expected_reasons);
  const std::vector<std::string> summary = audit_summary(r);
  EXPECT_TRUE(std::any_of(summary.begin(), summary.end(), [&](const std::string& line) {
    return line == fmt::format("  unsupported cases by reason: {} x additive mask (AFZ_CAP_ADD_MASK)",
                               r.audits[0].cells.size());
  })) << fmt::format("{}", fmt::join(summary, "\n"));

  // Several cases per cell: still one matrix cell each, counting them all.
  AuditOptions three = options({&no_add}, kAddNegInfShard);
  three.cases_per_cell = 3;
  const Report r3 = run_audit(three, runner);
  ASSERT_EQ(r3.audits[0].cells.size(), kNarrowRows * generator_table().size() / kShards);
  for (const ReportAuditCell& c : r3.audits[0].cells) EXPECT_EQ(c.cases, 3);
  EXPECT_EQ(r3.run.cases, int64_t(3 * r3.audits[0].cells.size()));
}

// --sweep-time: a sweep past its time stops at a chunk boundary, and each
// matrix says how many cells were not run (here: all after the first chunk).
TEST(Audit, SweepTimeStopsTheSweepAndSaysWhatWasNotRun) {
  const afz_kernel k = narrow(testing::mutant_kernel(), "mutant.narrow");
  const Runner runner(RunOptions{});
  AuditOptions o = options({&k}, kNoMaskShard);
  o.sweep_time_s = 1e-9;
  const Report r = run_audit(o, runner);
  ASSERT_EQ(r.audits.size(), 1u);
  EXPECT_TRUE(r.audits[0].cells.empty());
  ASSERT_EQ(r.audits[0].notes.size(), 1u);
  const size_t cells = kNarrowRows * generator_table().size() / kShards;
  EXPECT_EQ(r.audits[0].notes[0],
            fmt::format("sweep stopped by --sweep-time 0 s after 0 of {} cells: {} cells not run", cells, cells));
}

// The default order reaches every part of the matrix early: the first
// shard's cells span many rows (row by row they would be 5), and the report
// lists them in matrix order all the same.
TEST(Audit, InterleavedSweepSpreadsItsFirstCellsOverTheMatrix) {
  const afz_kernel k = narrow(testing::mutant_kernel(), "mutant.narrow");
  const Runner runner(RunOptions{});
  AuditOptions o = options({&k}, kNoMaskShard);
  o.interleave_cells = true;
  const Report r = run_audit(o, runner);
  const ReportAudit& a = r.audits[0];
  ASSERT_EQ(a.cells.size(), kNarrowRows * generator_table().size() / kShards);
  std::set<std::string> rows;
  for (const ReportAuditCell& c : a.cells) rows.insert(c.row);
  EXPECT_GE(rows.size(), 30u);
  std::map<std::string, size_t> row_at;
  for (size_t i = 0; i < a.rows.size(); ++i) row_at.emplace(a.rows[i], i);
  for (size_t i = 1; i < a.cells.size(); ++i) EXPECT_LE(row_at[a.cells[i - 1].row], row_at[a.cells[i].row]);
}

// The mutant (accumulator never rescaled) fails cells; each failing cell
// names a failure whose saved repro fails again as it is; the correct kernel
// audited beside it passes every cell; the matrix is the same with 2 jobs.
TEST(Audit, FailingCellsHaveRepros) {
  const afz_kernel good = narrow(testing::correct_kernel(), "good");
  const afz_kernel bad = narrow(testing::mutant_kernel(), "bad");
  const std::string corpus = testing::temp_folder("audit-corpus");
  const Runner runner(RunOptions{});
  const Report r = run_audit(options({&good, &bad}, kNoMaskShard, corpus), runner);
  ASSERT_EQ(r.audits.size(), 2u);
  EXPECT_EQ(r.run.kind, "audit");
  for (const ReportAuditCell& c : r.audits[0].cells) EXPECT_EQ(c.status, "pass") << c.row << " x " << c.column;
  int failing = 0;
  for (const ReportAuditCell& c : r.audits[1].cells) {
    if (c.status != "fail") continue;
    ++failing;
    EXPECT_TRUE(is_failure(c.verdict));
    const auto f = std::find_if(r.failures.begin(), r.failures.end(),
                                [&](const ReportFailure& x) { return x.signature == c.signature; });
    ASSERT_NE(f, r.failures.end()) << "cell " << c.row << " x " << c.column << " names no failure";
    std::string error;
    const std::optional<Case> saved = load_case_file(f->case_file, &error);
    ASSERT_TRUE(saved) << error;
    EXPECT_EQ(saved->kernel, "bad");
    EXPECT_EQ(f->repro, "attnfuzz repro " + f->case_file);
    EXPECT_TRUE(is_failure(runner.run(bad, *saved).verdict.cls)) << f->case_file;
  }
  EXPECT_GT(failing, 0) << "the late_max column should catch the missing rescale";
  EXPECT_FALSE(r.passed());

  AuditOptions two_jobs = options({&good, &bad}, kNoMaskShard);
  two_jobs.jobs = 2;
  const Report again = run_audit(two_jobs, runner);
  ASSERT_EQ(again.audits.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_EQ(again.audits[k].cells.size(), r.audits[k].cells.size());
    for (size_t i = 0; i < r.audits[k].cells.size(); ++i) {
      EXPECT_EQ(again.audits[k].cells[i].status, r.audits[k].cells[i].status);
      EXPECT_EQ(again.audits[k].cells[i].signature, r.audits[k].cells[i].signature);
    }
  }
}

// Past the minimization budget, new failures keep their cases as generated
// (still failing repros), the matrix says how many, and the cells are the
// same as with unlimited minimization.
TEST(Audit, MinimizationBudgetKeepsTheSweepGoing) {
  const afz_kernel bad = narrow(testing::mutant_kernel(), "bad");
  const Runner runner(RunOptions{});
  const Report unlimited = run_audit(options({&bad}, kNoMaskShard), runner);
  AuditOptions o = options({&bad}, kNoMaskShard, testing::temp_folder("audit-budget"));
  o.minimize_budget_s = 1e-9;  // spent by the first minimization
  const Report r = run_audit(o, runner);
  ASSERT_GE(r.failures.size(), 2u);
  EXPECT_LT(r.failures[0].minimize.to_elements, r.failures[0].minimize.from_elements);
  int64_t kept = 0;
  for (size_t i = 1; i < r.failures.size(); ++i) {
    EXPECT_EQ(r.failures[i].minimize.to_elements, r.failures[i].minimize.from_elements);
    std::string error;
    const std::optional<Case> saved = load_case_file(r.failures[i].case_file, &error);
    ASSERT_TRUE(saved) << error;
    EXPECT_TRUE(is_failure(runner.run(bad, *saved).verdict.cls)) << r.failures[i].case_file;
    ++kept;
  }
  ASSERT_FALSE(r.audits[0].notes.empty());
  // Each failure past the first came from a raw signature that was not minimized.
  const std::string& note = r.audits[0].notes.back();
  const std::string prefix = "minimization budget of 1e-09 s spent: ";
  ASSERT_EQ(note.rfind(prefix, 0), 0u) << note;
  EXPECT_GE(std::stoll(note.substr(prefix.size())), kept) << note;
  EXPECT_NE(note.find(" new raw signatures kept their cases as generated"), std::string::npos) << note;
  ASSERT_EQ(r.audits[0].cells.size(), unlimited.audits[0].cells.size());
  for (size_t i = 0; i < r.audits[0].cells.size(); ++i)
    EXPECT_EQ(r.audits[0].cells[i].status, unlimited.audits[0].cells[i].status);
}

TEST(Audit, NotesWhereDeclaredConventionsDiffer) {
  afz_kernel zero = narrow(testing::correct_kernel(), "zero_rows", AFZ_CAP_ADD_MASK);
  afz_kernel nan_rows = zero;
  nan_rows.name = "nan_rows";
  nan_rows.conventions.masked_row_output = AFZ_MASKED_ROW_NAN;
  nan_rows.conventions.empty_lse = AFZ_EMPTY_LSE_POS_INF;
  EXPECT_TRUE(convention_differences({&zero, &zero}).empty());
  const std::vector<std::string> notes = convention_differences({&zero, &nan_rows});
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0], "masked row output: nan (nan_rows); zero (zero_rows)");
  EXPECT_EQ(notes[1], "LSE of an empty row: +inf (nan_rows); -inf (zero_rows)");

  const Runner runner(RunOptions{});
  const Report r = run_audit(options({&zero, &nan_rows}, kAddNegInfShard), runner);  // all declined: quick
  ASSERT_EQ(r.audits.size(), 2u);
  std::vector<std::string> tagged;  // as the report keeps them, apart from the sweep's own notes
  for (const std::string& n : notes) tagged.push_back("conventions differ: " + n);
  EXPECT_EQ(r.audits[1].notes, tagged);
  std::string error;
  const std::optional<Report> back = report_from_json(report_to_json(r), &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->audits[0].notes, tagged);
  const std::string html = report_to_html(r, HtmlOptions{"/nonexistent/gnuplot"});
  EXPECT_NE(html.find("masked row output: nan (nan_rows); zero (zero_rows)"), std::string::npos);
  for (const std::string& line : audit_summary(r))
    if (line.find("conventions differ") != std::string::npos) return;
  ADD_FAILURE() << "the terminal summary should name the differences";
}

// --cells A-B resumes a cut sweep: the cells a time limit cut from a
// shard, run as a range, give that shard's matrix exactly.
TEST(Audit, CellRangesResumeAShard) {
  const afz_kernel k = narrow(testing::mutant_kernel(), "mutant.narrow");
  const Runner runner(RunOptions{});
  const Report whole = run_audit(options({&k}, kAddNegInfShard), runner);
  const int64_t cells = int64_t(kNarrowRows * generator_table().size()), begin = cells * kAddNegInfShard / kShards,
                end = cells * (kAddNegInfShard + 1) / kShards, cut = begin + (end - begin) / 3;
  std::vector<ReportAuditCell> joined;
  for (auto [a, b] : {std::pair(begin, cut), std::pair(cut, end)}) {
    AuditOptions o = options({&k}, 0);
    o.shards = 1;
    o.first_cell = a;
    o.end_cell = b;
    const Report part = run_audit(o, runner);
    EXPECT_EQ(part.run.cases, b - a);
    joined.insert(joined.end(), part.audits[0].cells.begin(), part.audits[0].cells.end());
  }
  const std::vector<ReportAuditCell>& want = whole.audits[0].cells;
  ASSERT_EQ(joined.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(joined[i].row, want[i].row);
    EXPECT_EQ(joined[i].column, want[i].column);
    EXPECT_EQ(joined[i].status, want[i].status) << want[i].row << " x " << want[i].column;
  }
}

// --rows splits a sweep by feature (run 9 swept the row-gap rows, whose
// kernels fault, apart from the rest): a regex and its negation take
// disjoint cells that together are the whole range, each kept in order.
TEST(Audit, RowsRegexSplitsTheSweepByFeature) {
  const afz_kernel k = narrow(testing::mutant_kernel(), "mutant.narrow");
  AuditOptions o = options({&k}, kNoMaskShard);  // rows 0-4: every layout once
  const std::vector<SweepCell> all = audit_sweep_cells(o);
  o.rows_regex = "row_gap3";
  const std::vector<SweepCell> gaps = audit_sweep_cells(o);
  o.rows_regex = "^(?!.*row_gap3)";
  const std::vector<SweepCell> rest = audit_sweep_cells(o);
  ASSERT_FALSE(gaps.empty());
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(gaps.size() + rest.size(), all.size());
  for (const SweepCell& c : gaps) EXPECT_NE(c.row.find("row_gap3"), std::string::npos) << c.row;
  for (const SweepCell& c : rest) EXPECT_EQ(c.row.find("row_gap3"), std::string::npos) << c.row;
  auto in_order = [](const std::vector<SweepCell>& part, const std::vector<SweepCell>& whole) {
    size_t at = 0;
    for (const SweepCell& c : part) {
      while (at < whole.size() && whole[at].cell != c.cell) ++at;
      if (at == whole.size()) return false;
    }
    return true;
  };
  EXPECT_TRUE(in_order(gaps, all));
  EXPECT_TRUE(in_order(rest, all));

  o.rows_regex = "row_gap3";
  const Runner runner(RunOptions{});
  const Report r = run_audit(o, runner);
  EXPECT_EQ(r.run.cases, int64_t(gaps.size()));
  const std::vector<std::string>& notes = r.audits.at(0).notes;
  EXPECT_NE(std::find(notes.begin(), notes.end(),
                      fmt::format("{} of the range's {} cells skipped: their rows do not match --rows 'row_gap3'",
                                  rest.size(), all.size())),
            notes.end());
  o.rows_regex = "(";
  EXPECT_THROW(audit_sweep_cells(o), std::runtime_error) << "a malformed regex is one line, not a crash";
}

TEST(Audit, RejectsUnusableOptions) {
  const Runner runner(RunOptions{});
  const afz_kernel& k = testing::correct_kernel();
  AuditOptions o = options({&k}, 0);
  o.shard = o.shards;
  EXPECT_THROW(run_audit(o, runner), std::runtime_error);
  o = options({&k}, 0);
  o.first_cell = 5;
  o.end_cell = 5;
  EXPECT_THROW(run_audit(o, runner), std::runtime_error) << "an empty range";
  o.first_cell = 0;
  o.end_cell = int64_t(kNarrowRows * generator_table().size()) * 100;
  EXPECT_THROW(run_audit(o, runner), std::runtime_error) << "past the matrix";
  EXPECT_THROW(run_audit(options({}, 0), runner), std::runtime_error);
}

// The audit through the backward pass (audit --pass bwd): the sweep over a
// backward kernel's cells, its supports() deciding what is unsupported (with
// its reason), the reference passing every cell it takes, a backward mutant
// failing cells whose repros record `pass bwd` and fail again, and shards of
// the sweep merging as for the forward.

// Like `base`, claiming only bf16 and head dim 64: 160 rows, as narrow() above.
afz_backward_kernel narrow_backward(const char* base, const char* name) {
  afz_backward_kernel k = *find_backward_kernel(base);
  k.name = name;
  k.caps.in_dtypes = k.caps.out_dtypes = 1u << AFZ_BF16;
  k.caps.min_head_dim = k.caps.max_head_dim = 64;
  return k;
}

// The backward tests' sweep: one row (9 cells) per shard, short minimizations.
AuditOptions backward_options(std::vector<CampaignKernel> kernels, int shard, const std::string& corpus = "") {
  AuditOptions o = slot_options(std::move(kernels), shard, corpus);
  o.shards = int(kNarrowRows);
  o.minimize_options.max_runs = 10;
  return o;
}

TEST(AuditBackward, ReferencePassesEveryCellAndAMutantFailsWithRepros) {
  const afz_backward_kernel good = narrow_backward("cpu.bwd.fa2", "good");
  const afz_backward_kernel bad = narrow_backward("cpu.bwd.mutant.ds_no_scale", "bad");
  const testing::TempDir corpus("afz-audit-bwd");
  RunOptions determinism;
  determinism.check_determinism = true;  // as `attnfuzz audit` runs
  const Runner runner(determinism);
  const Report r = run_audit(
      backward_options({backward_campaign_kernel(good, "builtin"), backward_campaign_kernel(bad, "builtin")}, 0,
                       corpus.str()),
      runner);
  ASSERT_EQ(r.audits.size(), 2u);
  EXPECT_EQ(r.audits[0].kernel, "good [bwd]");
  EXPECT_EQ(r.audits[1].kernel, "bad [bwd]");
  ASSERT_EQ(r.kernels.size(), 2u);
  EXPECT_EQ(r.kernels[0].pass, "bwd");
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  int passing = 0;
  for (const ReportAuditCell& c : r.audits[0].cells) {
    EXPECT_NE(c.status, "fail") << c.row << " x " << c.column << ": " << c.signature;
    passing += c.status == "pass";
  }
  EXPECT_GT(passing, 0);
  EXPECT_GT(r.run.reruns, 0) << "determinism: every passing case ran twice";
  const auto oracle = make_fast_backward_oracle();
  const auto precise = make_escalation_backward_oracle();
  int failing = 0;
  for (const ReportAuditCell& c : r.audits[1].cells) {
    if (c.status != "fail") continue;
    ++failing;
    const auto f = std::find_if(r.failures.begin(), r.failures.end(),
                                [&](const ReportFailure& x) { return x.signature == c.signature; });
    ASSERT_NE(f, r.failures.end()) << c.row << " x " << c.column;
    EXPECT_EQ(f->pass, "bwd");
    EXPECT_NE(f->gradient, "dv") << "dV does not use the scale";
    std::string error;
    const std::optional<Case> saved = load_case_file(f->case_file, &error);
    ASSERT_TRUE(saved) << error;
    EXPECT_EQ(saved->kernel, "bad");
    EXPECT_EQ(saved->pass, Pass::Bwd);
    EXPECT_EQ(f->repro, "attnfuzz --determinism repro " + f->case_file);
    EXPECT_TRUE(is_failure(run_backward_case(bad, *saved, *oracle, precise.get()).verdict.cls)) << f->case_file;
  }
  EXPECT_GT(failing, 0);
  EXPECT_FALSE(r.passed());
  const std::vector<std::string> summary = audit_summary(r);
  EXPECT_EQ(summary.front().rfind("good [bwd]: ", 0), 0u) << summary.front();
}

int decline_all(const afz_backward_kernel*, const afz_backward_problem*, char* reason, size_t len) {
  std::snprintf(reason, len, "test: this backward kernel takes no problem");
  return 1;
}

TEST(AuditBackward, SupportsDecidesUnsupportedWithItsReason) {
  afz_backward_kernel picky = narrow_backward("cpu.bwd.fa2", "picky");
  picky.supports = decline_all;
  const Runner runner(RunOptions{});
  const Report r = run_audit(backward_options({backward_campaign_kernel(picky, "builtin")}, 0), runner);
  ASSERT_EQ(r.audits.size(), 1u);
  ASSERT_FALSE(r.audits[0].cells.empty());
  for (const ReportAuditCell& c : r.audits[0].cells) EXPECT_EQ(c.status, "unsupported") << c.row;
  ASSERT_EQ(r.audits[0].unsupported_reasons.count("test: this backward kernel takes no problem"), 1u);
  EXPECT_TRUE(r.passed());
}

// Two shards of the backward sweep merge into the matrix of both.
TEST(AuditBackward, ShardsMergeWithThePass) {
  const afz_backward_kernel good = narrow_backward("cpu.bwd.fa2", "good");
  const Runner runner(RunOptions{});
  std::vector<Report> parts;
  for (int shard : {0, 1})
    parts.push_back(run_audit(backward_options({backward_campaign_kernel(good, "builtin")}, shard), runner));
  std::string error;
  const std::optional<Report> merged = merge_reports(parts, &error);
  ASSERT_TRUE(merged) << error;
  ASSERT_EQ(merged->kernels.size(), 1u);
  EXPECT_EQ(merged->kernels[0].name, "good [bwd]");
  EXPECT_EQ(merged->kernels[0].pass, "bwd");
  ASSERT_EQ(merged->audits.size(), 1u);
  EXPECT_EQ(merged->audits[0].cells.size(), parts[0].audits[0].cells.size() + parts[1].audits[0].cells.size());
}

}  // namespace
}  // namespace afz

namespace afz {
namespace {

// The committed example (reports/examples/audit, made by the command in its
// COMMAND.txt) validates against the schema and holds the whole matrix:
// every row of cpu.tiled's capabilities x every class, plus the fuzz row.
TEST(AuditExample, CommittedReportValidatesAndHoldsEveryCell) {
  const std::string dir = std::string(ATTNFUZZ_SOURCE_DIR) + "/reports/examples/audit";
  std::ifstream in(dir + "/report.json");
  ASSERT_TRUE(in) << dir << "/report.json";
  std::stringstream text;
  text << in.rdbuf();
  testing::SchemaValidator v(nlohmann::json::parse(
      std::ifstream(std::string(ATTNFUZZ_SOURCE_DIR) + "/reports/schema/report.schema.json")));
  for (const std::string& p : v.validate(nlohmann::json::parse(text.str()))) ADD_FAILURE() << p;
  std::string error;
  const std::optional<Report> r = report_from_json(text.str(), &error);
  ASSERT_TRUE(r) << error;
  EXPECT_EQ(r->run.kind, "audit");
  ASSERT_EQ(r->audits.size(), 1u);
  const ReportAudit& a = r->audits[0];
  const afz_kernel& tiled_like = testing::correct_kernel();  // the CPU kernels' capabilities
  const size_t rows = audit_rows({&tiled_like}).size(), classes = generator_table().size();
  EXPECT_EQ(a.columns.size(), classes);
  EXPECT_GE(a.rows.size(), rows);
  size_t sweep_cells = 0;
  for (const ReportAuditCell& c : a.cells) sweep_cells += c.row.find("fuzz phase") == std::string::npos;
  EXPECT_EQ(sweep_cells, rows * classes);
  for (const ReportAuditCell& c : a.cells)
    if (c.status == "fail") {
      const auto f = std::find_if(r->failures.begin(), r->failures.end(),
                                  [&](const ReportFailure& x) { return x.signature == c.signature; });
      EXPECT_NE(f, r->failures.end()) << c.row << " x " << c.column;
    }
}

}  // namespace
}  // namespace afz
