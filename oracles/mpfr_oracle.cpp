// The MPFR tier: exact attention at a configurable precision (default 256
// bits), the reference of last resort that undecided rows escalate to.
//
// MPFR rounds every operation correctly, so the error analysis below is
// rigorous.  Scores are computed at a precision raised by the magnitude of
// the row's largest score bound, so their absolute error stays ~2^-p even
// for scores of 1e30 or an additive mask of -3.4e38; the weights, sums and
// outputs are at p bits.
#include "oracles/oracle.h"

#if ATTNFUZZ_HAVE_MPFR

#include <mpfr.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "oracles/problem_view.h"

namespace afz {

namespace {

using oracle_detail::CondTerms;
using oracle_detail::KvCache;
using oracle_detail::ProblemView;
using oracle_detail::RowId;

constexpr mpfr_prec_t kMinPrecision = 64;
constexpr mpfr_prec_t kMaxPrecision = 1 << 16;
// A double times a value of at most 53 bits (every input dtype) is exact in 106 bits.
constexpr mpfr_prec_t kExactProductBits = 106;
// Score precision grows in steps, so neighbouring rows share it and the
// score array is rarely re-allocated.
constexpr int kGuardStep = 32;
constexpr double kDdRepresentation = 0x1p-105;  // |x - (hi + lo)| / |x| for hi, lo rounded to nearest
constexpr double kTiny = 0x1p-1074;             // a subnormal lo may round away this much

// n mpfr_t initialized once, cleared once: nothing in a hot loop allocates.
class MpfrArray {
 public:
  MpfrArray(size_t n, mpfr_prec_t prec) : v_(n) {
    for (auto& x : v_) mpfr_init2(&x, prec);
  }
  ~MpfrArray() {
    for (auto& x : v_) mpfr_clear(&x);
  }
  MpfrArray(const MpfrArray&) = delete;
  MpfrArray& operator=(const MpfrArray&) = delete;
  mpfr_ptr operator[](size_t i) { return &v_[i]; }
  mpfr_ptr* pointers(std::vector<mpfr_ptr>& out) {
    out.clear();
    for (auto& x : v_) out.push_back(&x);
    return out.data();
  }

 private:
  std::vector<__mpfr_struct> v_;
};

class MpfrVar {
 public:
  explicit MpfrVar(mpfr_prec_t prec) { mpfr_init2(x_, prec); }
  ~MpfrVar() { mpfr_clear(x_); }
  MpfrVar(const MpfrVar&) = delete;
  MpfrVar& operator=(const MpfrVar&) = delete;
  mpfr_ptr get() { return x_; }
  // Sets the precision (dropping the value) only when it changes.
  void ensure_precision(mpfr_prec_t prec) {
    if (mpfr_get_prec(x_) != prec) mpfr_set_prec(x_, prec);
  }

 private:
  mpfr_t x_;
};

// x as hi + lo: hi = x rounded to nearest, lo = the remainder rounded to
// nearest.  x - hi is exact in scratch when scratch has at least x's
// precision: hi's last bit is no finer than x's.
DD to_dd(mpfr_srcptr x, mpfr_ptr scratch) {
  DD out;
  out.hi = mpfr_get_d(x, MPFR_RNDN);
  mpfr_sub_d(scratch, x, out.hi, MPFR_RNDN);
  out.lo = mpfr_get_d(scratch, MPFR_RNDN);
  return out;
}

// Extra score bits so that 2^-(p + guard) * (largest score bound) <= 2^-(p+1).
mpfr_prec_t guard_bits(double sigma_max) {
  if (!(sigma_max > 0)) return 0;
  const int needed = std::ilogb(sigma_max) + 2;
  return needed <= 0 ? 0 : mpfr_prec_t((needed + kGuardStep - 1) / kGuardStep * kGuardStep);
}

// One compute() call's workspace; rows are computed one after another.
class MpfrRows {
 public:
  MpfrRows(const ProblemView& view, mpfr_prec_t prec)
      : view_(view),
        prec_(prec),
        kv_(view, 1),
        q_(view.head_dim(), 53),
        products_(view.head_dim(), kExactProductBits),
        acc_(view.head_dim_v(), prec),
        n_max_(view.problem().max_seqlen_k),
        scores_(n_max_, prec),
        weights_(n_max_, prec),
        m_(prec),
        diff_(prec),
        l_(prec),
        tmp_(prec),
        scratch_(prec) {
    q_double_.resize(view.head_dim());
    products_.pointers(product_ptrs_);
  }

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
    for (int x = 0; x < d; ++x) mpfr_set_d(q_[x], q_double_[x], MPFR_RNDN);  // exact: 53 bits

