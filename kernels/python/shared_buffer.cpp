#include "kernels/python/shared_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace afz::python {
namespace {

// Grown in doublings from one page of this size, so that a campaign's
// growing cases remap the worker's view a handful of times, not every case.
constexpr uint64_t kFirstSize = 1u << 16;

}  // namespace

SharedBuffer::~SharedBuffer() {
  if (data_) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
}

bool SharedBuffer::open(std::string* why) {
  fd_ = memfd_create("attnfuzz-python-bridge", MFD_CLOEXEC);
  if (fd_ < 0) {
    *why = std::string("memfd_create: ") + std::strerror(errno);
    return false;
  }
  return reserve(kFirstSize, why);
}

bool SharedBuffer::reserve(uint64_t bytes, std::string* why) {
  if (bytes <= size_) return true;
  uint64_t size = size_ ? size_ : kFirstSize;
  while (size < bytes) size *= 2;
  if (ftruncate(fd_, off_t(size)) != 0) {
    *why = std::string("cannot grow the shared memory: ") + std::strerror(errno);
    return false;
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) {
    *why = std::string("cannot map the shared memory: ") + std::strerror(errno);
    return false;
  }
  if (data_) munmap(data_, size_);
  data_ = static_cast<uint8_t*>(p);
  size_ = size;
  return true;
}

}  // namespace afz::python
