#include <limits>

#include "oracles/backward_oracle.h"

namespace afz {

void GradTerms::resize(size_t n) {
  value.assign(n, DD{});
  for (auto* v : {&rel, &score, &lse, &cancel, &cancel_w, &dout_l1, &tiny, &own_mean, &own_scores, &own_scores_lse,
                  &own_rowsum, &err})
    v->assign(n, 0.0);
}

void GradResult::resize(const afz_problem& p) {
  batch = p.batch;
  heads_q = p.heads_q;
  heads_kv = p.heads_kv;
  max_sq = p.max_seqlen_q;
  max_sk = p.max_seqlen_k;
  head_dim = p.head_dim;
  head_dim_v = p.head_dim_v;
  const size_t rows = size_t(batch) * heads_q * max_sq, keys = size_t(batch) * heads_kv * max_sk;
  dq.resize(rows * head_dim);
  dk.resize(keys * head_dim);
  dv.resize(keys * size_t(p.head_dim_v));
  o.assign(rows * size_t(p.head_dim_v), DD{});
  // Every row starts empty (lse = -inf): the engine overwrites the rows it computes.
  lse.assign(rows, DD{-std::numeric_limits<double>::infinity(), 0.0});
  empty.assign(rows, 1);
  visible_keys.assign(rows, 0);
  key_rows.assign(keys, 0);
  max_sigma = max_abs_lse = max_abs_ds = 0;
}

}  // namespace afz
