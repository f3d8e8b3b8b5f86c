// An audit sweep keeps one GPU worker process per job for the whole sweep.
// A worker holds a CUDA context and the plugins it loaded (libtorch takes
// seconds): the sweep once made its threads afresh per batch of cases, and
// each thread's end took its worker with it, so a 2,000-cell sweep started
// hundreds of workers.  This machine has no GPU: the workers start, greet
// with "no device" and stay, which is all the count needs.
#include <gtest/gtest.h>

#include <optional>

#include "harness/campaign/audit.h"
#include "harness/run/gpu/gpu_run.h"
#include "tests/harness/planted_kernel.h"

namespace afz {
namespace {

// Workers an audit of `jobs` jobs starts on a planted GPU kernel, about 100
// cells; nullopt (skip) where a GPU is present and the cases would run.
std::optional<int64_t> workers_for_audit(int jobs, int64_t* cases) {
  testing::PlantedKernel gpu_kernel{"planted.gpu", ~uint32_t(AFZ_CAP_NONDETERMINISTIC)};
  gpu::stop_worker();
  if (gpu::gpu_unavailable_reason().empty()) return std::nullopt;
  gpu::stop_worker();
  AuditOptions o;
  o.kernels = {{&gpu_kernel.k, "builtin"}};
  o.jobs = jobs;
  o.shards = 200;  // about 100 cells: a dozen batches of the old sweep
  o.time_s = 0;    // the sweep only
  const Runner runner{RunOptions{}};
  const int64_t before = gpu::workers_started();
  *cases = run_audit(o, runner).run.cases;
  const int64_t started = gpu::workers_started() - before;
  gpu::stop_worker();
  return started;
}

TEST(AuditWorkers, OneWorkerPerJobForTheWholeSweep) {
  constexpr int kJobs = 2;
  int64_t cases = 0;
  const std::optional<int64_t> started = workers_for_audit(kJobs, &cases);
  if (!started) GTEST_SKIP() << "a GPU is present: the cases would run";
  EXPECT_GT(cases, 8 * kJobs) << "more cells than one batch of the old sweep";
  // One per job; this thread starts none (it only consumes and minimizes).
  EXPECT_LE(*started, kJobs);
}

// --gpu-workers 1 (limit_workers): the jobs share one worker, so one CUDA
// context at most is on the GPU, whatever the jobs.
TEST(AuditWorkers, LimitWorkersCapsTheWorkersOfAllJobs) {
  constexpr int kJobs = 4;
  gpu::limit_workers(1);
  int64_t cases = 0;
  const std::optional<int64_t> started = workers_for_audit(kJobs, &cases);
  gpu::limit_workers(0);
  if (!started) GTEST_SKIP() << "a GPU is present: the cases would run";
  EXPECT_GT(cases, 8 * kJobs);
  EXPECT_EQ(*started, 1);
}

}  // namespace
}  // namespace afz
