// The gate `--confirm-alone` runs its repros through: shared jobs side by
// side, a job that may fault with nothing beside it.
#include "harness/campaign/exclusive_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace afz {
namespace {

using namespace std::chrono_literals;

// Polls until `done` or 10 s pass; whether it came.
template <class Done>
bool eventually(Done done) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(ExclusiveGate, SharedJobsRunSideBySide) {
  ExclusiveGate gate;
  std::atomic<int> inside{0};
  std::atomic<bool> met[2] = {false, false};
  auto job = [&](int i) {
    const ExclusiveGate::Pass pass(gate, false);
    ++inside;
    met[i] = eventually([&] { return inside.load() == 2; });
  };
  std::thread a(job, 0), b(job, 1);
  a.join(), b.join();
  EXPECT_TRUE(met[0] && met[1]);
}

TEST(ExclusiveGate, AnExclusiveJobWaitsForTheRunningOnesAndNoNewOneStartsBesideIt) {
  ExclusiveGate gate;
  std::mutex mu;
  std::vector<std::string> entered;
  auto log = [&](const char* who) {
    const std::lock_guard<std::mutex> lock(mu);
    entered.push_back(who);
  };
  gate.enter(false);  // a repro running
  std::thread exclusive([&] {
    const ExclusiveGate::Pass pass(gate, true);
    log("exclusive");
  });
  // EXPECT, not ASSERT: returning here would leave the thread unjoined.
  EXPECT_TRUE(eventually([&] { return gate.exclusive_waiting(); }));
  std::thread later([&] {
    const ExclusiveGate::Pass pass(gate, false);
    log("later");
  });
  std::this_thread::sleep_for(50ms);
  {
    const std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(entered.empty());  // neither beside the running one
  }
  gate.leave(false);
  exclusive.join(), later.join();
  EXPECT_EQ(entered, (std::vector<std::string>{"exclusive", "later"}));
}

TEST(ExclusiveGate, NothingEverRunsBesideAnExclusiveJob) {
  ExclusiveGate gate;
  std::atomic<int> shared{0}, exclusive{0}, broken{0};
  auto worker = [&](int t) {
    for (int j = 0; j < 200; ++j) {
      const bool alone = (j * 7 + t) % 5 == 0;
      const ExclusiveGate::Pass pass(gate, alone);
      if (alone) {
        if (++exclusive != 1 || shared.load() != 0) ++broken;
        std::this_thread::sleep_for(50us);
        --exclusive;
      } else {
        ++shared;
        if (exclusive.load() != 0) ++broken;
        std::this_thread::sleep_for(50us);
        --shared;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(broken.load(), 0);
}

}  // namespace
}  // namespace afz
