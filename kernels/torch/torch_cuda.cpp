#include "torch_cuda.h"

#include <ATen/detail/CUDAHooksInterface.h>

#include "torch_ops.h"

#ifdef AFZ_TORCH_WITH_CUDA
#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <vector>
#endif

namespace afz::torchk {

namespace {
// CUDART_VERSION is major * 1000 + minor * 10.
constexpr long kCudartMajor = 1000;
constexpr long kCudartMinor = 10;

#ifdef AFZ_TORCH_WITH_CUDA
// The caching allocator's pools (c10/cuda/CUDACachingAllocator.cpp): requests
// up to kSmallSize come out of 2 MiB segments; larger ones out of 20 MiB
// segments, or above 10 MiB out of a segment of their own rounded up to 2 MiB.
constexpr int64_t kMiB = int64_t(1) << 20;
constexpr int64_t kSmallSize = 1 * kMiB;
constexpr int64_t kSmallBuffer = 2 * kMiB;
constexpr int64_t kLargeBuffer = 20 * kMiB;
constexpr int64_t kRoundLarge = 2 * kMiB;
// Small segments poisoned: an operator's small outputs and temporaries
// together rarely pass 8 MiB; beyond that it gets fresh (unpoisoned) memory.
constexpr int64_t kSmallSegmentsPoisoned = 4;
// The large pool gets this many times the outputs: the operator's
// temporaries and workspace are carved out of the same segment, often first.
constexpr int64_t kLargeSlack = 4;
#endif
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

#ifdef AFZ_TORCH_WITH_CUDA
void poison_cached_memory(int64_t output_bytes) {
  namespace alloc = c10::cuda::CUDACachingAllocator;
  // Cached blocks from earlier calls hold their data: give them back to the
  // driver, so that none can be picked before the poisoned ones.
  alloc::emptyCache();
  const at::TensorOptions bytes = at::TensorOptions().dtype(at::kByte).device(at::kCUDA, c10::cuda::current_device());
  std::vector<at::Tensor> held;
  // Whole segments: a free remainder left unpoisoned behind a poisoned block
  // would merge with it and be handed out too.
  for (int64_t i = 0; i < kSmallSegmentsPoisoned * (kSmallBuffer / kSmallSize); ++i)
    held.push_back(at::empty({kSmallSize}, bytes).fill_(kPoisonByte));
  const int64_t large = std::max(kLargeBuffer, (kLargeSlack * output_bytes + kRoundLarge - 1) / kRoundLarge * kRoundLarge);
  held.push_back(at::empty({large}, bytes).fill_(kPoisonByte));
  // Freed here, on the current stream, after the fills in its order: the
  // call's allocations on that stream reuse them.
}
#else
void poison_cached_memory(int64_t) {}
#endif

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
