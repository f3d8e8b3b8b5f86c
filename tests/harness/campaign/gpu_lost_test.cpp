// A lost GPU (gpu_lost_reason(), harness/run/gpu/gpu_run.h) stops a
// campaign, an audit and the convention table at the next case boundary,
// as a stop request does: stop reason "gpu lost", a note saying how far the
// run got, and the outcomes that were `unsupported` only because the device
// was gone are not counted as run.  This machine has no GPU: a test plays
// "a worker found a device" (note_worker_greeting) and a real worker then
// finds none, or a CPU kernel plays the loss itself mid-run.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "harness/campaign/audit.h"
#include "harness/campaign/campaign.h"
#include "harness/campaign/conventions.h"
#include "harness/campaign/mutant_gate.h"
#include "harness/run/gpu/gpu_run.h"
#include "tests/harness/planted_kernel.h"

namespace afz {
namespace {

constexpr const char* kGone = "test: the device fell off the bus";

struct GpuLost : ::testing::Test {
  // A correct kernel that declares AFZ_CAP_GPU (run in a worker), and a CPU one.
  testing::PlantedKernel gpu_kernel{"planted.gpu", ~uint32_t(AFZ_CAP_NONDETERMINISTIC)};
  testing::PlantedKernel cpu_kernel{"planted.cpu"};
  Runner runner{RunOptions{}};
  std::string no_device;  // what a worker here says

