// attnfuzz_allocator_poison_check: on a GPU, whether poison_cached_memory()
// (kernels/torch/torch_cuda.h) does what the adapters rely on: after it, a
// tensor torch allocates the way an operator allocates its outputs
// (at::empty on the current stream) holds NaN in every byte, even when the
// cache held zeroed blocks of exactly that size before (an earlier case's
// leftovers).  A control without the poison shows the check can fail.
// One line per size; exit status 0 when every poisoned allocation was NaN
// throughout.  Built with attnfuzz_torch_probe (ATTNFUZZ_TORCH_PROBE=ON).
#include <cstdio>

#ifndef AFZ_TORCH_WITH_CUDA
int main() {
  std::puts("attnfuzz_allocator_poison_check: this torch has no CUDA; nothing to check");
  return 0;
}
#else
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>

#include "torch_cuda.h"

namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;
// Both pools, and both kinds of large segment: a 20 MiB one that requests
// between 1 and 10 MiB share, and one of its own above 10 MiB.
constexpr int64_t kSizes[] = {64, 4 * kKiB, 1 * kMiB, 3 * kMiB, 12 * kMiB, 48 * kMiB};
// As many blocks of the size, zeroed and freed, as an operator's outputs.
constexpr int kLeftovers = 3;

at::TensorOptions device_bytes() { return at::TensorOptions().dtype(at::kByte).device(at::kCUDA); }

// The cache left holding zeroed blocks of `bytes`.
void leave_zeroed_blocks(int64_t bytes) {
  for (int i = 0; i < kLeftovers; ++i) at::zeros({bytes}, device_bytes());
}

bool all_nan_bytes(const at::Tensor& t) { return t.eq(afz::torchk::kPoisonByte).all().item<bool>(); }

}  // namespace

int main() {
  if (!at::hasCUDA()) {
    std::puts("attnfuzz_allocator_poison_check: no GPU; nothing to check");
    return 0;
  }
  // The adapters run on the attnfuzz worker's stream, not the default one.
  const c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAStreamGuard on_stream(stream);
  bool ok = true;
  for (int64_t bytes : kSizes) {
    leave_zeroed_blocks(bytes);
    const bool control = all_nan_bytes(at::empty({bytes}, device_bytes()));
    leave_zeroed_blocks(bytes);
    afz::torchk::poison_cached_memory(kLeftovers * bytes);
    bool poisoned = true;
    {
      // Alive together, as an operator's outputs are, and all allocated
      // before any is read: the check's own temporaries come out of the
      // same poisoned blocks, and would hand them back written.
      at::Tensor outputs[kLeftovers];
      for (at::Tensor& o : outputs) o = at::empty({bytes}, device_bytes());
      for (const at::Tensor& o : outputs) poisoned = poisoned && all_nan_bytes(o);
    }
    ok = ok && poisoned;
    std::printf("%9lld bytes: %d blocks after poison_cached_memory %s; without it %s\n", (long long)bytes,
                kLeftovers, poisoned ? "all NaN" : "NOT ALL NaN", control ? "all NaN too" : "not NaN (leftovers)");
  }
  std::printf("allocator poison: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
#endif
