#include "harness/judge/verdict.h"

#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <vector>

#include "harness/judge/bound.h"
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

struct Judge {
  const afz_kernel& k;
  const Materialized& m;
  const afz_problem& p;
  Verdict v;

  void raise(VerdictClass c, const std::string& why) {
    if (int(c) > int(v.cls)) {
      v.cls = c;
      v.detail = why;
    }
  }

  // Returns the element's error / bound.
  double track(bool is_lse, int b, int h, int i, int x, double kv, double ov, double err, double bound, afz_dtype t) {
    const double over = bound > 0 ? err / bound : (err > 0 ? std::numeric_limits<double>::infinity() : 0);
    v.max_abs_error = std::max(v.max_abs_error, err);
    if (!v.worst.valid || over > v.worst.over_bound) {
      v.worst = {true, is_lse, b, h, i, x, kv, ov, err, bound, err / ulp(t, ov), over};
    }
    v.max_over_bound = std::max(v.max_over_bound, over);
    return over;
  }

  static std::string where(int b, int h, int i) { return fmt::format("b={} h={} i={}", b, h, i); }

  void empty_row(int b, int h, int i) {
    for (int x = 0; x < p.head_dim_v; ++x) {
      ++v.elements;
      const double o = m.o_at(b, h, i, x);
      if (m.o_bits_at(b, h, i, x) == output_poison_bits(p.o.dtype)) {
        ++v.failing;
        raise(VerdictClass::Unwritten, "fully masked row not written at " + where(b, h, i));
        continue;
      }
      const bool want_nan = k.conventions.masked_row_output == AFZ_MASKED_ROW_NAN;
      const bool ok = want_nan ? std::isnan(o) : o == 0.0;
      if (!ok) {
        ++v.failing;
        raise(VerdictClass::SemanticMismatch,
              fmt::format("fully masked row {} gives o[{}] = {:a}, convention says {}", where(b, h, i), x, o,
                          want_nan ? "NaN" : "0"));
      }
    }
    if (!p.lse || !(k.caps.flags & AFZ_CAP_LSE)) return;
    const float l = m.lse_at(b, h, i);
    if (bits_of(l) == kPoisonF32) {
      raise(VerdictClass::Unwritten, "LSE of fully masked row not written at " + where(b, h, i));
      return;
    }
    bool ok = false;
    switch (k.conventions.empty_lse) {
      case AFZ_EMPTY_LSE_NEG_INF: ok = std::isinf(l) && l < 0; break;
      case AFZ_EMPTY_LSE_POS_INF: ok = std::isinf(l) && l > 0; break;
      case AFZ_EMPTY_LSE_NAN: ok = std::isnan(l); break;
      case AFZ_EMPTY_LSE_ZERO: ok = l == 0; break;
    }
    if (!ok) raise(VerdictClass::SemanticMismatch, fmt::format("fully masked row {} gives lse = {:a}", where(b, h, i), l));
  }

  // Whether the oracle's own error (o_err, lse_err) lets every element of
  // the row be judged: pass needs err + oerr <= bound, fail err - oerr > bound.
  static bool decidable(const Materialized& m, const afz_kernel& k, int b, int h, int i, const OracleResult& r,
                        ErrorBound& eb) {
    const afz_problem& p = m.problem();
    const int64_t ri = r.row_index(b, h, i);
    if (r.o_err.empty() || !eb.begin_row(row_terms(p, r, ri, b))) return true;
    auto open = [](double err, double oerr, double bound) { return err - oerr <= bound && err + oerr > bound; };
    for (int x = 0; x < p.head_dim_v; ++x) {
      const int64_t e = ri * r.dv + x;
      const double ov = r.o[e].hi + r.o[e].lo, kv = m.o_at(b, h, i, x);
      if (!std::isfinite(kv)) continue;
      if (open(std::fabs(kv - ov), r.o_err[e], eb.element({ov, r.cond[e], r.cond_score[e], r.cond_tiny[e]})))
        return false;
    }
    if (p.lse && (k.caps.flags & AFZ_CAP_LSE) && !r.lse_err.empty()) {
      const double kl = m.lse_at(b, h, i), exact = r.lse[ri].hi;
      if (std::isfinite(kl) && open(std::fabs(kl - exact), r.lse_err[ri], eb.lse(exact))) return false;
    }
    return true;
  }

  static RowTerms row_terms(const afz_problem& p, const OracleResult& r, int64_t ri, int b) {
    const int n = r.visible_keys.empty() ? p.seqlens_k[b] : r.visible_keys[ri];
    const double max_sigma = r.max_sigma.empty() ? r.max_abs_score[ri] : r.max_sigma[ri];
    // ln l <= ln N: l sums N terms each at most 1.
    return {n, r.lse_cond_score[ri], max_sigma, std::log(double(std::max(n, 1)))};
  }

  // Where the row's largest score sits among its visible keys, for the
  // error-vs-key-position statistics (-1: the oracle did not say).
  static int key_bin(const OracleResult& r, int64_t ri) {
    if (r.max_key.empty() || r.visible_keys.empty()) return -1;
    return key_position_bin(r.max_key[ri], r.visible_keys[ri]);
  }

