// Memory that a kernel under test runs in, seen from the harness: buffers
// reused across cases, pattern fills, copies in and out, and a search for the
// first byte that no longer holds a pattern.  Two implementations: device
// memory (CUDA, cuda_session.cu) for GPU kernels and host memory (here) for
// CPU kernels run through the same worker, which is also how the guard logic
// is tested on machines without a GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace afz::gpu {

// A repeating element pattern: byte k of a filled region is byte
// (k + phase) % bytes of `bits` (little-endian), so element boundaries line up
// with the tensor's whatever the region's start.
struct Pattern {
  uint32_t bits = 0;
  int bytes = 1;
  int phase = 0;
  uint8_t byte_at(size_t k) const { return uint8_t(bits >> (8 * ((k + size_t(phase)) % size_t(bytes)))); }
};

class GuardedMemory {
 public:
  virtual ~GuardedMemory() = default;
  // At least n bytes for buffer `id`, kept and reused between calls
  // (contents undefined); aligned to 256 bytes.  nullptr on failure (error()).
  virtual uint8_t* buffer(int id, size_t n) = 0;
  virtual void fill(uint8_t* at, size_t n, const Pattern& p) = 0;
  virtual void put(uint8_t* dst, const uint8_t* host_src, size_t n) = 0;
  virtual void get(uint8_t* host_dst, const uint8_t* src, size_t n) = 0;
  // Offset of the first byte of [at, at + n) that differs from the pattern, or -1.
  virtual int64_t first_mismatch(const uint8_t* at, size_t n, const Pattern& p) = 0;
  // The first error any call met ("" when none): a sticky CUDA error ends the worker.
  virtual std::string error() = 0;
};

class HostMemory final : public GuardedMemory {
 public:
  uint8_t* buffer(int id, size_t n) override;
  void fill(uint8_t* at, size_t n, const Pattern& p) override;
  void put(uint8_t* dst, const uint8_t* host_src, size_t n) override;
  void get(uint8_t* host_dst, const uint8_t* src, size_t n) override;
  int64_t first_mismatch(const uint8_t* at, size_t n, const Pattern& p) override;
  std::string error() override { return ""; }

 private:
  struct Block {
    std::unique_ptr<uint8_t[]> storage;
    size_t bytes = 0;
    uint8_t* aligned = nullptr;
  };
  std::vector<Block> blocks_;
};

}  // namespace afz::gpu
