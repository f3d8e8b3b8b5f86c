// Standby workers (harness/run/gpu/gpu_run.h): after a thread's worker has
// died under a case, a second one is started ahead of need and takes over at
// the next death, with the plugins the thread used already loaded.  Planted
// CPU kernels on the worker's host mirror, so it runs without a GPU.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "harness/case/case.h"
#include "harness/case/materialize.h"
#include "harness/run/gpu/gpu_run.h"
#include "harness/run/gpu/protocol.h"
#include "harness/run/gpu/wire.h"
#include "harness/run/gpu/worker.h"
#include "tests/harness/case_from_text.h"
#include "tests/harness/planted_kernel.h"

namespace afz {
namespace {

Case parse(const std::string& body) { return testing::case_from_text(body); }

const char* const kCase = "batch 1\nheads 2 2\nseqlen_q 5\nseqlen_k 9\nhead_dim 8 8\ndtype f32\nseed 3\n";

int segfault(const afz_kernel*, const afz_problem*, char*, size_t) {
  raise(SIGSEGV);
  return 0;
}

// A correct kernel and one that kills its worker, both made before any
// worker is forked (a forked worker runs them at their addresses).
struct Kernels {
  testing::PlantedKernel good{"planted.good"};
  testing::PlantedKernel crashing{"planted.crash"};
  explicit Kernels(bool standby) {
    crashing.k.run = &segfault;
    gpu::set_standby_workers(standby);
    gpu::stop_worker();
  }
  ~Kernels() {
    gpu::stop_worker();
    gpu::set_standby_workers(true);
  }
  RunStatus run(const testing::PlantedKernel& k) {
    Materialized m(parse(kCase));
    return gpu::run_in_worker(k.k, m, 30).run.status;
  }
};

TEST(StandbyWorker, TakesOverFromTheSecondDeathOn) {
  Kernels ks(/*standby=*/true);
  const gpu::WorkerStarts before = gpu::worker_starts();
  ASSERT_EQ(ks.run(ks.good), RunStatus::Ok);
  ASSERT_EQ(ks.run(ks.crashing), RunStatus::Crash);  // the first death: no standby yet
  ASSERT_EQ(ks.run(ks.crashing), RunStatus::Crash);  // a cold start, and a standby beside it
  EXPECT_EQ(gpu::worker_starts().handovers - before.handovers, 0);
  ASSERT_EQ(ks.run(ks.good), RunStatus::Ok);  // the standby's case
  const gpu::WorkerStarts after = gpu::worker_starts();
  EXPECT_EQ(after.handovers - before.handovers, 1);
  // The first worker, the cold one after the first death, its standby, and
  // the standby made when that one took over.
  EXPECT_EQ(after.started - before.started, 4);
  EXPECT_GT(after.wait_s, before.wait_s);
}

TEST(StandbyWorker, OffMeansOneProcessAndAColdStartPerDeath) {
  Kernels ks(/*standby=*/false);
  const gpu::WorkerStarts before = gpu::worker_starts();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(ks.run(ks.crashing), RunStatus::Crash);
  ASSERT_EQ(ks.run(ks.good), RunStatus::Ok);
  const gpu::WorkerStarts after = gpu::worker_starts();
  EXPECT_EQ(after.handovers - before.handovers, 0);
  EXPECT_EQ(after.started - before.started, 4);
}

TEST(StandbyWorker, AHandedOverWorkerRunsCasesAsAFreshOneDoes) {
  Kernels ks(/*standby=*/true);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(ks.run(ks.crashing), RunStatus::Crash);
  const int64_t handovers = gpu::worker_starts().handovers;
  Materialized here(parse(kCase)), there(parse(kCase));
  char error[256] = {};
  ASSERT_EQ(ks.good.k.run(&ks.good.k, &here.problem(), error, sizeof error), 0) << error;
  const gpu::WorkerRun w = gpu::run_in_worker(ks.good.k, there, 30);
  ASSERT_EQ(w.run.status, RunStatus::Ok) << w.run.message;
  EXPECT_EQ(gpu::worker_starts().handovers, handovers + 1);
  EXPECT_EQ(here.output_bytes(), there.output_bytes());
}

// What a process has mapped: its /proc/PID/maps.
std::string maps_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

#if defined(ATTNFUZZ_PLUGIN_EXAMPLE)
TEST(StandbyWorker, APreloadedPluginIsMappedBeforeTheGreeting) {
  const std::string plugin = ATTNFUZZ_PLUGIN_EXAMPLE;
  const std::string file = plugin.substr(plugin.rfind('/') + 1);
  // ctest runs each test in its own process: nothing here loaded the plugin,
  // so a child that maps it loaded it itself.
  ASSERT_EQ(maps_of(getpid()).find(file), std::string::npos) << "this process already maps " << file;
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(sv[0]);
    _exit(gpu::serve(sv[1], /*forked=*/false, {plugin}));
  }
  close(sv[1]);
  std::vector<uint8_t> hello;
  ASSERT_TRUE(gpu::recv_frame(sv[0], &hello));  // sent after the preload
  WireReader rd(hello.data(), hello.size());
  EXPECT_EQ(rd.get<uint32_t>(), gpu::kHelloMagic);
  EXPECT_NE(maps_of(pid).find(file), std::string::npos) << "the worker greeted without the plugin mapped";
  close(sv[0]);  // the worker exits at EOF
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
#endif

TEST(StandbyWorker, TheWorkerSubcommandRejectsUnknownArguments) {
  const char* argv[] = {"worker", "--fd", "3", "--bogus", "x", nullptr};
  EXPECT_EQ(gpu::worker_main(5, const_cast<char**>(argv)), 2);
}

}  // namespace
}  // namespace afz
