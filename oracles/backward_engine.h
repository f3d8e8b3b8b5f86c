// The one implementation of exact attention gradients, templated on the
// number type: double (the fast tier, with compensated sums), Boost's
// cpp_bin_float and MPFR (256 bits).  The tiers differ only in arithmetic
// and in the error bound they attach (backward_*.cpp).
//
// Loop order: per (sequence, KV head), per query head of the GQA group, per
// visible row: the row's exact softmax (max-referenced, so no exponential
// overflows whatever the scores), O, D = dO . O from that exact O, then dP
// and dS of every visible key (with the row's sums over them), then per
// visible key the three accumulations.  dK and dV of the KV head accumulate
// over every row of every head in the group.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/abi/dtype.h"
#include "oracles/backward_oracle.h"
#include "oracles/problem_view.h"

namespace afz::oracle_detail {

// A running sum: plain in multiprecision, Neumaier-compensated in double
// (error <= 2u |sum| + O(n u^2) sum|x|, Higham 4.4).
template <class Num>
struct SumOf {
  Num s{};
  void add(const Num& x) { s += x; }
  Num value() const { return s; }
};
template <>
struct SumOf<double> {
  double s = 0, c = 0;
  void add(double x) {
    const double t = s + x;
    // The branch keeps whichever addend lost low-order bits.
    c += std::fabs(s) >= std::fabs(x) ? (s - t) + x : (x - t) + s;
    s = t;
  }
  double value() const { return s + c; }
};

// The number policy a tier provides:
//   static Num from(double), static double to_double(const Num&),
//   static DD to_dd(const Num&), and exp / log / tanh found by ADL or std.
template <class Num, class Policy>
class BackwardEngine {
 public:
  BackwardEngine(const afz_problem& p, const afz_tensor& dout) : p_(p), dout_(dout), view_(p), kv_(view_, 1) {
    if (!dout.data) throw std::invalid_argument("backward: dO is NULL");
  }

  GradResult run() {
    GradResult r;
    r.resize(p_);
    const int group = p_.heads_q / p_.heads_kv;
    for (int b = 0; b < p_.batch; ++b)
      for (int hk = 0; hk < p_.heads_kv; ++hk) {
        kv_.load(b, hk);
        const int sk = p_.seqlens_k[b];
        dk_.assign(size_t(sk) * p_.head_dim, SumOf<Num>{});
        dv_.assign(size_t(sk) * p_.head_dim_v, SumOf<Num>{});
        for (int h = hk * group; h < (hk + 1) * group; ++h)
          for (int i = 0; i < p_.seqlens_q[b]; ++i) row(RowId{r.row(b, h, i), b, h, i}, hk, r);
        for (int j = 0; j < sk; ++j) {
          const int64_t kr = r.key(b, hk, j);
          for (int x = 0; x < p_.head_dim; ++x)
            r.dk.value[kr * p_.head_dim + x] = Policy::to_dd(dk_[size_t(j) * p_.head_dim + x].value());
          for (int x = 0; x < p_.head_dim_v; ++x)
            r.dv.value[kr * p_.head_dim_v + x] = Policy::to_dd(dv_[size_t(j) * p_.head_dim_v + x].value());
        }
      }
    return r;
  }

