// bf16 instantiations of the forward (correct kernel and mutants); one file
// per dtype so that a 2-core build compiles them in parallel.
#include "kernels/cuda/fa2_launch.cuh"
#include "kernels/cuda/launch.h"

namespace afz::cuda {
cudaError_t launch_forward_bf16(const ForwardParams& p, Defect defect, cudaStream_t stream) {
  return launch_forward_typed<__nv_bfloat16>(p, defect, stream);
}
}  // namespace afz::cuda
