// The fast tier: attention in double with error-free transformations, for
// shapes where 256-bit arithmetic is too slow, and with an a-priori bound on
// its own error per element (o_err) and per row (lse_err).  A row whose bound
// leaves a verdict open is recomputed by the escalation tier (Ziv).
//
// Scores are double-doubles (Dot2: TwoProd + TwoSum, Ogita-Rump-Oishi 2005)
// and the max is subtracted part by part (the mask, then the two halves of
// the softcapped dot product), so a row whose keys all carry an additive
// mask of -3.4e38 still has its scores' differences to ~1e-28.  The exponentials are libm's, in double:
// they are the dominant error (about 5 u per weight, u = 2^-53), and l and
// every numerator are compensated sums, so the result is within roughly
// 11 u (cond + |o|) of the exact value, cond = sum_j w_j |v_j|.
//
// ASSUMPTION: libm's exp, log, expm1 and tanh in double are within 2 ulps
// of the exact result (glibc documents at most 1 ulp for exp, log and tanh
// on x86_64).  The derivation of each bound sits next to the code it covers.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "eft.h"
#include "oracle.h"
#include "problem_view.h"

// The two hot loops are compiled twice, with and without FMA/AVX2, and the
// loader picks one by CPU (GNU ifunc).  Both give the same bits: std::fma is
// correctly rounded either way and the loops only vectorize across
// independent lanes, never reassociating a sum.  Sanitizer builds skip the
// clones: an ifunc resolver runs before the sanitizer runtime is ready.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AFZ_NO_CLONES 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define AFZ_NO_CLONES 1
#endif
#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__)) && !defined(AFZ_NO_CLONES)
#define AFZ_FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define AFZ_FMA_CLONES
#endif

