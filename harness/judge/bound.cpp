#include "harness/judge/bound.h"

#include <cmath>
#include <limits>

#include "kernels/abi/dtype.h"

namespace afz {

namespace {
// Accumulator operations per key that may underflow: the product, the sum,
// and up to two for a rescale or renormalisation of the block it ends.
constexpr double kUnderflowOpsPerKey = 4;

bound_steps::UlpFormat ulp_format(afz_dtype t) { return {format_of(t).precision, format_of(t).min_exponent}; }
}  // namespace

ErrorBound::ErrorBound(const afz_precision& prec, afz_dtype in_dtype, afz_dtype out_dtype, int head_dim) {
  bound_steps::Model& m = model_;
  m.out = ulp_format(out_dtype);
  m.lse_out = ulp_format(AFZ_F32);
  m.u_s = unit_roundoff(prec.score_dtype);
  // AFZ_P_DTYPE_OF_V is no dtype of its own: P is rounded to V's dtype, which
  // is in_dtype (a case gives q, k and v one dtype).  Left unresolved it
  // would read as fp32 and drop P's rounding from the bound.
  const afz_dtype p_dtype = prec.p_dtype == AFZ_P_DTYPE_OF_V ? in_dtype : prec.p_dtype;
  m.u_p = p_dtype == prec.score_dtype ? 0.0 : unit_roundoff(p_dtype);
  m.u_acc = unit_roundoff(prec.acc_dtype);
  // Smallest magnitudes lost entirely: half the subnormal step, or the whole
  // normal range below min_normal when the kernel flushes subnormals.
  auto lost = [&](afz_dtype t) { return prec.flush_subnormals ? min_normal(t) : min_subnormal(t) / 2; };
  m.eta = lost(p_dtype) + lost(prec.score_dtype);
  m.eta_acc = lost(prec.acc_dtype);
  // fp16/bf16 products are exact in fp32; fp32 inputs round each product.
  const bool exact_products = in_dtype != AFZ_F32 || prec.score_dtype != AFZ_F32;
  m.c_s = gamma(head_dim + (exact_products ? 0 : 1), m.u_s) + 2 * m.u_s;
  m.e_p = 2 * double(prec.exp_ulps) * m.u_s + m.u_p;
  // Errors that reach l as well as the numerator (exp's; P's rounding too
  // when l sums the rounded P) cost twice; P's rounding alone, once.
  m.e_l = 2 * double(prec.exp_ulps) * m.u_s + (prec.l_from_unrounded_p ? 0.0 : m.u_p);
  m.e_num = m.e_p - m.e_l;
}

bool ErrorBound::begin_row(const RowTerms& r) {
  const bound_steps::Model& m = model_;
  row_.lse_cond_score = r.lse_cond_score;
  row_.ln_l = r.ln_l;
  row_.gamma_n = gamma(r.visible_keys, m.u_acc);
  // Products p_j v_j and partial sums that land in the subnormal range of
  // the accumulator lose up to eta_acc each, absolutely: 2N operations, and
  // a few more per key block for rescales, merges and FA1's renormalisation
  // (at most one block per key).  l >= 1, so dividing by it cannot grow them.
  row_.underflow_acc = (kUnderflowOpsPerKey * double(r.visible_keys) + kUnderflowOpsPerKey) * m.eta_acc;
  // expm1(ds)/ds turns the linear score term rigorous; 1/(1 - max|e|) the denominator.
  const double ds = m.c_s * (r.max_sigma > 0 ? r.max_sigma : 0);
  const double expm1_ratio = ds > 0 ? std::expm1(ds) / ds : 1.0;
  const double e_max = std::expm1(ds) + m.e_p * (1 + std::expm1(ds));
  if (!(e_max < 0.5) || !(row_.gamma_n < 0.5)) return false;
  row_.weights_slack = expm1_ratio / (1 - e_max);
  return true;
}

}  // namespace afz
