// A stop request (what SIGINT/SIGTERM set) ends a campaign or an audit at a
// case boundary with its report intact and saying why it stopped.
#include "harness/campaign/stop_request.h"

#include <gtest/gtest.h>

#include <csignal>

#include "harness/campaign/audit.h"
#include "harness/campaign/campaign.h"
#include "tests/harness/planted_kernel.h"

namespace afz {
namespace {

struct StopRequestTest : ::testing::Test {
  testing::PlantedKernel correct{"planted.correct"};
  Runner runner{RunOptions{}};
  void TearDown() override { clear_stop_request(); }
};

TEST_F(StopRequestTest, CampaignStopsBeforeItsNextCaseWithReasonSignal) {
  CampaignOptions o;
  o.kernels = {{&correct.k, "builtin"}};
  o.cases = 1000;
  for (int jobs : {1, 2}) {
    o.jobs = jobs;
    request_stop();
    const Report r = run_campaign(o, runner);
    EXPECT_EQ(r.run.stop_reason, "signal") << jobs;
    EXPECT_EQ(r.run.cases, 0) << jobs;
  }
}

TEST_F(StopRequestTest, AuditNotesTheCellsNotRun) {
  AuditOptions o;
  o.kernels = {{&correct.k, "builtin"}};
  o.time_s = 30;
  request_stop();
  const Report r = run_audit(o, runner);
  EXPECT_EQ(r.run.stop_reason, "signal");
  ASSERT_EQ(r.audits.size(), 1u);
  ASSERT_FALSE(r.audits[0].notes.empty());
  EXPECT_EQ(r.audits[0].notes.back().rfind("sweep stopped by a signal after 0 of ", 0), 0u) << r.audits[0].notes.back();
}

TEST_F(StopRequestTest, SigtermSetsTheRequestOnce) {
  install_stop_handlers();
  EXPECT_FALSE(stop_requested());
  std::raise(SIGTERM);
  EXPECT_TRUE(stop_requested());
  // The handler gave SIGTERM back its default action: put ours back for
  // the rest of this test binary's life rather than leave it lethal.
  install_stop_handlers();
}

}  // namespace
}  // namespace afz
