#include "harness/process/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>

extern char** environ;

namespace afz {
namespace {

using Clock = std::chrono::steady_clock;

// How long one wait for output lasts before the child's exit and the
// deadline are looked at again.
constexpr int kPollSliceMs = 50;

// Appends what the pipe holds now; false once it is at end of file.
bool drain(int fd, std::string& out) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, size_t(n));
      if (out.size() > kMaxChildOutput) out.resize(kMaxChildOutput);
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

void note_status(ChildRun& r, int status) {
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
}

}  // namespace

ChildRun run_child(const std::vector<std::string>& args, double timeout_s) {
  ChildRun r;
  if (args.empty()) {
    r.error = "no program to run";
    return r;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    r.error = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  // dup2 clears close-on-exec on the copies: the child writes to them only.
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: a timeout kills its workers too
  pid_t pid = 0;
  const auto start = Clock::now();
  const int rc = ::posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    r.error = args[0] + ": " + std::strerror(rc);
    return r;
  }
  r.started = true;
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  bool open = true;
  for (;;) {
    if (open) {
      pollfd p{fds[0], POLLIN, 0};
      if (::poll(&p, 1, kPollSliceMs) > 0) open = drain(fds[0], r.output);
    } else {
      ::usleep(kPollSliceMs * 1000);
    }
    // The child may exit while a grandchild (a GPU worker) still holds the
    // pipe: its exit ends the wait, not the pipe's end.  WNOWAIT leaves it
    // unreaped, so its group id cannot be reused before the kill below.
    siginfo_t info{};
    if (::waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) break;
    if (timeout_s > 0 && elapsed() > timeout_s) {
      r.timed_out = true;
      break;
    }
  }
  ::kill(-pid, SIGKILL);  // what is left of its group: leftover workers, or all of it after a timeout
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (open) drain(fds[0], r.output);
  note_status(r, status);
  ::close(fds[0]);
  r.seconds = elapsed();
  return r;
}

std::string last_line(const std::string& output, const char* blank) {
  std::istringstream in(output);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(blank) != std::string::npos) last = line;
  return last;
}

}  // namespace afz
