#include "harness/run/gpu/gpu_run.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "harness/run/gpu/device_session.h"
#include "harness/run/gpu/problem_wire.h"
#include "harness/run/gpu/protocol.h"
#include "harness/run/gpu/wire.h"
#include "harness/run/gpu/worker.h"
#include "kernels/registry.h"

namespace afz::gpu {
namespace {

// CUDA initialisation and module loading can take seconds on a cold machine.
constexpr double kStartTimeoutSeconds = 120;
// After a fatal reply the worker exits on its own; this long at most.
constexpr double kExitGraceSeconds = 5;

std::mutex g_exec_mu;
std::string g_exec_path;

std::string exec_path() {
  std::lock_guard<std::mutex> lock(g_exec_mu);
  return g_exec_path;
}

// The process-wide lost-device record (gpu_run.h).
std::mutex g_record_mu;
bool g_device_seen = false;
std::string g_lost_reason;
std::atomic<int64_t> g_workers_started{0};
// Seconds harness threads waited for workers to greet, all threads together.
std::mutex g_wait_mu;
double g_start_wait_s = 0;
// How an `unsupported` detail says the device was lost.
constexpr std::string_view kLostPrefix = "the GPU was lost: ";

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

enum class ReadResult { Ok, Eof, Timeout };

// One frame, or EOF, or nothing before the deadline.
ReadResult read_frame(int fd, std::vector<uint8_t>* out, double timeout_s) {
  const auto t0 = Clock::now();
  uint64_t want = 0;
  std::vector<uint8_t> buf;
  bool have_length = false;
  for (;;) {
    const size_t need = have_length ? size_t(want) : sizeof want;
    if (buf.size() == need) {
      if (have_length) {
        *out = std::move(buf);
        return ReadResult::Ok;
      }
      std::memcpy(&want, buf.data(), sizeof want);
      have_length = true;
      buf.clear();
      buf.reserve(size_t(want));
      continue;
    }
    const double left = timeout_s - seconds_since(t0);
    if (left <= 0) return ReadResult::Timeout;
    pollfd pfd{fd, POLLIN, 0};
    const int ready = poll(&pfd, 1, int(left * 1000) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    uint8_t chunk[1 << 16];
    const size_t room = std::min(sizeof chunk, need - buf.size());
    const ssize_t n = recv(fd, chunk, room, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ReadResult::Eof;
    buf.insert(buf.end(), chunk, chunk + n);
  }
}

// The shared object that defines a kernel: "" for this program's own.
// The plugin spec (path#config) the worker loads the kernel from, as the
// registry loaded it; "" for kernels built into attnfuzz.  A kernel no
// registry knows (a test's own, in a plugin-like library) is found by address.
// Forward and backward kernels alike.
template <class Kernel>
std::string library_of(const Kernel& k) {
  if (std::string origin = registered_origin(&k); !origin.empty()) return is_builtin_origin(origin) ? "" : origin;
  Dl_info mine{}, theirs{};
  if (!dladdr(reinterpret_cast<void*>(&run_in_worker), &mine) || !dladdr(&k, &theirs)) return "";
  if (theirs.dli_fbase == mine.dli_fbase || !theirs.dli_fname) return "";
  return theirs.dli_fname;
}

class WorkerClient {
 public:
  ~WorkerClient() { stop(false); }

  bool alive() const { return pid_ > 0; }
  void shut_down() { stop(false); }
  int pid() const { return pid_; }
  const std::string& device() const { return device_; }

  // Starts a worker if none runs; false with *why if it cannot.
  bool ensure(std::string* why) {
    if (alive()) return true;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      *why = std::string("socketpair: ") + std::strerror(errno);
      return false;
    }
    // Everything the child needs is prepared before fork: between fork and
    // exec only async-signal-safe calls are allowed (other threads may hold locks).
    const std::string exe = exec_path();
    const std::string fd_arg = std::to_string(sv[1]);
    const char* argv[] = {exe.c_str(), "worker", "--fd", fd_arg.c_str(), nullptr};
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
      *why = std::string("fork: ") + std::strerror(errno);
      close(sv[0]);
      close(sv[1]);
      return false;
    }
    if (pid == 0) {
      if (!exe.empty()) {
        fcntl(sv[1], F_SETFD, 0);  // the worker's end survives exec
        execv(exe.c_str(), const_cast<char* const*>(argv));
        _exit(127);
      }
      close(sv[0]);
      _exit(serve(sv[1], /*forked=*/true));
    }
    close(sv[1]);
    pid_ = pid;
    fd_ = sv[0];
    ++g_workers_started;
    std::vector<uint8_t> hello;
    const auto t0 = Clock::now();
    const ReadResult greeted = read_frame(fd_, &hello, kStartTimeoutSeconds);
    {
      std::lock_guard<std::mutex> lock(g_wait_mu);
      g_start_wait_s += seconds_since(t0);
    }
    if (greeted != ReadResult::Ok) {
      *why = "the worker process did not start" + (exe.empty() ? std::string() : " (" + exe + " worker)");
      stop(true);
      note_worker_greeting(false, *why);
      *why = lost_or(*why);
      return false;
    }
    try {
      WireReader rd(hello.data(), hello.size());
      if (rd.get<uint32_t>() != kHelloMagic) throw WireError("bad hello");
      has_device_ = rd.get<uint8_t>() != 0;
      (has_device_ ? device_ : no_device_) = rd.str();
      note_worker_greeting(has_device_, no_device_);
    } catch (const WireError& e) {
      *why = std::string("the worker process sent a bad greeting: ") + e.what();
      stop(true);
      return false;
    }
    return true;
  }

  std::string unavailable() {
    std::string why;
    if (!ensure(&why)) return why;
    return has_device_ ? "" : lost_or(no_device_);
  }

  WorkerRun run(const afz_kernel& k, Materialized& m, double timeout_s) {
    WireWriter req;
    req.put(kRequestMagic);
    req.put(RequestPass::Forward);
    req.put<uint64_t>(reinterpret_cast<uintptr_t>(&k));
    encode_problem(req, k.name, library_of(k), m.problem());
    Reply r;
    WorkerRun out = exchange(req, timeout_s, &r);
    if (out.run.status != RunStatus::Ok) return out;
    if (!copy_back(m.problem(), kO, r.o) || !copy_back(m.problem(), kLse, r.lse)) {
      out.run.status = RunStatus::Crash;
      out.run.message = "the worker sent outputs of the wrong size";
    }
    return out;
  }

  WorkerRun run_backward(const afz_backward_kernel& k, afz_backward_problem& bp, double timeout_s) {
    const afz_problem& f = *bp.fwd;
    const int64_t B = f.batch, hq = f.heads_q, hkv = f.heads_kv, sq = f.max_seqlen_q, sk = f.max_seqlen_k;
    afz_tensor lse{};
    lse.data = const_cast<float*>(bp.lse);
    lse.dtype = AFZ_F32;
    std::copy(bp.lse_stride, bp.lse_stride + 3, lse.stride + 1);
    // In protocol order (BackwardExtra).
    std::vector<ExtraTensor> extra = {
        {"dout", tensor_ref_of(bp.dout, B, hq, sq, f.head_dim_v), false},
        {"out", tensor_ref_of(bp.out, B, hq, sq, f.head_dim_v), false},
        {"lse", tensor_ref_of(lse, 1, B, hq, sq), false},
        {"dq", tensor_ref_of(bp.dq, B, hq, sq, f.head_dim), true},
        {"dk", tensor_ref_of(bp.dk, B, hkv, sk, f.head_dim), true},
        {"dv", tensor_ref_of(bp.dv, B, hkv, sk, f.head_dim_v), true},
    };
    WireWriter req;
    req.put(kRequestMagic);
    req.put(RequestPass::Backward);
    req.put<uint64_t>(reinterpret_cast<uintptr_t>(&k));
    encode_problem(req, k.name, library_of(k), f, extra);
    Reply r;
    WorkerRun out = exchange(req, timeout_s, &r);
    if (out.run.status != RunStatus::Ok) return out;
    bool sizes_ok = r.extra.size() == 3;
    for (size_t i = 0; sizes_ok && i < 3; ++i) {
      const TensorRef& t = extra[kDq + i].ref;
      const Span sp = tensor_span(t);
      sizes_ok = r.extra[i].size() == size_t(sp.bytes());
      if (sizes_ok && !r.extra[i].empty())
        std::memcpy(static_cast<uint8_t*>(t.data) + sp.lo_bytes(), r.extra[i].data(), r.extra[i].size());
    }
    if (!sizes_ok) {
      out.run.status = RunStatus::Crash;
      out.run.message = "the worker sent gradients of the wrong size";
    }
    return out;
  }

 private:
  // Sends a request and reads its reply; out.run.status Ok means *reply holds the outputs.
  WorkerRun exchange(const WireWriter& req, double timeout_s, Reply* reply) {
    WorkerRun out;
    const auto t0 = Clock::now();
    // A worker that exited after the previous case (or never started) is
    // replaced once; a send that still fails is the worker's failure.
    bool sent = false;
    for (int attempt = 0; attempt < 2 && !sent; ++attempt) {
      std::string why;
      if (!ensure(&why)) return fail(out, RunStatus::Error, "cannot start the GPU worker: " + why, t0);
      sent = send_frame(fd_, req.data());
      if (!sent) stop(true);
    }
    if (!sent) return fail(out, RunStatus::Crash, "the worker process closed its socket before the case", t0);

    std::vector<uint8_t> frame;
    switch (read_frame(fd_, &frame, timeout_s)) {
      case ReadResult::Timeout:
        stop(true);
        return fail(out, RunStatus::Hang, fmt::format("no result after {:.1f} s: worker process killed", timeout_s), t0);
      case ReadResult::Eof:
        return fail(out, RunStatus::Crash, reap_description(), t0);
      case ReadResult::Ok: break;
    }
    Reply& r = *reply;
    try {
      r = decode_reply(frame);
    } catch (const WireError& e) {
      stop(true);
      return fail(out, RunStatus::Crash, std::string("unreadable reply from the worker: ") + e.what(), t0);
    }
    if (r.fatal) stop(false);
    out.run.seconds = seconds_since(t0);
    out.kernel_seconds = r.seconds;
    out.run.message = r.message;
    out.run.status = r.status == ReplyStatus::Ok            ? RunStatus::Ok
                     : r.status == ReplyStatus::Error       ? RunStatus::Error
                     : r.status == ReplyStatus::Unsupported ? RunStatus::Unsupported
                     : r.status == ReplyStatus::Hang        ? RunStatus::Hang
                                                            : RunStatus::Crash;
    if (out.run.status == RunStatus::Ok) out.out_of_bounds = r.oob;
    return out;
  }

  static bool copy_back(afz_problem& p, int slot, const std::vector<uint8_t>& bytes) {
    const TensorRef t = tensor_ref(p, slot);
    if (!t.present) return bytes.empty();
    const Span s = tensor_span(t);
    if (bytes.size() != size_t(s.bytes())) return false;
    if (!bytes.empty()) std::memcpy(static_cast<uint8_t*>(t.data) + s.lo_bytes(), bytes.data(), bytes.size());
    return true;
  }

  WorkerRun& fail(WorkerRun& out, RunStatus st, const std::string& msg, Clock::time_point t0) {
    out.run.status = st;
    out.run.message = msg;
    out.run.seconds = seconds_since(t0);
    return out;
  }

  // The worker closed its socket mid-case: how it ended.
  std::string reap_description() {
    int status = 0;
    const pid_t pid = pid_;
    close_socket();
    pid_ = -1;
    if (waitpid(pid, &status, 0) != pid) return "the worker process vanished";
    if (WIFSIGNALED(status))
      return fmt::format("worker process died of signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
    return fmt::format("worker process exited with status {} before replying", WEXITSTATUS(status));
  }

  void close_socket() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  // Ends the worker: closing the socket makes an idle one exit; `kill`
  // (hang, broken protocol) or a grace period that runs out ends it by force.
  void stop(bool kill_now) {
    close_socket();
    if (pid_ <= 0) return;
    if (kill_now) kill(pid_, SIGKILL);
    const auto t0 = Clock::now();
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (seconds_since(t0) > kExitGraceSeconds) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      usleep(1000);
    }
    pid_ = -1;
  }

  // `why`, or after a loss of the device the same marked as such (is_gpu_lost_detail).
  static std::string lost_or(const std::string& why) {
    return gpu_lost_reason().empty() ? why : std::string(kLostPrefix) + why;
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  bool has_device_ = false;
  std::string device_, no_device_;
};

WorkerClient& this_thread_client() {
  thread_local WorkerClient client;
  return client;
}

// limit_workers(N): N workers for all threads together, each lent to one
// thread for one call and kept between calls.
class WorkerPool {
 public:
  int size() const { return size_.load(); }

  void resize(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [&] { return none_lent(); });
    clients_.clear();  // each ends its worker
    free_.clear();
    for (int i = 0; i < n; ++i) {
      clients_.push_back(std::make_unique<WorkerClient>());
      free_.push_back(clients_.back().get());
    }
    size_ = n;
  }

  WorkerClient* take() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [&] { return !free_.empty(); });
    WorkerClient* c = free_.back();
    free_.pop_back();
    return c;
  }

