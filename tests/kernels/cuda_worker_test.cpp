// The worker process and its guarded mirror, exercised with CPU kernels on
// host memory: the same protocol, margins, poison and restart logic that GPU
// kernels go through, so these run (and must pass) on machines without a GPU.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "harness/case/case.h"
#include "harness/case/materialize.h"
#include "harness/run/gpu/gpu_run.h"
#include "harness/run/runner.h"
#include "kernels/registry.h"

namespace afz {
namespace {

Case parse(const std::string& text) {
  ParseError err;
  std::optional<Case> c = parse_case(text, &err);
  if (!c) ADD_FAILURE() << err.format("case") << "\n" << text;
  return c.value_or(Case{});
}

// A CPU kernel whose run() is a plain function with a planted behaviour.
struct PlantedKernel {
  afz_kernel k{};
  explicit PlantedKernel(int (*run)(const afz_kernel*, const afz_problem*, char*, size_t)) {
    const afz_kernel* tiled = KernelRegistry::with_builtins().find("cpu.tiled");
    k = *tiled;  // caps, precision, conventions of a correct kernel
    k.name = "planted";
    k.user = const_cast<afz_kernel*>(tiled);
    k.run = run;
    // A forked worker runs the kernel at its address in the harness, which
    // must have existed when the worker was forked: start a fresh one.
    gpu::stop_worker();
  }
};

// Runs the correct cpu.tiled (kept in user), then does its own thing.
int run_tiled(const afz_kernel* self, const afz_problem* p, char* e, size_t n) {
  const auto* tiled = static_cast<const afz_kernel*>(self->user);
  return tiled->run(tiled, p, e, n);
}

int64_t last_offset(const afz_tensor& t, const int64_t (&extent)[4]) {
  int64_t last = 0;
  for (int a = 0; a < 4; ++a) last += (extent[a] - 1) * t.stride[a];
  return last;
}

int write_past_output(const afz_kernel* self, const afz_problem* p, char* e, size_t n) {
  if (int rc = run_tiled(self, p, e, n); rc != 0) return rc;
  const int64_t ext[4] = {p->batch, p->heads_q, p->max_seqlen_q, p->head_dim_v};
  static_cast<uint16_t*>(p->o.data)[last_offset(p->o, ext) + 1] = 0x3c00;
  return 0;
}

int write_padding_row(const afz_kernel* self, const afz_problem* p, char* e, size_t n) {
  if (int rc = run_tiled(self, p, e, n); rc != 0) return rc;
  // Sequence 0 has seqlen_q < max_seqlen_q in the case below: its last row is padding.
  const int64_t at = (p->max_seqlen_q - 1) * p->o.stride[2];
  static_cast<uint16_t*>(p->o.data)[at] = 0;
  return 0;
}

int write_before_q(const afz_kernel* self, const afz_problem* p, char* e, size_t n) {
  if (int rc = run_tiled(self, p, e, n); rc != 0) return rc;
  static_cast<uint16_t*>(const_cast<void*>(p->q.data))[-3] = 0;
  return 0;
}

int segfault(const afz_kernel*, const afz_problem*, char*, size_t) {
  raise(SIGSEGV);
  return 0;
}

int sleep_forever(const afz_kernel*, const afz_problem*, char*, size_t) {
  for (;;) pause();
}

// A plugin whose own watchdog gave up on its work (the Python bridge's).
int plugin_hang(const afz_kernel*, const afz_problem*, char* e, size_t n) {
  std::snprintf(e, n, "the plugin's watchdog gave up");
  return AFZ_RUN_HANG;
}

const char* kCase = R"(attnfuzz-case 1
batch 2
heads 4 2
seqlen_q 37 40
seqlen_k 70 0
head_dim 16
dtype bf16
causal top_left
layout bshd
row_gap 3
seed 11
)";

TEST(GpuWorker, HostKernelInWorkerMatchesInProcessBitForBit) {
  const afz_kernel* tiled = KernelRegistry::with_builtins().find("cpu.tiled");
  ASSERT_NE(tiled, nullptr);
  gpu::stop_worker();
  for (const char* layout : {"bhsd", "bshd", "packed_qkv"}) {
    std::string text = kCase;
    text.replace(text.find("bshd"), 4, layout);
    if (std::string(layout) == "packed_qkv") text.replace(text.find("heads 4 2"), 9, "heads 4 4");
    Materialized here(parse(text)), there(parse(text));
    here.poison_outputs();
    char err[256];
    ASSERT_EQ(tiled->run(tiled, &here.problem(), err, sizeof err), 0) << err;
    there.poison_outputs();
    gpu::WorkerRun w = gpu::run_in_worker(*tiled, there, 30);
    ASSERT_EQ(w.run.status, RunStatus::Ok) << w.run.message;
    EXPECT_EQ(w.out_of_bounds, "") << layout;
    EXPECT_EQ(here.output_bytes(), there.output_bytes()) << layout;
  }
}

TEST(GpuWorker, WriteIntoTheOutputMarginIsOutOfBounds) {
  PlantedKernel k(write_past_output);
  Materialized m(parse(kCase));
  m.poison_outputs();
  gpu::WorkerRun w = gpu::run_in_worker(k.k, m, 30);
  ASSERT_EQ(w.run.status, RunStatus::Ok) << w.run.message;
  EXPECT_NE(w.out_of_bounds.find("o guard margin written 0 bytes past"), std::string::npos) << w.out_of_bounds;
}

TEST(GpuWorker, WriteIntoAPaddingRowIsOutOfBounds) {
  PlantedKernel k(write_padding_row);
  Materialized m(parse(kCase));
  m.poison_outputs();
  gpu::WorkerRun w = gpu::run_in_worker(k.k, m, 30);
  ASSERT_EQ(w.run.status, RunStatus::Ok) << w.run.message;
  EXPECT_NE(w.out_of_bounds.find("o[b=0 h=0 i=39] written: a padding row"), std::string::npos) << w.out_of_bounds;
}

TEST(GpuWorker, WriteBeforeAnInputIsOutOfBounds) {
  PlantedKernel k(write_before_q);
  Materialized m(parse(kCase));
  m.poison_outputs();
  gpu::WorkerRun w = gpu::run_in_worker(k.k, m, 30);
  ASSERT_EQ(w.run.status, RunStatus::Ok) << w.run.message;
  EXPECT_NE(w.out_of_bounds.find("q guard margin written 6 bytes before"), std::string::npos) << w.out_of_bounds;
}

TEST(GpuWorker, CrashAndHangEndOnlyTheWorkerWhichRestarts) {
  PlantedKernel crash(segfault), hang(sleep_forever), fine(run_tiled);
  Materialized m(parse(kCase));
  gpu::WorkerRun w = gpu::run_in_worker(crash.k, m, 30);
  EXPECT_EQ(w.run.status, RunStatus::Crash);
  EXPECT_NE(w.run.message.find("signal 11"), std::string::npos) << w.run.message;
  EXPECT_EQ(gpu::worker_pid(), -1);

  w = gpu::run_in_worker(hang.k, m, 0.5);
  EXPECT_EQ(w.run.status, RunStatus::Hang);
  EXPECT_NE(w.run.message.find("no result after 0.5 s"), std::string::npos) << w.run.message;
  EXPECT_EQ(gpu::worker_pid(), -1);

  m.poison_outputs();
  w = gpu::run_in_worker(fine.k, m, 30);
  EXPECT_EQ(w.run.status, RunStatus::Ok) << w.run.message;
  EXPECT_EQ(w.out_of_bounds, "");
  const int pid = gpu::worker_pid();
  EXPECT_GT(pid, 0);
  w = gpu::run_in_worker(fine.k, m, 30);
  EXPECT_EQ(gpu::worker_pid(), pid) << "a healthy worker is reused";
}

TEST(GpuWorker, APluginsHangCodeIsAHangAndTheWorkerLivesOn) {
  PlantedKernel hang(plugin_hang), fine(run_tiled);
  Materialized m(parse(kCase));
  gpu::WorkerRun w = gpu::run_in_worker(fine.k, m, 30);
  ASSERT_EQ(w.run.status, RunStatus::Ok) << w.run.message;
  const int pid = gpu::worker_pid();
  w = gpu::run_in_worker(hang.k, m, 30);
  EXPECT_EQ(w.run.status, RunStatus::Hang);
  EXPECT_EQ(w.run.message, "the plugin's watchdog gave up");
  EXPECT_EQ(gpu::worker_pid(), pid) << "the worker itself is sound: it stays";
}

TEST(GpuWorker, GpuKernelsAreUnsupportedWithoutADevice) {
  if (gpu::gpu_unavailable_reason().empty()) GTEST_SKIP() << "a GPU is present";
  const afz_kernel* k = KernelRegistry::with_builtins().find("gpu.fa2");
  if (!k) GTEST_SKIP() << "built without CUDA";
  Runner runner(RunOptions{});
  std::string text = kCase;
  text.replace(text.find("head_dim 16"), 11, "head_dim 64");
  const CaseOutcome o = runner.run(*k, parse(text));
  EXPECT_EQ(o.verdict.cls, VerdictClass::Unsupported);
  EXPECT_NE(o.verdict.detail.find("CUDA"), std::string::npos) << o.verdict.detail;
}

}  // namespace
}  // namespace afz
