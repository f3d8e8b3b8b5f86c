// An audit sweep keeps one GPU worker process per job for the whole sweep.
// A worker holds a CUDA context and the plugins it loaded (libtorch takes
// seconds): the sweep once made its threads afresh per batch of cases, and
// each thread's end took its worker with it, so a 2,000-cell sweep started
// hundreds of workers.  This machine has no GPU: the workers start, greet
// with "no device" and stay, which is all the count needs.
#include <gtest/gtest.h>

#include "harness/campaign/audit.h"
#include "harness/run/gpu/gpu_run.h"
#include "tests/harness/planted_kernel.h"

namespace afz {
namespace {

TEST(AuditWorkers, OneWorkerPerJobForTheWholeSweep) {
  testing::PlantedKernel gpu_kernel{"planted.gpu", ~uint32_t(AFZ_CAP_NONDETERMINISTIC)};
  gpu::stop_worker();
  if (gpu::gpu_unavailable_reason().empty()) GTEST_SKIP() << "a GPU is present: the cases would run";
  gpu::stop_worker();
  constexpr int kJobs = 2;
  AuditOptions o;
  o.kernels = {{&gpu_kernel.k, "builtin"}};
  o.jobs = kJobs;
  o.shards = 200;  // about 100 cells: a dozen batches of the old sweep
  o.time_s = 0;    // the sweep only
  const Runner runner{RunOptions{}};
  const int64_t before = gpu::workers_started();
  const Report r = run_audit(o, runner);
  EXPECT_GT(r.run.cases, 8 * kJobs) << "more cells than one batch of the old sweep";
  // One per job; this thread starts none (it only consumes and minimizes).
  EXPECT_LE(gpu::workers_started() - before, kJobs);
  gpu::stop_worker();
}

// --gpu-workers 1 (limit_workers): the jobs share one worker, so one CUDA
// context at most is on the GPU, whatever the jobs.
TEST(AuditWorkers, LimitWorkersCapsTheWorkersOfAllJobs) {
  testing::PlantedKernel gpu_kernel{"planted.gpu", ~uint32_t(AFZ_CAP_NONDETERMINISTIC)};
  gpu::stop_worker();
  if (gpu::gpu_unavailable_reason().empty()) GTEST_SKIP() << "a GPU is present: the cases would run";
  gpu::stop_worker();
  gpu::limit_workers(1);
  AuditOptions o;
  o.kernels = {{&gpu_kernel.k, "builtin"}};
  o.jobs = 4;
  o.shards = 200;
  o.time_s = 0;
  const Runner runner{RunOptions{}};
  const int64_t before = gpu::workers_started();
  const Report r = run_audit(o, runner);
  EXPECT_GT(r.run.cases, 8 * o.jobs);
  EXPECT_EQ(gpu::workers_started() - before, 1);
  gpu::stop_worker();
  gpu::limit_workers(0);
}

}  // namespace
}  // namespace afz
