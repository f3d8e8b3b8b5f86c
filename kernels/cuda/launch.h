// Host entry points of the CUDA kernels, one per family; each returns the
// launch's cudaError_t (kernels run asynchronously on `stream`).
#pragma once
#include <cuda_runtime.h>

#include "kernels/cuda/defects.h"
#include "kernels/cuda/forward_params.h"

namespace afz::cuda {

// The FA2 forward over the whole key range: head_dim 32, 64, 96 or 128.
cudaError_t launch_forward_bf16(const ForwardParams& p, Defect defect, cudaStream_t stream);
cudaError_t launch_forward_f16(const ForwardParams& p, Defect defect, cudaStream_t stream);

// Split-KV: p.num_splits / blocks_per_split and the workspace must be set
// (plan_splits); partial pass then merge.
struct SplitPlan {
  int num_splits = 1, blocks_per_split = 1;
  size_t workspace_floats = 0;
};
SplitPlan plan_splits(const ForwardParams& p, int sm_count);
cudaError_t launch_splitkv_bf16(const ForwardParams& p, bool rescale_in_merge, cudaStream_t stream);
cudaError_t launch_splitkv_f16(const ForwardParams& p, bool rescale_in_merge, cudaStream_t stream);

// Deliberately faulty kernels, for the harness's own tests.
cudaError_t launch_write_past_end(void* first_byte_past_output, cudaStream_t stream);  // out of bounds
cudaError_t launch_illegal_address(cudaStream_t stream);                             // sticky fault
cudaError_t launch_spin_forever(cudaStream_t stream);                                // never returns

}  // namespace afz::cuda
