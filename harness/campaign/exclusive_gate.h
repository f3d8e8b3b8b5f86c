// Jobs that may run side by side, and jobs that must run with nothing beside
// them: the repros `--confirm-alone` runs at once.
//
// Each GPU repro is its own process with its own CUDA context.  Twelve
// contexts at once is fine for kernels that return; it is not for kernels
// that fault.  On the H100 (session 16, reports/backward/README.md) twelve
// torch.cudnn [bwd] repros that each ended in cudaErrorMisalignedAddress,
// run at once, drove the driver into GSP timeouts (Xid 119) and left the GPU
// "GPU Reset Required" (Xid 154); the same cases one at a time never had.
// So a repro that may fault enters alone: it waits for the running ones to
// end, and none starts beside it.  Writer preference: once one waits, no new
// shared job starts, or a stream of them would keep it waiting to the end.
#pragma once

#include <condition_variable>
#include <mutex>

namespace afz {

class ExclusiveGate {
 public:
  void enter(bool exclusive) {
    std::unique_lock<std::mutex> lock(mu_);
    if (exclusive) {
      ++exclusive_waiting_;
      changed_.wait(lock, [&] { return running_ == 0 && !exclusive_running_; });
      --exclusive_waiting_;
      exclusive_running_ = true;
    } else {
      changed_.wait(lock, [&] { return exclusive_waiting_ == 0 && !exclusive_running_; });
      ++running_;
    }
  }

  void leave(bool exclusive) {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      if (exclusive) exclusive_running_ = false;
      else --running_;
    }
    changed_.notify_all();
  }

  // Whether an exclusive job waits for the shared ones (for tests).
  bool exclusive_waiting() {
    const std::lock_guard<std::mutex> lock(mu_);
    return exclusive_waiting_ > 0;
  }

  // Holds the gate for one job's scope.
  class Pass {
   public:
    Pass(ExclusiveGate& gate, bool exclusive) : gate_(gate), exclusive_(exclusive) { gate_.enter(exclusive_); }
    ~Pass() { gate_.leave(exclusive_); }
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;

   private:
    ExclusiveGate& gate_;
    bool exclusive_;
  };

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  int running_ = 0;            // shared jobs in progress
  int exclusive_waiting_ = 0;  // exclusive jobs waiting for the shared ones to end
  bool exclusive_running_ = false;
};

}  // namespace afz
