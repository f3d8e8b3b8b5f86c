#include "harness/run/gpu/wire.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace afz::gpu {
namespace {

bool send_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    // MSG_NOSIGNAL: a peer that died must give EPIPE here, not kill us with SIGPIPE.
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

bool recv_all(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

}  // namespace

bool send_frame(int fd, const std::vector<uint8_t>& payload) {
  const uint64_t n = payload.size();
  return send_all(fd, &n, sizeof n) && send_all(fd, payload.data(), payload.size());
}

bool recv_frame(int fd, std::vector<uint8_t>* payload) {
  uint64_t n = 0;
  if (!recv_all(fd, &n, sizeof n)) return false;
  payload->resize(n);
  return recv_all(fd, payload->data(), n);
}

}  // namespace afz::gpu
