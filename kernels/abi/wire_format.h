// Bounds-checked binary messages between attnfuzz and its helper processes
// (the GPU worker, harness/run/gpu; the Python bridge's worker,
// kernels/python).  Both ends run on one machine, so values go in native
// byte order; every read is bounds-checked, because a process that died
// mid-message leaves a truncated one.
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace afz {

class WireWriter {
 public:
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes(&v, sizeof v);
  }
  void bytes(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), c, c + n);
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void blob(const void* p, size_t n) {
    put<uint64_t>(n);
    bytes(p, n);
  }
  const std::vector<uint8_t>& data() const { return buf_; }
  std::vector<uint8_t>& data() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

struct WireError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class WireReader {
 public:
  WireReader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  std::string str() {
    const uint64_t n = get<uint64_t>();
    const auto* at = reinterpret_cast<const char*>(take(n));
    return std::string(at, n);
  }
  // A blob's bytes, in place (valid while the message lives).
  const uint8_t* blob(uint64_t* n) {
    *n = get<uint64_t>();
    return take(*n);
  }
  // n bytes written with WireWriter::bytes, in place.
  const uint8_t* raw(uint64_t n) { return take(n); }
  bool done() const { return at_ == n_; }

 private:
  const uint8_t* take(uint64_t n) {
    if (n > n_ - at_) throw WireError("truncated message");
    const uint8_t* r = p_ + at_;
    at_ += n;
    return r;
  }
  const uint8_t* p_;
  size_t n_, at_ = 0;
};

}  // namespace afz
