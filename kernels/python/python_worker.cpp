#include "kernels/python/python_worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

extern char** environ;

namespace afz::python {
namespace {

// After the socket closes an idle worker exits at once; this long at most.
constexpr double kExitGraceSeconds = 5;
constexpr int kPollSliceMs = 1000;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

enum class ReadResult { Ok, Eof, Timeout, Malformed };

bool read_exact(int fd, uint8_t* out, size_t n, Clock::time_point t0, double timeout_s, ReadResult* why) {
  size_t got = 0;
  while (got < n) {
    const double left = timeout_s - seconds_since(t0);
    if (left <= 0) {
      *why = ReadResult::Timeout;
      return false;
    }
    pollfd pfd{fd, POLLIN, 0};
    const int ready = poll(&pfd, 1, std::min(kPollSliceMs, int(left * 1000) + 1));
    if (ready <= 0) continue;  // EINTR or a slice without data
    const ssize_t k = recv(fd, out + got, n - got, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      *why = ReadResult::Eof;
      return false;
    }
    got += size_t(k);
  }
  return true;
}

ReadResult read_frame(int fd, std::vector<uint8_t>* out, double timeout_s) {
  const auto t0 = Clock::now();
  ReadResult why = ReadResult::Ok;
  uint32_t n = 0;
  if (!read_exact(fd, reinterpret_cast<uint8_t*>(&n), sizeof n, t0, timeout_s, &why)) return why;
  if (n > kMaxFrameBytes) return ReadResult::Malformed;
  out->resize(n);
  if (!read_exact(fd, out->data(), n, t0, timeout_s, &why)) return why;
  return ReadResult::Ok;
}

bool send_frame(int fd, const std::vector<uint8_t>& payload) {
  const uint32_t n = uint32_t(payload.size());
  std::vector<uint8_t> frame(sizeof n + payload.size());
  std::memcpy(frame.data(), &n, sizeof n);
  std::memcpy(frame.data() + sizeof n, payload.data(), payload.size());
  size_t sent = 0;
  while (sent < frame.size()) {
    // MSG_NOSIGNAL: a dead worker is a verdict, not a SIGPIPE for the harness.
    const ssize_t k = send(fd, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    sent += size_t(k);
  }
  return true;
}

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

}  // namespace

bool PythonWorker::start(Hello* hello, std::string* why) {
  stop(false);
  shm_ = std::make_unique<SharedBuffer>();
  if (!shm_->open(why)) return false;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    *why = std::string("socketpair: ") + std::strerror(errno);
    return false;
  }
  // Everything the child needs is built before fork: between fork and exec
  // only async-signal-safe calls (other harness threads may hold locks).
  const std::string sock = std::to_string(sv[1]), shm = std::to_string(shm_->fd());
  std::vector<std::string> args = {settings_.python, "-m", "attnfuzz.worker", "--sock", sock,
                                   "--shm", shm, "--target", settings_.target};
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (settings_.python_path.empty() || std::strncmp(*e, "PYTHONPATH=", 11) != 0) env.emplace_back(*e);
  if (!settings_.python_path.empty()) {
    const char* old = std::getenv("PYTHONPATH");
    env.push_back("PYTHONPATH=" + settings_.python_path + (old && *old ? ":" + std::string(old) : ""));
  }
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t parent = getpid();
  const int shm_fd = shm_->fd();

  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    *why = std::string("fork: ") + std::strerror(errno);
    close(sv[0]);
    close(sv[1]);
    return false;
  }
  if (pid == 0) {
    setpgid(0, 0);                        // its own group: a hang kills compile workers too
    prctl(PR_SET_PDEATHSIG, SIGKILL);     // never outlive the harness (a killed campaign)
    if (getppid() != parent) _exit(127);  // the harness died before prctl
    fcntl(sv[1], F_SETFD, 0);             // these two survive exec
    fcntl(shm_fd, F_SETFD, 0);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(sv[1]);
  pid_ = pid;
  fd_ = sv[0];
  std::vector<uint8_t> frame;
  switch (read_frame(fd_, &frame, settings_.start_timeout_s)) {
    case ReadResult::Ok: break;
    case ReadResult::Timeout:
      stop(true);
      *why = "the Python worker did not start within " + format_seconds(settings_.start_timeout_s) + " s";
      return false;
    default:
      *why = reap("the Python worker (" + settings_.python + " -m attnfuzz.worker)");
      return false;
  }
  try {
    *hello = decode_hello(frame);
  } catch (const std::exception& e) {
    stop(true);
    *why = e.what();
    return false;
  }
  if (!hello->ok) {
    stop(false);
    *why = hello->error;
    return false;
  }
  return true;
}

CallResult PythonWorker::call(uint32_t index, afz_problem& p) {
  CallResult out;
  auto fail = [&](int rc, std::string msg) {
    out.rc = rc;
    out.message = std::move(msg);
    return out;
  };
  if (!running()) {
    Hello hello;
    std::string why;
    if (!start(&hello, &why)) return fail(1, "cannot start the Python worker: " + why);
  }
  const Layout layout = layout_of(p);
  std::string why;
  if (!shm_->reserve(layout.bytes, &why)) return fail(1, why);
  // Inputs travel whole (padding and poison included); outputs too, so that
  // an element the kernel never writes stays poisoned.
  for (int s = 0; s < kSlotCount; ++s) {
    if (!layout.ref[s].present || layout.span[s].bytes() == 0) continue;
    const auto* from = static_cast<const uint8_t*>(layout.ref[s].data) + layout.span[s].lo_bytes();
    std::memcpy(shm_->data() + layout.offset[s], from, size_t(layout.span[s].bytes()));
  }
  if (!send_frame(fd_, encode_request(index, shm_->size(), p, layout)))
    return fail(1, reap("the Python worker"));
  std::vector<uint8_t> frame;
  switch (read_frame(fd_, &frame, settings_.call_timeout_s)) {
    case ReadResult::Ok: break;
    case ReadResult::Timeout:
      stop(true);
      return fail(AFZ_RUN_HANG, "no result after " + format_seconds(settings_.call_timeout_s) +
                                    " s: Python worker killed (a fresh one runs the next case)");
    case ReadResult::Malformed: stop(true); return fail(1, "the Python worker broke the protocol");
    case ReadResult::Eof: return fail(1, reap("the Python worker"));
  }
  try {
    out.reply = decode_reply(frame);
  } catch (const std::exception& e) {
    stop(true);
    return fail(1, e.what());
  }
  switch (out.reply.status) {
    case ReplyStatus::Ok: break;
    case ReplyStatus::Unsupported: return fail(AFZ_RUN_UNSUPPORTED, out.reply.message);
    case ReplyStatus::Exception: return fail(1, "Python exception: " + out.reply.message);
    case ReplyStatus::Fatal:
      stop(false);  // it exits after a fatal reply (a poisoned CUDA context)
      return fail(1, "Python exception, worker restarted: " + out.reply.message);
  }
  for (int s = kO; s <= kLse; ++s) {
    if (!layout.ref[s].present || layout.span[s].bytes() == 0) continue;
    auto* to = static_cast<uint8_t*>(layout.ref[s].data) + layout.span[s].lo_bytes();
    std::memcpy(to, shm_->data() + layout.offset[s], size_t(layout.span[s].bytes()));
  }
  return out;
}

void PythonWorker::forget_inherited() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  pid_ = -1;
  shm_.reset();  // this process's mapping and descriptor only
}

