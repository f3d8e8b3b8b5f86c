// The backward pass's problem for a case: the forward Materialized plus dO,
// the forward's O and LSE as inputs, and the dQ, dK, dV outputs.
//
// Inputs the backward kernel gets (documented choice):
//   dO   the case's `values_do` recipe on its own RNG stream, rounded to the
//        input dtype (FlashAttention takes dO in the input dtype), stored
//        [b][h][i][dv] with the case's row gap; padding holds the case's poison;
//   O    the ORACLE's exact O rounded once to the case's output dtype (the
//        forward problem's o dtype: bf16, fp16 or fp32) and stored in it,
//        dense [b][h][i][dv]: what a real forward stores and a real backward
//        reads back.  Not some kernel's output: a forward kernel's error must
//        not become the backward's input.  D = dO . O from this O carries the
//        rounding, |O_stored - O| <= u_o |O| + eta_o per element, and the
//        bound charges it (backward_verdict.h);
//   LSE  the oracle's exact LSE rounded to fp32, -inf for empty rows (the
//        forward ABI's convention).
// Outputs are fp32, dense [b][h][s][d], filled with the signalling-NaN
// poison before every run, padding included (a write there is out of bounds).
#pragma once
#include <cstdint>
#include <vector>

#include "harness/case/materialize.h"
#include "kernels/abi/attnfuzz_kernel.h"
#include "oracles/backward_oracle.h"

namespace afz {

// RNG stream of dO (materialize.cpp uses 1..4 and 100 + transform index).
inline constexpr uint64_t kStreamDout = 5;

class BackwardMaterialized {
 public:
  // fwd must outlive this object.
  explicit BackwardMaterialized(Materialized& fwd);
  BackwardMaterialized(const BackwardMaterialized&) = delete;
  BackwardMaterialized& operator=(const BackwardMaterialized&) = delete;

  const Materialized& forward() const { return fwd_; }
  const afz_backward_problem& problem() const { return problem_; }
  afz_backward_problem& problem() { return problem_; }
  const afz_tensor& dout() const { return problem_.dout; }

  // O and LSE from the oracle's exact forward values (see above).  Throws
  // std::runtime_error (one line) where a visible row's O overflows the
  // output dtype: the backward's input would not be finite.
  void set_forward_outputs(const GradResult& exact);
  void poison_outputs();

  enum class Grad { Q, K, V };
  float grad_at(Grad g, int b, int h, int s, int x) const;
  // Whether every padding element of the three outputs still holds poison.
  bool padding_untouched(std::string* where) const;

 private:
  const std::vector<float>& storage(Grad g) const;
  int64_t offset(Grad g, int b, int h, int s, int x) const;

  Materialized& fwd_;
  std::vector<uint8_t> dout_storage_, o_storage_;
  std::vector<float> lse_storage_, dq_, dk_, dv_;
  afz_problem fwd_problem_{};
  afz_backward_problem problem_{};
};

}  // namespace afz
