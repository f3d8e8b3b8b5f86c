#include "harness/campaign/stop_request.h"

#include <atomic>
#include <csignal>

namespace afz {
namespace {

// Lock-free so the handler may touch it (async-signal-safe).
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_stop_signal(int sig) {
  g_stop.store(true, std::memory_order_relaxed);
  // The next signal of this kind takes its default action: a harness stuck
  // somewhere that never polls can still be ended.
  std::signal(sig, SIG_DFL);
}

}  // namespace

void install_stop_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

bool stop_requested() { return g_stop.load(std::memory_order_relaxed); }
void request_stop() { g_stop.store(true, std::memory_order_relaxed); }
void clear_stop_request() { g_stop.store(false, std::memory_order_relaxed); }

}  // namespace afz
