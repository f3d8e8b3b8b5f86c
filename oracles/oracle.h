// Exact attention forward: the references every verdict is judged against.
//
// Oracles read the problem through the same pointers and strides the kernel
// sees (the rounded inputs, exactly), and compute in high precision:
//   s_j = softcap(scale * q.k_j) + a_j   over visible keys j
//   m = max_j s_j,  l = sum_j exp(s_j - m),  o = sum_j exp(s_j - m) v_j / l
//   lse = m + ln l
// A row with no visible key has o = 0 exactly and lse = -inf; no oracle ever
// returns NaN, whatever the score magnitude.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/abi/attnfuzz_kernel.h"

namespace afz {

// A value as an unevaluated sum hi + lo with |lo| <= ulp(hi)/2: about 106
// bits, enough to show 100-bit agreement and to round correctly to any dtype.
struct DD {
  double hi = 0, lo = 0;
};

// Everything indexed by row r = (b * heads_q + h) * max_seqlen_q + i; element
// arrays by r * head_dim_v + x.  Padding rows (i >= seqlens_q[b]) are empty.
struct OracleResult {
  int batch = 0, heads_q = 0, max_sq = 0, dv = 0;
  std::vector<DD> o;
  std::vector<DD> lse;                 // -inf for empty rows
  std::vector<uint8_t> empty;          // row has no visible key
  // Condition terms for the verdict's bound, with w_j = exp(s_j - m) / l:
  std::vector<double> cond;            // [elem] sum_j w_j |v_j|
  std::vector<double> cond_score;      // [elem] sum_j w_j |v_j| sigma_j
  std::vector<double> cond_tiny;       // [elem] sum_j |v_j| / l  (underflow and subtraction terms)
  std::vector<double> lse_cond_score;  // [row]  sum_j w_j sigma_j
  std::vector<double> max_abs_score;   // [row]  max_j |s_j| over visible keys
  std::vector<double> max_sigma;       // [row]  max_j sigma_j over visible keys (bound's slack)
  std::vector<int32_t> visible_keys;   // [row]  number of visible keys N
  std::vector<int32_t> max_key;        // [row]  ordinal among the visible keys of the first one with the
                                       //        largest s_j (-1: empty row); for the reports' statistics
  // sigma_j = scale * sum_x |q_x k_jx| + |softcap| + |a_j|: the magnitude
  // that a kernel's rounding of the score s_j is proportional to.
  // The oracle's own error bound on o and lse (0 for the multiprecision
  // tiers); the verdict escalates rows it cannot decide.
  // (In fact all three tiers fill a bound, derived in their sources: the
  // multiprecision ones about 2^-105 |o| + 2^-240 cond; +inf means the tier
  // cannot resolve the row.)
  std::vector<double> o_err;           // [elem]
  std::vector<double> lse_err;         // [row]

  int64_t rows() const { return int64_t(batch) * heads_q * max_sq; }
  int64_t row_index(int b, int h, int i) const { return (int64_t(b) * heads_q + h) * max_sq + i; }
  void resize(int batch, int heads_q, int max_sq, int dv);
};

class Oracle {
 public:
  virtual ~Oracle() = default;
  virtual std::string name() const = 0;
  // Computes all rows.
  virtual OracleResult compute(const afz_problem& p) const = 0;
  // Recomputes the listed rows into `out` (Ziv escalation of undecided rows).
  virtual void compute_rows(const afz_problem& p, const std::vector<int64_t>& rows,
                            OracleResult& out) const = 0;
};

// The tiers.  make_mpfr_oracle returns nullptr where MPFR was not built.
std::unique_ptr<Oracle> make_mpfr_oracle(int precision_bits = 256);
std::unique_ptr<Oracle> make_boost_oracle();  // cpp_bin_float, 256 bits
std::unique_ptr<Oracle> make_fast_oracle();   // double, compensated, with a bound
// The fast tier's steps and bound on the GPU (oracles/gpu, fp64): nullptr,
// with *why, where this build has no CUDA or no device is found.  It calls
// CUDA in the calling process, so a process that forks CUDA workers without
// exec (the test binary) must not use it before forking; attnfuzz starts its
// workers by fork + exec (harness/run/gpu/gpu_run.h).
std::unique_ptr<Oracle> make_gpu_oracle(std::string* why = nullptr);
bool have_mpfr();
// The tier undecided rows escalate to: MPFR where it was built, else Boost.
std::unique_ptr<Oracle> make_escalation_oracle();

}  // namespace afz
