// The boolean mask as an additive bias.  cuDNN's fused SDPA engine loads a
// full-size tensor only as the operand of an ADD (the bias) or a MUL: every
// formulation of "mask ? score : -inf" on a loaded tensor (u8, int8, int32,
// fp32 or bf16 mask, CMP then BINARY_SELECT, or the mask as the select's
// predicate) gets no engine config on cuDNN 9.14 and 9.19 (measured on an
// H200), and a CUDNN_DATA_BOOLEAN predicate crashes the heuristics (SIGFPE).
// So, as PyTorch does for a boolean attn_mask on cuDNN, the mask becomes a
// bias of 0 / -inf, merged with the additive mask when there is one:
//     bias = keep ? add : -inf
// a select, not an add, so a masked key stays -inf whatever the additive
// mask holds there (+inf included).  Exact in fp32.  The one semantic
// difference left: a masked key whose fp32 score is itself +inf (a q.k
// overflow) gives +inf + -inf = NaN, where the ABI would ignore the key.
#pragma once
#include <cstdint>
#include <vector>

#include "attnfuzz_kernel.h"
#include "kernels/cudnn/sdpa_graph.h"

namespace afz::cudnn {

// The merged bias, dense over its dims: an axis is broadcast (extent 1) only
// where every mask present broadcasts it (stride 0).
struct MaskBias {
  Dims dims{};
  std::vector<float> values;  // packed [b][h][i][j] over dims
  Dims strides() const;       // packed strides; 0 along extent-1 axes, as a broadcast in the problem
};

// Elements from a mask's data pointer to one past its last element (strides
// are non-negative: sdpa_unsupported_reason declines the rest).
int64_t mask_span_elements(const afz_tensor& t, const Dims& extent);

// Host copies of the masks, each starting at its data pointer (add_values
// may be null: no additive mask).
MaskBias merge_masks(const afz_problem& p, const uint8_t* keep, const float* add_values);

}  // namespace afz::cudnn