 private:
  void row(const RowId& id, int hk, GradResult& r) {
    using std::exp;
    using std::log;
    using std::tanh;
    const int d = p_.head_dim, dvn = p_.head_dim_v, b = id.b;
    view_.visible_keys(id, keys_, add_);
    const int n = int(keys_.size());
    r.visible_keys[id.r] = n;
    if (n == 0) return;  // an empty row: every gradient term it would add is 0
    for (int32_t j : keys_) kv_.require_finite(j);
    q_.resize(d);
    view_.load_q(id, q_.data());
    load_dout(id);
    const Num scale = Policy::from(p_.scale), cap = Policy::from(p_.softcap);
    // Scores s_j, their derivative g_j = ds/d(q.k) and sigma_j.
    s_.resize(n), g_.resize(n), sigma_.resize(n);
    for (int jj = 0; jj < n; ++jj) {
      const float* k = kv_.k(keys_[jj]);
      SumOf<Num> t;
      double abs_dot = 0;
      for (int x = 0; x < d; ++x) {
        t.add(Policy::from(q_[x]) * Policy::from(k[x]));  // q_x k_x is exact in double: 24 x 24 bits
        abs_dot += std::fabs(q_[x] * double(k[x]));
      }
      Num s = scale * t.value();
      Num g = scale;
      if (p_.softcap != 0) {
        const Num y = tanh(s / cap);
        g = scale * (Num(1) - y * y);  // d/dt cap tanh(scale t / cap) = scale sech^2
        s = cap * y;
      }
      s_[jj] = s + Policy::from(add_[jj]);
      g_[jj] = g;
      sigma_[jj] = std::fabs(double(p_.scale)) * abs_dot + std::fabs(double(p_.softcap)) + std::fabs(add_[jj]);
      r.max_sigma = std::max(r.max_sigma, sigma_[jj]);
    }
    // The exact softmax, referenced to the max: exp never overflows.
    Num m = s_[0];
    for (int jj = 1; jj < n; ++jj)
      if (s_[jj] > m) m = s_[jj];
    SumOf<Num> l;
    w_.resize(n);
    for (int jj = 0; jj < n; ++jj) {
      w_[jj] = exp(s_[jj] - m);
      l.add(w_[jj]);
    }
    const Num lsum = l.value();
    for (Num& w : w_) w = w / lsum;
    const Num lse = m + log(lsum);
    const double lse_d = Policy::to_double(lse);
    r.lse[id.r] = Policy::to_dd(lse);
    r.empty[id.r] = 0;
    r.max_abs_lse = std::max(r.max_abs_lse, std::fabs(lse_d));
    // O, and D = dO . O from that exact O.
    o_.assign(dvn, Num{});
    abs_o_w_.assign(dvn, 0.0);
    for (int x = 0; x < dvn; ++x) {
      SumOf<Num> o;
      for (int jj = 0; jj < n; ++jj) {
        const double v = kv_.v(keys_[jj])[x];
        o.add(w_[jj] * Policy::from(v));
        abs_o_w_[x] += Policy::to_double(w_[jj]) * std::fabs(v);
      }
      o_[x] = o.value();
      r.o[id.r * dvn + x] = Policy::to_dd(o_[x]);
    }
    SumOf<Num> dsum;
    double B = 0, BW = 0, L1 = 0;
    for (int x = 0; x < dvn; ++x) {
      dsum.add(Policy::from(do_[x]) * o_[x]);
      B += std::fabs(do_[x]) * std::fabs(Policy::to_double(o_[x]));
      BW += std::fabs(do_[x]) * abs_o_w_[x];
      L1 += std::fabs(do_[x]);
    }
    const Num D = dsum.value();
    // dP and dS of every key first: the own-forward terms (backward_oracle.h)
    // need the row's sums over all its keys before any key's accumulation.
    ds_.resize(n), A_.resize(n), adiff_.resize(n);
    const double abs_lse = std::fabs(lse_d);
    double w_sigma = 0, t_sum = 0, u_sum = 0, a_bar = 0;
    for (int jj = 0; jj < n; ++jj) {
      const float* v = kv_.v(keys_[jj]);
      SumOf<Num> dp;
      double A = 0;
      for (int x = 0; x < dvn; ++x) {
        dp.add(Policy::from(do_[x]) * Policy::from(v[x]));  // exact products in double too
        A += std::fabs(do_[x] * double(v[x]));
      }
      const Num diff = dp.value() - D;
      ds_[jj] = w_[jj] * diff;
      A_[jj] = A;
      adiff_[jj] = std::fabs(Policy::to_double(diff));
      const double w = Policy::to_double(w_[jj]), ads = std::fabs(Policy::to_double(ds_[jj]));
      r.max_abs_ds = std::max(r.max_abs_ds, ads);
      w_sigma += w * sigma_[jj];
      t_sum += sigma_[jj] * ads;
      u_sum += ads;
      a_bar += w * A;
    }
    // Per key: the three accumulations and their condition terms.
    std::vector<SumOf<Num>>& dq = dq_;
    dq.assign(d, SumOf<Num>{});
    const int64_t qbase = id.r * d;
    const double scale_abs = std::fabs(double(p_.scale));
    for (int jj = 0; jj < n; ++jj) {
      const int j = keys_[jj];
      const float* k = kv_.k(j);
      const Num dsg = ds_[jj] * g_[jj];
      const double w = Policy::to_double(w_[jj]), ads = std::fabs(Policy::to_double(ds_[jj]));
      const double c_rel = ads * scale_abs, c_w = w * scale_abs;
      const PairTerms grad{c_rel,
                           c_rel * sigma_[jj],
                           c_rel * abs_lse,
                           c_w * (A_[jj] + B),
                           c_w * (A_[jj] + BW),
                           c_w * L1,
                           (adiff_[jj] + 1) * scale_abs,
                           c_rel * w_sigma,
                           c_w * t_sum,
                           c_w * abs_lse * u_sum,
                           c_w * a_bar};
      const PairTerms value{w, w * sigma_[jj], w * abs_lse, 0.0, 0.0, 0.0, 1.0, w * w_sigma, 0.0, 0.0, 0.0};
      const int64_t kbase = r.key(b, hk, j) * d, vbase = r.key(b, hk, j) * dvn;
      for (int x = 0; x < d; ++x) {
        dq[x].add(dsg * Policy::from(k[x]));
        dk_[size_t(j) * d + x].add(dsg * Policy::from(q_[x]));
        add_terms(r.dq, qbase + x, std::fabs(double(k[x])), grad);
        add_terms(r.dk, kbase + x, std::fabs(q_[x]), grad);
      }
      for (int x = 0; x < dvn; ++x) {
        dv_[size_t(j) * dvn + x].add(w_[jj] * Policy::from(do_[x]));
        add_terms(r.dv, vbase + x, std::fabs(do_[x]), value);
      }
      ++r.key_rows[r.key(b, hk, j)];
    }
    for (int x = 0; x < d; ++x) r.dq.value[qbase + x] = Policy::to_dd(dq[x].value());
  }

