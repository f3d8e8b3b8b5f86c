// fp16 instantiations of the forward (correct kernel and mutants).
#include "kernels/cuda/fa2_launch.cuh"
#include "kernels/cuda/launch.h"

namespace afz::cuda {
cudaError_t launch_forward_f16(const ForwardParams& p, Defect defect, cudaStream_t stream) {
  return launch_forward_typed<__half>(p, defect, stream);
}
}  // namespace afz::cuda
