// cpu.direct: two-pass softmax per query row, the textbook form the other
// kernels are checked against: all scores of the row, their max, then
// exp-sum and P.V in one more pass.
#pragma once
#include <vector>

#include "kernels/cpu/common.h"

namespace afz::cpu {

template <class Steps = Fa2Steps>
void direct_attention(const afz_problem& p) {
  const int d = p.head_dim, dv = p.head_dim_v;
  std::vector<float> q(d), K, V, s, acc(dv);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const HeadView view(p, b, h);
      if (view.seqlen_q == 0) continue;
      K.resize(int64_t(view.seqlen_k) * d);
      V.resize(int64_t(view.seqlen_k) * dv);
      s.resize(view.seqlen_k);
      view.load_kv_rows(0, view.seqlen_k, K.data(), V.data());
      const RoundPTo round_p = view.round_p();
      for (int i = 0; i < view.seqlen_q; ++i) {
        view.load_q(i, q.data());
        const int64_t first = view.first_key<Steps>(i), last = view.last_key<Steps>(i);
        // Pass 1: the scores and their max.
        float m = kNegInf<float>;
        for (int64_t j = first; j <= last; ++j) {
          s[j] = view.score<Steps>(i, j, q.data(), K.data() + j * d);
          m = std::max(m, s[j]);
        }
        std::fill(acc.begin(), acc.end(), 0.0f);
        if (m == kNegInf<float>) {  // no visible key: O = 0, LSE = log 0
          view.store_row(i, acc.data(), kNegInf<float>);
          continue;
        }
        // Pass 2: P = exp(s - m), l = sum P (fp32), A = sum round(P) v.
        const float m_ref = Steps::reference(m);
        float l = 0.0f;
        for (int64_t j = first; j <= last; ++j) {
          const float prob = Steps::probability(s[j], m_ref);
          l = l + prob;
          const float pr = round_p(prob);
          if (pr == 0.0f) continue;
          for (int x = 0; x < dv; ++x) acc[x] = acc[x] + pr * V[j * dv + x];
        }
        for (int x = 0; x < dv; ++x) acc[x] = Steps::normalised(acc[x], l);
        view.store_row(i, acc.data(), Steps::log_sum_exp(m, l));
      }
    }
}

template <class Steps = Fa2Steps>
int direct_entry(const afz_kernel*, const afz_problem* p, char* error, size_t error_len) {
  return guarded_run(p, error, error_len, [](const afz_problem& pr) { direct_attention<Steps>(pr); });
}

}  // namespace afz::cpu