  void give(WorkerClient* c) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      free_.push_back(c);
    }
    idle_.notify_all();
  }

  void shut_down_all() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [&] { return none_lent(); });
    for (auto& c : clients_) c->shut_down();
  }

 private:
  bool none_lent() const { return free_.size() == clients_.size(); }

  std::mutex mu_;
  std::condition_variable idle_;
  std::vector<std::unique_ptr<WorkerClient>> clients_;
  std::vector<WorkerClient*> free_;
  std::atomic<int> size_{0};
};

WorkerPool& pool() {
  static WorkerPool p;
  return p;
}

// The worker one call uses: this thread's own, or one lent from the pool.
// A thread holds one lease at a time, so the pool cannot deadlock.
class Lease {
 public:
  Lease() : pooled_(pool().size() > 0), client_(pooled_ ? pool().take() : &this_thread_client()) {}
  ~Lease() {
    if (pooled_) pool().give(client_);
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  WorkerClient* operator->() const { return client_; }

 private:
  bool pooled_;
  WorkerClient* client_;
};

}  // namespace

void limit_workers(int n) { pool().resize(n > 0 ? n : 0); }

void use_exec_worker(const std::string& executable) {
  std::lock_guard<std::mutex> lock(g_exec_mu);
  g_exec_path = executable;
}

