// The in-flight record (harness/campaign/in_flight.h): while a sweep's case
// runs, the file names it with the --cells slot that runs it alone; a sweep
// that ends normally leaves no case listed.
#include <gtest/gtest.h>

#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "harness/campaign/audit.h"
#include "harness/campaign/in_flight.h"
#include "tests/harness/planted_kernel.h"
#include "tests/temp_dir.h"

namespace afz {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(InFlightLog, ListsWhatRunsInOrderAndForgetsWhatFinished) {
  testing::TempDir dir("in-flight-log");
  std::filesystem::create_directories(dir.path);
  const std::string path = dir.str() + "/in_flight.txt";
  InFlightLog log(path, "# header\n");
  EXPECT_EQ(read_file(path), "# header\n");
  log.started(7, "--cells 7-8  seven");
  log.started(3, "--cells 3-4  three");
  EXPECT_EQ(read_file(path), "# header\n--cells 3-4  three\n--cells 7-8  seven\n");
  log.finished(3);
  EXPECT_EQ(read_file(path), "# header\n--cells 7-8  seven\n");
  EXPECT_EQ(log.text(), read_file(path));
}

TEST(InFlightLog, TheHistoryKeepsEveryStartAndEndWithItsUtcTime) {
  testing::TempDir dir("in-flight-history");
  std::filesystem::create_directories(dir.path);
  const std::string history = dir.str() + "/in_flight_history.txt";
  {
    InFlightLog log(dir.str() + "/in_flight.txt", "# header\n", history);
    log.started(3, "--cells 3-4  three");
    log.started(7, "--cells 7-8  seven");
    log.finished(3);
    log.finished(42);  // never started: no line
  }
  std::istringstream lines(read_file(history));
  std::vector<std::string> got;
  for (std::string line; std::getline(lines, line);) got.push_back(line);
  ASSERT_EQ(got.size(), 3u) << read_file(history);
  const char* want[] = {" start --cells 3-4  three", " start --cells 7-8  seven", " end   --cells 3-4  three"};
  for (size_t i = 0; i < got.size(); ++i) {
    // 2026-12-02T13:05:01.123456Z: 27 characters, then the event.
    ASSERT_GT(got[i].size(), 27u);
    EXPECT_EQ(got[i][4], '-');
    EXPECT_EQ(got[i][10], 'T');
    EXPECT_EQ(got[i][19], '.');
    EXPECT_EQ(got[i][26], 'Z');
    EXPECT_EQ(got[i].substr(27), want[i]);
  }
}

TEST(InFlightLog, WithoutAPathItKeepsTheListInMemoryOnly) {
  InFlightLog log("", "");
  log.started(1, "one");
  EXPECT_EQ(log.text(), "one\n");
}

TEST(InFlightLog, AnAuditListsEachCaseWhileItsKernelRuns) {
  testing::TempDir dir("in-flight-audit");
  std::filesystem::create_directories(dir.path);
  const std::string path = dir.str() + "/in_flight.txt";
  testing::PlantedKernel k{"planted.watcher"};
  std::mutex mu;
  std::vector<std::string> seen;  // the record as each run found it
  k.defect = [&](const afz_problem&, int b) {
    if (b == 0) {
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back(read_file(path));
    }
    return false;
  };
  AuditOptions o;
  o.kernels = {{&k.k, "builtin"}};
  o.time_s = 0;  // the sweep only
  o.first_cell = 10;
  o.end_cell = 14;
  o.in_flight_path = path;
  const Runner runner(RunOptions{});
  const Report r = run_audit(o, runner);
  ASSERT_FALSE(seen.empty());
  // One job: exactly one case listed during each run, one of the range's slots.
  for (const std::string& text : seen) {
    const size_t at = text.find("\n--cells ");
    ASSERT_NE(at, std::string::npos) << text;
    EXPECT_EQ(text.find("\n--cells ", at + 1), std::string::npos) << text;
    const int slot = std::stoi(text.substr(at + 9));
    EXPECT_GE(slot, 10);
    EXPECT_LT(slot, 14);
    EXPECT_NE(text.find(" case 0"), std::string::npos) << text;
  }
  EXPECT_EQ(read_file(path).find("\n--cells "), std::string::npos) << "a finished sweep lists nothing";
  EXPECT_EQ(r.run.cases, 4);
}

}  // namespace
}  // namespace afz
