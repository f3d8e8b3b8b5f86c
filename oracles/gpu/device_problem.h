// An afz_problem's inputs copied to the device, with the same element
// addressing (strides in elements, 0 broadcasts), and the OracleResult's
// arrays allocated there with the host vectors' layout, so that one copy
// brings each back.  CUDA only (nvcc): included by oracles/gpu/*.cu.
#pragma once
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/abi/attnfuzz_kernel.h"
#include "oracles/oracle.h"

namespace afz::gpu_oracle {

// Throws std::runtime_error("gpu oracle: what: error") unless e is cudaSuccess.
void check(cudaError_t e, const char* what);

struct DeviceTensor {
  const char* data = nullptr;  // element [0][0][0][0]: the copy's base, moved by the most negative offset
  afz_dtype dtype = AFZ_F32;
  int elem_bytes = 0;
  int64_t stride[4] = {};
};

// Element [b][h][s][x] as a double: every value dtype is exact in it.
__device__ inline double load(const DeviceTensor& t, int64_t b, int64_t h, int64_t s, int64_t x) {
  const char* at = t.data + (b * t.stride[0] + h * t.stride[1] + s * t.stride[2] + x * t.stride[3]) * t.elem_bytes;
  switch (t.dtype) {
    case AFZ_F32: return *reinterpret_cast<const float*>(at);
    case AFZ_F16: return __half2float(*reinterpret_cast<const __half*>(at));
    case AFZ_BF16: return __uint_as_float(uint32_t(*reinterpret_cast<const uint16_t*>(at)) << 16);
    case AFZ_F8E4M3: {
      __nv_fp8_e4m3 v;
      v.__x = *reinterpret_cast<const __nv_fp8_storage_t*>(at);
      return float(v);
    }
    case AFZ_U8: return *reinterpret_cast<const uint8_t*>(at);
    default: return __longlong_as_double(0x7ff8000000000000ll);  // ProblemView rejected other dtypes on the host
  }
}

// Device pointers to the OracleResult's arrays.
struct Outputs {
  DD* o;
  double *cond, *cond_score, *cond_tiny, *o_err;
  DD* lse;
  uint8_t* empty;
  double *lse_cond_score, *max_abs_score, *max_sigma, *lse_err;
  int32_t *visible_keys, *max_key;
};

// The kernel's arguments (oracles/gpu/gpu_oracle.cu fills the tiling).
struct Params {
  DeviceTensor q, k, v, bool_mask, add_mask;
  bool has_bool_mask, has_add_mask;
  const int32_t *seqlens_q, *seqlens_k;
  int heads_q, group, max_sq, d, dv;
  int tile_keys, k_ld, v_ld;
  double scale, softcap, dot_err;
  bool has_window, bottom_right;
  int window_left, window_right;
  int64_t row0;  // set per block: the result row of the block's first query
  Outputs out;
  unsigned long long* bad_row;  // lowest row with a non-finite input on a visible path
};

// Device allocations freed together.
class DeviceArena {
 public:
  DeviceArena() = default;
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  void* alloc(size_t bytes);  // throws std::runtime_error on CUDA errors
  // A copy of the host array on the device.
  template <class T>
  T* upload(const T* host, size_t count) {
    T* d = static_cast<T*>(alloc(count * sizeof(T)));
    check(cudaMemcpy(d, host, count * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy (upload)");
    return d;
  }

 private:
  std::vector<void*> owned_;
};

// Tensor t, [extent[0]][extent[1]][extent[2]][extent[3]] through its strides,
// copied to the device: the copy spans every element the strides can address
// (negative strides included), so reads through the same offsets land in it.
DeviceTensor upload_tensor(DeviceArena& arena, const afz_tensor& t, const int64_t (&extent)[4]);

class DeviceProblem {
 public:
  explicit DeviceProblem(const afz_problem& p);  // uploads; throws std::runtime_error on CUDA errors
  DeviceProblem(const DeviceProblem&) = delete;
  DeviceProblem& operator=(const DeviceProblem&) = delete;

  const Params& params() const { return params_; }
  // Waits for the device and copies every array into out (sized by ProblemView::prepare).
  void download(OracleResult& out);
  unsigned long long bad_row();

 private:
  void* alloc(size_t bytes) { return arena_.alloc(bytes); }
  DeviceTensor upload(const afz_tensor& t, const int64_t (&extent)[4]) { return upload_tensor(arena_, t, extent); }
  DeviceArena arena_;
  Params params_{};
};

// Row r (its elements and row terms) of `from` into `to`, both of one shape.
void copy_row(const OracleResult& from, int64_t r, OracleResult& to);

}  // namespace afz::gpu_oracle
