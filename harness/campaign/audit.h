// The audit (issue 5): a systematic sweep of every feature combination a
// kernel's capabilities allow, crossed with every adversarial class, then a
// focused fuzz phase for the time left.
//
// The sweep's rows are the cross product of the feature axes (audit_axes():
// dtype x head dim x mask kind x GQA x varlen x layout); its columns are the
// generator classes.  A cell's case is the class's generated case with the
// row's features forced onto it (force_features), so the class still
// supplies the adversarial shape, values and transforms while the row pins
// what the kernel is asked to support.  Cells a kernel declines are
// "unsupported", never failures; a failing cell's case is minimized (same
// kernel, same verdict class) and saved to the corpus, so `attnfuzz repro`
// takes the folder as it is.  A backward slot (CampaignKernel::backward,
// `audit --pass bwd`) sweeps the rows its backward kernel's caps span; its
// supports() declines cells with its reason, its cells are judged on dQ, dK,
// dV, and its repros record `pass bwd`.
//
// Determinism: cell (row r, class c, case n) is a pure function of
// (seed, r, c, n); workers only compute, results are consumed in cell order,
// so the matrix and the repros do not depend on --jobs.  The fuzz phase is
// the campaign driver (campaign.h) with its own seed stream.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness/campaign/audit_coverage.h"
#include "harness/campaign/campaign.h"

namespace afz {

// One value of a feature axis: its label in the row name and how it is
// forced onto a case.
enum class MaskKind { None, CausalTopLeft, CausalBottomRight, Window, Bool, AddNegInf, AddLowest, AddLarge };
enum class LayoutKind { Bhsd, Bshd, PackedQkv, RowGaps, KvBroadcast };

struct AuditRow {
  afz_dtype dtype = AFZ_BF16;
  int head_dim = 64;
  MaskKind mask = MaskKind::None;
  bool gqa = false;
  bool varlen = false;
  LayoutKind layout = LayoutKind::Bhsd;
  std::string name() const;  // "bf16 d64 causal_br gqa varlen bshd"
};

// Every row for these kernels: the dtypes and representative head dims that
// at least one of them claims (8, 64, 128, 256 and an odd size), crossed
// with every mask kind, GQA, varlen and layout.
std::vector<AuditRow> audit_rows(const std::vector<const afz_kernel*>& kernels);
// The adversarial classes an audit crosses the rows with: the generator
// table, and the backward classes too when a slot is a backward kernel.
std::vector<const GeneratorDef*> audit_classes(const std::vector<CampaignKernel>& kernels);

// The class's case with the row's features forced onto it, then shrunk
// (sequence lengths only: every forced feature stays) to the sweep's work
// budget.  Always a valid case.
Case force_features(Case c, const AuditRow& row);

// Case n of cell (row, class) of an audit with `seed`.
Case audit_cell_case(uint64_t seed, size_t row_index, const AuditRow& row, const GeneratorDef& gen, int n,
                     int cases_per_cell);

struct AuditOptions {
  std::vector<CampaignKernel> kernels;
  uint64_t seed = 1;
  // The whole audit: the sweep always completes; the fuzz phase gets what
  // it leaves, but at least a quarter of time_s (none when that is below 1 s).
  double time_s = 60;
  // A safety valve for slow kernels (a library that compiles a kernel per
  // shape): the sweep stops at the first chunk boundary past this many
  // seconds, and each matrix notes how many cells were not run.  <= 0: none.
  double sweep_time_s = 0;
  // The sweep visits its cells in a stride permutation that reaches every
  // row early, so a sweep cut by sweep_time_s covers the whole matrix thinly
  // rather than its first rows (the fp32 rows, for GPU kernels); shards are
  // contiguous ranges of that order.  false: row by row.  The report lists
  // the cells in matrix order either way.
  bool interleave_cells = true;
  int cases_per_cell = 1;
  int jobs = 1;
  std::string corpus_dir;      // "": failures are reported, not saved
  MinimizeOptions minimize_options;
  // The sweep's minimizations, summed, stop past this many seconds (<= 0:
  // no limit): a minimization runs on the sweep's thread and holds every job
  // (on the H200, cuDNN's audit spent 248 s of its 314 s wall minimizing).
  // Later failing cells keep their case as generated, a valid repro, and
  // each matrix notes how many did.
  double minimize_budget_s = 0;
  std::string command;
  // Sweep shards: this process runs the cells [K*cells/N, (K+1)*cells/N).
  int shard = 0, shards = 1;
  // Or the cells [first_cell, end_cell) of the matrix, in the order shards
  // cut it (--cells A-B): the rest of a sweep a deadline cut ("after X of
  // Y cells": its range's first cell + X onwards).  end_cell < 0: unused.
  int64_t first_cell = 0, end_cell = -1;
  // Cells of the range every audited kernel already has in an earlier report
  // (--skip-covered) are not swept; the range's other cells are, in order.
  CoveredCells covered;
  // Only the rows whose names ("bf16 d64 causal_br gqa varlen bshd") this
  // ECMAScript regex finds (--rows): a sweep split by feature, e.g. the rows
  // whose kernels fault apart from the rest.  "": every row.
  std::string rows_regex;
  // Where the cases running now are listed (in_flight.h; `audit` writes
  // OUT/in_flight.txt); "": nowhere.
  std::string in_flight_path;
  // Where each case's start and end are appended with their UTC time
  // (OUT/in_flight_history.txt); "": nowhere.
  std::string in_flight_history_path;
  // Called after each sweep cell is consumed (cells done, cells in all) and
  // once per new failure signature.
  std::function<void(int64_t, int64_t)> on_sweep_progress;
  std::function<void(const ReportFailure&)> on_failure;
  std::function<void(const ProgressSnapshot&)> on_fuzz_progress;
};

// A cell of the sweep: its index in matrix order (row * classes + class)
// and its names, as the report's matrix names them.
struct SweepCell {
  int64_t cell = 0;
  std::string row, column;
};
// The cells run_audit(o) sweeps, in its order (`audit --list-cells`).
std::vector<SweepCell> audit_sweep_cells(const AuditOptions& o);

// Runs the audit; the report's run.kind is "audit", its `audits` hold one
// matrix per kernel (plus a "fuzz phase" row with the campaign's per-class
// results), and kernels whose declared conventions differ are noted in
// each matrix.  Throws std::runtime_error with a one-line message for
// unusable options.
Report run_audit(const AuditOptions& options, const Runner& runner);

// The declared conventions where the kernels disagree, one line each
// ("masked_row_output: zero (cpu.tiled), nan (torch.math)"); empty when
// they all agree or there is one kernel.
std::vector<std::string> convention_differences(const std::vector<const afz_kernel*>& kernels);

// "bf16 d64 ...: 12 pass, 3 fail (numeric_mismatch), 9 unsupported"-style
// summary lines of a report's audit matrices, for the terminal.
std::vector<std::string> audit_summary(const Report& r);

}  // namespace afz
