// The GPU oracle tier's time, and the verdict's, at FlashAttention's
// benchmark sizes: bf16, d = dv = 128, 16 heads, batch = 16384 / N (so
// batch x heads x N = 16 x 16K query rows at every N), N = 512, 2K, 8K and
// 16K keys, causal (bottom-right, the generators' default) and not.
//
// Per case: materializing the inputs (not timed), the GPU tier's compute
// (upload, kernel, download: the `oracle` counter, seconds), a kernel output
// equal to the oracle's value correctly rounded to bf16 (not timed), then
// judge() with MPFR behind it (the `verdict` counter, seconds; on the CPU:
// the verdict has not moved to the GPU yet).  The fast CPU tier is timed at
// N = 512 only (`fast_oracle`): it takes minutes at 16K.  Without a device
// each case is skipped with the reason.  Run (under 3 minutes on an H200):
//   build/tests/gpu_oracle_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <string>

#include "harness/case/materialize.h"
#include "harness/judge/verdict.h"
#include "oracles/oracle.h"
#include "tests/harness/test_kernels.h"

namespace afz {
namespace {

constexpr int kHeads = 16;
constexpr int kTokens = 16384;  // batch x N, as FlashAttention's benchmark
constexpr int kHeadDim = 128;
constexpr uint64_t kSeed = 15;
constexpr int kFastTierMaxKeys = 512;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Case bench_case(int n, bool causal) {
  Case c;
  c.batch = kTokens / n;
  c.heads_q = c.heads_kv = kHeads;
  c.seqlens_q.assign(size_t(c.batch), n);
  c.seqlens_k.assign(size_t(c.batch), n);
  c.head_dim = c.head_dim_v = kHeadDim;
  c.in_dtype = c.out_dtype = AFZ_BF16;
  if (causal) c.has_window = true, c.window_left = -1, c.window_right = 0;
  c.seed = kSeed;
  return c;
}

void BM_GpuOracleAndVerdict(benchmark::State& state) {
  const int n = int(state.range(0));
  const bool causal = state.range(1) != 0;
  std::string why;
  const auto gpu = make_gpu_oracle(&why);
  if (!gpu) {
    state.SkipWithError(why.c_str());
    return;
  }
  const Case c = bench_case(n, causal);
  Materialized m(c);
  const auto escalate = make_escalation_oracle();
  double oracle_s = 0, verdict_s = 0, fast_s = 0;
  Verdict v;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    OracleResult r = gpu->compute(m.problem());
    oracle_s += seconds_since(t0);
    testing::FakeKernel kernel{c.in_dtype, c.out_dtype};
    kernel.oracle = &r;
    m.poison_outputs();
    char err[64];
    kernel.k.run(&kernel.k, &m.problem(), err, sizeof err);
    t0 = std::chrono::steady_clock::now();
    v = judge(kernel.k, m, r, escalate.get());
    verdict_s += seconds_since(t0);
    if (n <= kFastTierMaxKeys) {
      t0 = std::chrono::steady_clock::now();
      benchmark::DoNotOptimize(make_fast_oracle()->compute(m.problem()).o.data());
      fast_s += seconds_since(t0);
    }
  }
  const double iters = double(state.iterations());
  state.counters["oracle"] = oracle_s / iters;
  state.counters["verdict"] = verdict_s / iters;
  if (n <= kFastTierMaxKeys) state.counters["fast_oracle"] = fast_s / iters;
  state.counters["escalated"] = double(v.escalated_rows);
  state.counters["elements"] = double(v.elements);
  state.SetLabel(std::string(verdict_name(v.cls)) + (causal ? " causal" : ""));
}

BENCHMARK(BM_GpuOracleAndVerdict)
    ->ArgsProduct({{512, 2048, 8192, 16384}, {0, 1}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace afz
