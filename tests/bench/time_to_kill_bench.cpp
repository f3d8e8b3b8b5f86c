// Time to kill each mutant of the zoo: the gate's campaign (default
// generator mix, seed 1, one job, no corpus) until the first failure,
// minimization excluded.  One benchmark per mutant, its manual time being
// the time to kill, with the case count as a counter; the last benchmark,
// TimeToKill/summary, reports the median and worst over the zoo (the issue's
// targets on the 2-core CI machine: median under 1 s, none over 10 s).
//
//   build-x/tests/time_to_kill_bench                      every mutant, then the summary
//   build-x/tests/time_to_kill_bench --benchmark_filter=acc   one mutant
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <vector>

#include "harness/mutant_gate.h"
#include "kernels/mutants/mutants.h"

namespace afz {
namespace {

constexpr uint64_t kSeed = 1;
constexpr int64_t kBudgetCases = 5000;
constexpr double kBudgetSeconds = 60;

std::vector<double>& kill_times() {
  static std::vector<double> times;
  return times;
}
std::vector<std::string>& survivors() {
  static std::vector<std::string> names;
  return names;
}

const Runner& runner() {
  static const Runner r{RunOptions{}};
  return r;
}

void time_to_kill(benchmark::State& state, const MutantInfo* m) {
  MutantGateOptions o;
  o.seed = kSeed;
  o.budget_cases = kBudgetCases;
  o.time_per_mutant_s = kBudgetSeconds;
  o.minimize_options.max_runs = 0;  // the kill is what is timed; a repro is not needed here
  for (auto _ : state) {
    const MutantGateResult r = run_mutant_gate({{&m->kernel, std::string(kMutantOrigin)}}, o, runner());
    const MutantRow& row = r.rows.front();
    state.SetIterationTime(row.seconds);
    state.counters["cases"] = double(row.cases);
    state.counters["killed"] = row.killed ? 1 : 0;
    if (row.killed) {
      kill_times().push_back(row.seconds);
      state.SetLabel(std::string(verdict_name(row.kill->verdict)) + " via " + row.kill->generator);
    } else {
      survivors().push_back(m->kernel.name);
      state.SkipWithError("survived");
    }
  }
}

void summary(benchmark::State& state) {
  for (auto _ : state) {
  }
  const std::vector<double>& t = kill_times();
  state.counters["killed"] = double(t.size());
  state.counters["survived"] = double(survivors().size());
  state.counters["median_s"] = median_of(t);
  state.counters["worst_s"] = t.empty() ? 0 : *std::max_element(t.begin(), t.end());
}

const bool kRegistered = [] {
  for (const MutantInfo& m : cpu_mutants())
    benchmark::RegisterBenchmark(("TimeToKill/" + std::string(m.kernel.name)).c_str(), time_to_kill, &m)
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("TimeToKill/summary", summary)->Iterations(1);
  return true;
}();

}  // namespace
}  // namespace afz
