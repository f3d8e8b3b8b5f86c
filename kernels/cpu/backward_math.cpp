#include "kernels/cpu/backward_math.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/backward_fa2.h"
#include "kernels/cpu/common.h"

namespace afz::cpu {
namespace {

// One query head's steps over a sequence, in fp32, on dense rows: qs, dO
// [sq x d], [sq x dv]; kt, V [sk x d], [sk x dv]; S, P, dS [sq x sk].
struct MathHead {
  const HeadView& view;
  int d, dv, sq, sk;

  // S = qs kt^T (+ mask), masked pairs -inf.
  std::vector<float> scores(const std::vector<float>& qs, const std::vector<float>& kt) const {
    std::vector<float> s(size_t(sq) * sk);
    for (int i = 0; i < sq; ++i)
      for (int j = 0; j < sk; ++j) {
        float acc = 0.0f;
        for (int x = 0; x < d; ++x) acc = acc + qs[size_t(i) * d + x] * kt[size_t(j) * d + x];
        if (view.p.add_mask.data) acc = acc + view.add_mask(i, j);
        s[size_t(i) * sk + j] = view.visible(i, j) ? acc : kNegInf<float>;
      }
    return s;
  }

  // _safe_softmax over each row of s, in place.
  void softmax(std::vector<float>& s) const {
    for (int i = 0; i < sq; ++i) {
      float* row = s.data() + size_t(i) * sk;
      const float m = sk > 0 ? *std::max_element(row, row + sk) : kNegInf<float>;
      if (m == kNegInf<float>) {  // no visible key: zeros, not 0/0
        std::fill(row, row + sk, 0.0f);
        continue;
      }
      float l = 0.0f;
      for (int j = 0; j < sk; ++j) {
        row[j] = std::exp(row[j] - m);
        l = l + row[j];
      }
      for (int j = 0; j < sk; ++j) row[j] = row[j] / l;
    }
  }

  // dS = P (dP - rowsum(dP P)), dP = dO V^T.
  void score_grads(const std::vector<float>& p, const std::vector<float>& dout, const std::vector<float>& v,
                   std::vector<float>& ds) const {
    ds.assign(size_t(sq) * sk, 0.0f);
    for (int i = 0; i < sq; ++i) {
      float* dp = ds.data() + size_t(i) * sk;
      for (int j = 0; j < sk; ++j) {
        float acc = 0.0f;
        for (int x = 0; x < dv; ++x) acc = acc + dout[size_t(i) * dv + x] * v[size_t(j) * dv + x];
        dp[j] = acc;
      }
      float D = 0.0f;
      for (int j = 0; j < sk; ++j) D = D + dp[j] * p[size_t(i) * sk + j];
      for (int j = 0; j < sk; ++j) dp[j] = p[size_t(i) * sk + j] * (dp[j] - D);
    }
  }

  // dQ = (dS kt) * sf_q, rounded once to the input dtype and stored.
  void store_dq(const afz_tensor& out, const std::vector<float>& ds, const std::vector<float>& kt,
                float sf_q) const {
    for (int i = 0; i < sq; ++i)
      for (int x = 0; x < d; ++x) {
        float acc = 0.0f;
        for (int j = 0; j < sk; ++j) acc = acc + ds[size_t(i) * sk + j] * kt[size_t(j) * d + x];
        store(out.dtype, element_ptr(out, view.b, view.h, i, x), round_to(view.p.q.dtype, double(acc * sf_q)));
      }
  }

  // This head's dK = (dS^T qs) * sf and dV = P^T dO, added to its group's
  // fp32 sums (repeat_interleave's backward).
  void add_dk_dv(const std::vector<float>& ds, const std::vector<float>& qs, const std::vector<float>& prob,
                 const std::vector<float>& dout, float sf, std::vector<float>& dk, std::vector<float>& dvs) const {
    for (int j = 0; j < sk; ++j) {
      for (int x = 0; x < d; ++x) {
        float acc = 0.0f;
        for (int i = 0; i < sq; ++i) acc = acc + ds[size_t(i) * sk + j] * qs[size_t(i) * d + x];
        dk[size_t(j) * d + x] = dk[size_t(j) * d + x] + acc * sf;
      }
      for (int x = 0; x < dv; ++x) {
        float acc = 0.0f;
        for (int i = 0; i < sq; ++i) acc = acc + prob[size_t(i) * sk + j] * dout[size_t(i) * dv + x];
        dvs[size_t(j) * dv + x] = dvs[size_t(j) * dv + x] + acc;
      }
    }
  }
};

// Rows [0, n) of one (sequence, head) of t into dense fp32, each element
// times f (one fp32 rounding; f = 1 loads exactly).
void load_scaled(const afz_tensor& t, int b, int h, int n, int dim, float f, std::vector<float>& out) {
  out.resize(size_t(n) * dim);
  for (int s = 0; s < n; ++s) load_row(t, b, h, s, dim, out.data() + size_t(s) * dim);
  for (float& x : out) x = x * f;
}

void math_backward(const afz_backward_problem& bp) {
  const afz_problem& p = *bp.fwd;
  if (p.softcap != 0.0f) throw std::invalid_argument("cpu.bwd.math: the math path has no softcap");
  const int d = p.head_dim, dv = p.head_dim_v, group = p.heads_q / p.heads_kv;
  const float sf = float(std::sqrt(std::fabs(double(p.scale))));
  const float sf_q = p.scale < 0 ? -sf : sf;
  std::vector<float> kt, v, qs, dout, ds;
  for (int b = 0; b < p.batch; ++b)
    for (int hk = 0; hk < p.heads_kv; ++hk) {
      const int sq = p.seqlens_q[b], sk = p.seqlens_k[b];
      load_scaled(p.k, b, hk, sk, d, sf, kt);
      load_scaled(p.v, b, hk, sk, dv, 1.0f, v);
      std::vector<float> dk(size_t(sk) * d, 0.0f), dvs(size_t(sk) * dv, 0.0f);
      for (int g = 0; g < group; ++g) {
        const HeadView view(p, b, hk * group + g);
        const MathHead head{view, d, dv, sq, sk};
        load_scaled(p.q, b, view.h, sq, d, sf_q, qs);
        load_scaled(bp.dout, b, view.h, sq, dv, 1.0f, dout);
        std::vector<float> prob = head.scores(qs, kt);
        head.softmax(prob);
        head.score_grads(prob, dout, v, ds);
        head.store_dq(bp.dq, ds, kt, sf_q);
        head.add_dk_dv(ds, qs, prob, dout, sf, dk, dvs);
      }
      for (int j = 0; j < sk; ++j) {
        for (int x = 0; x < d; ++x)
          store(bp.dk.dtype, element_ptr(bp.dk, b, hk, j, x), round_to(p.q.dtype, double(dk[size_t(j) * d + x])));
        for (int x = 0; x < dv; ++x)
          store(bp.dv.dtype, element_ptr(bp.dv, b, hk, j, x), round_to(p.q.dtype, double(dvs[size_t(j) * dv + x])));
      }
    }
}

}  // namespace

int math_backward_entry(const afz_backward_kernel*, const afz_backward_problem* bp, char* error, size_t error_len) {
  return guarded_backward_run(bp, error, error_len, math_backward);
}

}  // namespace afz::cpu
