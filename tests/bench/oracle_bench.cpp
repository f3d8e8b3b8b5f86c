// Oracle throughput: MPFR (256 bits), Boost (cpp_bin_float, 256 bits) and the
// fast tier, at N = 256, 1024, 4096 keys and head dims 64, 128 (dv = d), bf16
// inputs, no mask.
//
// Every tier computes a block of query rows against all N keys through
// compute_rows (the multiprecision tiers are ~100x slower than the fast tier,
// so their block is smaller); the fast tier is also timed on the whole N x N
// problem.  Counters: rows/s, and keys/s = query-key pairs per second (rows
// times N), which compares tiers and shapes directly.  Run:
//   build/tests/oracle_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cmath>
#include <memory>
#include <vector>

#include "oracles/oracle.h"
#include "tests/oracles/problem_builder.h"

namespace afz {
namespace {

constexpr int kPreciseRows = 2;  // query rows per MPFR / Boost iteration
constexpr int kFastRows = 64;    // query rows per fast-tier block iteration
constexpr uint64_t kSeed = 2024;

std::unique_ptr<test::TestProblem> make_problem(int n, int d) {
  test::Shape s;
  s.d = d, s.dv = d, s.seqlens_q = {n}, s.seqlens_k = {n}, s.dtype = AFZ_BF16;
  auto t = std::make_unique<test::TestProblem>(s);
  t->fill_uniform(kSeed, 2, 2, 1);  // scores of a few units: typical, most weights non-negligible
  t->set_scale(float(1 / std::sqrt(double(d))));
  return t;
}

void report(benchmark::State& state, int64_t rows_per_iteration, int n) {
  const double rows = double(rows_per_iteration) * double(state.iterations());
  state.counters["rows/s"] = benchmark::Counter(rows, benchmark::Counter::kIsRate);
  state.counters["keys/s"] = benchmark::Counter(rows * n, benchmark::Counter::kIsRate);
}

void run_block(benchmark::State& state, const Oracle* oracle, int rows) {
  const int n = int(state.range(0)), d = int(state.range(1));
  if (!oracle) {
    state.SkipWithError("MPFR was not built here");
    return;
  }
  auto t = make_problem(n, d);
  const afz_problem p = t->problem();
  OracleResult out;
  out.resize(p.batch, p.heads_q, p.max_seqlen_q, p.head_dim_v);
  std::vector<int64_t> block;
  for (int i = 0; i < rows; ++i) block.push_back(int64_t(i) * n / rows);  // spread over the sequence
  for (auto _ : state) {
    oracle->compute_rows(p, block, out);
    benchmark::DoNotOptimize(out.o.data());
  }
  report(state, rows, n);
}

void BM_Mpfr(benchmark::State& state) {
  const auto oracle = make_mpfr_oracle();
  run_block(state, oracle.get(), kPreciseRows);
}

void BM_Boost(benchmark::State& state) {
  const auto oracle = make_boost_oracle();
  run_block(state, oracle.get(), kPreciseRows);
}

void BM_FastBlock(benchmark::State& state) {
  const auto oracle = make_fast_oracle();
  run_block(state, oracle.get(), kFastRows);
}

void BM_FastFullProblem(benchmark::State& state) {
  const int n = int(state.range(0)), d = int(state.range(1));
  auto t = make_problem(n, d);
  const afz_problem p = t->problem();
  const auto oracle = make_fast_oracle();
  for (auto _ : state) {
    OracleResult r = oracle->compute(p);
    benchmark::DoNotOptimize(r.o.data());
  }
  report(state, n, n);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int n : {256, 1024, 4096})
    for (int d : {64, 128}) b->Args({n, d});
  b->ArgNames({"N", "d"})->Unit(benchmark::kMillisecond);
}

constexpr double kMinSeconds = 0.5;
BENCHMARK(BM_Mpfr)->Apply(shapes)->MinTime(kMinSeconds);
BENCHMARK(BM_Boost)->Apply(shapes)->MinTime(kMinSeconds);
BENCHMARK(BM_FastBlock)->Apply(shapes)->MinTime(kMinSeconds);
// One iteration of the largest whole problem already takes seconds.
BENCHMARK(BM_FastFullProblem)->Apply(shapes)->Iterations(1);

}  // namespace
}  // namespace afz
