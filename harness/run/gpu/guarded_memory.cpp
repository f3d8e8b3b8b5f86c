#include "harness/run/gpu/guarded_memory.h"

#include <cstring>

namespace afz::gpu {

namespace {
constexpr size_t kAlignment = 256;  // what cudaMalloc guarantees, so both memories align alike
}

uint8_t* HostMemory::buffer(int id, size_t n) {
  if (id < 0) return nullptr;
  if (size_t(id) >= blocks_.size()) blocks_.resize(size_t(id) + 1);
  Block& b = blocks_[size_t(id)];
  if (b.bytes < n || !b.storage) {
    b.storage.reset(new uint8_t[n + kAlignment]);
    b.bytes = n;
    const auto addr = reinterpret_cast<uintptr_t>(b.storage.get());
    b.aligned = b.storage.get() + (kAlignment - addr % kAlignment) % kAlignment;
  }
  return b.aligned;
}

void HostMemory::fill(uint8_t* at, size_t n, const Pattern& p) {
  for (size_t k = 0; k < n; ++k) at[k] = p.byte_at(k);
}

void HostMemory::put(uint8_t* dst, const uint8_t* host_src, size_t n) {
  if (n) std::memcpy(dst, host_src, n);
}

void HostMemory::get(uint8_t* host_dst, const uint8_t* src, size_t n) {
  if (n) std::memcpy(host_dst, src, n);
}

int64_t HostMemory::first_mismatch(const uint8_t* at, size_t n, const Pattern& p) {
  for (size_t k = 0; k < n; ++k)
    if (at[k] != p.byte_at(k)) return int64_t(k);
  return -1;
}

}  // namespace afz::gpu
