// The backward mutants' defects: each a BwdSteps type deriving from the
// correct Fa2BwdSteps (kernels/cpu/backward_fa2.h) and hiding one step.
#pragma once
#include <cmath>

#include "kernels/abi/dtype.h"
#include "kernels/cpu/backward_fa2.h"

namespace afz::mutants {

using cpu::Fa2BwdSteps;

// The LSE read as if it were in log2 units (a kernel whose forward stores
// m log2(e) + log2(l) for exp2): P = exp2(s log2(e) - LSE), wrong by
// e^{LSE (1 - ln 2)}... on every row whose LSE is not 0.
struct BwdLseLog2 : Fa2BwdSteps {
  template <typename T>
  static T probability(T s, T lse_ref) {
    constexpr T kLog2e = T(1.4426950408889634);
    return std::exp2(s * kLog2e - lse_ref);
  }
};

// The LSE with the wrong sign: P = exp(s + LSE).
struct BwdLseNegated : Fa2BwdSteps {
  template <typename T>
  static T probability(T s, T lse_ref) { return std::exp(s + lse_ref); }
};

// D = dO . O from the O rounded to the forward's output dtype (what
// FlashAttention does: its preprocess reads the stored bf16 O) while the
// kernel was given the fp32 O.  See backward_mutants.cpp for whether that
// is a defect at the bound.
struct BwdDFromRoundedO : Fa2BwdSteps {
  static float o_for_row_term(float o, afz_dtype stored) { return float(round_to(stored, double(o))); }
};

// dQ and dK without the softmax scale: the chain rule through s = scale q.k dropped.
struct BwdNoScaleInDs : Fa2BwdSteps {
  template <typename T>
  static T grad_scale(T) { return T(1); }
};

// Masked scores set to 0 instead of -inf: P = exp(0 - LSE) for every masked
// pair, overflowing to inf when LSE < -88.7, and inf * 0 = NaN in dS.
struct BwdMaskedScoreZero : Fa2BwdSteps {
  template <typename T>
  static T masked_score() { return T(0); }
};

// No LSE guard: the kernel assumes FlashAttention's +inf for an empty row's
// LSE, so it never maps the ABI's -inf; exp(-inf - (-inf)) = NaN for the
// masked scores of an empty row, and the NaN P reaches dV and dS.
struct BwdEmptyLseUnguarded : Fa2BwdSteps {
  template <typename T>
  static T lse_reference(T lse) { return lse; }
};

}  // namespace afz::mutants