  // One (row, key) pair's coefficients of each condition term (GradTerms),
  // each to be multiplied by |z|, the element of the vector it multiplies.
  struct PairTerms {
    double rel, score, lse, cancel, cancel_w, dout_l1, tiny, own_mean, own_scores, own_scores_lse, own_rowsum;
  };

  static void add_terms(GradTerms& t, int64_t e, double z, const PairTerms& c) {
    t.rel[e] += c.rel * z;
    t.score[e] += c.score * z;
    t.lse[e] += c.lse * z;
    t.cancel[e] += c.cancel * z;
    t.cancel_w[e] += c.cancel_w * z;
    t.dout_l1[e] += c.dout_l1 * z;
    t.tiny[e] += c.tiny * z;
    t.own_mean[e] += c.own_mean * z;
    t.own_scores[e] += c.own_scores * z;
    t.own_scores_lse[e] += c.own_scores_lse * z;
    t.own_rowsum[e] += c.own_rowsum * z;
  }

  void load_dout(const RowId& id) {
    do_.resize(p_.head_dim_v);
    const int esz = size_of(dout_.dtype);
    for (int x = 0; x < p_.head_dim_v; ++x) {
      const int64_t off = id.b * dout_.stride[0] + id.h * dout_.stride[1] + id.i * dout_.stride[2] + x * dout_.stride[3];
      do_[x] = load(dout_.dtype, static_cast<const uint8_t*>(dout_.data) + off * esz);
      if (!std::isfinite(do_[x]))
        throw std::invalid_argument("backward: dO is not finite at a visible row (the gradient is undefined)");
    }
  }

  const afz_problem& p_;
  afz_tensor dout_;
  ProblemView view_;
  KvCache kv_;
  std::vector<int32_t> keys_;
  std::vector<double> add_, q_, do_, sigma_, abs_o_w_, A_, adiff_;
  std::vector<Num> s_, g_, w_, o_, ds_;
  std::vector<SumOf<Num>> dq_, dk_, dv_;
};

}  // namespace afz::oracle_detail