namespace afz {

namespace {

using eft::Pair;
using oracle_detail::KvCache;
using oracle_detail::ProblemView;
using oracle_detail::RowId;

constexpr int kLanes = 4;                     // independent accumulators, one SIMD register of doubles
constexpr double kU = 0x1p-53;                // unit roundoff of double
constexpr double kTiny = 0x1p-1074;           // smallest subnormal: the absolute error of an underflow
// Below this argument exp(x) < 2^-1075: the weight rounds to 0 and the true
// one is below kTiny (exp(-745.2) = 2^-1075.1).
constexpr double kExpUnderflow = -745.2;
// A shift s_j - m above this means the max was chosen inconsistently, which
// only happens when the scores' errors are huge; clamping keeps exp finite
// and the row is then reported undecidable.
constexpr double kMaxShift = 64.0;
// Relative error of one weight exp(d_hi) (1 + d_lo): libm's exp (2 ulps =
// 4u), the fma (u), and |exp(d_lo) - 1 - d_lo| <= d_lo^2 <= (746 u)^2.
constexpr double kExpRelErr = 5.5 * kU;
// |cap tanh(x_hi) - cap tanh(t / cap)| for the rounded argument x_hi:
// tanh's 2 ulps (4u |cap|) plus |x - x_hi| <= 2u |x| damped by
// sech^2, max_x 2u x sech^2(x) = 0.9u, so 4.9u |cap|; 6u leaves room for
// the rounding of the bound itself.
constexpr double kSoftcapErr = 6 * kU;
constexpr double kInf = std::numeric_limits<double>::infinity();

double gamma(double n) { return n * kU / (1 - n * kU); }

// Dot2 of q with each listed key, in kLanes interleaved lanes: lane l sums
// x = l (mod kLanes).  Per product, TwoProd gives h + r = q_x k_x exactly
// and TwoSum folds h into the lane's running sum P exactly, its error e
// going with r into the lane's correction S (plain additions).  The lanes
// are then folded with TwoSum as well.  Every step but the additions into
// S is exact, so the only error is that of summing the 2d + 3 terms e, r
// in double: gamma(2d + 3) times their total magnitude, which is at most
// (d/4 + 4) u D with D = sum_x |q_x k_x| (each e is u times a lane's
// partial sum, each r u times its product).  Hence, with d' = d rounded up
// to kLanes (zero padding adds exact zeros),
//   |t_hi + t_lo - q.k| <= gamma(2d' + 3) (d'/4 + 4) u D(1 + gamma(d')).
// abs_dot receives sum |h| (within (d' + 1) u of D).
AFZ_FMA_CLONES
void dot2_keys(const double* __restrict q, const float* __restrict k_base, int k_stride, const int32_t* __restrict keys,
               int n, int d_padded, double* __restrict t_hi, double* __restrict t_lo, double* __restrict abs_dot) {
  for (int jj = 0; jj < n; ++jj) {
    const float* __restrict k = k_base + int64_t(keys[jj]) * k_stride;
    double P[kLanes] = {}, S[kLanes] = {}, A[kLanes] = {};
    for (int x = 0; x < d_padded; x += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        double h, r, s, e;
        eft::two_prod(q[x + l], double(k[x + l]), h, r);
        eft::two_sum(P[l], h, s, e);
        P[l] = s;
        S[l] += e + r;
        A[l] += std::fabs(h);
      }
    }
    double p = P[0], c = S[0], a = A[0];
    for (int l = 1; l < kLanes; ++l) {
      double e;
      eft::two_sum(p, P[l], p, e);
      c += e + S[l];
      a += A[l];
    }
    eft::two_sum(p, c, t_hi[jj], t_lo[jj]);
    abs_dot[jj] = a;
  }
}

// Per element x of the output, over the listed keys:
//   (S, C)  the compensated numerator sum_j e_j v_jx (Dot2 again),
//   A1 = sum_j e_j |v_jx|,  A2 = sum_j e_j sigma_j |v_jx|,  A3 = sum_j |v_jx|,
//   A4 = sum_j e_j rho_j |v_jx|: the condition terms times l and the
//   weights' error budget.  Keys whose weight underflowed only feed A3.
struct ValueSums {
  std::vector<double> S, C, A1, A2, A3, A4;
  void reset(int n) {
    for (auto* v : {&S, &C, &A1, &A2, &A3, &A4}) v->assign(n, 0.0);
  }
};

AFZ_FMA_CLONES
void accumulate_values(const float* __restrict v_base, int v_stride, const int32_t* __restrict keys,
                       const double* __restrict e, const double* __restrict e_sigma, const double* __restrict e_rho,
                       int n, int dv_padded, double* __restrict S, double* __restrict C, double* __restrict A1,
                       double* __restrict A2, double* __restrict A3, double* __restrict A4) {
  for (int jj = 0; jj < n; ++jj) {
    const float* __restrict v = v_base + int64_t(keys[jj]) * v_stride;
    const double w = e[jj], ws = e_sigma[jj], wr = e_rho[jj];
    if (w == 0) {
      for (int x = 0; x < dv_padded; ++x) A3[x] += std::fabs(double(v[x]));
      continue;
    }
    for (int x = 0; x < dv_padded; x += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        const int i = x + l;
        const double vx = v[i], av = std::fabs(vx);
        double h, r, s, q;
        eft::two_prod(w, vx, h, r);
        eft::two_sum(S[i], h, s, q);
        S[i] = s;
        C[i] += q + r;
        A1[i] += w * av;
        A2[i] += ws * av;
        A3[i] += av;
        A4[i] += wr * av;
      }
    }
  }
}

// s_j - m for the reference m = m_a + m_g + m_gl (three doubles, so m is
// exact), computed as (a_j - m_a) + (g_j.hi - m_g) + (g_j.lo - m_gl) so that
// neither a huge mask nor a huge dot product swamps the difference.  The
// first two differences are TwoSums (exact); the rest are additions of
// terms u times smaller:
//   g.lo - m_gl and its addition to gl:   u^2 (|g.hi| + |m_g|) + u^2 (|Gh| + |g.hi| + |m_g|)
//   al + gl and its addition to e:        u^2 (|Ah| + |Gh|) + u^2 (|H| + |Ah| + |Gh|)
// so, with |H| <= |Ah| + |Gh| and 10% for higher orders,
//   |result - exact| <= 1.1 u^2 (3 |Ah| + 4 |Gh| + 2 |g.hi| + 2 |m_g|).
// The reference key itself gets exactly 0, hence weight exactly 1.
struct Shift {
  Pair d;
  double err;
};
struct Reference {
  double m_a, m_g, m_gl;
  int key;  // ordinal of the reference key among the visible ones
};
Shift shifted(double a, Pair g, const Reference& m) {
  double ah, al, gh, gl, h, e;
  eft::two_sum(a, -m.m_a, ah, al);
  eft::two_sum(g.hi, -m.m_g, gh, gl);
  gl += g.lo - m.m_gl;
  eft::two_sum(ah, gh, h, e);
  e += al + gl;
  const double err = 1.1 * kU * kU * (3 * std::fabs(ah) + 4 * std::fabs(gh) + 2 * std::fabs(g.hi) + 2 * std::fabs(m.m_g));
  return {eft::normalize(h, e), err};
}