    // sigma_j first: the largest one fixes the score precision.
    sigma_.resize(n);
    double sigma_max = 0;
    for (int jj = 0; jj < n; ++jj) {
      kv_.require_finite(keys_[jj]);
      sigma_[jj] = oracle_detail::scaled_abs_dot(q_double_.data(), kv_.k(keys_[jj]), d, scale) + std::fabs(cap) +
                   std::fabs(add_[jj]);
      sigma_max = std::max(sigma_max, sigma_[jj]);
    }
    const mpfr_prec_t score_prec = prec_ + guard_bits(sigma_max);
    m_.ensure_precision(score_prec);
    diff_.ensure_precision(score_prec);
    scratch_.ensure_precision(score_prec);  // >= every precision to_dd sees

    // s_j = softcap(scale * q.k_j) + a_j.  The products are exact and
    // mpfr_sum rounds their sum once, correctly.
    for (int jj = 0; jj < n; ++jj) {
      mpfr_ptr s = scores_[jj];
      if (mpfr_get_prec(s) != score_prec) mpfr_set_prec(s, score_prec);
      const float* k = kv_.k(keys_[jj]);
      for (int x = 0; x < d; ++x) mpfr_mul_d(products_[x], q_[x], k[x], MPFR_RNDN);
      mpfr_sum(s, product_ptrs_.data(), d, MPFR_RNDN);
      mpfr_mul_d(s, s, scale, MPFR_RNDN);
      if (cap != 0) {
        mpfr_div_d(s, s, cap, MPFR_RNDN);
        mpfr_tanh(s, s, MPFR_RNDN);
        mpfr_mul_d(s, s, cap, MPFR_RNDN);
      }
      mpfr_add_d(s, s, add_[jj], MPFR_RNDN);
      if (jj == 0 || mpfr_greater_p(s, m_.get())) mpfr_set(m_.get(), s, MPFR_RNDN);
    }

    // e_j = exp(s_j - m) <= 1, l = sum e_j >= 1.  MPFR's exponent range
    // (down to 2^-(2^30) at least) keeps even exp(-3e38) from going below
    // zero by more than that, and s_j - m is never +inf - (+inf): all finite.
    mpfr_set_zero(l_.get(), 1);
    for (int jj = 0; jj < n; ++jj) {
      mpfr_sub(diff_.get(), scores_[jj], m_.get(), MPFR_RNDN);
      mpfr_exp(weights_[jj], diff_.get(), MPFR_RNDN);
      mpfr_add(l_.get(), l_.get(), weights_[jj], MPFR_RNDN);
    }

    // Numerator sum_j e_j v_j, one accumulator per output element.
    for (int x = 0; x < dv; ++x) mpfr_set_zero(acc_[x], 1);
    for (int jj = 0; jj < n; ++jj) {
      if (mpfr_zero_p(weights_[jj])) continue;
      const float* v = kv_.v(keys_[jj]);
      for (int x = 0; x < dv; ++x) {
        mpfr_mul_d(tmp_.get(), weights_[jj], v[x], MPFR_RNDN);
        mpfr_add(acc_[x], acc_[x], tmp_.get(), MPFR_RNDN);
      }
    }

    // Condition terms from w_j = e_j / l, in double.
    cond_.begin(dv);
    for (int jj = 0; jj < n; ++jj) {
      mpfr_div(tmp_.get(), weights_[jj], l_.get(), MPFR_RNDN);
      const double w = mpfr_get_d(tmp_.get(), MPFR_RNDN);
      cond_.add_key(w, sigma_[jj], std::fabs(mpfr_get_d(scores_[jj], MPFR_RNDN)), kv_.v(keys_[jj]));
    }
    cond_.finish(mpfr_get_d(l_.get(), MPFR_RNDN), id.r, out);

