#include "torch_cuda.h"

#include <ATen/detail/CUDAHooksInterface.h>

#include "torch_ops.h"

#ifdef AFZ_TORCH_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace afz::torchk {

namespace {
// CUDART_VERSION is major * 1000 + minor * 10.
constexpr long kCudartMajor = 1000;
constexpr long kCudartMinor = 10;
}  // namespace

bool cuda_built() {
#ifdef AFZ_TORCH_WITH_CUDA
  return true;
#else
  return false;
#endif
}

#ifdef AFZ_TORCH_WITH_CUDA
struct StreamScope::Guard {
  explicit Guard(c10::cuda::CUDAStream s) : guard(s) {}
  c10::cuda::CUDAStreamGuard guard;
};

StreamScope::StreamScope(void* cuda_stream) {
  device_index_ = c10::cuda::current_device();
  if (!cuda_stream) return;
  guard_ = std::make_unique<Guard>(
      c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(cuda_stream), c10::DeviceIndex(device_index_)));
}
#else
struct StreamScope::Guard {};
StreamScope::StreamScope(void*) {}
#endif

StreamScope::~StreamScope() = default;

std::string library_version() {
  std::string v = "PyTorch " + torch_version();
  if (!cuda_built()) return v + ", CPU only";
  // Compile-time constants behind torch's CUDA hooks: no CUDA call is made.
  try {
    const long rt = at::detail::getCUDAHooks().versionCUDART();
    v += ", CUDA " + std::to_string(rt / kCudartMajor) + "." + std::to_string(rt % kCudartMajor / kCudartMinor);
  } catch (const std::exception&) {
    // A CUDA build whose libtorch_cuda was dropped by the linker: say so,
    // since every GPU operator will then be missing its CUDA kernel.
    return v + ", CUDA library not loaded (libtorch_cuda missing: link with --no-as-needed)";
  }
  try {
    v += ", cuDNN " + std::to_string(at::detail::getCUDAHooks().versionCuDNN());
  } catch (const std::exception&) {
    v += ", no cuDNN";
  }
  return v;
}

}  // namespace afz::torchk
