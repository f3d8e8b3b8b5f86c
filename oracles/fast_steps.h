// The fast tier's arithmetic, one key or one row at a time: the steps and
// a-priori bounds that fast_oracle.cpp (on the CPU, vectorized) and
// gpu/gpu_oracle.cu (on the GPU, one thread per key or element) both run,
// so the two tiers compute the same things with the same bound and can only
// differ in the last bits of the transcendental functions.  Both sides meet
// fast_oracle.cpp's ASSUMPTION of at most 2 ulps for double exp, expm1, log
// and tanh: glibc documents 1 ulp on x86_64, and the CUDA Programming
// Guide's table of double-precision standard functions 1 ulp for each (from
// extensive tests, not proofs: the same standing as glibc's figures).  The
// derivation of each bound sits next to the code it covers.
//
// Everything here is host-device and libm-only through the unqualified
// double functions (::exp and friends), so that nvcc picks its device
// versions and g++ glibc's.  Both compilers must keep every operation as
// written (no FMA contraction: -ffp-contract=off, nvcc --fmad=false).
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "oracles/eft.h"

namespace afz::fast_steps {

using eft::Pair;

constexpr int kLanes = 8;                     // independent dot-product lanes (fast_oracle.cpp: two vectors of 4)
constexpr int kPad = kLanes;                  // head dims are rounded up to this for the dot bound
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

AFZ_HOST_DEVICE inline double gamma(double n) { return n * kU / (1 - n * kU); }

// A head dim rounded up to kPad: the padded length the dot bound is stated for.
AFZ_HOST_DEVICE inline int padded(int d) { return (d + kPad - 1) / kPad * kPad; }

// The lane-folding of Dot2 (fast_oracle.cpp, dot2_keys): lane l holds the
// running TwoSum P[l], its error sum S[l] and sum |q_x k_x| A[l] over
// x = l mod kLanes.  Lanes 0..3 and 4..7 are the two vectors of the CPU
// loop; they are folded in this order, with TwoSum, on both tiers.
AFZ_HOST_DEVICE inline void fold_lanes(const double* P, const double* S, const double* A, double& t_hi, double& t_lo,
                                       double& abs_dot) {
  constexpr int kHalf = kLanes / 2;
  double p = P[0], c = S[0] + S[kHalf], a = A[0] + A[kHalf];
  for (int l = 0; l < kHalf; ++l) {
    double e;
    if (l > 0) {
      eft::two_sum(p, P[l], p, e);
      c += e + S[l] + S[kHalf + l];
      a += A[l] + A[kHalf + l];
    }
    eft::two_sum(p, P[kHalf + l], p, e);
    c += e;
  }
  eft::two_sum(p, c, t_hi, t_lo);
  abs_dot = a;
}

// Score error per unit of scale * sum|q k| (see dot2_keys in
// fast_oracle.cpp), times (1 + gamma(d')) for abs_dot's own rounding, plus
// 3.2 u^2 for the scale product (eft::mul), with 10% for the bound's own
// roundings.  d_padded = padded(head_dim).
AFZ_HOST_DEVICE inline double dot_err(int d_padded) {
  const double d = d_padded;
  return 1.1 * (gamma(d + kLanes) * (d / kLanes + kLanes) * kU * (1 + gamma(d)) + 3.2 * kU * kU);
}

// g_j = softcap(scale * t_j) as a pair, sigma_j, and delta_j: the bound on
// |g^_j - g_j|.  Without softcap, scale * t is eft::mul (3.2 u^2) on a
// t within dot_err: delta = dot_err scale D.  With softcap
// cap tanh(t / cap): the argument's error is damped by tanh' <= 1 and
// scaled back by |cap|, so it stays dot_err scale D; tanh and the
// rounded argument add kSoftcapErr |cap|; cap * tanh is a TwoProd, exact.
struct Score {
  double g_hi, g_lo, sigma, delta;
};
AFZ_HOST_DEVICE inline Score score(double t_hi, double t_lo, double abs_dot, double add, double scale, double cap,
                                   double dot_err) {
  Pair g = eft::mul(Pair{t_hi, t_lo}, scale);
  const double abs_scaled = fabs(scale) * abs_dot;
  double delta = dot_err * abs_scaled + kTiny;  // kTiny: eft::mul's underflow
  if (cap != 0) {
    const double y = tanh(g.hi / cap);
    eft::two_prod(cap, y, g.hi, g.lo);
    delta += kSoftcapErr * fabs(cap);
  }
  return {g.hi, g.lo, abs_scaled + fabs(cap) + fabs(add), delta};
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
AFZ_HOST_DEVICE inline Shift shifted(double a, Pair g, const Reference& m) {
  double ah, al, gh, gl, h, e;
  eft::two_sum(a, -m.m_a, ah, al);
  eft::two_sum(g.hi, -m.m_g, gh, gl);
  gl += g.lo - m.m_gl;
  eft::two_sum(ah, gh, h, e);
  e += al + gl;
  const double err = 1.1 * kU * kU * (3 * fabs(ah) + 4 * fabs(gh) + 2 * fabs(g.hi) + 2 * fabs(m.m_g));
  return {eft::normalize(h, e), err};
}

// Whether key (a, g) replaces the current reference: the max is taken
// through the same three-part difference the weights use, so that no
// computed shift is noticeably positive.  Any reference gives the same o
// and lse = m + ln sum exp(s_j - m); scanning the keys in order and
// replacing on a positive shift picks the same key on both tiers.
AFZ_HOST_DEVICE inline bool beats(double a, Pair g, const Reference& m) { return shifted(a, g, m).d.hi > 0; }

// e_j = exp(s_j - m) and the bound on its error.  With D_j = delta_j +
// the shift's rounding, the true weight is e^(d_j) with |d_j - d^_j| <=
// D_j, so |e^_j - e_j| <= e^_j rho_j + zeta, rho_j = (expm1(D_j) +
// kExpRelErr) / (1 - kExpRelErr), zeta = 3 kTiny for a subnormal result
// (2 ulps of exp plus the fma's rounding).  A weight below the underflow
// threshold is set to 0; its true value is at most exp(d^ + |d_lo| + D),
// kept in tail.  Clears *trusted when the bound cannot be trusted.
struct Weight {
  double e, e_sigma, e_rho, tail;
};
AFZ_HOST_DEVICE inline Weight weight(double add, Pair g, double sigma, double delta, const Reference& ref,
                                     bool* trusted) {
  const Shift sh = shifted(add, g, ref);
  const double D = delta + sh.err;
  if (sh.d.hi < kExpUnderflow) {
    const double top = sh.d.hi + fabs(sh.d.lo) + D;
    return {0, 0, 0, top < kExpUnderflow ? kTiny : exp(top) * (1 + 8 * kU)};
  }
  double dh = sh.d.hi;
  if (dh > kMaxShift) {  // see kMaxShift
    dh = kMaxShift;
    *trusted = false;
  }
  const double E = exp(dh);
  const double e = fma(E, sh.d.lo, E);  // exp(dh + d_lo) = E (1 + d_lo + O(d_lo^2))
  const double rho = (expm1(D) * (1 + 8 * kU) + kExpRelErr) / (1 - kExpRelErr);
  if (!(rho < kInf)) *trusted = false;
  return {e, e * sigma, *trusted ? e * rho : 0, 3 * kTiny};  // 0, not inf * 0 = NaN, when the row is lost anyway
}

// One key's contribution to the numerator and condition sums of one output
// element (fast_oracle.cpp, accumulate_values, where the derivation is):
// w = w_hi + w_lo (eft::split) so both products with a 24-bit v are exact,
// each folded into s by TwoSum with its error into c.  T is double or a
// vector of doubles; av = |v|.
template <class T>
AFZ_HOST_DEVICE inline void accumulate_key(T& s, T& c, T& a1, T& a2, T& a3, T& a4, const T& w_hi, const T& w_lo,
                                           const T& w, const T& ws, const T& wr, const T& vx, const T& av) {
  T t, q1, q2;
  eft::two_sum(s, w_hi * vx, t, q1);  // exact product
  eft::two_sum(t, w_lo * vx, s, q2);  // exact product
  c += q1 + q2;
  a1 += w * av;
  a2 += ws * av;
  a3 += av;
  a4 += wr * av;
}

// A row's sums over its visible keys, in key order.  l = sum e_j as a
// TwoSum chain: the n exact errors, each at most u l, are summed in double:
// |error| <= gamma(n) n u l.
struct RowSums {
  double l_hi = 0, l_lo = 0, sum_e_rho = 0, sum_e_sigma = 0, zeta = 0, max_abs_score = 0, max_sigma = 0;
  int n = 0;
  AFZ_HOST_DEVICE void add(const Weight& w, double g_hi, double add, double sigma) {
    double e;
    eft::two_sum(l_hi, w.e, l_hi, e);
    l_lo += e;
    sum_e_rho += w.e_rho;
    sum_e_sigma += w.e_sigma;
    zeta = fmax(zeta, w.tail);
    max_abs_score = fmax(max_abs_score, fabs(g_hi + add));
    max_sigma = fmax(max_sigma, sigma);
    ++n;
  }
};

// The row's normalizer and its bound.  The accumulated bound terms are
// double sums of nonnegative roundings: the true sums are within gamma(n +
// 2) of them; F covers that and the few roundings in evaluating each bound.
struct RowBound {
  Pair l;
  double F, eps_l, l_low, dot_n, zeta;
  int n;
  bool trusted;
};
AFZ_HOST_DEVICE inline RowBound row_bound(const RowSums& s, bool trusted) {
  RowBound r;
  r.n = s.n;
  r.l = eft::normalize(s.l_hi, s.l_lo);
  r.F = 1 + (2.0 * s.n + 16) * kU;
  r.eps_l = r.F * (s.sum_e_rho + s.n * s.zeta + gamma(s.n) * s.n * kU * r.l.hi);
  r.trusted = trusted && r.eps_l < 0.5 * r.l.hi;
  r.l_low = r.l.hi * (1 - 2 * kU) - r.eps_l;  // l >= l_low > l^/2 (l.lo >= -u l.hi)
  // The numerator's own rounding (see accumulate_values): gamma(2n)(2n + 1) u A1.
  r.dot_n = gamma(2.0 * s.n) * (2.0 * s.n + 1) * kU;
  r.zeta = s.zeta;
  return r;
}

// One output element from its sums (S, C) and condition sums A1..A4.
// o = N / l.  With N^, l^ within eps_N, eps_l of the exact N, l:
//   |N^/l^ - N/l| <= (eps_N + |N^/l^| eps_l) / l,
// eps_N = sum_j |e^_j - e_j| |v_j| + the numerator's own rounding,
// gamma(2n)(2n + 1) u A1 + 2n kTiny (see accumulate_values); the DD
// division adds 16 u^2 |o| and a subnormal lo kTiny.
struct Element {
  Pair o;
  double cond, cond_score, cond_tiny, err;
};
AFZ_HOST_DEVICE inline Element element(const RowBound& r, double S, double C, double A1, double A2, double A3,
                                       double A4) {
  Element out;
  out.o = eft::div(eft::normalize(S, C), r.l);
  out.cond = A1 / r.l.hi;
  out.cond_score = A2 / r.l.hi;
  out.cond_tiny = A3 / r.l.hi;
  const double eps_n = r.F * (A4 + r.zeta * A3 + r.dot_n * A1 + 2.0 * r.n * kTiny);
  out.err = r.trusted ? r.F * (eps_n + fabs(out.o.hi) * r.eps_l) / r.l_low + 16 * kU * kU * fabs(out.o.hi) + kTiny
                      : kInf;
  return out;
}

// lse = m_a + m_g + m_gl + ln l.  ln(l_hi + l_lo) = ln l_hi + l_lo / l_hi
// up to (l_lo / l_hi)^2 <= u^2, and ln_lo rounds by u^2; libm's log costs
// 4u |ln l_hi|.  The TwoSum errors e1 <= u(|m_a| + |m_g|) and e2 <= u(|x1|
// + |ln|) are added with m_gl (<= u |m_g|) and ln_lo in three roundings of
// u times their sum: in all at most 5.5 u^2 (|m_a| + |m_g| + |ln l_hi| + 2)
// with the two u^2 above.  l's own
// error moves ln l by -ln(1 - eps_l / l^) <= (eps_l / l^) / (1 - eps_l / l^).
struct Lse {
  Pair lse;
  double err;
};
AFZ_HOST_DEVICE inline Lse lse(const RowBound& r, const Reference& ref) {
  const double ln_hi = log(r.l.hi), ln_lo = r.l.lo / r.l.hi;
  double x1, e1, x2, e2;
  eft::two_sum(ref.m_a, ref.m_g, x1, e1);
  eft::two_sum(x1, ln_hi, x2, e2);
  Lse out;
  out.lse = eft::normalize(x2, e1 + e2 + ref.m_gl + ln_lo);
  const double rel_l = r.eps_l / r.l.hi;
  out.err = r.trusted ? r.F * (rel_l / (1 - rel_l) + 4 * kU * fabs(ln_hi) +
                               5.5 * kU * kU * (fabs(ref.m_a) + fabs(ref.m_g) + fabs(ln_hi) + 2)) +
                            kTiny
                      : kInf;
  return out;
}

}  // namespace afz::fast_steps
