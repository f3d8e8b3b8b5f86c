// Exact gradients of attention: the references every backward verdict is
// judged against.
//
// For a given upstream gradient dO, at the given (rounded) inputs, the
// oracle computes the gradient of the EXACT function:
//   w_ij = exp(s_ij - lse_i)                        exact weights (P)
//   O_i  = sum_j w_ij v_j                           exact output
//   D_i  = dO_i . O_i                               from the exact O (the spec), not the
//                                                   stored one a kernel is given
//   dP_ij = dO_i . v_j,   dS_ij = w_ij (dP_ij - D_i)
//   dV_j = sum_i w_ij dO_i
//   dQ_i = sum_j dS_ij g_ij k_j,   dK_j = sum_i dS_ij g_ij q_i
// with g_ij = ds_ij / d(q.k) = scale (times sech^2(scale q.k / cap) under a
// softcap).  dK and dV of a KV head sum over the query heads of its GQA
// group.  A row with no visible key contributes nothing (its gradients are
// exactly 0); a key that no row sees gets dK = dV = 0 exactly.  No oracle
// ever returns NaN.
//
// The condition terms below let the verdict bound a kernel's error without
// hiding the cancellation in dS = P (dP - D): the errors of the computed dP
// and D are proportional to sum|dO||v_j| >= |dP| and sum|dO||O| >= |D|, not
// to the (possibly tiny) difference, and the bound carries those sums.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/abi/attnfuzz_kernel.h"
#include "oracles/oracle.h"

namespace afz {

// Per gradient element y = sum_t c_t z_t (t over the (query, key) pairs that
// reach it), with z the vector the gradient multiplies (k_j for dQ, q_i for
// dK, dO_i for dV) and c the exact coefficient:
struct GradTerms {
  std::vector<DD> value;         // the exact gradient
  std::vector<double> rel;       // sum_t |c_t| |z_t|            (relative errors of c: exp, roundings)
  std::vector<double> score;     // sum_t |c_t| sigma_t |z_t|    (score errors, amplified by exp)
  std::vector<double> lse;       // sum_t |c_t| |lse_i| |z_t|    (the fp32 LSE's rounding)
  std::vector<double> cancel;    // dQ/dK: sum_t w_t (A_t + B_i) g |z_t|, A = sum|dO||v_j|, B = sum|dO||O|
  std::vector<double> cancel_w;  // the same with B_W = sum|dO| W (W = sum_j w|v_j| >= |O|): the fast tier's own error
  std::vector<double> dout_l1;   // dQ/dK: sum_t w_t |dO_i|_1 g |z_t|: D's absolute error per unit error of each O
                                 // element (an O rounded into its dtype's subnormals)
  std::vector<double> tiny;      // sum_t (|dP - D| + 1) g |z_t| (dQ/dK) or |z_t| (dV): absolute underflow terms
  // For a kernel that differentiates its OWN forward (AFZ_CAP_BWD_OWN_FORWARD):
  // its P is normalized by its own row sum, so every score error of row i
  // reaches every P of the row, and its D = sum_k dP_ik P_ik reads them all.
  // With the row sums W_i = sum_k w_ik sigma_ik (the row's mean score size),
  // T_i = sum_k sigma_ik |dS_ik|, U_i = sum_k |dS_ik| and Abar_i =
  // sum_k w_ik A_ik (A as in `cancel`; Abar_i >= sum_k w |dP_ik|, >= B_i):
  std::vector<double> own_mean;        // sum_t |c_t| W_i |z_t|  (the row's mean score error, in each P)
  std::vector<double> own_scores;      // dQ/dK: sum_t w_t g T_i |z_t|  (D's error from every key's score error)
  std::vector<double> own_scores_lse;  // dQ/dK: sum_t w_t g |lse_i| U_i |z_t|  (the same from each s - m)
  std::vector<double> own_rowsum;      // dQ/dK: sum_t w_t g Abar_i |z_t|  (D's and the row sum's roundings)
  std::vector<double> err;       // the oracle's own error bound (+inf: the tier cannot resolve it)
  void resize(size_t n);
};

struct GradResult {
  int batch = 0, heads_q = 0, heads_kv = 0, max_sq = 0, max_sk = 0, head_dim = 0, head_dim_v = 0;
  GradTerms dq;  // [b][heads_q][i][d]
  GradTerms dk;  // [b][heads_kv][j][d]
  GradTerms dv;  // [b][heads_kv][j][dv]
  std::vector<DD> o;             // [b][heads_q][i][dv] the exact forward output
  std::vector<DD> lse;           // [row] -inf for empty rows
  std::vector<uint8_t> empty;    // [row]
  std::vector<int32_t> visible_keys;  // [row]
  std::vector<int32_t> key_rows;      // [b][heads_kv][j] (query, head) pairs that see key j
  double max_sigma = 0;          // max sigma_ij over every visible pair
  double max_abs_lse = 0;        // max |lse_i| over non-empty rows
  double max_abs_ds = 0;         // max |dS_ij| = |P_ij (dP_ij - D_i)| over every visible pair (before the scale)

  int64_t row(int b, int h, int i) const { return (int64_t(b) * heads_q + h) * max_sq + i; }
  int64_t key(int b, int hk, int j) const { return (int64_t(b) * heads_kv + hk) * max_sk + j; }
  void resize(const afz_problem& p);
};

class BackwardOracle {
 public:
  virtual ~BackwardOracle() = default;
  virtual std::string name() const = 0;
  // dout: dO [b][heads_q][i][dv], read through its strides with afz::load.
  // Throws std::invalid_argument (one line) on malformed problems or
  // non-finite inputs on a visible path.
  virtual GradResult compute(const afz_problem& p, const afz_tensor& dout) const = 0;
};

std::unique_ptr<BackwardOracle> make_fast_backward_oracle();   // double, compensated, a-priori bound
std::unique_ptr<BackwardOracle> make_boost_backward_oracle();  // cpp_bin_float, 256 bits
std::unique_ptr<BackwardOracle> make_mpfr_backward_oracle();   // nullptr where MPFR was not built
// MPFR where built, else Boost.
std::unique_ptr<BackwardOracle> make_escalation_backward_oracle();

}  // namespace afz