    // Error bound (u = 2^-p).  Every score is below E = 2^(ilogb(sigma_max)+1)
    // in magnitude and the score precision is p + guard with 2^-guard E <= 1/2,
    // so each of the <= 6 roundings of the score pipeline (sum, scale,
    // softcap's division, tanh and product, mask addition) and the rounding
    // of s_j - m (|s_j - m| <= 2E) cost at most u absolute: the exponent's
    // argument is off by D <= 4u.  exp rounds (u), so every weight carries a
    // relative error <= e^(4u)(1 + u) - 1 <= 5.01u.  The n positive terms of
    // l round n - 1 times (gamma(n-1)); the numerator's n products and sums
    // 2n times, against sum e_j |v_j| = l cond; the quotient once.  With
    // |o| <= cond this gives |o^ - o| <= (n + 8) u (cond + |o|) to first
    // order in u; the factor 2 covers the higher orders and the double
    // rounding of cond itself.  The DD adds 2^-105 |o|, and a subnormal lo
    // 2^-1074.  For the LSE = m + ln l: l's relative error (5.01u +
    // gamma(n)) becomes absolute, ln rounds (u |ln l|), and m + ln l rounds
    // at the score precision (u/2).
    const double u = std::ldexp(1.0, -int(prec_));
    for (int x = 0; x < dv; ++x) {
      const int64_t e = id.r * dv + x;
      mpfr_div(tmp_.get(), acc_[x], l_.get(), MPFR_RNDN);
      out.o[e] = to_dd(tmp_.get(), scratch_.get());
      const double o_abs = std::fabs(out.o[e].hi);
      out.o_err[e] = 2 * (n + 8) * u * (out.cond[e] + o_abs) + kDdRepresentation * o_abs + kTiny;
    }
    mpfr_log(tmp_.get(), l_.get(), MPFR_RNDN);
    const double ln_l = mpfr_get_d(tmp_.get(), MPFR_RNDN);
    mpfr_add(diff_.get(), m_.get(), tmp_.get(), MPFR_RNDN);
    out.lse[id.r] = to_dd(diff_.get(), scratch_.get());
    out.lse_err[id.r] =
        2 * (n + 8) * u * (1 + std::fabs(ln_l)) + kDdRepresentation * std::fabs(out.lse[id.r].hi) + kTiny;
  }

 private:
  const ProblemView& view_;
  mpfr_prec_t prec_;
  KvCache kv_;
  MpfrArray q_, products_, acc_;
  int n_max_;
  MpfrArray scores_, weights_;
  MpfrVar m_, diff_, l_, tmp_, scratch_;
  std::vector<mpfr_ptr> product_ptrs_;
  std::vector<double> q_double_, sigma_;
  std::vector<int32_t> keys_;
  std::vector<double> add_;
  CondTerms cond_;
};

class MpfrOracle final : public Oracle {
 public:
  explicit MpfrOracle(mpfr_prec_t prec) : prec_(prec) {}
  std::string name() const override { return "mpfr" + std::to_string(prec_); }

  OracleResult compute(const afz_problem& p) const override {
    ProblemView view(p);
    OracleResult out;
    view.prepare(out);
    MpfrRows rows(view, prec_);
    for (int64_t r = 0; r < view.rows(); ++r) rows.compute(view.row(r), out);
    return out;
  }

  void compute_rows(const afz_problem& p, const std::vector<int64_t>& rows, OracleResult& out) const override {
    ProblemView view(p);
    view.check_rows(out, rows);
    MpfrRows engine(view, prec_);
    for (int64_t r : rows) engine.compute(view.row(r), out);
  }

 private:
  mpfr_prec_t prec_;
};

}  // namespace

std::unique_ptr<Oracle> make_mpfr_oracle(int precision_bits) {
  if (precision_bits < kMinPrecision || precision_bits > kMaxPrecision)
    throw std::invalid_argument("oracle: MPFR precision " + std::to_string(precision_bits) + " bits outside [" +
                                std::to_string(kMinPrecision) + ", " + std::to_string(kMaxPrecision) + "]");
  return std::make_unique<MpfrOracle>(precision_bits);
}

bool have_mpfr() { return true; }

}  // namespace afz

#else  // !ATTNFUZZ_HAVE_MPFR: this build has no MPFR headers (the H200 image).

namespace afz {

std::unique_ptr<Oracle> make_mpfr_oracle(int) { return nullptr; }
bool have_mpfr() { return false; }

}  // namespace afz

#endif
