#include "oracles/oracle.h"

#include <limits>

namespace afz {

void OracleResult::resize(int batch_, int heads_q_, int max_sq_, int dv_) {
  batch = batch_;
  heads_q = heads_q_;
  max_sq = max_sq_;
  dv = dv_;
  const size_t n_rows = size_t(rows()), n_elems = n_rows * size_t(dv);
  // Every row starts as an empty row (o = 0, lse = -inf): a tier overwrites
  // each row it computes, and the values are those of a row with no key.
  o.assign(n_elems, DD{});
  lse.assign(n_rows, DD{-std::numeric_limits<double>::infinity(), 0.0});
  empty.assign(n_rows, 1);
  cond.assign(n_elems, 0.0);
  cond_score.assign(n_elems, 0.0);
  cond_tiny.assign(n_elems, 0.0);
  lse_cond_score.assign(n_rows, 0.0);
  max_abs_score.assign(n_rows, 0.0);
  max_sigma.assign(n_rows, 0.0);
  visible_keys.assign(n_rows, 0);
  max_key.assign(n_rows, -1);
  o_err.assign(n_elems, 0.0);
  lse_err.assign(n_rows, 0.0);
}

std::unique_ptr<Oracle> make_escalation_oracle() {
  if (auto m = make_mpfr_oracle()) return m;
  return make_boost_oracle();
}

}  // namespace afz
