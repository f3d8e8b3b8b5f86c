#include "harness/judge/verdict_summary.h"

#include <algorithm>

#include "harness/judge/bound.h"
#include "harness/judge/verdict_inputs.h"
#include "harness/judge/verdict_steps.h"

namespace afz {

namespace {

RowModel row_model(const afz_kernel& k, const Materialized& m, const OracleResult& r, std::vector<int64_t> rows) {
  const afz_problem& p = m.problem();
  ErrorBound eb(k.precision, p.q.dtype, p.o.dtype, p.head_dim);
  RowModel model;
  model.rows = std::move(rows);
  model.factors.resize(model.rows.size());
  model.modelled.assign(model.rows.size(), 0);
  for (size_t n = 0; n < model.rows.size(); ++n) {
    const int64_t ri = model.rows[n];
    if (r.empty[ri]) continue;
    model.modelled[n] = eb.begin_row(row_terms(p, r, ri));
    model.factors[n] = eb.row_factors();
  }
  return model;
}

const bound_steps::RowFactors* factors_at(const RowModel& model, size_t n) {
  return model.modelled[n] ? &model.factors[n] : nullptr;
}

// The host's summary sink: what the GPU's keeps, row by row.  A row's
// largest error / bound drops NaN as judge()'s std::max does (an over is NaN
// only for an infinite oracle value, which no tier returns).
struct SummarySink {
  VerdictSummary s;
  double row_max = 0;
  bool row_tracked = false;

  void raise(const verdict_steps::Event& e) { s.first_row[size_t(e.cls)] = std::min(s.first_row[size_t(e.cls)], e.row); }
  void track(const verdict_steps::Tracked& t) {
    s.max_abs_error = std::max(s.max_abs_error, t.err);
    row_max = verdict_steps::max_kept(row_max, t.over);
    row_tracked = true;
  }
  void o_element(double over, double ulps) { s.o_stats.add_element(over, ulps); }
  void o_row(double over, int key_bin, double max_abs_score) { s.o_stats.add_row(over, key_bin, max_abs_score); }
  void lse_element(double over, double ulps) { s.lse_stats.add_element(over, ulps); }
  void lse_row(double over, int key_bin, double max_abs_score) { s.lse_stats.add_row(over, key_bin, max_abs_score); }

  void end_row(int64_t ri, const verdict_steps::RowCounts& n) {
    s.elements += n.elements;
    s.failing += n.failing;
    if (row_tracked && (s.worst_row == kNoRow || row_max > s.max_over_bound)) {
      s.worst_row = ri;
      s.max_over_bound = verdict_steps::max_kept(s.max_over_bound, row_max);
    }
    row_max = 0;
    row_tracked = false;
  }
};

// One row judged on the CPU (with its detail line and worst element).
Verdict judge_row(const afz_kernel& k, const Materialized& m, const OracleResult& r, int64_t ri) {
  return judge_rows(k, m, r, {ri});
}

}  // namespace

std::vector<int64_t> HostRowJudge::undecided(const RowModel& model) {
  return undecided_rows(k_, m_, r_, model.rows);
}

VerdictSummary HostRowJudge::summarize(const RowModel& model, const std::vector<int64_t>& skip) {
  const verdict_steps::Inputs in = host_inputs(k_, m_, r_, bound_model(k_, m_.problem()));
  SummarySink sink;
  for (size_t n = 0; n < model.rows.size(); ++n) {
    const int64_t ri = model.rows[n];
    if (std::binary_search(skip.begin(), skip.end(), ri)) continue;
    const verdict_steps::RowCounts counts = r_.empty[ri] ? verdict_steps::masked_row(in, ri, sink)
                                                         : verdict_steps::row(in, ri, factors_at(model, n), sink);
    sink.end_row(ri, counts);
  }
  return sink.s;
}

Verdict judge_by_rows(const afz_kernel& k, const Materialized& m, OracleResult& r, const Oracle* escalate,
                      const RowSampling& sampling, RowJudge& rows_on) {
  Verdict v;
  v.o_dtype = m.problem().o.dtype;
  const RowModel model = row_model(k, m, r, checked_rows(m.problem(), sampling, &v.coverage));
  // Ziv's strategy, as judge(): the undecided rows are recomputed on the
  // host, then judged there.
  std::vector<int64_t> undecided;
  if (escalate && !r.o_err.empty()) {
    undecided = rows_on.undecided(model);
    if (!undecided.empty()) escalate->compute_rows(m.problem(), undecided, r);
  }
  const VerdictSummary s = rows_on.summarize(model, undecided);
  v.elements = s.elements;
  v.failing = s.failing;
  v.max_abs_error = s.max_abs_error;
  v.max_over_bound = s.max_over_bound;
  v.o_stats = s.o_stats;
  v.lse_stats = s.lse_stats;
  for (int c = 0; c < kVerdictClasses; ++c)
    if (s.first_row[size_t(c)] != kNoRow) v.cls = std::max(v.cls, VerdictClass(c));
  // Where the detail line and the worst element are: a row of the summary
  // (re-judged below) or an escalated row; the lowest row wins ties.
  int64_t detail_row = v.cls == VerdictClass::Pass ? kNoRow : s.first_row[size_t(v.cls)];
  int64_t worst_row = s.worst_row;
  double worst_over = s.max_over_bound;
  std::vector<Verdict> escalated;
  for (int64_t ri : undecided) {
    Verdict rv = judge_row(k, m, r, ri);
    v.elements += rv.elements;
    v.failing += rv.failing;
    v.max_abs_error = std::max(v.max_abs_error, rv.max_abs_error);
    v.max_over_bound = std::max(v.max_over_bound, rv.max_over_bound);
    v.o_stats.merge(rv.o_stats);
    v.lse_stats.merge(rv.lse_stats);
    if (int(rv.cls) > int(v.cls) || (rv.cls == v.cls && rv.cls != VerdictClass::Pass && ri < detail_row)) {
      v.cls = rv.cls;
      detail_row = ri;
    }
    if (rv.worst.valid && (worst_row == kNoRow || rv.worst.over_bound > worst_over ||
                           (rv.worst.over_bound == worst_over && ri < worst_row))) {
      worst_row = ri;
      worst_over = rv.worst.over_bound;
    }
  }
  if (detail_row != kNoRow) v.detail = judge_row(k, m, r, detail_row).detail;
  if (worst_row != kNoRow) v.worst = judge_row(k, m, r, worst_row).worst;
  v.escalated_rows = int64_t(undecided.size());
  note_coverage(v);
  return v;
}

}  // namespace afz
