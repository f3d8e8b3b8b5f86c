// The per-element error bound a correct kernel must meet, derived from its
// declared precision model (afz_precision) and the oracle's condition terms.
//
// Derivation (first order in the unit roundoffs, then made rigorous by the
// factor in `weights_slack`).  Write w_j = p_j / l for the exact weights and
// let the kernel compute p^_j = p_j (1 + e_j).  Then
//     o^ - o = sum_j w_j e_j (v_j - o) / (1 + sum_j w_j e_j)
// and with |o| <= W := sum_j w_j |v_j| (a convex combination),
//     |o^ - o| <= [sum_j w_j |e_j| |v_j| + W sum_j w_j |e_j|] / (1 - max|e|).
// Each weight's error e_j has two parts:
//   * the score error ds_j: q.k in the score dtype over d products is off by
//     gamma(d+1) sum|q k| (products of fp16/bf16 are exact in fp32; fp32
//     inputs round them, hence d+1), the scale multiply and the additive mask
//     add one rounding each, bounded by u |s| <= u sigma_j.  So
//     ds_j <= c_s sigma_j,  c_s = gamma(d+1) + 2u_s,  sigma_j = scale sum|q k| + |cap| + |a_j|
//     and exp turns it into a relative error expm1(ds_j) ~ ds_j.
//   * E_p: exp's own error (exp_ulps ulps = 2 exp_ulps u_s relative) and the
//     rounding of P to p_dtype before P.V (u_p).
// Summing:  sum_j w_j |e_j||v_j| <= E_p W + c_s WS,   W sum_j w_j|e_j| <= E_l W + c_s W LS
// where E_l is the part of E_p that also reaches l: a FlashAttention-2
// kernel sums l from P before rounding it for the P.V product
// (l_from_unrounded_p), so P's rounding perturbs only the numerator and
// costs u_p W once, not twice.
// with WS = sum w|v|sigma (cond_score), LS = sum w sigma (lse_cond_score).
// Accumulating N products into the acc dtype (any order, blocked or not)
// costs gamma(N) W in the numerator and gamma(N)|o| <= gamma(N) W in l; the
// final division u_acc |o|.  Absolute terms that no relative bound covers:
// P values that round to a subnormal or flush to zero in p_dtype or in the
// score dtype's exp (at most eta each, times sum|v_j| / l = cond_tiny), and
// the subtraction s_j - m, whose rounding u|s_j - m| costs p_j u|s_j - m| <=
// u/e (x e^-x <= 1/e) per key.  Finally the output is rounded to out dtype:
// one ulp of it covers the half-ulp rounding even across a binade edge.
// Near zero, relative bounds fail: every accumulator operation whose result
// is subnormal (or flushed) loses up to eta_acc absolutely, a few per key.
//
// The LSE = m + ln l: d LSE / d s_j = w_j, so score errors cost c_s LS; l's
// relative error (exp's error, plus u_p when the kernel sums the rounded P
// rather than the score-dtype P: l_from_unrounded_p) and gamma(N) cost that
// much absolutely; the fp32 log and
// the final addition cost u_s (|ln l| + |LSE|) each, doubled for the
// conversion to the stored fp32.
#pragma once
#include "harness/judge/bound_steps.h"
#include "kernels/abi/attnfuzz_kernel.h"

namespace afz {

struct RowTerms {        // from the oracle, per row
  int visible_keys;      // N
  double lse_cond_score; // LS
  double max_sigma;      // max_j sigma_j (for the second-order slack); <= 0 if unknown
  double ln_l;           // ln l (>= 0)
};

class ErrorBound {
 public:
  ErrorBound(const afz_precision& prec, afz_dtype in_dtype, afz_dtype out_dtype, int head_dim);
  // Per-row factors; call before element() for that row.  Returns false when
  // the declared precision cannot resolve the row at all (score errors of
  // order one: outside the model, not a kernel bug).  The only libm calls
  // (expm1) are here, on the host: the GPU verdict receives the factors.
  bool begin_row(const RowTerms& r);
  double element(const ElementTerms& e) const { return bound_steps::element(model_, row_, e); }
  double lse(double lse_value) const { return bound_steps::lse(model_, row_, lse_value); }

  const bound_steps::Model& model() const { return model_; }
  const bound_steps::RowFactors& row_factors() const { return row_; }

 private:
  double gamma(double n, double u) const { return n * u / (1 - n * u); }
  bound_steps::Model model_{};
  bound_steps::RowFactors row_{};
};

}  // namespace afz
