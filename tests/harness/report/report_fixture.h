// Real reports for the report tests: short seeded campaigns through the
// campaign API against a correct CPU kernel and a one-defect mutant of it
// (the accumulator is never rescaled), so failures, minimized repros and
// error statistics all come from the real pipeline.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <unistd.h>

#include "harness/campaign/campaign.h"
#include "harness/report/report_views.h"
#include "kernels/cpu/common.h"
#include "kernels/cpu/tiled.h"

namespace afz::testing {

// The mutant zoo's first defect (issue 3): A is not rescaled when the max grows.
struct NoAccRescaleSteps : cpu::Fa2Steps {
  template <typename T>
  static void rescale_acc(T*, int, T) {}
};

inline const afz_kernel& correct_kernel() {
  static const cpu::TiledConfig config{16, 16};
  static const afz_kernel k = cpu::emulating_kernel("test.tiled16", "FA2 tiled, Br = Bc = 16",
                                                    cpu::tiled_entry<>, &config);
  return k;
}

inline const afz_kernel& mutant_kernel() {
  static const cpu::TiledConfig config{16, 16};
  static const afz_kernel k = cpu::emulating_kernel("test.no_acc_rescale", "FA2 tiled without rescaling A",
                                                    cpu::tiled_entry<NoAccRescaleSteps>, &config);
  return k;
}

// Classes whose cases stay small (no 8K-key flat rows), so a few dozen
// cases take well under a second.
inline constexpr const char* kQuickClasses = "late_max=3,masking=1,shapes=1,add_mask=1";

inline CampaignOptions quick_campaign(int64_t first_case, int64_t cases, int jobs = 1) {
  CampaignOptions o;
  o.kernels = {{&correct_kernel(), "builtin"}, {&mutant_kernel(), "mutant"}};
  o.seed = 7;
  o.first_case = first_case;
  o.cases = cases;
  o.jobs = jobs;
  std::string error;
  o.mix = *GeneratorMix::parse(kQuickClasses, &error);
  // Budgets by runs only: a time budget would make minimization, and so
  // the report, depend on the machine's speed.
  o.minimize_options.max_runs = 60;
  o.minimize_options.max_seconds = 1e9;
  o.command = "report tests";
  return o;
}

// corpus_dir: where repros are saved (then every failure has a case file
// and an `attnfuzz repro` command); "" saves nothing.
inline Report run_quick_campaign(int64_t first_case, int64_t cases, int jobs = 1, const std::string& corpus_dir = "") {
  const Runner runner(RunOptions{});
  CampaignOptions o = quick_campaign(first_case, cases, jobs);
  o.corpus_dir = corpus_dir;
  return run_campaign(o, runner);
}

// A fresh empty folder under the system's temp dir.
inline std::string temp_folder(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("attnfuzz-" + name + "-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                    "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace afz::testing
