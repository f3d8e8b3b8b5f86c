#include "harness/judge/verdict.h"

#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <vector>

#include "harness/judge/bound.h"
#include "harness/judge/verdict_inputs.h"
#include "harness/judge/verdict_steps.h"
#include "kernels/abi/dtype.h"

namespace afz {

std::string_view verdict_name(VerdictClass c) {
  switch (c) {
    case VerdictClass::Pass: return "pass";
    case VerdictClass::Unsupported: return "unsupported";
    case VerdictClass::NumericMismatch: return "numeric_mismatch";
    case VerdictClass::NanInf: return "nan_inf";
    case VerdictClass::SemanticMismatch: return "semantic_mismatch";
    case VerdictClass::Unwritten: return "unwritten";
    case VerdictClass::OutOfBounds: return "out_of_bounds";
    case VerdictClass::Nondeterministic: return "nondeterministic";
    case VerdictClass::Crash: return "crash";
    case VerdictClass::Hang: return "hang";
  }
  return "?";
}

bool is_failure(VerdictClass c) { return c != VerdictClass::Pass && c != VerdictClass::Unsupported; }

std::string WorstElement::format() const {
  if (!valid) return "no element checked";
  if (!tensor.empty())
    return fmt::format("{}[b={} h={} s={} x={}] kernel {:a} ({:.9g}) oracle {:a} ({:.9g}) error {:.3g} = {:.3g} ulp = "
                       "{:.3g} x bound",
                       tensor, b, h, i, x, kernel, kernel, oracle, oracle, error, ulps, over_bound);
  return fmt::format("{}[b={} h={} i={}{}] kernel {:a} ({:.9g}) oracle {:a} ({:.9g}) error {:.3g} = {:.3g} ulp = {:.3g} x bound",
                     is_lse ? "lse" : "o", b, h, i, is_lse ? "" : fmt::format(" d={}", x), kernel, kernel, oracle,
                     oracle, error, ulps, over_bound);
}

namespace {

std::string where(const verdict_steps::Where& w) { return fmt::format("b={} h={} i={}", w.b, w.h, w.i); }

// The detail line of each event (an LSE's value is the kernel's float).
std::string describe(const verdict_steps::Event& e, const afz_kernel& k) {
  using verdict_steps::What;
  const float l = float(e.kernel);
  switch (e.what) {
    case What::MaskedRowUnwritten: return "fully masked row not written at " + where(e.w);
    case What::MaskedRowConvention:
      return fmt::format("fully masked row {} gives o[{}] = {:a}, convention says {}", where(e.w), e.x, e.kernel,
                         k.conventions.masked_row_output == AFZ_MASKED_ROW_NAN ? "NaN" : "0");
    case What::MaskedLseUnwritten: return "LSE of fully masked row not written at " + where(e.w);
    case What::MaskedLseConvention: return fmt::format("fully masked row {} gives lse = {:a}", where(e.w), l);
    case What::Unwritten: return fmt::format("o[{} d={}] never written", where(e.w), e.x);
    case What::NanInf: return fmt::format("o[{} d={}] = {} where the oracle gives {:a}", where(e.w), e.x, e.kernel, e.oracle);
    case What::Beyond: return fmt::format("o[{} d={}] beyond its bound", where(e.w), e.x);
    case What::LseUnwritten: return "lse[" + where(e.w) + "] never written";
    case What::LseNanInf: return fmt::format("lse[{}] = {} where the oracle gives {:a}", where(e.w), l, e.oracle);
    case What::LseLog2: return fmt::format("lse[{}] is in log2 (base-2 convention), the ABI asks for ln", where(e.w));
    case What::LseBeyond: return fmt::format("lse[{}] beyond its bound", where(e.w));
  }
  return "?";
}

// The CPU's sink for verdict_steps: the detail line of the first element
// that raised the most severe class, the worst element, the statistics.
struct Judge {
  const afz_kernel& k;
  Verdict v;

