#include "case.h"

#include <algorithm>
#include <cmath>

#include "dtype.h"

namespace afz {

namespace {
// The allocation extent of a varlen batch; an empty batch has extent 0.
int max_of(const std::vector<int32_t>& seqlens) {
  return seqlens.empty() ? 0 : *std::max_element(seqlens.begin(), seqlens.end());
}
}  // namespace

int Case::max_seqlen_q() const { return max_of(seqlens_q); }
int Case::max_seqlen_k() const { return max_of(seqlens_k); }

// Kernels take the scale as fp32 (afz_problem::scale), so the case's scale is
// the fp32 rounding of its double.  The default follows what FlashAttention's
// Python front end passes: 1/sqrt(d) in double, then rounded to fp32.  sqrt
// and the division are correctly rounded IEEE operations and round_to is
// exact integer code, so the result is the same bits on every machine
// (1/sqrt(d) is not itself the correctly rounded fp32 of d^-1/2 in every
// case, but it is the value users' kernels are actually called with).
float Case::effective_scale() const {
  const double s = scale ? *scale : 1.0 / std::sqrt(double(head_dim));
  return float(round_to(AFZ_F32, s));
}

}  // namespace afz