class FastRows {
 public:
  explicit FastRows(const ProblemView& view)
      : view_(view),
        kv_(view, kLanes),
        d_padded_(kv_.k_stride()),
        dv_padded_(kv_.v_stride()),
        q_(d_padded_, 0.0) {
    const int d = view.head_dim();
    // Score error per unit of scale * sum|q k| (see dot2_keys), times
    // (1 + gamma(d')) for abs_dot's own rounding, plus 3.2 u^2 for the
    // scale product (eft::mul), with 10% for the bound's own roundings.
    dot_err_ = 1.1 * (gamma(2 * d_padded_ + 3) * (d_padded_ / 4.0 + 4) * kU * (1 + gamma(d_padded_)) + 3.2 * kU * kU);
    // TwoProd underflow in the dot product: at most kTiny per product.
    dot_tiny_ = (d + kLanes) * kTiny;
  }

  void compute(const RowId& id, OracleResult& out) {
    view_.visible_keys(id, keys_, add_);
    if (keys_.empty()) {
      oracle_detail::write_empty_row(out, id.r);
      return;
    }
    const int n = int(keys_.size());
    kv_.load(id.b, view_.kv_head(id.h));
    for (int32_t j : keys_) kv_.require_finite(j);
    view_.load_q(id, q_.data());
    resize_keys(n);
    dot2_keys(q_.data(), kv_.k(0), kv_.k_stride(), keys_.data(), n, d_padded_, t_hi_.data(), t_lo_.data(),
              abs_dot_.data());
    scores(n);
    const Reference ref = reference(n);
    bool trusted = weights(n, ref);
    sums_.reset(dv_padded_);
    accumulate_values(kv_.v(0), kv_.v_stride(), keys_.data(), e_.data(), e_sigma_.data(), e_rho_.data(), n, dv_padded_,
                      sums_.S.data(), sums_.C.data(), sums_.A1.data(), sums_.A2.data(), sums_.A3.data(),
                      sums_.A4.data());
    trusted = finish(id, n, ref, trusted, out);
    if (!trusted) {
      for (int x = 0; x < view_.head_dim_v(); ++x) out.o_err[id.r * out.dv + x] = kInf;
      out.lse_err[id.r] = kInf;
    }
  }

 private:
  void resize_keys(int n) {
    for (auto* v : {&t_hi_, &t_lo_, &abs_dot_, &g_hi_, &g_lo_, &sigma_, &delta_, &e_, &e_sigma_, &e_rho_, &tail_})
      v->resize(n);
  }

  // g_j = softcap(scale * t_j) as a pair, sigma_j, and delta_j: the bound on
  // |g^_j - g_j|.  Without softcap, scale * t is eft::mul (3.2 u^2) on a
  // t within dot_err_: delta = dot_err_ scale D.  With softcap
  // cap tanh(t / cap): the argument's error is damped by tanh' <= 1 and
  // scaled back by |cap|, so it stays dot_err_ scale D; tanh and the
  // rounded argument add kSoftcapErr |cap|; cap * tanh is a TwoProd, exact.
  void scores(int n) {
    const double scale = view_.scale(), cap = view_.softcap();
    for (int jj = 0; jj < n; ++jj) {
      Pair g = eft::mul(Pair{t_hi_[jj], t_lo_[jj]}, scale);
      const double abs_scaled = std::fabs(scale) * abs_dot_[jj];
      delta_[jj] = dot_err_ * abs_scaled + dot_tiny_ * (std::fabs(scale) + 1);
      if (cap != 0) {
        const double y = std::tanh(g.hi / cap);
        eft::two_prod(cap, y, g.hi, g.lo);
        delta_[jj] += kSoftcapErr * std::fabs(cap);
      }
      g_hi_[jj] = g.hi;
      g_lo_[jj] = g.lo;
      sigma_[jj] = abs_scaled + std::fabs(cap) + std::fabs(add_[jj]);
    }
  }

