// The backward pass's problem for a case: the forward Materialized plus dO,
// the forward's O and LSE as inputs, and the dQ, dK, dV outputs.
//
// Inputs the backward kernel gets (documented choice):
//   dO   the case's `values_do` recipe on its own RNG stream, rounded to the
//        input dtype (FlashAttention takes dO in the input dtype), stored
//        [b][h][i][dv] with the case's row gap; padding holds the case's poison;
//   O    the ORACLE's exact O rounded once to fp32, not some kernel's output:
//        a forward kernel's error must not become the backward's input, and
//        fp32 is the accumulator precision a kernel holds O in before its
//        final rounding (a kernel that wants the stored out-dtype O rounds
//        it itself, which its precision must then pay for);
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

  // O and LSE from the oracle's exact forward values (see above).
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
  std::vector<uint8_t> dout_storage_;
  std::vector<float> o_storage_, lse_storage_, dq_, dk_, dv_;
  afz_problem fwd_problem_{};
  afz_backward_problem problem_{};
};

}  // namespace afz
