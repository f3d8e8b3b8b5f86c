#include "kernels/cudnn/cudnn_runtime.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cudnn/backend_descriptor.h"
#include "kernels/cudnn/mask_bias.h"
#include "kernels/cudnn/sdpa_lowering.h"

namespace afz::cudnn {
namespace {

// The seq_len_kv tensor starts this many int32 past seq_len_q's rounding, so
// both device tensors keep the 16-byte alignment the graph declares.
constexpr size_t kSeqLenAlignElements = size_t(kTensorAlignment) / sizeof(int32_t);

}  // namespace

void write_message(char* buf, size_t len, std::string msg) {
  if (!buf || len == 0) return;
  for (char& c : msg)
    if (c == '\n' || c == '\r') c = ' ';
  const size_t n = std::min(len - 1, msg.size());
  std::memcpy(buf, msg.data(), n);
  buf[n] = 0;
}

RunError cuda_failure(const std::string& call, cudaError_t e) {
  return {1, call + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e)};
}

RunError ensure(DeviceBuffer* b, size_t bytes, const char* what) {
  if (bytes <= b->bytes) return {};
  if (b->ptr) cudaFree(b->ptr);  // synchronizes: no launch still reads it
  b->ptr = nullptr;
  b->bytes = 0;
  if (cudaError_t e = cudaMalloc(&b->ptr, bytes); e != cudaSuccess)
    return cuda_failure(std::string("cudaMalloc (") + what + ", " + std::to_string(bytes) + " bytes)", e);
  b->bytes = bytes;
  return {};
}

RunError poisoned_workspace(DeviceBuffer* workspace, size_t bytes, cudaStream_t stream) {
  AFZ_TRY(ensure(workspace, bytes, "cuDNN workspace"));
  if (bytes > 0)
    AFZ_TRY_CUDA(cudaMemsetAsync(workspace->ptr, kNanFillByte, bytes, stream), "cudaMemsetAsync (cuDNN workspace)");
  return {};
}

SdpaPlan* PlanCache::find(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second);
  return it->second->second.get();
}

SdpaPlan* PlanCache::insert(const std::string& key, std::unique_ptr<SdpaPlan> plan) {
  if (order_.size() >= capacity_) {
    // A plan's compiled module with launches still queued must not be
    // destroyed (a use-after-free on the device).  run() synchronizes
    // before it returns; this guards other callers.  Evictions are rare.
    cudaDeviceSynchronize();
    index_.erase(order_.back().first);
    order_.pop_back();
  }
  order_.emplace_front(key, std::move(plan));
  index_[key] = order_.begin();
  return order_.front().second.get();
}

RunError device_handle(const CudnnLibrary& lib, std::unordered_map<int, cudnnHandle_t>* handles, cudaStream_t stream,
                       int* device, cudnnHandle_t* handle) {
  AFZ_TRY_CUDA(cudaGetDevice(device), "cudaGetDevice");
  cudnnHandle_t& h = (*handles)[*device];
  if (!h)
    if (cudnnStatus_t st = lib.api.Create(&h); st != CUDNN_STATUS_SUCCESS) {
      h = nullptr;
      return {1, lib.describe() + ": cudnnCreate: " + status_text(lib.api, st)};
    }
  *handle = h;
  if (cudnnStatus_t st = lib.api.SetStream(h, stream); st != CUDNN_STATUS_SUCCESS)
    return {1, "cudnnSetStream: " + status_text(lib.api, st)};
  return {};
}

