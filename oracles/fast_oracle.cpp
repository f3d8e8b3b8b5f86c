// The fast tier: attention in double with error-free transformations, for
// shapes where 256-bit arithmetic is too slow, and with an a-priori bound on
// its own error per element (o_err) and per row (lse_err).  A row whose bound
// leaves a verdict open is recomputed by the escalation tier (Ziv).
//
// Scores are double-doubles (Dot2 of Ogita-Rump-Oishi 2005: TwoProd and
// TwoSum) and the max is subtracted part by part (the mask, then the two
// halves of the softcapped dot product), so a row whose keys all carry an
// additive mask of -3.4e38 still has its scores' differences to ~1e-28.
// The exponentials are libm's, in double: they are the dominant error
// (about 5 u per weight, u = 2^-53); l and every numerator are compensated
// sums (Sum2, Dot2), so the result is within about 5.5 u (cond + |o|) of
// the exact value, cond = sum_j w_j |v_j|, and the bound says so.
//
// In the two hot loops TwoProd needs no FMA: every input has at most 24
// significant bits, so q_x k_x is exact in double, and a weight split once
// into two 26-bit halves (eft::split) makes e_j v_jx a sum of two exact
// products.  The scalar steps (scale, softcap, division) use the FMA
// TwoProd of eft.h.
//
// ASSUMPTION: libm's exp, log, expm1 and tanh in double are within 2 ulps
// of the exact result (glibc documents at most 1 ulp for exp, log and tanh
// on x86_64).  The derivation of each bound sits next to the code it covers.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "oracles/eft.h"
#include "oracles/oracle.h"
#include "oracles/problem_view.h"

// The two hot loops work on vectors of kVec doubles (GCC/Clang vector
// extensions) and are compiled twice, for AVX2 and for baseline x86-64 (two
// SSE2 halves per vector); the loader picks one by CPU (GNU ifunc).  Both
// give the same bits: the loops only run independent lanes side by side,
// never reassociating a sum, and need no FMA (see dot2_keys and
// accumulate_values).  Sanitizer builds skip the clones: an ifunc resolver
// runs before the sanitizer runtime is ready.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AFZ_NO_CLONES 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define AFZ_NO_CLONES 1
#endif
#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__)) && !defined(AFZ_NO_CLONES)
#define AFZ_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define AFZ_SIMD_CLONES
#endif

