// Judging a backward kernel's dQ, dK, dV against the backward oracle.
//
// The bound per gradient element (derived like harness/judge/bound.h, first order
// in the unit roundoffs, then divided by 1 - e_max for the products of
// first-order terms; e_max is the largest relative error of a recomputed P
// and a row beyond e_max >= 1/2 is outside the precision model):
//
//   P_ij = exp(s_ij - LSE_i) is recomputed in the score dtype from the fp32
//   LSE.  Its relative error is
//     e_ij <= c_s sigma_ij        (the score, as in the forward: c_s = gamma(d [+1]) + 2u_s)
//           + u_s |s_ij - LSE_i| <= u_s (sigma_ij + |LSE_i|)   (the subtraction)
//           + u_s |LSE_i|         (the LSE's rounding to fp32)
//           + 2 exp_ulps u_s      (exp)
//   and P is rounded to p_dtype (u_p) before the P^T dO and dS products.
//   dV_j = sum_i P_ij dO_i:
//     |err| <= (E + u_p + gamma(N)) rel + (c_s + u_s) score + 2u_s lse + eta tiny + ulp
//     with rel = sum w|dO|, score = sum w sigma |dO|, lse = sum w |LSE| |dO|.
//   dS_ij = P_ij (dP_ij - D_i).  The kernel's dP = dO . v_j (exact inputs,
//   fp32 dot product) is off by gamma(dv) A_ij, A_ij = sum|dO||v_j|.  Its D
//   is computed from the O it was GIVEN: the exact O rounded once to the
//   output dtype, |O^ - O| <= u_o |O| + eta_o per element (u_o, eta_o =
//   half the smallest subnormal: backward_problem.h stores it RNE with
//   gradual underflow), then an fp32 dot product with dO:
//     |D^ - D| <= sum|dO||O^ - O| + gamma |dO|.|O^|
//              <= (u_o + (1 + u_o) gamma) B_i + (1 + gamma) eta_o |dO_i|_1
//     with B_i = sum|dO||O| (exact O), gamma = gamma(dv + 1): the dot
//   product's dv products and dv - 1 additions, plus one rounding of a D
//   accumulated wider and stored to fp32 (FlashAttention's preprocess
//   writes D to an fp32 buffer).  Call the coefficients d_rel and d_abs;
//   d_rel >= gamma(dv) covers dP too, so both errors are charged as
//     d_rel (A_ij + B_i) + d_abs |dO_i|_1  per unit of P_ij.
//   The ORACLE's D is from the exact O (the spec): the rounding of O is
//   the kernel's input error, and it is these terms that pay for it.
//   THIS is the cancellation: dP - D may be far smaller than |dP| + |D|, and
//   the errors of the computed dP and D scale with A >= |dP| and B >= |D|,
//   not with the difference.  The bound carries that condition term:
//     cancel = sum_j w (A_ij + B_i) |g| |z|
//   where a relative bound on dS would hide it.  The rest of dS's error is
//   relative: e_ij (from P), 2u_s (the subtraction and the product), u_p
//   (dS rounded for the dQ / dK GEMMs), u_s (the final scale).
//   dQ_i = sum_j dS_ij g_ij k_j (dK alike over i): |err| <=
//     (E + 3u_s + u_p + gamma(N)) rel + (c_s (1 + 2/|cap|) + u_s) score
//       + 2u_s lse + d_rel cancel + d_abs dout_l1 + (eta_s + eta_p) tiny + ulp,
//   with dout_l1 = sum_j w |dO_i|_1 |g| |z| (the oracle's GradTerms),
//   the softcap's 2c_s/|cap| being the error of g = scale sech^2 from the
//   score's (|d sech^2| <= 2 |d tanh|), and the oracle's terms use scale >= |g|.
// Overflow: a kernel rounding dS to a 16-bit p_dtype cannot hold an exact
// dS past that dtype's range (fp16: 65504, reached with V near its own
// maximum); such a problem is outside the precision model, not judged.
// Underflow: a P that flushes or goes subnormal loses eta_s, a dS rounded
// to p_dtype eta_p, absolutely: the tiny terms.  Accumulator operations in
// the subnormal range lose eta_acc each: 4 per term.
// The final `ulp` is one rounding of the result to the dtype the gradients
// are stored in: fp32, or the input dtype for a kernel declaring
// AFZ_CAP_GRADS_IN_INPUT_DTYPE (PyTorch's, FlashAttention's and cuDNN's
// backward return them so).  Such a kernel's dK, dV under GQA may sum query
// heads' gradients already rounded each: + u_in rel + group * eta_in (rel >=
// sum over the group of |g_h|), the group_rounding term.
//
// A kernel that differentiates its OWN forward (AFZ_CAP_BWD_OWN_FORWARD:
// autograd through PyTorch's math path) computes no P = exp(s - LSE) from a
// given LSE and no D from a given O.  Its P^_ik = exp(s^_ik - m_i) / l^_i is
// normalized by its own row sum of its own scores, and D^_i = rowsum(dP P^).
// Let delta_ik be the relative error s^_ik's error and exp put in P (first
// order): |delta_ik| <= e'_ik = c_own sigma_ik + u_s |LSE_i| + exp_rel, with
// c' = c_s + 3u_s (the split scale, below) and c_own = c' + u_s (the
// subtraction s - m: |s_ik - m_i| <= sigma_ik + |LSE_i| as m_i <= LSE_i).
// The normalization spreads every key's error over the row:
//   P^_ik = P_ik (1 + delta_ik - dbar_i)(1 + theta_i)(1 + div_ik),
//   dbar_i = sum_k P_ik delta_ik,  |dbar_i| <= c_own W_i + u_s |LSE_i| + exp_rel,
//   |theta_i| <= gamma(n_i) (the row sum l^), |div| <= u_s,
// and since sum_k P_ik (delta_ik - dbar_i) dP_ik = sum_k delta_ik dS_ik,
//   |D^_i - D_i| <= sum_k e'_ik |dS_ik| + gamma(n_i) |D_i|
//                   + (u_s + gamma(n_i) + gamma(dv + 1)) sum_k P_ik A_ik   (div, D's sum, dP)
//                <= c_own T_i + u_s |LSE_i| U_i + c_rowsum Abar_i,
//   c_rowsum = 2 exp_rel + 2 gamma(n) + gamma(dv + 1) + u_s,
// using U_i <= Abar_i + B_i <= 2 Abar_i for exp's part and |D_i| <= B_i <=
// Abar_i (W, T, U, Abar: the oracle's row sums, backward_oracle.h).  So
//   dS^_ij = dS_ij (1 + delta_ij - dbar_i + theta_i + ...) - P_ij (D^_i - D_i),
// where a fused kernel's dS carries only dS_ij delta_ij.  The additions:
//   dQ/dK: c_own (own_mean + own_scores) + u_s (lse + own_scores_lse)
//          + (exp_rel + gamma(n) + 3u_s) rel + c_rowsum own_rowsum + 3u_s score
//   dV:    c_own own_mean + u_s lse + (exp_rel + gamma(n)) rel + 3u_s score
// with n the longest row's key count.  The 3u_s: such a composite may scale
// q and k by a rounded sqrt(scale) each before the S GEMM (PyTorch does):
// sqrt(scale)'s rounding enters S squared (2u) and each operand's product
// rounds (2u), four roundings where a fused kernel's one scale product has
// one (and 16-bit inputs, whose products c_s takes as exact, lose that: 4u_s
// then); dQ = (dS k~) sqrt(scale) and dK alike have the same four for one.
#pragma once
#include <string>

