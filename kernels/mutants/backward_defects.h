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

// D = dO . O from an unscaled FP8 (e4m3) copy of O: an FP8 attention's
// preprocess that reads the FP8 output buffer but drops its amax scale
// (scale 1).  Reading the stored bf16 / fp16 O is correct (it is what the
// kernel is given, and the bound pays for its rounding); e4m3 keeps 4
// significand bits (2^-4 relative, 2^5 times bf16's 2^-9), flushes |O| below
// 2^-10 to zero and saturates past 448 to NaN (e4m3 has no Inf): a defect
// on every output dtype.
struct BwdDFromFp8O : Fa2BwdSteps {
  static float d_term(float dout, float o) { return dout * float(round_to(AFZ_F8E4M3, double(o))); }
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