// The worker closed its socket: how it ended, one line.
std::string PythonWorker::reap(const std::string& what) {
  const pid_t pid = pid_;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  pid_ = -1;
  if (pid <= 0) return what + " vanished";
  pid_ = pid;
  int status = 0;
  end_group(&status);
  if (WIFSIGNALED(status))
    return what + " died of signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  if (WEXITSTATUS(status) == 127) return what + " could not be started (exit status 127)";
  return what + " exited with status " + std::to_string(WEXITSTATUS(status));
}

void PythonWorker::stop(bool kill_now) {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  if (pid_ <= 0) return;
  if (kill_now) kill(-pid_, SIGKILL);
  int status = 0;
  end_group(&status);
}

// Lets the worker exit on its own for a grace period (waiting without
// reaping: while the leader is unreaped its group id cannot be reused, so
// the kill below hits only ours), then kills what is left of its process
// group (torch.compile's compile workers, a worker that would not exit) and
// reaps the leader.
void PythonWorker::end_group(int* status) {
  const auto t0 = Clock::now();
  siginfo_t info{};
  while (waitid(P_PID, id_t(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0) {
    if (seconds_since(t0) > kExitGraceSeconds) break;
    usleep(1000);
  }
  kill(-pid_, SIGKILL);
  waitpid(pid_, status, 0);
  pid_ = -1;
}

}  // namespace afz::python
