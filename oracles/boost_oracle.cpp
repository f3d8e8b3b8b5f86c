// The Boost tier: exact attention with boost::multiprecision::cpp_bin_float
// at 256 bits.  Header-only, so it exists wherever the project builds (the
// H200 image has no MPFR headers), and it shares no arithmetic with the MPFR
// tier: Boost's own expression of the significands, its own exp, log and
// tanh.  Agreement between the two is the evidence that both are right.
//
// Unlike the MPFR tier the precision is fixed at compile time, so a score's
// absolute error grows with its magnitude (2^-256 relative); the bound
// below says so, and says "undecidable" when that stops being small.
#include <boost/multiprecision/cpp_bin_float.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/abi/dtype.h"
#include "oracles/oracle.h"
#include "oracles/problem_view.h"

namespace afz {

namespace {

using oracle_detail::CondTerms;
using oracle_detail::KvCache;
using oracle_detail::ProblemView;
using oracle_detail::RowId;

constexpr int kBits = 256;
// Expression templates off: plain values, predictable temporaries.
using Real = boost::multiprecision::number<
    boost::multiprecision::cpp_bin_float<kBits, boost::multiprecision::digit_base_2>,
    boost::multiprecision::et_off>;

constexpr double kU = 0x1p-256;                 // unit roundoff of Real
// Boost documents no accuracy for exp, log and tanh on cpp_bin_float; we
// assume 2^10 ulps (= 2^11 u relative), far looser than what the MPFR
// agreement tests observe.
constexpr double kFunctionRelErr = 0x1p11 * kU;
constexpr double kFirstOrderLimit = 0x1p-20;    // beyond this score error the bound is not trusted
constexpr double kDdRepresentation = 0x1p-105;
constexpr double kTiny = 0x1p-1074;

// x as hi + lo with hi = x rounded to nearest even and lo the remainder
// rounded to nearest.  convert_to<double> is correctly rounded in the Boost
// versions we build with (1.74, 1.83); the check below makes that a fact
// rather than an assumption: the remainder x - hi (exact: Real has more
// bits than hi at hi's exponent) must not exceed half the gap to the
// neighbour on its side, with ties going to the even significand.
DD to_dd(const Real& x) {
  double hi = x.convert_to<double>();
  for (int step = 0; step < 2 && std::isfinite(hi); ++step) {
    const Real rem = x - Real(hi);
    if (rem == 0) break;
    const double toward = rem > 0 ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
    const double next = std::nextafter(hi, toward);
    const Real half_gap = abs(Real(next) - Real(hi)) / 2;
    const Real arem = abs(rem);
    const bool odd = (bits_of(hi) & 1) != 0;
    if (arem > half_gap || (arem == half_gap && odd)) hi = next;
    else break;
  }
  DD out;
  out.hi = hi;
  out.lo = Real(x - Real(hi)).convert_to<double>();
  return out;
}

class BoostRows {
 public:
  explicit BoostRows(const ProblemView& view)
      : view_(view), kv_(view, 1), acc_(view.head_dim_v()), q_(view.head_dim()), q_double_(view.head_dim()) {}

