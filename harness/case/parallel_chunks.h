// Splitting one huge tensor's element loop over threads.
//
// Every element of a materialized case is a pure function of (seed, stream,
// index) (CounterRng), so cutting [0, n) into contiguous chunks and running
// them in any order, on any number of threads, writes the same bits.  Small
// ranges stay on the calling thread: a campaign already runs one case per
// job, and a thread's start costs tens of microseconds.
#pragma once
#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace afz {

// Below this many units of work a range runs on the calling thread; above it
// each thread gets at least this many (about a millisecond of generation),
// so thread starts stay under a few percent.  Campaign cases (case_work at
// most 2^22 multiply-adds: tensors of a few hundred thousand elements) never
// reach it; a 16 x 16384 x 128 tensor (2^25 elements) spreads over 32.
inline constexpr int64_t kMinElementsPerThread = int64_t{1} << 20;

// Calls body(begin, end) over contiguous chunks covering [0, n), each at
// least `grain` long, on up to hardware_concurrency() threads (the calling
// one included).  `grain` lets a caller count in rows of many elements.
template <typename Body>
void for_each_chunk(int64_t n, int64_t grain, Body body) {
  const int64_t cores = std::max<int64_t>(1, int64_t(std::thread::hardware_concurrency()));
  const int64_t threads = std::clamp<int64_t>(n / std::max<int64_t>(grain, 1), 1, cores);
  if (threads == 1) {
    if (n > 0) body(int64_t{0}, n);
    return;
  }
  const int64_t chunk = (n + threads - 1) / threads;
  std::vector<std::thread> pool;
  pool.reserve(size_t(threads - 1));
  for (int64_t t = 1; t < threads; ++t) {
    const int64_t begin = std::min(n, t * chunk), end = std::min(n, begin + chunk);
    if (begin < end) pool.emplace_back([=] { body(begin, end); });
  }
  body(int64_t{0}, std::min(n, chunk));
  for (std::thread& t : pool) t.join();
}

}  // namespace afz
