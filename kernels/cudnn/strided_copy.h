// A device-side copy between two [b][h][s][x] tensors of any strides and of
// dtypes f32, f16 or bf16, converting with round-to-nearest-even and copying
// only the rows s < row_limit[b] of each sequence: the backward adapter packs
// the harness's tensors into the dense scratch cuDNN is given (padding rows
// stay the zeros they were cleared to, never the harness's NaN poison) and
// scatters cuDNN's dense gradients back into the harness's tensors without
// touching their padding.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attnfuzz_kernel.h"

namespace afz::cudnn {

struct CopyExtent {
  int64_t batch = 0, heads = 0, seq = 0, width = 0;
};

// row_limit: DEVICE int32 per batch entry (a seq-length array).  Launches
// on `stream`; returns the launch's error.
cudaError_t strided_copy(const afz_tensor& src, const afz_tensor& dst, const CopyExtent& extent,
                         const int32_t* row_limit, cudaStream_t stream);

}  // namespace afz::cudnn
