// Indices computed on worker threads, consumed on the calling thread in
// index order: the loop of campaigns and audit sweeps.
//
// The workers live for the whole loop.  That matters more than it looks: a
// GPU kernel runs in a worker process owned by the calling thread
// (gpu_run.cpp's thread_local client), and a thread that ends takes its
// process with it.  Threads made afresh per batch of cases restarted every
// worker process per batch: CUDA context, plugin load (libtorch), the
// library's handles and plan caches, each time.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace afz {

// compute(i) -> Work runs on `jobs` threads, at most `window` indices ahead
// of the consumer; go_on(i) then consume(i, Work&&) run here for i = begin,
// begin + 1, ... < end.  The loop ends at `end` or when go_on(i) is false
// (the work already computed past i is dropped).  With jobs <= 1 everything
// runs on the calling thread.  An exception from consume or go_on stops the
// workers and propagates; compute must not throw.
template <class Compute, class GoOn, class Consume>
void run_in_order(int64_t begin, int64_t end, int jobs, int64_t window, Compute compute, GoOn go_on,
                  Consume consume) {
  using Work = decltype(compute(begin));
  if (jobs <= 1) {
    for (int64_t i = begin; i < end && go_on(i); ++i) consume(i, compute(i));
    return;
  }
  std::mutex mu;
  std::condition_variable ready, room;
  std::map<int64_t, Work> done;
  int64_t next = begin, wanted = begin;
  bool stop = false;
  auto worker = [&] {
    for (;;) {
      int64_t i;
      {
        std::unique_lock lock(mu);
        room.wait(lock, [&] { return stop || next >= end || next < wanted + window; });
        if (stop || next >= end) return;
        i = next++;
      }
      Work w = compute(i);
      std::lock_guard lock(mu);
      done.emplace(i, std::move(w));
      ready.notify_all();
    }
  };
  std::vector<std::thread> threads;
  for (int j = 0; j < jobs; ++j) threads.emplace_back(worker);
  auto stop_workers = [&] {
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    room.notify_all();
    for (std::thread& t : threads) t.join();
  };
  try {
    for (int64_t i = begin; i < end && go_on(i); ++i) {
      Work w;
      {
        std::unique_lock lock(mu);
        ready.wait(lock, [&] { return done.count(i) > 0; });
        w = std::move(done.extract(i).mapped());
        wanted = i + 1;
      }
      room.notify_all();
      consume(i, std::move(w));
    }
  } catch (...) {
    stop_workers();
    throw;
  }
  stop_workers();
}

}  // namespace afz
