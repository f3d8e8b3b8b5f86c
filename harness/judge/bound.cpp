#include "harness/judge/bound.h"

#include <cmath>
#include <limits>

#include "kernels/abi/dtype.h"

namespace afz {

namespace {
constexpr double kInvE = 0x1.78b56362cef38p-2;  // 1/e: max of x e^-x
// Accumulator operations per key that may underflow: the product, the sum,
// and up to two for a rescale or renormalisation of the block it ends.
constexpr double kUnderflowOpsPerKey = 4;
}

ErrorBound::ErrorBound(const afz_precision& prec, afz_dtype in_dtype, afz_dtype out_dtype, int head_dim)
    : out_(out_dtype) {
  u_s_ = unit_roundoff(prec.score_dtype);
  // AFZ_P_DTYPE_OF_V is no dtype of its own: P is rounded to V's dtype, which
  // is in_dtype (a case gives q, k and v one dtype).  Left unresolved it
  // would read as fp32 and drop P's rounding from the bound.
  const afz_dtype p_dtype = prec.p_dtype == AFZ_P_DTYPE_OF_V ? in_dtype : prec.p_dtype;
  u_p_ = p_dtype == prec.score_dtype ? 0.0 : unit_roundoff(p_dtype);
  u_acc_ = unit_roundoff(prec.acc_dtype);
  // Smallest magnitudes lost entirely: half the subnormal step, or the whole
  // normal range below min_normal when the kernel flushes subnormals.
  auto lost = [&](afz_dtype t) { return prec.flush_subnormals ? min_normal(t) : min_subnormal(t) / 2; };
  eta_ = lost(p_dtype) + lost(prec.score_dtype);
  eta_acc_ = lost(prec.acc_dtype);
  // fp16/bf16 products are exact in fp32; fp32 inputs round each product.
  const bool exact_products = in_dtype != AFZ_F32 || prec.score_dtype != AFZ_F32;
  c_s_ = gamma(head_dim + (exact_products ? 0 : 1), u_s_) + 2 * u_s_;
  e_p_ = 2 * double(prec.exp_ulps) * u_s_ + u_p_;
  // Errors that reach l as well as the numerator (exp's; P's rounding too
  // when l sums the rounded P) cost twice; P's rounding alone, once.
  e_l_ = 2 * double(prec.exp_ulps) * u_s_ + (prec.l_from_unrounded_p ? 0.0 : u_p_);
  e_num_ = e_p_ - e_l_;
}

bool ErrorBound::begin_row(const RowTerms& r) {
  row_ = r;
  gamma_n_ = gamma(r.visible_keys, u_acc_);
  // Products p_j v_j and partial sums that land in the subnormal range of
  // the accumulator lose up to eta_acc each, absolutely: 2N operations, and
  // a few more per key block for rescales, merges and FA1's renormalisation
  // (at most one block per key).  l >= 1, so dividing by it cannot grow them.
  underflow_acc_ = (kUnderflowOpsPerKey * double(r.visible_keys) + kUnderflowOpsPerKey) * eta_acc_;
  // expm1(ds)/ds turns the linear score term rigorous; 1/(1 - max|e|) the denominator.
  const double ds = c_s_ * (r.max_sigma > 0 ? r.max_sigma : 0);
  const double expm1_ratio = ds > 0 ? std::expm1(ds) / ds : 1.0;
  const double e_max = std::expm1(ds) + e_p_ * (1 + std::expm1(ds));
  if (!(e_max < 0.5) || !(gamma_n_ < 0.5)) return false;
  weights_slack_ = expm1_ratio / (1 - e_max);
  return true;
}

double ErrorBound::element(const ElementTerms& e) const {
  const double weights = ((2 * e_l_ + e_num_) * e.cond + c_s_ * (e.cond_score + e.cond * row_.lse_cond_score)) * weights_slack_;
  const double accumulate = (2 * gamma_n_ + u_acc_) * e.cond;
  const double tiny = (eta_ + u_s_ * kInvE) * e.cond_tiny;
  return ulp(out_, std::fabs(e.o) + weights + accumulate) + weights + accumulate + tiny + underflow_acc_;
}

double ErrorBound::lse(double lse_value) const {
  const double scores = c_s_ * row_.lse_cond_score * weights_slack_;
  const double normalizer = e_l_ + gamma_n_;
  const double logs = 2 * u_s_ * (std::fabs(row_.ln_l) + std::fabs(lse_value));
  return scores + normalizer + logs + ulp(AFZ_F32, std::fabs(lse_value));
}

}  // namespace afz