std::string gpu_lost_reason() {
  std::lock_guard<std::mutex> lock(g_record_mu);
  return g_lost_reason;
}

bool is_gpu_lost_detail(const std::string& detail) { return detail.starts_with(kLostPrefix); }

bool is_no_device_detail(const std::string& detail) {
  return detail.starts_with(kNoDevicePrefix) || is_gpu_lost_detail(detail);
}

void note_worker_greeting(bool found_device, const std::string& why_none) {
  std::lock_guard<std::mutex> lock(g_record_mu);
  if (found_device) g_device_seen = true;
  else if (g_device_seen && g_lost_reason.empty()) g_lost_reason = why_none.empty() ? "no device" : why_none;
}

void reset_gpu_record_for_tests() {
  std::lock_guard<std::mutex> lock(g_record_mu);
  g_device_seen = false;
  g_lost_reason.clear();
}

std::string gpu_unavailable_reason() { return Lease()->unavailable(); }

std::string gpu_device_name() {
  Lease c;
  return c->unavailable().empty() ? c->device() : "";
}

WorkerRun run_in_worker(const afz_kernel& k, Materialized& m, double timeout_s) {
  return Lease()->run(k, m, timeout_s);
}

WorkerRun run_backward_in_worker(const afz_backward_kernel& k, afz_backward_problem& p, double timeout_s) {
  return Lease()->run_backward(k, p, timeout_s);
}

int worker_pid() { return Lease()->pid(); }

void stop_worker() {
  this_thread_client().shut_down();
  pool().shut_down_all();
}

int64_t workers_started() { return g_workers_started.load(); }

WorkerStarts worker_starts() {
  std::lock_guard<std::mutex> lock(g_wait_mu);
  return {g_workers_started.load(), g_start_wait_s};
}

}  // namespace afz::gpu