  void compute(const RowId& id, OracleResult& out) {
    view_.visible_keys(id, keys_, add_);
    if (keys_.empty()) {
      oracle_detail::write_empty_row(out, id.r);
      return;
    }
    const int d = view_.head_dim(), dv = view_.head_dim_v(), n = int(keys_.size());
    const double scale = view_.scale(), cap = view_.softcap();
    kv_.load(id.b, view_.kv_head(id.h));
    view_.load_q(id, q_double_.data());
    for (int x = 0; x < d; ++x) q_[x] = q_double_[x];

    // Scores.  q_x k_x is exact (at most 48 significant bits); the sum
    // rounds d - 1 times.
    scores_.resize(n);
    sigma_.resize(n);
    double sigma_max = 0;
    for (int jj = 0; jj < n; ++jj) {
      kv_.require_finite(keys_[jj]);
      const float* k = kv_.k(keys_[jj]);
      Real t = 0;
      for (int x = 0; x < d; ++x) t += q_[x] * Real(k[x]);
      t *= Real(scale);
      if (cap != 0) t = Real(cap) * tanh(t / Real(cap));
      scores_[jj] = t + Real(add_[jj]);
      sigma_[jj] = oracle_detail::scaled_abs_dot(q_double_.data(), k, d, scale) + std::fabs(cap) + std::fabs(add_[jj]);
      sigma_max = std::max(sigma_max, sigma_[jj]);
    }
    Real m = scores_[0];
    for (int jj = 1; jj < n; ++jj)
      if (scores_[jj] > m) m = scores_[jj];

    // Weights: s_j - m <= 0 (rounding is monotone), so exp cannot overflow;
    // far below the max it underflows to exactly 0 in Boost's exponent range.
    weights_.resize(n);
    Real l = 0;
    for (int jj = 0; jj < n; ++jj) {
      weights_[jj] = exp(scores_[jj] - m);
      l += weights_[jj];
    }
    for (int x = 0; x < dv; ++x) acc_[x] = 0;
    for (int jj = 0; jj < n; ++jj) {
      if (weights_[jj] == 0) continue;
      const float* v = kv_.v(keys_[jj]);
      for (int x = 0; x < dv; ++x) acc_[x] += weights_[jj] * Real(v[x]);
    }

    cond_.begin(dv);
    for (int jj = 0; jj < n; ++jj) {
      const double w = Real(weights_[jj] / l).convert_to<double>();
      cond_.add_key(w, sigma_[jj], std::fabs(scores_[jj].convert_to<double>()), kv_.v(keys_[jj]));
    }
    cond_.finish(l.convert_to<double>(), id.r, out);

    // Error bound (u = 2^-256).  The score s_j is off by at most
    //   D_j <= (d + 2) u sigma_j + 2^12 u |cap| + 2 u sigma_max:
    // gamma(d - 1) sum|q k| for the sum, u for the scale product and the
    // mask addition (|s_j| <= sigma_j), 2^11 u |cap| for tanh and two more
    // u |cap| for the softcap's division and product, and u |s_j - m| <=
    // 2 u sigma_max for the subtraction.  d o / d s_j = w_j (v_j - o), so to
    // first order the scores cost sum_j w_j |v_j - o| D_j <=
    // (d + 2) u (cond_score + |o| lse_cond_score) + (2^12 u |cap| + 2 u sigma_max)(cond + |o|).
    // exp's own error (2^11 u relative on each weight), the n - 1 roundings
    // of l and the 2n of the numerator add (2^11 + n + 2) u (cond + |o|), the
    // quotient u |o|.  The factor 2 covers the second-order terms while the
    // largest D_j stays below 2^-20; beyond that the row is reported
    // undecidable (infinite bound) rather than guessed.  The LSE: d lse / d s_j
    // = w_j gives (d + 2) u lse_cond_score + ...; l's relative error becomes
    // absolute; log (2^11 u |ln l|) and m + ln l (u |lse|) round once each.
    const double d_max = (d + 2) * kU * sigma_max + 0x1p12 * kU * std::fabs(cap) + 2 * kU * sigma_max;
    const double per_weight = 0x1p12 * kU * std::fabs(cap) + 2 * kU * sigma_max + kFunctionRelErr + (n + 2) * kU;
    const double lcs = out.lse_cond_score[id.r];
    const bool trusted = d_max <= kFirstOrderLimit;
    constexpr double kInf = std::numeric_limits<double>::infinity();
    for (int x = 0; x < dv; ++x) {
      const int64_t e = id.r * dv + x;
      out.o[e] = to_dd(acc_[x] / l);
      const double o_abs = std::fabs(out.o[e].hi);
      const double first_order =
          (d + 2) * kU * (out.cond_score[e] + o_abs * lcs) + per_weight * (out.cond[e] + o_abs) + kU * o_abs;
      out.o_err[e] = trusted ? 2 * first_order + kDdRepresentation * o_abs + kTiny : kInf;
    }
    const Real ln_l = log(l);
    out.lse[id.r] = to_dd(m + ln_l);
    const double lse_abs = std::fabs(out.lse[id.r].hi);
    const double lse_first_order = (d + 2) * kU * lcs + per_weight +
                                   kFunctionRelErr * std::fabs(ln_l.convert_to<double>()) + kU * lse_abs;
    out.lse_err[id.r] = trusted ? 2 * lse_first_order + kDdRepresentation * lse_abs + kTiny : kInf;
  }

 private:
  const ProblemView& view_;
  KvCache kv_;
  std::vector<Real> acc_, q_, scores_, weights_;
  std::vector<double> q_double_, sigma_, add_;
  std::vector<int32_t> keys_;
  CondTerms cond_;
};

class BoostOracle final : public Oracle {
 public:
  std::string name() const override { return "boost" + std::to_string(kBits); }

  OracleResult compute(const afz_problem& p) const override {
    ProblemView view(p);
    OracleResult out;
    view.prepare(out);
    BoostRows rows(view);
    for (int64_t r = 0; r < view.rows(); ++r) rows.compute(view.row(r), out);
    return out;
  }

  void compute_rows(const afz_problem& p, const std::vector<int64_t>& rows, OracleResult& out) const override {
    ProblemView view(p);
    view.check_rows(out, rows);
    BoostRows engine(view);
    for (int64_t r : rows) engine.compute(view.row(r), out);
  }
};

}  // namespace

std::unique_ptr<Oracle> make_boost_oracle() { return std::make_unique<BoostOracle>(); }

}  // namespace afz
