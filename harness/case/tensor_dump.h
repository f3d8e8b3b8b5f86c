// A backward case's tensors as NumPy files, for looking at a failure outside
// the harness (an emulation, a plot):
//
//   q, k, v, dout        float32, logical [b][h][s][x] (rows past a
//                        sequence's length 0)
//   bias                 float32 [b][hq][i][j]: the additive mask, -inf where
//                        a key is not visible (masks and causal bands folded in)
//   o, lse               what the backward kernel is given: O in [b][hq][i][dv]
//                        (its dtype's values), LSE in [b][hq][i] (-inf: empty row)
//   exact_dq, _dk, _dv   float64, the oracle's gradients
//   kernel_dq, _dk, _dv  float32, what the kernel wrote (when it ran)
//   meta.json            dtype, scale, seqlens, the oracle's max sigma and |LSE|
#pragma once
#include <string>

#include "harness/case/backward_problem.h"
#include "oracles/backward_oracle.h"

namespace afz {

// Writes the files into `dir` (made if missing).  Throws std::runtime_error
// (one line) where a file cannot be written.
void dump_backward_tensors(const std::string& dir, const BackwardMaterialized& bm, const GradResult& exact,
                           bool kernel_ran);

}  // namespace afz
