// The GPU oracle tier's time, and the verdict's, at FlashAttention's
// benchmark sizes (a benchmark, not a test; a plain program so that it is
// carried to the H200 like attnfuzz_gpu_bench, without Google Benchmark):
// bf16, d = dv = 128, 16 heads, batch = 16384 / N (batch x heads x N =
// 16 x 16K query rows at every N), N = 512, 2K, 8K and 16K keys, causal
// (bottom-right, the generators' default) and not.
//
// Per shape: materializing the inputs (`inputs`), the GPU tier's compute
// (upload, kernel, download: `oracle`), a kernel output equal to the
// oracle's value correctly rounded to bf16 (not timed), then judge() with
// MPFR behind it (`verdict`: on the CPU, every element), and the same on
// the GPU (`verdict_gpu`: harness/judge/gpu_verdict.h, uploads included;
// `upload` is its share spent copying the outputs and the oracle's arrays
// up) and whether the two verdicts agree in every field (`agree`: yes, or
// the first field that differs).  The fast CPU tier
// is timed at N = 512 only (`fast`): it takes minutes at 16K.  Seconds, one
// run each.  Without a device it says why and exits 1.
//
//   attnfuzz_gpu_oracle_bench [--max-n N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "harness/case/materialize.h"
#include "harness/judge/gpu_verdict.h"
#include "harness/judge/verdict.h"
#include "harness/judge/verdict_compare.h"
#include "oracles/oracle.h"
#include "tests/harness/test_kernels.h"

namespace afz {
namespace {

constexpr int kHeads = 16;
constexpr int kTokens = 16384;  // batch x N, as FlashAttention's benchmark
constexpr int kHeadDim = 128;
constexpr uint64_t kSeed = 15;
constexpr int kFastTierMaxKeys = 512;
constexpr int kKeys[] = {512, 2048, 8192, 16384};

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

int run(int max_n) {
  std::string why;
  const auto gpu = make_gpu_oracle(&why);
  if (!gpu) {
    std::fprintf(stderr, "attnfuzz_gpu_oracle_bench: %s\n", why.c_str());
    return 1;
  }
  const auto escalate = make_escalation_oracle();
  std::printf("%6s %6s %5s %5s %9s %9s %9s %13s %9s %9s %12s %9s %-8s %s\n", "N", "causal", "batch", "heads", "inputs_s",
              "oracle_s", "verdict_s", "verdict_gpu_s", "upload_s", "fast_s", "elements", "escalated", "verdict", "agree");
  for (int n : kKeys) {
    if (n > max_n) continue;
    for (bool causal : {false, true}) {
      const Case c = bench_case(n, causal);
      auto t0 = std::chrono::steady_clock::now();
      Materialized m(c);
      const double inputs_s = seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
      OracleResult r = gpu->compute(m.problem());
      const double oracle_s = seconds_since(t0);
      testing::FakeKernel kernel{c.in_dtype, c.out_dtype};
      kernel.oracle = &r;
      m.poison_outputs();
      char err[64];
      kernel.k.run(&kernel.k, &m.problem(), err, sizeof err);
      OracleResult r_gpu = r;  // escalation rewrites rows: each verdict gets the same reference
      t0 = std::chrono::steady_clock::now();
      const Verdict v = judge(kernel.k, m, r, escalate.get());
      const double verdict_s = seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
      const std::unique_ptr<RowJudge> rows = make_gpu_row_judge(kernel.k, m, r_gpu, &why);
      if (!rows) throw std::runtime_error(why);
      const double upload_s = seconds_since(t0);
      const Verdict v_gpu = judge_by_rows(kernel.k, m, r_gpu, escalate.get(), {}, *rows);
      const double verdict_gpu_s = seconds_since(t0);
      const std::string difference = verdict_difference(v_gpu, v);
      double fast_s = -1;
      if (n <= kFastTierMaxKeys) {
        t0 = std::chrono::steady_clock::now();
        make_fast_oracle()->compute(m.problem());
        fast_s = seconds_since(t0);
      }
      std::printf("%6d %6s %5d %5d %9.3f %9.3f %9.3f %13.3f %9.3f %9.3f %12lld %9lld %-8s %s\n", n, causal ? "yes" : "no",
                  c.batch, c.heads_q, inputs_s, oracle_s, verdict_s, verdict_gpu_s, upload_s, fast_s,
                  (long long)v.elements, (long long)v.escalated_rows, std::string(verdict_name(v.cls)).c_str(),
                  difference.empty() ? "yes" : difference.c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace afz

int main(int argc, char** argv) {
  int max_n = 1 << 30;
  for (int a = 1; a < argc; ++a) {
    if (std::strcmp(argv[a], "--max-n") == 0 && a + 1 < argc) {
      max_n = std::atoi(argv[++a]);
    } else {
      std::fprintf(stderr, "usage: attnfuzz_gpu_oracle_bench [--max-n N]\n");
      return 2;
    }
  }
  try {
    return afz::run(max_n);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attnfuzz_gpu_oracle_bench: %s\n", e.what());
    return 1;
  }
}
