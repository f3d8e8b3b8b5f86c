// One long-lived Python worker process (python3 -m attnfuzz.worker) and the
// calls into it.  Its failures are verdicts, not ours: an exception in the
// kernel comes back as a message (crash verdict), a worker that dies is a
// crash verdict with its signal, and one that does not answer within the
// call timeout is killed with its whole process group (torch.compile's
// compile workers too) and reported as AFZ_RUN_HANG.  The next call starts a
// fresh worker.
#pragma once
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/abi/attnfuzz_kernel.h"
#include "kernels/python/bridge_protocol.h"
#include "kernels/python/shared_buffer.h"

namespace afz::python {

struct WorkerSettings {
  std::string python;       // the interpreter, a resolved path
  std::string python_path;  // put before PYTHONPATH ("" leaves it as it is)
  std::string target;       // module:name or path/to/file.py:name
  double start_timeout_s = 0;
  double call_timeout_s = 0;
};

struct CallResult {
  int rc = 0;               // 0, AFZ_RUN_UNSUPPORTED, AFZ_RUN_HANG, or 1 (crash verdict)
  std::string message;      // one line, when rc != 0
  Reply reply;              // the worker's timings, when it answered
};

class PythonWorker {
 public:
  explicit PythonWorker(WorkerSettings settings) : settings_(std::move(settings)) {}
  ~PythonWorker() { stop(false); }
  PythonWorker(const PythonWorker&) = delete;
  PythonWorker& operator=(const PythonWorker&) = delete;

  // Starts the process and reads its greeting; false with a one-line *why
  // (the interpreter is missing, the target does not import, a malformed
  // declaration: the worker's own one-line error).
  bool start(Hello* hello, std::string* why);
  bool running() const { return pid_ > 0; }
  // Runs declared kernel `index` on p (a fresh worker first if none runs).
  CallResult call(uint32_t index, afz_problem& p);
  // Forgets a worker inherited through fork() (an isolated child's copy of
  // its parent's state) without touching it: the parent still owns it.
  void forget_inherited();

 private:
  void stop(bool kill_now);
  std::string reap(const std::string& what);
  void end_group(int* status);

  WorkerSettings settings_;
  std::unique_ptr<SharedBuffer> shm_;
  pid_t pid_ = -1;
  int fd_ = -1;
};

}  // namespace afz::python