  // The key with the largest score, compared through the same three-part
  // difference the weights use, so that no computed shift is noticeably
  // positive.  m = a_best + g_best is an exact reference: any m gives the
  // same o and lse = m + ln sum exp(s_j - m).
  Reference reference(int n) const {
    int best = 0;
    for (int jj = 1; jj < n; ++jj)
      if (shifted(add_[jj], {g_hi_[jj], g_lo_[jj]}, {add_[best], g_hi_[best], g_lo_[best], best}).d.hi > 0) best = jj;
    return {add_[best], g_hi_[best], g_lo_[best], best};
  }

  // e_j = exp(s_j - m) and the bound on its error.  With D_j = delta_j +
  // the shift's rounding, the true weight is e^(d_j) with |d_j - d^_j| <=
  // D_j, so |e^_j - e_j| <= e^_j rho_j + zeta, rho_j = (expm1(D_j) +
  // kExpRelErr) / (1 - kExpRelErr), zeta = 3 kTiny for a subnormal result
  // (2 ulps of exp plus the fma's rounding).  A weight below the underflow
  // threshold is set to 0; its true value is at most exp(d^ + |d_lo| + D),
  // kept in tail_.  Returns false when the bound cannot be trusted.
  bool weights(int n, const Reference& ref) {
    bool trusted = true;
    for (int jj = 0; jj < n; ++jj) {
      const Shift sh = shifted(add_[jj], {g_hi_[jj], g_lo_[jj]}, ref);
      const double D = delta_[jj] + sh.err;
      if (sh.d.hi < kExpUnderflow) {
        e_[jj] = e_sigma_[jj] = e_rho_[jj] = 0;
        const double top = sh.d.hi + std::fabs(sh.d.lo) + D;
        tail_[jj] = top < kExpUnderflow ? kTiny : std::exp(top) * (1 + 8 * kU);
        continue;
      }
      double dh = sh.d.hi;
      if (dh > kMaxShift) {  // see kMaxShift
        dh = kMaxShift;
        trusted = false;
      }
      const double E = std::exp(dh);
      e_[jj] = std::fma(E, sh.d.lo, E);  // exp(dh + d_lo) = E (1 + d_lo + O(d_lo^2))
      const double rho = (std::expm1(D) * (1 + 8 * kU) + kExpRelErr) / (1 - kExpRelErr);
      if (!(rho < kInf)) trusted = false;
      e_sigma_[jj] = e_[jj] * sigma_[jj];
      e_rho_[jj] = trusted ? e_[jj] * rho : 0;  // 0, not inf * 0 = NaN, when the row is lost anyway
      tail_[jj] = 3 * kTiny;
    }
    return trusted;
  }

