// What starting GPU workers costs (gpu_run.h, worker_starts): one start per
// thread, or per pooled worker (limit_workers), one more after every case
// that killed its worker, and the time spent waiting for each greeting.
// Planted CPU kernels on the worker's host mirror, so it runs without a GPU.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <thread>
#include <vector>

#include "harness/case/materialize.h"
#include "harness/run/gpu/gpu_run.h"
#include "tests/harness/case_from_text.h"
#include "tests/harness/planted_kernel.h"

namespace afz {
namespace {

int segfault(const afz_kernel*, const afz_problem*, char*, size_t) {
  raise(SIGSEGV);
  return 0;
}

RunStatus run(const testing::PlantedKernel& k) {
  Materialized m(testing::case_from_text("batch 1\nheads 2 2\nseqlen_q 5\nseqlen_k 9\nhead_dim 8 8\ndtype f32\nseed 3\n"));
  return gpu::run_in_worker(k.k, m, 30).run.status;
}

TEST(WorkerStarts, EveryDeathCostsAStartAndItsWaitIsCounted) {
  testing::PlantedKernel good{"planted.good"}, crashing{"planted.crash"};
  crashing.k.run = &segfault;
  gpu::stop_worker();  // forked workers must see these kernels at their addresses
  const gpu::WorkerStarts before = gpu::worker_starts();
  ASSERT_EQ(run(good), RunStatus::Ok);
  ASSERT_EQ(run(good), RunStatus::Ok);  // the same worker
  EXPECT_EQ(gpu::worker_starts().started - before.started, 1);
  ASSERT_EQ(run(crashing), RunStatus::Crash);
  ASSERT_EQ(run(crashing), RunStatus::Crash);
  ASSERT_EQ(run(good), RunStatus::Ok);
  const gpu::WorkerStarts after = gpu::worker_starts();
  EXPECT_EQ(after.started - before.started, 3);
  EXPECT_GT(after.wait_s, before.wait_s);
  gpu::stop_worker();
}

// Forks happen on this thread alone: a plain fork (the test binary has no
// `worker` subcommand) while other threads allocate could copy a held lock.
TEST(WorkerPool, OneWorkerServesEveryThreadAndACrashCostsOneRestart) {
  testing::PlantedKernel good{"planted.good"}, crashing{"planted.crash"};
  crashing.k.run = &segfault;
  gpu::stop_worker();  // forked workers must see these kernels at their addresses
  gpu::limit_workers(1);
  const int64_t before = gpu::worker_starts().started;
  ASSERT_EQ(run(good), RunStatus::Ok);  // the pool's worker starts here
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) ok += run(good) == RunStatus::Ok;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 20);
  EXPECT_EQ(gpu::worker_starts().started - before, 1) << "four threads, one worker";
  EXPECT_EQ(run(crashing), RunStatus::Crash);
  EXPECT_EQ(run(good), RunStatus::Ok);
  EXPECT_EQ(gpu::worker_starts().started - before, 2) << "the crash costs one restart";
  gpu::stop_worker();
  gpu::limit_workers(0);
}

}  // namespace
}  // namespace afz
