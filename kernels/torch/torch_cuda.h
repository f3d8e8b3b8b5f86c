// The CUDA side of the adapters, compiled only where torch was built with
// CUDA (AFZ_TORCH_WITH_CUDA, set by CMakeLists.txt when c10_cuda exists).
// Debian's libtorch 1.13 is CPU-only, yet it installs c10/cuda headers that
// include <cuda_runtime_api.h>, so `__has_include` cannot tell; the CMake
// check on the c10_cuda library can.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace afz::torchk {

// Whether these adapters were built against a CUDA torch.
bool cuda_built();

// For the duration of a GPU kernel's run(): torch's current device and
// stream become those of the problem, so every operator we call (and every
// temporary the caching allocator hands out) is ordered on the stream the
// attnfuzz worker uploads on and synchronizes after run().  A null stream,
// or a CPU build, leaves torch's defaults alone.
class StreamScope {
 public:
  explicit StreamScope(void* cuda_stream);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;
  int device_index() const { return device_index_; }

 private:
  struct Guard;
  std::unique_ptr<Guard> guard_;
  int device_index_ = 0;
};

// Before an operator call on the GPU (inside a StreamScope): the memory the
// caching allocator will hand the operator's outputs holds NaN, as the
// harness's own output buffers do.  An operator returns tensors it allocated
// itself (at::empty), so an element it never writes holds whatever the
// allocator had there: in a fresh process zeros from cudaMalloc, which pass
// for the convention of an empty row, and after other cases their leftovers.
// Such a verdict would depend on what ran before; poisoned, it does not.
// Every cached block nobody holds is released, then fresh segments, NaN-
// filled, are cached for both of the allocator's pools (small requests and
// large ones, `output_bytes` of the call's outputs with room to spare) on the
// current stream, which the call's allocations then come from.  A CPU build
// does nothing.
void poison_cached_memory(int64_t output_bytes);
// The byte it fills with: 0xFF in every byte is a NaN in fp16, bf16, fp32
// and fp64 alike (all exponent bits set, a nonzero mantissa).
constexpr int kPoisonByte = 0xFF;

// "PyTorch 2.11.0, CUDA 13.0, cuDNN 91900": from compile-time constants and
// torch's CUDA hooks, which report versions without creating a CUDA context
// (the harness process loads this library too, and must stay context-free).
std::string library_version();

}  // namespace afz::torchk
