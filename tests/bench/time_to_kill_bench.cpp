// Time to kill each mutant of the zoo: the gate's campaign (default
// generator mix, one job, no corpus) until the first failure, minimization
// excluded, over campaign seeds 1..S (S = the benchmark's argument: 3, or
// ATTNFUZZ_TTK_SEEDS).  One benchmark per mutant: its manual time is the
// mean time to kill, with the median and worst over the seeds and the
// median case count as counters.  The last benchmark, TimeToKill/summary,
// reports the median and worst over every (mutant, seed), the median of the
// per-mutant medians and the worst of them (issue 16's target on the 2-core
// CI machine: worst_median_s under 2 s).
//
//   build-x/tests/time_to_kill_bench                            every mutant, 3 seeds, then the summary
//   ATTNFUZZ_TTK_SEEDS=10 build-x/tests/time_to_kill_bench      10 seeds
//   build-x/tests/time_to_kill_bench --benchmark_filter='acc|summary'   one mutant
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness/campaign/mutant_gate.h"
#include "kernels/mutants/mutants.h"

namespace afz {
namespace {

// Seeds per mutant: the median of three is the gate's target measure.
constexpr int kDefaultSeeds = 3;
int seeds() {
  const char* env = std::getenv("ATTNFUZZ_TTK_SEEDS");
  const int n = env ? std::atoi(env) : 0;
  return n > 0 ? n : kDefaultSeeds;
}
constexpr int64_t kBudgetCases = 5000;
constexpr double kBudgetSeconds = 60;

struct Tally {
  std::vector<double> all;            // every (mutant, seed) kill
  std::vector<double> mutant_medians;  // one per mutant
  std::vector<std::string> survivors;  // "mutant@seed"
};
Tally& tally() {
  static Tally t;
  return t;
}

const Runner& runner() {
  static const Runner r{RunOptions{}};
  return r;
}

void time_to_kill(benchmark::State& state, const MutantInfo* m) {
  MutantGateOptions o;
  o.budget_cases = kBudgetCases;
  o.time_per_mutant_s = kBudgetSeconds;
  o.minimize_options.max_runs = 0;  // the kill is what is timed; a repro is not needed here
  for (auto _ : state) {
    std::vector<double> times, cases;
    for (int64_t seed = 1; seed <= state.range(0); ++seed) {
      o.seed = uint64_t(seed);
      const MutantGateResult r = run_mutant_gate({{&m->kernel, std::string(kMutantOrigin)}}, o, runner());
      const MutantRow& row = r.rows.front();
      if (!row.killed) {
        tally().survivors.push_back(std::string(m->kernel.name) + "@" + std::to_string(seed));
        continue;
      }
      times.push_back(row.seconds);
      cases.push_back(double(row.cases));
    }
    double total = 0;
    for (double t : times) total += t;
    state.SetIterationTime(times.empty() ? 0 : total / double(times.size()));
    state.counters["killed"] = double(times.size());
    state.counters["median_s"] = median_of(times);
    state.counters["worst_s"] = times.empty() ? 0 : *std::max_element(times.begin(), times.end());
    state.counters["median_cases"] = median_of(cases);
    tally().all.insert(tally().all.end(), times.begin(), times.end());
    if (!times.empty()) tally().mutant_medians.push_back(median_of(times));
    if (times.size() < size_t(state.range(0))) state.SkipWithError("survived some seeds");
  }
}

void summary(benchmark::State& state) {
  for (auto _ : state) {
  }
  const Tally& t = tally();
  state.counters["kills"] = double(t.all.size());
  state.counters["survivals"] = double(t.survivors.size());
  state.counters["median_s"] = median_of(t.all);
  state.counters["worst_s"] = t.all.empty() ? 0 : *std::max_element(t.all.begin(), t.all.end());
  state.counters["median_of_medians_s"] = median_of(t.mutant_medians);
  state.counters["worst_median_s"] =
      t.mutant_medians.empty() ? 0 : *std::max_element(t.mutant_medians.begin(), t.mutant_medians.end());
  std::string label;
  for (const std::string& s : t.survivors) label += (label.empty() ? "survived: " : ", ") + s;
  state.SetLabel(label);
}

const bool kRegistered = [] {
  for (const MutantInfo& m : cpu_mutants())
    benchmark::RegisterBenchmark(("TimeToKill/" + std::string(m.kernel.name)).c_str(), time_to_kill, &m)
        ->UseManualTime()
        ->Arg(seeds())
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("TimeToKill/summary", summary)->Iterations(1);
  return true;
}();

}  // namespace
}  // namespace afz
