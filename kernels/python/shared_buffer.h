// The memory the harness and its Python worker share: one memfd, mapped here
// and (by the descriptor the worker inherits) in the worker, grown as cases
// need.  The worker maps it again when a request names a new size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace afz::python {

class SharedBuffer {
 public:
  SharedBuffer() = default;
  ~SharedBuffer();
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;

  // Creates the memfd (close-on-exec: only the worker's exec keeps it).
  bool open(std::string* why);
  // At least `bytes` mapped; false with *why when the memory cannot be had.
  bool reserve(uint64_t bytes, std::string* why);
  int fd() const { return fd_; }
  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  int fd_ = -1;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace afz::python