namespace afz {

namespace {

using eft::Pair;
using oracle_detail::KvCache;
using oracle_detail::ProblemView;
using oracle_detail::RowId;

constexpr int kVec = 4;                       // doubles per vector: one AVX2 register
constexpr int kLanes = 2 * kVec;              // independent dot-product lanes: two vectors hide add latency
constexpr int kPad = kLanes;                  // K and V rows are zero-padded to a multiple of this
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

typedef double Vd __attribute__((vector_size(kVec * sizeof(double))));
typedef float Vf __attribute__((vector_size(kVec * sizeof(float))));
typedef uint64_t Vu __attribute__((vector_size(kVec * sizeof(uint64_t))));

// Vectors travel through references and out-parameters only: a 32-byte
// vector by value has another ABI with and without AVX, which the clones
// would cross (Clang rejects that, GCC warns).
inline void load_vd(Vd& v, const double* p) { std::memcpy(&v, p, sizeof v); }
inline void load_widened(Vd& v, const float* p) {  // float -> double is exact
  Vf f;
  std::memcpy(&f, p, sizeof f);
  v = __builtin_convertvector(f, Vd);
}
inline void store_vd(double* p, const Vd& v) { std::memcpy(p, &v, sizeof v); }
inline void broadcast(Vd& v, double x) { v = Vd{} + x; }
inline void add_abs(Vd& acc, const Vd& x) {  // acc += |x|, by clearing the sign bits
  constexpr uint64_t kNoSign = ~(uint64_t{1} << 63);
  acc += (Vd)((Vu)x & kNoSign);
}
inline void add_scaled_abs(Vd& acc, const Vd& w, const Vd& abs_x) { acc += w * abs_x; }

// Dot2 of q with each listed key.  q and k hold at most 24 significant bits
// (every input dtype is a subset of fp32), so each product h = q_x k_x is
// exact in double (48 bits, and no underflow: |h| >= 2^-298): TwoProd's
// error term is identically 0 and needs no FMA.  TwoSum folds h into lane
// l's running sum P exactly (lane l takes x = l mod kLanes), its error e
// going into the lane's correction S by plain additions; the lanes are
// folded with TwoSum too.  Every step but the additions into S is exact, so
// the only error is that of summing those d' + kLanes - 1 error terms in
// double: gamma(d' + kLanes) times their total magnitude, at most
// (d' / kLanes + kLanes) u D with D = sum_x |q_x k_x| (each e is u times a
// lane's partial sum).  Hence, with d' = d rounded up to kPad (the zero
// padding adds exact zeros),
//   |t_hi + t_lo - q.k| <= gamma(d' + kLanes) (d'/kLanes + kLanes) u D.
// abs_dot receives D itself, rounded (relative gamma(d')).
AFZ_SIMD_CLONES
void dot2_keys(const double* __restrict q, const float* __restrict k_base, int k_stride, const int32_t* __restrict keys,
               int n, int d_padded, double* __restrict t_hi, double* __restrict t_lo, double* __restrict abs_dot) {
  for (int jj = 0; jj < n; ++jj) {
    const float* __restrict k = k_base + int64_t(keys[jj]) * k_stride;
    Vd P0{}, P1{}, S0{}, S1{}, A0{}, A1{};
    for (int x = 0; x < d_padded; x += kLanes) {
      Vd q0, q1, k0, k1;
      load_vd(q0, q + x), load_vd(q1, q + x + kVec);
      load_widened(k0, k + x), load_widened(k1, k + x + kVec);
      const Vd h0 = q0 * k0, h1 = q1 * k1;  // exact
      Vd s, e;
      eft::two_sum(P0, h0, s, e);
      P0 = s;
      S0 += e;
      eft::two_sum(P1, h1, s, e);
      P1 = s;
      S1 += e;
      add_abs(A0, h0);
      add_abs(A1, h1);
    }
    double p = P0[0], c = S0[0] + S1[0], a = A0[0] + A1[0];
    for (int l = 0; l < kVec; ++l) {
      double e;
      if (l > 0) {
        eft::two_sum(p, P0[l], p, e);
        c += e + S0[l] + S1[l];
        a += A0[l] + A1[l];
      }
      eft::two_sum(p, P1[l], p, e);
      c += e;
    }
    eft::two_sum(p, c, t_hi[jj], t_lo[jj]);
    abs_dot[jj] = a;
  }
}

// Per element x of the output, over the listed keys:
//   (S, C)  the compensated numerator sum_j e_j v_jx,
//   A1 = sum_j e_j |v_jx|,  A2 = sum_j e_j sigma_j |v_jx|,  A3 = sum_j |v_jx|,
//   A4 = sum_j e_j rho_j |v_jx|: the condition terms times l and the
//   weights' error budget.
// e_j v_jx is made exact without an FMA: e_j = hi + lo (eft::split, once per
// key) and both parts times a 24-bit v are exact, so each key adds two exact
// products to the numerator through two TwoSums whose errors go to C.  The
// only rounding is in C's additions: 2n error terms, each at most u times a
// partial sum (<= u A1), summed in double: gamma(2n)(2n + 1) u A1.  Products
// that underflow (a subnormal weight) add at most kTiny each.
// A key whose weight underflowed to 0 goes through the same steps, which then
// change nothing but A3.  Keys are applied kKeyBlock at a time to each vector
// of elements, in key order, so the accumulators stay in registers and the
// sums are the same as one key at a time.
struct ValueSums {
  std::vector<double> S, C, A1, A2, A3, A4;
  std::vector<float> zero_row;  // stands in for the missing keys of a short last block
  void reset(int n) {
    for (auto* v : {&S, &C, &A1, &A2, &A3, &A4}) v->assign(n, 0.0);
    zero_row.assign(n, 0.0f);
  }
};

constexpr int kKeyBlock = 4;

AFZ_SIMD_CLONES
void accumulate_values(const float* __restrict v_base, int v_stride, const int32_t* __restrict keys,
                       const double* __restrict e, const double* __restrict e_sigma, const double* __restrict e_rho,
                       int n, int dv_padded, const float* __restrict zero_row, double* __restrict S,
                       double* __restrict C, double* __restrict A1, double* __restrict A2, double* __restrict A3,
                       double* __restrict A4) {
  for (int j0 = 0; j0 < n; j0 += kKeyBlock) {
    const float* __restrict v[kKeyBlock];
    Vd w_hi[kKeyBlock], w_lo[kKeyBlock], w[kKeyBlock], ws[kKeyBlock], wr[kKeyBlock];
    for (int b = 0; b < kKeyBlock; ++b) {
      // A short last block is completed with weight 0 and a row of zeros,
      // which leave every sum as it is.
      const bool real = j0 + b < n;
      v[b] = real ? v_base + int64_t(keys[j0 + b]) * v_stride : zero_row;
      const double wj = real ? e[j0 + b] : 0.0;
      double hi, lo;
      eft::split(wj, hi, lo);
      broadcast(w_hi[b], hi);
      broadcast(w_lo[b], lo);
      broadcast(w[b], wj);
      broadcast(ws[b], real ? e_sigma[j0 + b] : 0.0);
      broadcast(wr[b], real ? e_rho[j0 + b] : 0.0);
    }
    for (int x = 0; x < dv_padded; x += kVec) {
      Vd s, c, a1, a2, a3, a4;
      load_vd(s, S + x), load_vd(c, C + x), load_vd(a1, A1 + x), load_vd(a2, A2 + x), load_vd(a3, A3 + x),
          load_vd(a4, A4 + x);
      for (int b = 0; b < kKeyBlock; ++b) {
        Vd vx, av{}, t, q1, q2;
        load_widened(vx, v[b] + x);
        add_abs(av, vx);
        eft::two_sum(s, w_hi[b] * vx, t, q1);  // exact product
        eft::two_sum(t, w_lo[b] * vx, s, q2);  // exact product
        c += q1 + q2;
        add_scaled_abs(a1, w[b], av);
        add_scaled_abs(a2, ws[b], av);
        a3 += av;
        add_scaled_abs(a4, wr[b], av);
      }
      store_vd(S + x, s), store_vd(C + x, c), store_vd(A1 + x, a1), store_vd(A2 + x, a2), store_vd(A3 + x, a3),
          store_vd(A4 + x, a4);
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
  const double err =
      1.1 * kU * kU * (3 * std::fabs(ah) + 4 * std::fabs(gh) + 2 * std::fabs(g.hi) + 2 * std::fabs(m.m_g));
  return {eft::normalize(h, e), err};
}

class FastRows {
 public:
  explicit FastRows(const ProblemView& view)
      : view_(view),
        kv_(view, kPad),
        d_padded_(kv_.k_stride()),
        dv_padded_(kv_.v_stride()),
        q_(d_padded_, 0.0) {
    // Score error per unit of scale * sum|q k| (see dot2_keys), times
    // (1 + gamma(d')) for abs_dot's own rounding, plus 3.2 u^2 for the
    // scale product (eft::mul), with 10% for the bound's own roundings.
    const double d = d_padded_;
    dot_err_ = 1.1 * (gamma(d + kLanes) * (d / kLanes + kLanes) * kU * (1 + gamma(d)) + 3.2 * kU * kU);
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
                      sums_.zero_row.data(), sums_.S.data(), sums_.C.data(), sums_.A1.data(), sums_.A2.data(),
                      sums_.A3.data(), sums_.A4.data());
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
      delta_[jj] = dot_err_ * abs_scaled + kTiny;  // kTiny: eft::mul's underflow
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
    // eps_N = sum_j |e^_j - e_j| |v_j| + the numerator's own rounding,
    // gamma(2n)(2n + 1) u A1 + 2n kTiny (see accumulate_values); the DD
    // division adds 16 u^2 |o| and a subnormal lo kTiny.
    const double dot_n = gamma(2.0 * n) * (2.0 * n + 1) * kU;
    for (int x = 0; x < dv; ++x) {
      const int64_t e = id.r * dv + x;
      const Pair o = eft::div(eft::normalize(sums_.S[x], sums_.C[x]), l);
      out.o[e] = DD{o.hi, o.lo};
      out.cond[e] = sums_.A1[x] / l.hi;
      out.cond_score[e] = sums_.A2[x] / l.hi;
      out.cond_tiny[e] = sums_.A3[x] / l.hi;
      const double eps_n = F * (sums_.A4[x] + zeta * sums_.A3[x] + dot_n * sums_.A1[x] + 2.0 * n * kTiny);
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
  double dot_err_ = 0;
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
