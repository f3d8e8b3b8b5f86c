// Launching one instantiation of fa2_forward / splitkv_merge.
#pragma once
#include <cuda_runtime.h>

#include "kernels/cuda/fa2_forward.cuh"

namespace afz::cuda {

inline int ceil_div(int a, int b) { return (a + b - 1) / b; }

template <typename Elem, int kD, Defect kDefect, bool kSplit>
cudaError_t launch_fa2(const ForwardParams& p, cudaStream_t stream) {
  constexpr size_t kSmem = TileShape<kD>::kSmemBytes;
  auto* kernel = &fa2_forward<Elem, kD, kDefect, kSplit>;
  // Above 48 KiB of dynamic shared memory a kernel must opt in, once.
  static const cudaError_t opt_in =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem));
  if (opt_in != cudaSuccess) return opt_in;
  // Split-KV packs each K/V head's query heads into the tile rows (RowMap).
  const dim3 grid = kSplit ? dim3(ceil_div(p.max_seqlen_q * (p.heads_q / p.heads_kv), kBlockM), p.heads_kv,
                                  p.batch * p.num_splits)
                           : dim3(ceil_div(p.max_seqlen_q, kBlockM), p.heads_q, p.batch);
  if (grid.x == 0) return cudaSuccess;  // no query rows anywhere: nothing to write
  kernel<<<grid, kThreads, kSmem, stream>>>(p);
  return cudaGetLastError();
}

template <typename Elem, int kD>
cudaError_t launch_forward_dim(const ForwardParams& p, Defect defect, cudaStream_t stream) {
  switch (defect) {
    case Defect::None: return launch_fa2<Elem, kD, Defect::None, false>(p, stream);
    case Defect::NoAccRescale: return launch_fa2<Elem, kD, Defect::NoAccRescale, false>(p, stream);
    case Defect::MInitZero: return launch_fa2<Elem, kD, Defect::MInitZero, false>(p, stream);
    case Defect::NoEmptyRowGuard: return launch_fa2<Elem, kD, Defect::NoEmptyRowGuard, false>(p, stream);
    case Defect::PartialBlockUnmasked: return launch_fa2<Elem, kD, Defect::PartialBlockUnmasked, false>(p, stream);
    case Defect::CausalOffByOne: return launch_fa2<Elem, kD, Defect::CausalOffByOne, false>(p, stream);
    case Defect::SplitMergeNoRescale: break;  // a merge defect: no forward variant
  }
  return cudaErrorInvalidValue;
}

template <typename Elem>
cudaError_t launch_forward_typed(const ForwardParams& p, Defect defect, cudaStream_t stream) {
  switch (p.head_dim) {
    case 32: return launch_forward_dim<Elem, 32>(p, defect, stream);
    case 64: return launch_forward_dim<Elem, 64>(p, defect, stream);
    case 96: return launch_forward_dim<Elem, 96>(p, defect, stream);
    case 128: return launch_forward_dim<Elem, 128>(p, defect, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename Elem, int kD>
cudaError_t launch_splitkv_dim(const ForwardParams& p, bool rescale_in_merge, cudaStream_t stream) {
  if (cudaError_t e = launch_fa2<Elem, kD, Defect::None, true>(p, stream); e != cudaSuccess) return e;
  const dim3 grid(p.max_seqlen_q, p.heads_q, p.batch);
  if (grid.x == 0) return cudaSuccess;
  if (rescale_in_merge) splitkv_merge<kD, true><<<grid, kD, 0, stream>>>(p);
  else splitkv_merge<kD, false><<<grid, kD, 0, stream>>>(p);
  return cudaGetLastError();
}

template <typename Elem>
cudaError_t launch_splitkv_typed(const ForwardParams& p, bool rescale_in_merge, cudaStream_t stream) {
  switch (p.head_dim) {
    case 32: return launch_splitkv_dim<Elem, 32>(p, rescale_in_merge, stream);
    case 64: return launch_splitkv_dim<Elem, 64>(p, rescale_in_merge, stream);
    case 96: return launch_splitkv_dim<Elem, 96>(p, rescale_in_merge, stream);
    case 128: return launch_splitkv_dim<Elem, 128>(p, rescale_in_merge, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace afz::cuda