  void row(int b, int h, int i, const OracleResult& r, ErrorBound& eb) {
    const int64_t ri = r.row_index(b, h, i);
    const double lse_exact = r.lse[ri].hi;
    if (!eb.begin_row(row_terms(p, r, ri, b))) return;  // outside the declared precision model
    double row_over = 0;
    bool judged = false;
    // Ulps at the row's scale, its largest exact |o|: an element whose exact
    // value is near zero is judged against a bound set by the row (the sum
    // of w|v| it came from), so ulps at its own tiny value would call a
    // correct kernel billions of ulps off.
    double row_scale = 0;
    for (int x = 0; x < p.head_dim_v; ++x) {
      const int64_t e = ri * r.dv + x;
      row_scale = std::max(row_scale, std::fabs(r.o[e].hi + r.o[e].lo));
    }
    for (int x = 0; x < p.head_dim_v; ++x) {
      const int64_t e = ri * r.dv + x;
      const double ov = r.o[e].hi + r.o[e].lo;
      const double kv = m.o_at(b, h, i, x);
      ++v.elements;
      if (m.o_bits_at(b, h, i, x) == output_poison_bits(p.o.dtype)) {
        ++v.failing;
        raise(VerdictClass::Unwritten, fmt::format("o[{} d={}] never written", where(b, h, i), x));
        continue;
      }
      if (!std::isfinite(kv)) {
        ++v.failing;
        raise(VerdictClass::NanInf, fmt::format("o[{} d={}] = {} where the oracle gives {:a}", where(b, h, i), x, kv, ov));
        continue;
      }
      const double bound = eb.element({ov, r.cond[e], r.cond_score[e], r.cond_tiny[e]});
      const double err = std::fabs(kv - ov);
      const double oerr = r.o_err.empty() ? 0.0 : r.o_err[e];
      const double over = track(false, b, h, i, x, kv, ov, err, bound, p.o.dtype);
      v.o_stats.add_element(over, err / ulp(p.o.dtype, row_scale));
      row_over = std::max(row_over, over);
      judged = true;
      if (err - oerr > bound) {
        ++v.failing;
        raise(VerdictClass::NumericMismatch, fmt::format("o[{} d={}] beyond its bound", where(b, h, i), x));
      }
    }
    if (judged) v.o_stats.add_row(row_over, key_bin(r, ri), r.max_abs_score[ri]);
    if (p.lse && (k.caps.flags & AFZ_CAP_LSE)) lse(b, h, i, lse_exact, eb, r, ri);
  }

  void lse(int b, int h, int i, double exact, const ErrorBound& eb, const OracleResult& r, int64_t ri) {
    const float kl = m.lse_at(b, h, i);
    if (bits_of(kl) == kPoisonF32) {
      raise(VerdictClass::Unwritten, "lse[" + where(b, h, i) + "] never written");
      return;
    }
    if (!std::isfinite(kl)) {
      raise(VerdictClass::NanInf, fmt::format("lse[{}] = {} where the oracle gives {:a}", where(b, h, i), kl, exact));
      return;
    }
    const double bound = eb.lse(exact);
    const double err = std::fabs(double(kl) - exact);
    const double oerr = r.lse_err.empty() ? 0.0 : r.lse_err[ri];
    const double over = track(true, b, h, i, 0, kl, exact, err, bound, AFZ_F32);
    // The LSE is m + ln l: its scale is the row's largest |score| as much as its own value.
    v.lse_stats.add_element(over, err / ulp(AFZ_F32, std::max(std::fabs(exact), r.max_abs_score[ri])));
    v.lse_stats.add_row(over, key_bin(r, ri), r.max_abs_score[ri]);
    if (err - oerr <= bound) return;
    // Name the convention a wrong LSE follows, when it follows one.
    constexpr double kLog2e = 0x1.71547652b82fep0;
    std::string why = fmt::format("lse[{}] beyond its bound", where(b, h, i));
    if (std::fabs(double(kl) - exact * kLog2e) <= bound * kLog2e) {
      why = fmt::format("lse[{}] is in log2 (base-2 convention), the ABI asks for ln", where(b, h, i));
      raise(VerdictClass::SemanticMismatch, why);
      return;
    }
    raise(VerdictClass::NumericMismatch, why);
  }
};

}  // namespace

Verdict judge(const afz_kernel& k, const Materialized& m, OracleResult& r, const Oracle* escalate,
              const RowSampling& sampling) {
  const afz_problem& p = m.problem();
  Judge j{k, m, p, {}};
  j.v.o_dtype = p.o.dtype;
  const std::vector<int64_t> rows = checked_rows(p, sampling, &j.v.coverage);
  auto coordinates = [&](int64_t ri, int& b, int& h, int& i) {
    i = int(ri % p.max_seqlen_q);
    h = int(ri / p.max_seqlen_q % p.heads_q);
    b = int(ri / p.max_seqlen_q / p.heads_q);
  };
  ErrorBound eb(k.precision, p.q.dtype, p.o.dtype, p.head_dim);
  // Ziv's strategy: rows the fast tier's own error leaves undecided are
  // recomputed at high precision before anything is judged.
  std::vector<int64_t> undecided;
  int b, h, i;
  if (escalate && !r.o_err.empty()) {
    for (int64_t ri : rows) {
      coordinates(ri, b, h, i);
      if (!r.empty[ri] && !Judge::decidable(m, k, b, h, i, r, eb)) undecided.push_back(ri);
    }
    // The precise tier writes its own (tiny, or +inf where it cannot
    // resolve a score) bounds into o_err/lse_err: a row it cannot decide
    // either is never called a failure.
    if (!undecided.empty()) escalate->compute_rows(p, undecided, r);
  }
  for (int64_t ri : rows) {
    coordinates(ri, b, h, i);
    if (r.empty[ri]) j.empty_row(b, h, i);
    else j.row(b, h, i, r, eb);
  }
  j.v.escalated_rows = int64_t(undecided.size());
  // A sampled verdict says so wherever its line is shown (findings, reports).
  if (j.v.coverage.sampled) j.v.detail += (j.v.detail.empty() ? "" : "; ") + j.v.coverage.describe();
  return j.v;
}

}  // namespace afz