  void SetUp() override {
    gpu::reset_gpu_record_for_tests();
    gpu::stop_worker();
    no_device = gpu::gpu_unavailable_reason();
    if (no_device.empty()) GTEST_SKIP() << "a GPU is present: no worker here finds none";
    gpu::note_worker_greeting(true, "");  // a worker of this process found a device...
    gpu::stop_worker();                   // ...and the next one will not
  }
  void TearDown() override {
    gpu::reset_gpu_record_for_tests();
    gpu::stop_worker();
  }
  // The CPU kernel plays the loss at its n-th call (per sequence), in the middle of a run.
  std::atomic<int> calls{0};
  void lose_gpu_at_call(int n) {
    cpu_kernel.defect = [this, n](const afz_problem&, int) {
      if (++calls == n) gpu::note_worker_greeting(false, kGone);
      return false;
    };
  }
  // The campaign's note, spelled out here so the test pins its text.
  static std::string campaign_stop_note(int64_t cases, const std::string& why) {
    return fmt::format("stopped: the GPU was lost after {} cases: {}; the cases since then were not run", cases, why);
  }
  int64_t cases_of(const Report& r, const std::string& kernel) const {
    int64_t n = 0;
    for (const ReportCell& c : r.cells)
      if (c.kernel == kernel) n += c.cases;
    return n;
  }
};

TEST_F(GpuLost, CampaignStopsAndDoesNotCountTheLostOutcomes) {
  for (int jobs : {1, 2}) {
    gpu::reset_gpu_record_for_tests();
    gpu::note_worker_greeting(true, "");
    gpu::stop_worker();
    CampaignOptions o;
    o.kernels = {{&gpu_kernel.k, "builtin"}, {&cpu_kernel.k, "builtin"}};
    o.cases = 1000;
    o.jobs = jobs;
    const Report r = run_campaign(o, runner);
    EXPECT_EQ(r.run.stop_reason, "gpu lost") << jobs;
    EXPECT_EQ(gpu::gpu_lost_reason(), no_device);
    // The first case met the loss (its GPU outcome dropped, its CPU one
    // kept); the campaign stopped at the next boundary.
    EXPECT_LE(r.run.cases, 1) << jobs;
    EXPECT_EQ(cases_of(r, "planted.gpu"), 0) << "a lost outcome is not a case run";
    EXPECT_EQ(cases_of(r, "planted.cpu"), r.run.cases);
    ASSERT_FALSE(r.errors.empty());
    EXPECT_EQ(r.errors.back(), campaign_stop_note(r.run.cases, no_device));
  }
}

TEST_F(GpuLost, CampaignStopsAtTheCaseBoundaryAfterALossMidRun) {
  lose_gpu_at_call(40);
  CampaignOptions o;
  o.kernels = {{&cpu_kernel.k, "builtin"}};
  o.cases = 1000;
  const Report r = run_campaign(o, runner);
  EXPECT_EQ(r.run.stop_reason, "gpu lost");
  EXPECT_GT(r.run.cases, 0);
  EXPECT_LT(r.run.cases, 40) << "the case that met the loss was the last";
  EXPECT_EQ(cases_of(r, "planted.cpu"), r.run.cases);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_EQ(r.errors.back(), campaign_stop_note(r.run.cases, kGone));
}

// A correct "mutant" would survive its gate; cut short by a lost GPU it
// proved nothing either way: untested, never a survivor.
TEST_F(GpuLost, MutantGateCallsACampaignCutByALossUntested) {
  lose_gpu_at_call(40);
  MutantGateOptions o;
  o.budget_cases = 1000;
  const MutantGateResult g = run_mutant_gate({{&cpu_kernel.k, "mutant"}}, o, runner);
  ASSERT_EQ(g.rows.size(), 1u);
  EXPECT_TRUE(g.rows[0].untested);
  EXPECT_FALSE(g.rows[0].killed);
  EXPECT_EQ(g.rows[0].untested_reason, std::string("the GPU was lost: ") + kGone);
  EXPECT_EQ(g.survived, 0);
  EXPECT_EQ(g.untested, 1);
}

TEST_F(GpuLost, AuditStopsWithANoteInEveryMatrix) {
  AuditOptions o;
  o.kernels = {{&gpu_kernel.k, "builtin"}, {&cpu_kernel.k, "builtin"}};
  o.time_s = 30;  // a fuzz phase would follow the sweep: it must not
  const Report r = run_audit(o, runner);
  EXPECT_EQ(r.run.stop_reason, "gpu lost");
  ASSERT_EQ(r.audits.size(), 2u);
  const std::string note = fmt::format(
      "stopped: the GPU was lost after 0 cells: {}; the cells since then were not run", no_device);
  for (const ReportAudit& a : r.audits) {
    ASSERT_FALSE(a.notes.empty()) << a.kernel;
    EXPECT_EQ(a.notes.back(), note) << a.kernel;
    EXPECT_EQ(std::count(a.rows.begin(), a.rows.end(), "fuzz"), 0) << "no fuzz phase after the loss";
  }
  // The GPU kernel's cells of the chunk in flight were dropped, not
  // reported `unsupported`; the CPU kernel's stay.
  EXPECT_TRUE(r.audits[0].cells.empty());
  EXPECT_TRUE(r.audits[0].unsupported_reasons.empty());
  EXPECT_FALSE(r.audits[1].cells.empty());
  EXPECT_EQ(cases_of(r, "planted.gpu"), 0);
  EXPECT_GT(cases_of(r, "planted.cpu"), 0);
  // The summary shows the note as it is, not as a convention difference.
  bool shown = false;
  for (const std::string& line : audit_summary(r)) shown |= line == "  " + note;
  EXPECT_TRUE(shown);
}

TEST_F(GpuLost, AuditStopsAtTheNextCellAfterALossMidSweep) {
  lose_gpu_at_call(3);
  AuditOptions o;
  o.kernels = {{&cpu_kernel.k, "builtin"}};
  o.time_s = 30;
  const Report r = run_audit(o, runner);
  EXPECT_EQ(r.run.stop_reason, "gpu lost");
  ASSERT_EQ(r.audits.size(), 1u);
  ASSERT_FALSE(r.audits[0].notes.empty());
  // jobs 1: the third cell's call met the loss and ran whole; the sweep stops before the fourth.
  EXPECT_EQ(r.audits[0].notes.back(),
            fmt::format("stopped: the GPU was lost after 3 cells: {}; the cells since then were not run", kGone));
  EXPECT_EQ(r.run.cases, 3);
}

TEST_F(GpuLost, ConventionsStopAndSayHowFarTheyGot) {
  const ConventionTable t = probe_conventions({{&cpu_kernel.k, "builtin"}, {&gpu_kernel.k, "builtin"}}, runner);
  EXPECT_EQ(t.gpu_lost, no_device);
  EXPECT_EQ(t.probes_before_loss, 0u) << "the first probe met the loss";
  EXPECT_EQ(t.probes.size(), 1u) << "no probe after the loss";
}

TEST_F(GpuLost, ConventionsWithoutALossSayNothing) {
  gpu::reset_gpu_record_for_tests();  // never seen: a machine without a GPU
  const ConventionTable t = probe_conventions({{&gpu_kernel.k, "builtin"}}, runner);
  EXPECT_EQ(t.gpu_lost, "");
  EXPECT_EQ(t.probes_before_loss, convention_probes().size());
  EXPECT_FALSE(t.any_ran()) << "every cell `unsupported`: nothing ran";
}

}  // namespace
}  // namespace afz