  // l, o, lse, the condition terms and the bounds.
  bool finish(const RowId& id, int n, const Reference& ref, bool trusted, OracleResult& out) {
    const int dv = view_.head_dim_v();
    // l = sum e_j as a TwoSum chain: the n exact errors, each at most u l,
    // are summed in double: |error| <= gamma(n) n u l.
    double l_hi = 0, l_lo = 0, sum_e_rho = 0, sum_e_sigma = 0, zeta = 0, max_abs_score = 0, max_sigma = 0;
    for (int jj = 0; jj < n; ++jj) {
      double e;
      eft::two_sum(l_hi, e_[jj], l_hi, e);
      l_lo += e;
      sum_e_rho += e_rho_[jj];
      sum_e_sigma += e_sigma_[jj];
      zeta = std::max(zeta, tail_[jj]);
      max_abs_score = std::max(max_abs_score, std::fabs(g_hi_[jj] + add_[jj]));
      max_sigma = std::max(max_sigma, sigma_[jj]);
    }
    const Pair l = eft::normalize(l_hi, l_lo);
    // The accumulated bound terms are double sums of nonnegative roundings:
    // the true sums are within gamma(n + 2) of them; F covers that and the
    // few roundings in evaluating each bound.
    const double F = 1 + (2.0 * n + 16) * kU;
    const double eps_l = F * (sum_e_rho + n * zeta + gamma(n) * n * kU * l.hi);
    if (!(eps_l < 0.5 * l.hi)) trusted = false;
    const double l_low = l.hi * (1 - 2 * kU) - eps_l;  // l >= l_low > l^/2 (l.lo >= -u l.hi)

    // o = N / l.  With N^, l^ within eps_N, eps_l of the exact N, l:
    //   |N^/l^ - N/l| <= (eps_N + |N^/l^| eps_l) / l,
    // eps_N = sum_j |e^_j - e_j| |v_j| + Dot2's error: gamma(2n)(n + 1) u A1
    // (as in dot2_keys, over n products) + n kTiny (TwoProd underflow);
    // the DD division adds 16 u^2 |o| and a subnormal lo kTiny.
    const double dot_n = gamma(2.0 * n) * (n + 1) * kU;
    for (int x = 0; x < dv; ++x) {
      const int64_t e = id.r * dv + x;
      const Pair o = eft::div(eft::normalize(sums_.S[x], sums_.C[x]), l);
      out.o[e] = DD{o.hi, o.lo};
      out.cond[e] = sums_.A1[x] / l.hi;
      out.cond_score[e] = sums_.A2[x] / l.hi;
      out.cond_tiny[e] = sums_.A3[x] / l.hi;
      const double eps_n = F * (sums_.A4[x] + zeta * sums_.A3[x] + dot_n * sums_.A1[x] + n * kTiny);
      out.o_err[e] = F * (eps_n + std::fabs(o.hi) * eps_l) / l_low + 16 * kU * kU * std::fabs(o.hi) + kTiny;
    }

    // lse = m_a + m_g + m_gl + ln l.  ln(l_hi + l_lo) = ln l_hi + l_lo / l_hi
    // up to (l_lo / l_hi)^2 <= u^2, and ln_lo rounds by u^2; libm's log costs
    // 4u |ln l_hi|.  The TwoSum errors e1 <= u(|m_a| + |m_g|) and e2 <= u(|x1|
    // + |ln|) are added with m_gl (<= u |m_g|) and ln_lo in three roundings of
    // u times their sum: in all at most 5.5 u^2 (|m_a| + |m_g| + |ln l_hi| + 2)
    // with the two u^2 above.  l's own
    // error moves ln l by -ln(1 - eps_l / l^) <= (eps_l / l^) / (1 - eps_l / l^).
    const double ln_hi = std::log(l.hi), ln_lo = l.lo / l.hi;
    double x1, e1, x2, e2;
    eft::two_sum(ref.m_a, ref.m_g, x1, e1);
    eft::two_sum(x1, ln_hi, x2, e2);
    const Pair lse = eft::normalize(x2, e1 + e2 + ref.m_gl + ln_lo);
    out.lse[id.r] = DD{lse.hi, lse.lo};
    const double rel_l = eps_l / l.hi;
    out.lse_err[id.r] = F * (rel_l / (1 - rel_l) + 4 * kU * std::fabs(ln_hi) +
                             5.5 * kU * kU * (std::fabs(ref.m_a) + std::fabs(ref.m_g) + std::fabs(ln_hi) + 2)) +
                        kTiny;

    out.lse_cond_score[id.r] = sum_e_sigma / l.hi;
    out.max_abs_score[id.r] = max_abs_score;
    out.max_sigma[id.r] = max_sigma;
    out.visible_keys[id.r] = n;
    out.max_key[id.r] = ref.key;
    out.empty[id.r] = 0;
    return trusted;
  }

  const ProblemView& view_;
  KvCache kv_;
  int d_padded_, dv_padded_;
  double dot_err_ = 0, dot_tiny_ = 0;
  std::vector<double> q_;
  std::vector<int32_t> keys_;
  std::vector<double> add_, t_hi_, t_lo_, abs_dot_, g_hi_, g_lo_, sigma_, delta_, e_, e_sigma_, e_rho_, tail_;
  ValueSums sums_;
};

class FastOracle final : public Oracle {
 public:
  std::string name() const override { return "fast"; }

  OracleResult compute(const afz_problem& p) const override {
    ProblemView view(p);
    OracleResult out;
    view.prepare(out);
    FastRows rows(view);
    for (int64_t r = 0; r < view.rows(); ++r) rows.compute(view.row(r), out);
    return out;
  }

  void compute_rows(const afz_problem& p, const std::vector<int64_t>& rows, OracleResult& out) const override {
    ProblemView view(p);
    view.check_rows(out, rows);
    FastRows engine(view);
    for (int64_t r : rows) engine.compute(view.row(r), out);
  }
};

}  // namespace

std::unique_ptr<Oracle> make_fast_oracle() { return std::make_unique<FastOracle>(); }

}  // namespace afz
