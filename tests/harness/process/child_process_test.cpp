// run_child: exit status and output come back; a deadline kills the child's
// whole group, and a grandchild that keeps the output pipe open does not
// hold the caller past the child's own exit.
#include "harness/process/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace afz {
namespace {

ChildRun shell(const std::string& script, double timeout_s) { return run_child({"/bin/sh", "-c", script}, timeout_s); }

TEST(ChildProcess, ExitStatusAndBothStreams) {
  const ChildRun r = shell("echo out; echo err >&2; exit 3", 10);
  ASSERT_TRUE(r.started) << r.error;
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.signal, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.output.find("out\n"), std::string::npos);
  EXPECT_NE(r.output.find("err\n"), std::string::npos);
}

TEST(ChildProcess, ADeadlineKillsIt) {
  const ChildRun r = shell("echo started; sleep 30", 0.5);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_EQ(r.output, "started\n");
  EXPECT_LT(r.seconds, 10);
}

// A repro's GPU worker is such a grandchild: it inherits the pipe.
TEST(ChildProcess, AGrandchildHoldingThePipeDoesNotHoldTheCaller) {
  const ChildRun r = shell("sleep 30 & echo parent done", 20);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "parent done\n");
  EXPECT_LT(r.seconds, 10);
}

TEST(ChildProcess, AMissingProgramIsAnErrorNotACrash) {
  const ChildRun r = run_child({"/nonexistent/attnfuzz"}, 5);
  EXPECT_FALSE(r.started);
  EXPECT_NE(r.error.find("/nonexistent/attnfuzz"), std::string::npos);
  EXPECT_FALSE(run_child({}, 5).started);
}

TEST(ChildProcess, ChattyOutputIsCutNotUnbounded) {
  const ChildRun r = shell("head -c 3000000 /dev/zero", 20);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output.size(), kMaxChildOutput);
}

}  // namespace
}  // namespace afz
