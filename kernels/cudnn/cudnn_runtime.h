// What the forward (cudnn.sdpa) and backward (cudnn.sdpa [bwd]) adapters
// share in the GPU worker: one-line messages, device buffers grown on demand,
// an LRU cache of execution plans, the per-device cuDNN handle, and the
// boolean mask merged into an fp32 bias on the device.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "attnfuzz_kernel.h"
#include "kernels/cudnn/cudnn_api.h"
#include "kernels/cudnn/sdpa_graph.h"
#include "kernels/cudnn/sdpa_plan.h"

namespace afz::cudnn {

// Writes `msg` on one line (newlines become spaces), truncated to the buffer.
void write_message(char* buf, size_t len, std::string msg);

struct RunError {
  int code = 0;  // 0, 1 or AFZ_RUN_UNSUPPORTED
  std::string message;
};

RunError cuda_failure(const std::string& call, cudaError_t e);

// A device buffer grown on demand and kept for the process.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
};

// Grows `b` to at least `bytes` (cudaMalloc: 256-byte aligned).
RunError ensure(DeviceBuffer* b, size_t bytes, const char* what);

// Every byte 0xFF: NaN in fp32, fp16 and bf16 alike.
inline constexpr int kNanFillByte = 0xFF;

// The plan's workspace, grown to `bytes` and filled with NaN bytes on
// `stream` before each execution.  Its contents on entry are the library's
// to define, not ours: a kernel that reads its workspace before writing it
// then gives NaN in every process, instead of zeros in a fresh one (cudaMalloc)
// and an earlier case's data in a worker that ran others (on the H200 cuDNN
// 9.14's GQA backward summed dK and dV of keys whose sequence has no query
// from such memory: reports/backward/README.md, session 13).
RunError poisoned_workspace(DeviceBuffer* workspace, size_t bytes, cudaStream_t stream);

// Least recently used plans, by graph key.  Each holds a compiled kernel; a
// fuzz campaign visits many shapes, an audit sweeps a grid: `capacity` plans
// cover a grid's working set without holding hundreds of modules.
class PlanCache {
 public:
  explicit PlanCache(size_t capacity) : capacity_(capacity) {}
  SdpaPlan* find(const std::string& key);
  SdpaPlan* insert(const std::string& key, std::unique_ptr<SdpaPlan> plan);

 private:
  using Entry = std::pair<std::string, std::unique_ptr<SdpaPlan>>;
  size_t capacity_;
  std::list<Entry> order_;
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

// The handle of the current device (created once per device and kept: a
// plan is bound to its handle's device), set to `stream`.
RunError device_handle(const CudnnLibrary& lib, std::unordered_map<int, cudnnHandle_t>* handles, cudaStream_t stream,
                       int* device, cudnnHandle_t* handle);

// The boolean mask (and the additive one, if any) of the DEVICE problem `p`
// merged on the host into one fp32 bias (mask_bias.h: the engine takes no
// select on a tensor), uploaded into `bias`; `run` then carries it as its
// additive mask and no boolean mask.
RunError merge_bool_mask_on_device(const afz_problem& p, cudaStream_t stream, DeviceBuffer* bias, afz_problem* run);

// cuDNN's refusal as an `unsupported` run: the library, the reason, and a
// note when the process mixes cuDNN installs.
RunError unsupported_error(const CudnnLibrary& lib, std::string why);

// The seq lengths of the DEVICE problem: host copies (they decide the padded
// path and the scratch rows) and device copies in `buffer`, 16-byte aligned
// as the graph declares them.
RunError copy_seqlens(const afz_problem& p, cudaStream_t stream, DeviceBuffer* buffer, std::vector<int32_t>* host_q,
                      std::vector<int32_t>* host_k, int32_t** dev_q, int32_t** dev_kv);

// The cached plan of `graph` on this device, built on a miss; cuDNN's
// refusal is `unsupported`.
RunError cached_plan(const CudnnLibrary& lib, PlanCache* cache, cudnnHandle_t handle, int device,
                     const SdpaGraph& graph, Determinism determinism, SdpaPlan** plan);

// Binds every non-virtual tensor (`pointer` per binding; by-value scalars
// from the graph) and executes the plan on the handle's stream.
RunError execute_plan(const CudnnLibrary& lib, cudnnHandle_t handle, const SdpaGraph& graph, const SdpaPlan& plan,
                      const std::function<void*(Binding)>& pointer, void* workspace);

#define AFZ_TRY(expr)                    \
  do {                                   \
    if (::afz::cudnn::RunError e_ = (expr); e_.code) { \
      return e_;                         \
    }                                    \
  } while (0)

#define AFZ_TRY_CUDA(call, what)                               \
  do {                                                         \
    if (cudaError_t e_ = (call); e_ != cudaSuccess) {          \
      return ::afz::cudnn::cuda_failure(what, e_);             \
    }                                                          \
  } while (0)

}  // namespace afz::cudnn
