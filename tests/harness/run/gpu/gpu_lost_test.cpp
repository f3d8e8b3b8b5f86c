// The lost-device record (harness/run/gpu/gpu_run.h): a device that a worker
// of this process found and a later worker no longer finds is lost, with
// that worker's reason; a device never found is never lost.  On this
// machine without a GPU no worker finds one, so "found" is played through
// note_worker_greeting and "no longer finds" is a real worker's greeting.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "harness/run/gpu/gpu_run.h"

namespace afz {
namespace {

struct GpuLostRecord : ::testing::Test {
  void SetUp() override { gpu::reset_gpu_record_for_tests(); }
  void TearDown() override {
    gpu::reset_gpu_record_for_tests();
    gpu::stop_worker();
  }
};

TEST_F(GpuLostRecord, NeverSeenIsNeverLost) {
  gpu::note_worker_greeting(false, "no CUDA device");
  gpu::note_worker_greeting(false, "the worker process did not start");
  EXPECT_EQ(gpu::gpu_lost_reason(), "");
  EXPECT_FALSE(gpu::is_gpu_lost_detail("no CUDA device"));
}

TEST_F(GpuLostRecord, SeenThenNoneIsLostWithTheFirstReason) {
  gpu::note_worker_greeting(true, "");
  EXPECT_EQ(gpu::gpu_lost_reason(), "") << "a device found is not lost";
  gpu::note_worker_greeting(false, "no CUDA device: cudaErrorNoDevice: no CUDA-capable device is detected");
  EXPECT_EQ(gpu::gpu_lost_reason(), "no CUDA device: cudaErrorNoDevice: no CUDA-capable device is detected");
  gpu::note_worker_greeting(false, "the worker process did not start");
  gpu::note_worker_greeting(true, "");
  EXPECT_EQ(gpu::gpu_lost_reason(), "no CUDA device: cudaErrorNoDevice: no CUDA-capable device is detected")
      << "the first reason stays, and a loss is not undone";
}

TEST_F(GpuLostRecord, ConcurrentWorkersRecordOneReason) {
  gpu::note_worker_greeting(true, "");
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([i] { gpu::note_worker_greeting(false, "reason " + std::to_string(i)); });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(gpu::gpu_lost_reason().rfind("reason ", 0), 0u) << gpu::gpu_lost_reason();
}

TEST_F(GpuLostRecord, AWorkerFindingNoneAfterADeviceWasSeenMarksItLost) {
  gpu::stop_worker();
  const std::string before = gpu::gpu_unavailable_reason();  // a real worker's greeting
  if (before.empty()) GTEST_SKIP() << "a GPU is present: no worker here finds none";
  EXPECT_FALSE(gpu::is_gpu_lost_detail(before));
  EXPECT_EQ(gpu::gpu_lost_reason(), "") << "no device was ever seen here";

  gpu::reset_gpu_record_for_tests();
  gpu::note_worker_greeting(true, "");  // as if an earlier worker had found one
  gpu::stop_worker();                   // the next case starts a fresh worker (after a crash)
  const std::string after = gpu::gpu_unavailable_reason();
  EXPECT_EQ(gpu::gpu_lost_reason(), before);
  EXPECT_TRUE(gpu::is_gpu_lost_detail(after)) << after;
  EXPECT_NE(after.find(before), std::string::npos) << after;
}

}  // namespace
}  // namespace afz