  void raise(const verdict_steps::Event& e) {
    if (int(e.cls) > int(v.cls)) {
      v.cls = e.cls;
      v.detail = describe(e, k);
    }
  }
  void track(const verdict_steps::Tracked& t) {
    v.max_abs_error = std::max(v.max_abs_error, t.err);
    if (!v.worst.valid || t.over > v.worst.over_bound)
      v.worst = {true, t.is_lse, t.w.b, t.w.h, t.w.i, t.x, t.kernel, t.oracle, t.err, t.bound,
                 t.err / ulp(t.dtype, t.oracle), t.over};
    v.max_over_bound = std::max(v.max_over_bound, t.over);
  }
  void o_element(double over, double ulps) { v.o_stats.add_element(over, ulps); }
  void o_row(double over, int key_bin, double max_abs_score) { v.o_stats.add_row(over, key_bin, max_abs_score); }
  void lse_element(double over, double ulps) { v.lse_stats.add_element(over, ulps); }
  void lse_row(double over, int key_bin, double max_abs_score) { v.lse_stats.add_row(over, key_bin, max_abs_score); }

  void judge_row(const verdict_steps::Inputs& in, const afz_problem& p, const OracleResult& r, ErrorBound& eb,
                 int64_t ri) {
    verdict_steps::RowCounts n;
    if (r.empty[ri]) {
      n = verdict_steps::masked_row(in, ri, *this);
    } else {
      const bool modelled = eb.begin_row(row_terms(p, r, ri));
      n = verdict_steps::row(in, ri, modelled ? &eb.row_factors() : nullptr, *this);
    }
    v.elements += n.elements;
    v.failing += n.failing;
  }
};

}  // namespace

Verdict judge_rows(const afz_kernel& k, const Materialized& m, const OracleResult& r, const std::vector<int64_t>& rows) {
  const afz_problem& p = m.problem();
  Judge j{k, {}};
  j.v.o_dtype = p.o.dtype;
  ErrorBound eb(k.precision, p.q.dtype, p.o.dtype, p.head_dim);
  const verdict_steps::Inputs in = host_inputs(k, m, r, eb.model());
  for (int64_t ri : rows) j.judge_row(in, p, r, eb, ri);
  return j.v;
}

std::vector<int64_t> undecided_rows(const afz_kernel& k, const Materialized& m, const OracleResult& r,
                                    const std::vector<int64_t>& rows) {
  const afz_problem& p = m.problem();
  ErrorBound eb(k.precision, p.q.dtype, p.o.dtype, p.head_dim);
  const verdict_steps::Inputs in = host_inputs(k, m, r, eb.model());
  std::vector<int64_t> undecided;
  for (int64_t ri : rows) {
    if (r.empty[ri]) continue;
    const bool modelled = eb.begin_row(row_terms(p, r, ri));
    if (!verdict_steps::decidable(in, ri, modelled ? &eb.row_factors() : nullptr)) undecided.push_back(ri);
  }
  return undecided;
}

Verdict judge(const afz_kernel& k, const Materialized& m, OracleResult& r, const Oracle* escalate,
              const RowSampling& sampling) {
  RowCoverage coverage;
  const std::vector<int64_t> rows = checked_rows(m.problem(), sampling, &coverage);
  // Ziv's strategy: rows the fast tier's own error leaves undecided are
  // recomputed at high precision before anything is judged.  The precise
  // tier writes its own (tiny, or +inf where it cannot resolve a score)
  // bounds into o_err/lse_err: a row it cannot decide either is never
  // called a failure.
  std::vector<int64_t> undecided;
  if (escalate && !r.o_err.empty()) {
    undecided = undecided_rows(k, m, r, rows);
    if (!undecided.empty()) escalate->compute_rows(m.problem(), undecided, r);
  }
  Verdict v = judge_rows(k, m, r, rows);
  v.escalated_rows = int64_t(undecided.size());
  v.coverage = coverage;
  note_coverage(v);
  return v;
}

void note_coverage(Verdict& v) {
  // A sampled verdict says so wherever its line is shown (findings, reports).
  if (v.coverage.sampled) v.detail += (v.detail.empty() ? "" : "; ") + v.coverage.describe();
}

}  // namespace afz
