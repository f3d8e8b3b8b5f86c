#include "harness/run/isolate.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

namespace afz {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

KernelRun run_here(const afz_kernel& k, Materialized& m) {
  char err[512] = {0};
  KernelRun r;
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = k.run(&k, &m.problem(), err, sizeof err);
  r.seconds = seconds_since(t0);
  err[sizeof err - 1] = 0;
  if (rc == AFZ_RUN_UNSUPPORTED) {
    r.status = RunStatus::Unsupported;
    r.message = err[0] ? err : "the library refused the problem (no reason given)";
  } else if (rc == AFZ_RUN_HANG) {
    r.status = RunStatus::Hang;
    r.message = err[0] ? err : "the kernel's own watchdog gave up (no reason given)";
  } else if (rc != 0) {
    r.status = RunStatus::Error;
    r.message = fmt::format("kernel returned {}: {}", rc, err[0] ? err : "(no message)");
  }
  return r;
}

bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

// Child: run, then send [status byte][message length][message][outputs].
[[noreturn]] void child(const afz_kernel& k, Materialized& m, int fd) {
  KernelRun r = run_here(k, m);
  const std::vector<uint8_t> out = m.output_bytes();
  const uint8_t status = uint8_t(r.status);
  const uint32_t len = uint32_t(r.message.size());
  bool ok = write_all(fd, &status, 1) && write_all(fd, &len, 4) && write_all(fd, r.message.data(), len) &&
            write_all(fd, &r.seconds, sizeof r.seconds) && write_all(fd, out.data(), out.size());
  _exit(ok ? 0 : 3);
}

}  // namespace

KernelRun run_kernel(const afz_kernel& k, Materialized& m, bool isolate, double timeout_s) {
  if (!isolate) return run_here(k, m);
  int fds[2];
  if (pipe(fds) != 0) return {RunStatus::Error, "pipe() failed: " + std::string(strerror(errno)), 0};
  std::fflush(nullptr);  // the child must not flush our buffered output twice
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) return {RunStatus::Error, "fork() failed: " + std::string(strerror(errno)), 0};
  if (pid == 0) {
    close(fds[0]);
    child(k, m, fds[1]);
  }
  close(fds[1]);
  std::vector<uint8_t> bytes;
  bool timed_out = false;
  for (;;) {
    const double left = timeout_s - seconds_since(t0);
    if (left <= 0) { timed_out = true; break; }
    pollfd pfd{fds[0], POLLIN, 0};
    const int ready = poll(&pfd, 1, int(left * 1000) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    uint8_t buf[1 << 16];
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child finished or died
    bytes.insert(bytes.end(), buf, buf + n);
  }
  close(fds[0]);
  KernelRun r;
  r.seconds = seconds_since(t0);
  if (timed_out) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return {RunStatus::Hang, fmt::format("no result after {:.1f} s: killed", timeout_s), r.seconds};
  }
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  if (WIFSIGNALED(wstatus))
    return {RunStatus::Crash, fmt::format("kernel process died of signal {} ({})", WTERMSIG(wstatus),
                                          strsignal(WTERMSIG(wstatus))), r.seconds};
  const size_t header = 1 + 4;
  uint32_t len = 0;
  if (bytes.size() >= header) std::memcpy(&len, bytes.data() + 1, 4);
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0 || bytes.size() < header + len + sizeof(double))
    return {RunStatus::Crash, fmt::format("kernel process exited with status {} before sending its output",
                                          WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1), r.seconds};
  r.status = RunStatus(bytes[0]);
  r.message.assign(reinterpret_cast<const char*>(bytes.data() + header), len);
  std::memcpy(&r.seconds, bytes.data() + header + len, sizeof(double));
  const std::vector<uint8_t> out(bytes.begin() + header + len + sizeof(double), bytes.end());
  if (!m.set_output_bytes(out)) return {RunStatus::Crash, "kernel process sent a truncated output", r.seconds};
  return r;
}

}  // namespace afz
