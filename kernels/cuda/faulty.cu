// Three deliberately faulty kernels: the harness's tests and GPU campaigns
// use them to show that an out-of-bounds write, a sticky fault and a hang each
// become a verdict while the campaign carries on.
#include "kernels/cuda/launch.h"

namespace afz::cuda {
namespace {

// One fp32 1.0 where the output's guard margin begins.
__global__ void write_past_end(unsigned char* past_end) {
  const unsigned bits = 0x3f800000u;
  for (int i = 0; i < 4; ++i) past_end[i] = (unsigned char)(bits >> (8 * i));
}

// The null page is never mapped: a store there is cudaErrorIllegalAddress,
// which poisons the whole context (sticky).
__global__ void write_to_null_page() { *reinterpret_cast<volatile int*>(uintptr_t(16)) = 1; }

// asm volatile keeps the loop: a side-effect-free infinite loop may be removed.
__global__ void spin_forever() {
  for (;;) asm volatile("nanosleep.u32 1000;\n");
}

}  // namespace

cudaError_t launch_write_past_end(void* first_byte_past_output, cudaStream_t stream) {
  write_past_end<<<1, 1, 0, stream>>>(static_cast<unsigned char*>(first_byte_past_output));
  return cudaGetLastError();
}
cudaError_t launch_illegal_address(cudaStream_t stream) {
  write_to_null_page<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}
cudaError_t launch_spin_forever(cudaStream_t stream) {
  spin_forever<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

}  // namespace afz::cuda
