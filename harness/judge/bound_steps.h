// The arithmetic of ErrorBound (bound.h, where the derivation is) after the
// row's libm terms: element and LSE bounds from the precision model's
// constants and one row's factors, in +, *, / and ulp only.  The CPU judge
// (verdict.cpp) and the GPU verdict (harness/judge/gpu) both call these, so
// with -ffp-contract=off and nvcc --fmad=false each bound is the same double
// on both sides.
#pragma once
#include <cmath>

#include "kernels/abi/dtype.h"
#include "kernels/abi/host_device.h"

namespace afz {

struct ElementTerms {    // from the oracle, per element
  double o;              // exact value
  double cond;           // W
  double cond_score;     // WS
  double cond_tiny;      // sum |v_j| / l
};

namespace bound_steps {

// ulp() of the output dtype, as the two numbers ulp_in (dtype.h) needs.
struct UlpFormat {
  int precision, min_exponent;
};

// The kernel's declared precision model, reduced to the bound's constants.
struct Model {
  double u_s, u_p, u_acc, eta, eta_acc, c_s, e_p, e_l, e_num;
  UlpFormat out, lse_out;  // the O dtype and fp32 (the LSE's)
};

// One row's factors (ErrorBound::begin_row): the row's oracle terms and
// what expm1 made of them.
struct RowFactors {
  double lse_cond_score;  // LS
  double ln_l;            // ln l
  double weights_slack;   // expm1(ds)/ds / (1 - e_max)
  double gamma_n;         // gamma(N) in the accumulator
  double underflow_acc;   // subnormal losses in the accumulator
};

// 1/e: the maximum of x e^-x.
inline constexpr double kInvE = 0x1.78b56362cef38p-2;

AFZ_HOST_DEVICE inline double element(const Model& m, const RowFactors& r, const ElementTerms& e) {
  const double weights =
      ((2 * m.e_l + m.e_num) * e.cond + m.c_s * (e.cond_score + e.cond * r.lse_cond_score)) * r.weights_slack;
  const double accumulate = (2 * r.gamma_n + m.u_acc) * e.cond;
  const double tiny = (m.eta + m.u_s * kInvE) * e.cond_tiny;
  return bits_steps::ulp(m.out.precision, m.out.min_exponent, fabs(e.o) + weights + accumulate) + weights + accumulate + tiny +
         r.underflow_acc;
}

AFZ_HOST_DEVICE inline double lse(const Model& m, const RowFactors& r, double lse_value) {
  const double scores = m.c_s * r.lse_cond_score * r.weights_slack;
  const double normalizer = m.e_l + r.gamma_n;
  const double logs = 2 * m.u_s * (fabs(r.ln_l) + fabs(lse_value));
  return scores + normalizer + logs + bits_steps::ulp(m.lse_out.precision, m.lse_out.min_exponent, fabs(lse_value));
}

}  // namespace bound_steps
}  // namespace afz
