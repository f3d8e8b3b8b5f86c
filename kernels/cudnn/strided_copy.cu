#include "kernels/cudnn/strided_copy.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace afz::cudnn {
namespace {

constexpr int kThreads = 256;
// Enough blocks to fill an H200 several times; a grid-stride loop covers the rest.
constexpr int64_t kMaxBlocks = 4096;

struct View {
  char* data;
  afz_dtype dtype;
  int64_t stride[4];
};

__device__ float load(const View& v, int64_t off) {
  switch (v.dtype) {
    case AFZ_F16: return __half2float(reinterpret_cast<const __half*>(v.data)[off]);
    case AFZ_BF16: return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(v.data)[off]);
    default: return reinterpret_cast<const float*>(v.data)[off];
  }
}

__device__ void store(const View& v, int64_t off, float x) {
  switch (v.dtype) {
    case AFZ_F16: reinterpret_cast<__half*>(v.data)[off] = __float2half_rn(x); break;
    case AFZ_BF16: reinterpret_cast<__nv_bfloat16*>(v.data)[off] = __float2bfloat16_rn(x); break;
    default: reinterpret_cast<float*>(v.data)[off] = x; break;
  }
}

__global__ void copy_kernel(View src, View dst, CopyExtent e, const int32_t* row_limit) {
  const int64_t total = e.batch * e.heads * e.seq * e.width;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t x = i % e.width, s = (i / e.width) % e.seq, h = (i / (e.width * e.seq)) % e.heads;
    const int64_t b = i / (e.width * e.seq * e.heads);
    if (s >= row_limit[b]) continue;  // padding: neither read nor written
    const int64_t so = b * src.stride[0] + h * src.stride[1] + s * src.stride[2] + x * src.stride[3];
    const int64_t dof = b * dst.stride[0] + h * dst.stride[1] + s * dst.stride[2] + x * dst.stride[3];
    store(dst, dof, load(src, so));
  }
}

View view_of(const afz_tensor& t) {
  return {static_cast<char*>(t.data), t.dtype, {t.stride[0], t.stride[1], t.stride[2], t.stride[3]}};
}

}  // namespace

cudaError_t strided_copy(const afz_tensor& src, const afz_tensor& dst, const CopyExtent& extent,
                         const int32_t* row_limit, cudaStream_t stream) {
  const int64_t total = extent.batch * extent.heads * extent.seq * extent.width;
  if (total == 0) return cudaSuccess;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  copy_kernel<<<unsigned(blocks < kMaxBlocks ? blocks : kMaxBlocks), kThreads, 0, stream>>>(view_of(src), view_of(dst),
                                                                                           extent, row_limit);
  return cudaGetLastError();
}

}  // namespace afz::cudnn