RunError merge_bool_mask_on_device(const afz_problem& p, cudaStream_t stream, DeviceBuffer* bias_buffer,
                                   afz_problem* run) {
  const Dims full = {p.batch, p.heads_q, p.max_seqlen_q, p.max_seqlen_k};
  std::vector<uint8_t> keep(size_t(mask_span_elements(p.bool_mask, full)));
  std::vector<float> add(p.add_mask.data ? size_t(mask_span_elements(p.add_mask, full)) : 0);
  AFZ_TRY_CUDA(cudaMemcpyAsync(keep.data(), p.bool_mask.data, keep.size(), cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync (boolean mask to host)");
  if (!add.empty())
    AFZ_TRY_CUDA(cudaMemcpyAsync(add.data(), p.add_mask.data, add.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                 stream),
                 "cudaMemcpyAsync (additive mask to host)");
  AFZ_TRY_CUDA(cudaStreamSynchronize(stream), "cudaStreamSynchronize (masks)");
  const MaskBias bias = merge_masks(p, keep.data(), add.empty() ? nullptr : add.data());
  const size_t bytes = bias.values.size() * sizeof(float);
  AFZ_TRY(ensure(bias_buffer, bytes, "mask bias"));
  AFZ_TRY_CUDA(cudaMemcpyAsync(bias_buffer->ptr, bias.values.data(), bytes, cudaMemcpyHostToDevice, stream),
               "cudaMemcpyAsync (mask bias)");
  AFZ_TRY_CUDA(cudaStreamSynchronize(stream), "cudaStreamSynchronize (mask bias)");  // `bias` dies here
  run->bool_mask = afz_tensor{};
  run->add_mask.data = bias_buffer->ptr;
  run->add_mask.dtype = AFZ_F32;
  const Dims st = bias.strides();
  std::copy(st.begin(), st.end(), run->add_mask.stride);
  return {};
}

RunError unsupported_error(const CudnnLibrary& lib, std::string m) {
  if (const std::string note = mixed_install_note(lib); !note.empty()) m += " [" + note + "]";
  return {AFZ_RUN_UNSUPPORTED, lib.describe() + ": " + m};
}

RunError copy_seqlens(const afz_problem& p, cudaStream_t stream, DeviceBuffer* buffer, std::vector<int32_t>* host_q,
                      std::vector<int32_t>* host_k, int32_t** dev_q, int32_t** dev_kv) {
  const size_t b = size_t(p.batch), bytes = b * sizeof(int32_t);
  host_q->resize(b);
  host_k->resize(b);
  const size_t kv_offset = (b + kSeqLenAlignElements - 1) / kSeqLenAlignElements * kSeqLenAlignElements;
  AFZ_TRY(ensure(buffer, (kv_offset + b) * sizeof(int32_t), "seq lengths"));
  *dev_q = static_cast<int32_t*>(buffer->ptr);
  *dev_kv = *dev_q + kv_offset;
  AFZ_TRY_CUDA(cudaMemcpyAsync(host_q->data(), p.seqlens_q, bytes, cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync (seqlens_q to host)");
  AFZ_TRY_CUDA(cudaMemcpyAsync(host_k->data(), p.seqlens_k, bytes, cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync (seqlens_k to host)");
  AFZ_TRY_CUDA(cudaMemcpyAsync(*dev_q, p.seqlens_q, bytes, cudaMemcpyDeviceToDevice, stream),
               "cudaMemcpyAsync (seqlens_q)");
  AFZ_TRY_CUDA(cudaMemcpyAsync(*dev_kv, p.seqlens_k, bytes, cudaMemcpyDeviceToDevice, stream),
               "cudaMemcpyAsync (seqlens_k)");
  AFZ_TRY_CUDA(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return {};
}

RunError cached_plan(const CudnnLibrary& lib, PlanCache* cache, cudnnHandle_t handle, int device,
                     const SdpaGraph& graph, Determinism determinism, SdpaPlan** plan) {
  const std::string key = "device " + std::to_string(device) + ": " + graph.key();
  *plan = cache->find(key);
  if (*plan) return {};
  try {
    *plan = cache->insert(key, build_sdpa_plan(lib.api, handle, graph, determinism));
  } catch (const PlanRefused& e) {
    return unsupported_error(lib, e.what());
  } catch (const CudnnCallError& e) {
    return unsupported_error(lib, e.what());
  }
  return {};
}

RunError execute_plan(const CudnnLibrary& lib, cudnnHandle_t handle, const SdpaGraph& graph, const SdpaPlan& plan,
                      const std::function<void*(Binding)>& pointer, void* workspace) {
  std::vector<int64_t> uids;
  std::vector<void*> pointers;
  for (const GraphTensor& t : graph.tensors) {
    if (t.is_virtual) continue;
    uids.push_back(t.uid);
    // By-value scalars: host addresses, read when the launch is enqueued.
    pointers.push_back(t.by_value ? const_cast<void*>(t.value()) : pointer(t.binding));
  }
  try {
    const BackendDescriptor pack = make_variant_pack(lib.api, uids, pointers, plan.workspace_bytes > 0 ? workspace : nullptr);
    const cudnnStatus_t st = lib.api.BackendExecute(handle, plan.plan.get(), pack.get());
    if (st == CUDNN_STATUS_SUCCESS) return {};
    const std::string why = "cudnnBackendExecute (" + plan.engine + "): " + status_text(lib.api, st);
    if (CUDNN_STATUS_CATEGORY(st) == CUDNN_STATUS_NOT_SUPPORTED) return unsupported_error(lib, why);
    return {1, lib.describe() + ": " + why};
  } catch (const CudnnCallError& e) {
    return {1, lib.describe() + ": " + e.what()};
  }
}

}  // namespace afz::cudnn
