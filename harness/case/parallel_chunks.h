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

// A range of fewer elements than kParallelElements runs on the calling
// thread: campaign cases (case_work at most 2^22 multiply-adds, tensors of
// at most a few million elements) stay on their job's one thread, since a
// campaign already runs one case per core.  Above it each thread gets at
// least kMinElementsPerThread (tens of milliseconds of generation), so thread
// starts cost well under a percent; a 16 x 16384 x 128 tensor (2^25
// elements) spreads over 32.
inline constexpr int64_t kParallelElements = int64_t{1} << 24;
inline constexpr int64_t kMinElementsPerThread = int64_t{1} << 20;

// Calls body(begin, end) over contiguous chunks covering [0, n) units of
// `unit_elements` elements each (1 for elements, a row's length for rows),
// on up to hardware_concurrency() threads, the calling one included.
template <typename Body>
void for_each_chunk(int64_t n, int64_t unit_elements, Body body) {
  const int64_t elements = n * std::max<int64_t>(unit_elements, 1);
  const int64_t cores = std::max<int64_t>(1, int64_t(std::thread::hardware_concurrency()));
  const int64_t threads =
      elements < kParallelElements ? 1 : std::clamp<int64_t>(elements / kMinElementsPerThread, 1, std::min(cores, n));
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