#include "harness/case/backward_problem.h"
#include "harness/judge/verdict.h"
#include "kernels/abi/attnfuzz_kernel.h"
#include "oracles/backward_oracle.h"

namespace afz {

struct GradBoundModel {
  double c_s = 0, u_s = 0, u_p = 0, u_o = 0, u_acc = 0, exp_rel = 0, eta_s = 0, eta_p = 0, eta_acc = 0;
  double eta_o = 0;           // half the output dtype's smallest subnormal: O's absolute rounding error
  double d_rel = 0, d_abs = 0;  // D's error per unit of B (and of A: dP's) and per unit of |dO|_1 (see above)
  double softcap = 0;
  int d = 0, dim_v = 0;
  afz_dtype grad_dtype = AFZ_F32;  // what the kernel rounds dQ, dK, dV to before writing them
  double u_group = 0, eta_group = 0;  // per-head rounding of a GQA group's dK, dV (see store_gradients)
  // AFZ_CAP_BWD_OWN_FORWARD's coefficients (0 otherwise; see above): the
  // scale's extra roundings, c_own, and gamma(n) of the longest row.
  double split_scale = 0, c_own = 0, gamma_row = 0, c_rowsum = 0;
  bool exact_products = false;  // the unscaled q_x k_x are exact in the score dtype (16-bit inputs)
  GradBoundModel(const afz_precision& prec, afz_dtype in_dtype, afz_dtype o_dtype, const afz_problem& p);
  // A kernel declaring AFZ_CAP_GRADS_IN_INPUT_DTYPE rounds its gradients to
  // the input dtype (the final ulp term), and under GQA may have rounded each
  // query head's dK, dV before summing the group (group_rounding).
  void store_gradients(uint32_t caps, afz_dtype in_dtype, const afz_problem& p);
  double group_rounding(const GradTerms& t, size_t e) const;
  // A kernel declaring AFZ_CAP_BWD_OWN_FORWARD normalizes its own P and sums
  // its own D: the own-forward terms, from r's longest row.
  void own_forward(uint32_t caps, const GradResult& r);
  double own_dq_dk(const GradTerms& t, size_t e) const;
  double own_dv(const GradTerms& t, size_t e) const;
  // 1 / (1 - e_max) for the problem, or 0 when e_max >= 1/2 (outside the model).
  double slack(const GradResult& r) const;
  double dq_dk(const GradTerms& t, size_t e, int terms, double slack) const;
  double dv(const GradTerms& t, size_t e, int terms, double slack) const;
};

// Compares the kernel's gradients in m with the oracle's r.  Elements the
// fast tier's own error leaves undecided make the whole problem recompute
// with `escalate` (may be null): gradients of a KV head couple all its rows.
Verdict judge_backward(const afz_backward_kernel& k, const BackwardMaterialized& m, GradResult& r,
                       const BackwardOracle* escalate);

}  // namespace afz
