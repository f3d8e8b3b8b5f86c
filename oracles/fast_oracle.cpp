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
// on x86_64).  The derivation of each bound sits next to the code it covers
// (here and in fast_steps.h, whose steps the GPU tier runs too).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "oracles/eft.h"
#include "oracles/fast_steps.h"
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
static_assert(fast_steps::kLanes == 2 * kVec, "two vectors of lanes: fast_steps::fold_lanes");
using fast_steps::gamma;
using fast_steps::kInf;
using fast_steps::kLanes;
using fast_steps::kPad;
using fast_steps::kTiny;
using fast_steps::kU;

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
    double P[kLanes], S[kLanes], A[kLanes];
    store_vd(P, P0), store_vd(P + kVec, P1), store_vd(S, S0), store_vd(S + kVec, S1), store_vd(A, A0),
        store_vd(A + kVec, A1);
    fast_steps::fold_lanes(P, S, A, t_hi[jj], t_lo[jj], abs_dot[jj]);
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
        Vd vx, av{};
        load_widened(vx, v[b] + x);
        add_abs(av, vx);
        fast_steps::accumulate_key(s, c, a1, a2, a3, a4, w_hi[b], w_lo[b], w[b], ws[b], wr[b], vx, av);
      }
      store_vd(S + x, s), store_vd(C + x, c), store_vd(A1 + x, a1), store_vd(A2 + x, a2), store_vd(A3 + x, a3),
          store_vd(A4 + x, a4);
    }
  }
}

using fast_steps::Reference;

class FastRows {
 public:
  explicit FastRows(const ProblemView& view)
      : view_(view),
        kv_(view, kPad),
        d_padded_(kv_.k_stride()),
        dv_padded_(kv_.v_stride()),
        q_(d_padded_, 0.0) {
    dot_err_ = fast_steps::dot_err(d_padded_);
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
    finish(id, n, ref, trusted, out);
  }

 private:
  void resize_keys(int n) {
    for (auto* v : {&t_hi_, &t_lo_, &abs_dot_, &g_hi_, &g_lo_, &sigma_, &delta_, &e_, &e_sigma_, &e_rho_, &tail_})
      v->resize(n);
  }

  // The steps and their bounds: fast_steps.h (shared with the GPU tier).
  void scores(int n) {
    for (int jj = 0; jj < n; ++jj) {
      const fast_steps::Score sc =
          fast_steps::score(t_hi_[jj], t_lo_[jj], abs_dot_[jj], add_[jj], view_.scale(), view_.softcap(), dot_err_);
      g_hi_[jj] = sc.g_hi;
      g_lo_[jj] = sc.g_lo;
      sigma_[jj] = sc.sigma;
      delta_[jj] = sc.delta;
    }
  }

  // The key with the largest score, scanned in key order (fast_steps::beats).
  Reference reference(int n) const {
    Reference best{add_[0], g_hi_[0], g_lo_[0], 0};
    for (int jj = 1; jj < n; ++jj)
      if (fast_steps::beats(add_[jj], {g_hi_[jj], g_lo_[jj]}, best)) best = {add_[jj], g_hi_[jj], g_lo_[jj], jj};
    return best;
  }

  bool weights(int n, const Reference& ref) {
    bool trusted = true;
    for (int jj = 0; jj < n; ++jj) {
      const fast_steps::Weight w =
          fast_steps::weight(add_[jj], {g_hi_[jj], g_lo_[jj]}, sigma_[jj], delta_[jj], ref, &trusted);
      e_[jj] = w.e;
      e_sigma_[jj] = w.e_sigma;
      e_rho_[jj] = w.e_rho;
      tail_[jj] = w.tail;
    }
    return trusted;
  }

  // l, o, lse, the condition terms and the bounds (+inf where untrusted).
  void finish(const RowId& id, int n, const Reference& ref, bool trusted, OracleResult& out) {
    fast_steps::RowSums sums;
    for (int jj = 0; jj < n; ++jj) sums.add({e_[jj], e_sigma_[jj], e_rho_[jj], tail_[jj]}, g_hi_[jj], add_[jj], sigma_[jj]);
    const fast_steps::RowBound rb = fast_steps::row_bound(sums, trusted);
    for (int x = 0; x < view_.head_dim_v(); ++x) {
      const int64_t e = id.r * out.dv + x;
      const fast_steps::Element el =
          fast_steps::element(rb, sums_.S[x], sums_.C[x], sums_.A1[x], sums_.A2[x], sums_.A3[x], sums_.A4[x]);
      out.o[e] = DD{el.o.hi, el.o.lo};
      out.cond[e] = el.cond;
      out.cond_score[e] = el.cond_score;
      out.cond_tiny[e] = el.cond_tiny;
      out.o_err[e] = el.err;
    }
    const fast_steps::Lse lse = fast_steps::lse(rb, ref);
    out.lse[id.r] = DD{lse.lse.hi, lse.lse.lo};
    out.lse_err[id.r] = lse.err;
    out.lse_cond_score[id.r] = sums.sum_e_sigma / rb.l.hi;
    out.max_abs_score[id.r] = sums.max_abs_score;
    out.max_sigma[id.r] = sums.max_sigma;
    out.visible_keys[id.r] = n;
    out.max_key[id.r] = ref.key;
    out.empty[id.r] = 0;
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
