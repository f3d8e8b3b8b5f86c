// DeviceSession and device GuardedMemory on the CUDA runtime.
#include <cuda_runtime.h>

#include <climits>
#include <string>
#include <vector>

#include "harness/run/gpu/device_session.h"

namespace afz::gpu {
namespace {

constexpr int kFillThreads = 256;
constexpr int kMaxBlocks = 4096;

__global__ void fill_pattern(uint8_t* at, size_t n, Pattern p) {
  for (size_t k = blockIdx.x * size_t(blockDim.x) + threadIdx.x; k < n; k += size_t(gridDim.x) * blockDim.x)
    at[k] = uint8_t(p.bits >> (8 * ((k + size_t(p.phase)) % size_t(p.bytes))));
}

__global__ void find_mismatch(const uint8_t* at, size_t n, Pattern p, unsigned long long* first) {
  for (size_t k = blockIdx.x * size_t(blockDim.x) + threadIdx.x; k < n; k += size_t(gridDim.x) * blockDim.x)
    if (at[k] != uint8_t(p.bits >> (8 * ((k + size_t(p.phase)) % size_t(p.bytes))))) atomicMin(first, k);
}

int blocks_for(size_t n) {
  const size_t b = (n + kFillThreads - 1) / kFillThreads;
  return int(b < kMaxBlocks ? (b ? b : 1) : kMaxBlocks);
}

std::string describe(cudaError_t e, const char* what) {
  return std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
}

class DeviceMemory final : public GuardedMemory {
 public:
  explicit DeviceMemory(cudaStream_t s) : stream_(s) {}
  ~DeviceMemory() override {
    for (auto& b : blocks_)
      if (b.ptr) cudaFree(b.ptr);
    if (first_) cudaFree(first_);
  }
  uint8_t* buffer(int id, size_t n) override {
    if (size_t(id) >= blocks_.size()) blocks_.resize(size_t(id) + 1);
    Block& b = blocks_[size_t(id)];
    if (b.bytes < n || !b.ptr) {
      if (b.ptr) check(cudaFree(b.ptr), "cudaFree");
      b.ptr = nullptr;
      b.bytes = 0;
      size_t grow = 1 << 20;  // round up: cases of slowly growing size reuse one allocation
      while (grow < n) grow *= 2;
      if (!check(cudaMalloc(&b.ptr, grow), "cudaMalloc")) return nullptr;
      b.bytes = grow;
    }
    return static_cast<uint8_t*>(b.ptr);
  }
  void fill(uint8_t* at, size_t n, const Pattern& p) override {
    if (n == 0) return;
    fill_pattern<<<blocks_for(n), kFillThreads, 0, stream_>>>(at, n, p);
    check(cudaGetLastError(), "fill");
  }
  void put(uint8_t* dst, const uint8_t* src, size_t n) override {
    if (n) check(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream_), "copy to device");
  }
  void get(uint8_t* dst, const uint8_t* src, size_t n) override {
    if (n) check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream_), "copy from device");
    check(cudaStreamSynchronize(stream_), "copy from device");
  }
  int64_t first_mismatch(const uint8_t* at, size_t n, const Pattern& p) override {
    if (n == 0) return -1;
    if (!first_ && !check(cudaMalloc(&first_, sizeof *first_), "cudaMalloc")) return -1;
    check(cudaMemsetAsync(first_, 0xff, sizeof *first_, stream_), "memset");
    find_mismatch<<<blocks_for(n), kFillThreads, 0, stream_>>>(at, n, p, first_);
    check(cudaGetLastError(), "guard check");
    unsigned long long host = ULLONG_MAX;
    check(cudaMemcpyAsync(&host, first_, sizeof host, cudaMemcpyDeviceToHost, stream_), "guard check");
    check(cudaStreamSynchronize(stream_), "guard check");
    return host == ULLONG_MAX ? -1 : int64_t(host);
  }
  std::string error() override { return error_; }
  bool check(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return true;
    if (error_.empty()) error_ = describe(e, what);
    return false;
  }

 private:
  struct Block {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  cudaStream_t stream_;
  std::vector<Block> blocks_;
  unsigned long long* first_ = nullptr;
  std::string error_;
};

class CudaSession final : public DeviceSession {
 public:
  CudaSession(cudaStream_t s, cudaEvent_t a, cudaEvent_t b) : stream_(s), start_(a), stop_(b), memory_(s) {}
  ~CudaSession() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }
  GuardedMemory& memory() override { return memory_; }
  void* stream() override { return stream_; }
  void start_timer() override { memory_.check(cudaEventRecord(start_, stream_), "event"); }
  std::string finish(double* seconds) override {
    *seconds = 0;
    cudaError_t e = cudaEventRecord(stop_, stream_);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) return describe(e, "CUDA error after the kernel");
    float ms = 0;
    if (cudaEventElapsedTime(&ms, start_, stop_) == cudaSuccess) *seconds = ms / 1e3;
    return memory_.error();
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_, stop_;
  DeviceMemory memory_;
};

}  // namespace

std::unique_ptr<DeviceSession> DeviceSession::open(std::string* why, std::string* device_name) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    *why = describe(e, kNoDevicePrefix);
    return nullptr;
  }
  if (count == 0) {
    *why = kNoDevicePrefix;
    return nullptr;
  }
  cudaDeviceProp prop{};
  if (cudaError_t e = cudaGetDeviceProperties(&prop, 0); e != cudaSuccess) {
    *why = describe(e, "cudaGetDeviceProperties");
    return nullptr;
  }
  cudaStream_t s;
  cudaEvent_t a, b;
  if (cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); e != cudaSuccess) {
    *why = describe(e, "cudaStreamCreate");
    return nullptr;
  }
  if (cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess) {
    *why = "cudaEventCreate failed";
    return nullptr;
  }
  *device_name = std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
                 std::to_string(prop.multiProcessorCount) + " SMs)";
  return std::make_unique<CudaSession>(s, a, b);
}

}  // namespace afz::gpu
