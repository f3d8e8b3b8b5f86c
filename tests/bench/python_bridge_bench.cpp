// The Python bridge's own cost per call (kernels/python): a kernel that does
// nothing (tests/python/bridge_kernels.py:noop) on a small case, so the time
// is the bridge's alone: staging the spans into shared memory, the request,
// building the numpy views in the worker, the call, the reply, copying O
// and LSE back.  Run:
//   build/tests/python_bridge_bench --benchmark_repetitions=5
// and read the median line.  BM_BridgeCall/torch: the same through DLPack
// torch views (runs only where the interpreter has torch).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "harness/case/case.h"
#include "harness/case/materialize.h"
#include "kernels/registry.h"

namespace afz {
namespace {

// Small, with every tensor a kernel sees: batch 2, GQA 4/2, 64 x 64, d 64, fp16, LSE.
constexpr const char* kSmallCase = R"(attnfuzz-case 1
batch 2
heads 4 2
seqlen_q 64
seqlen_k 64
head_dim 64
dtype fp16
causal bottom_right
seed 3
)";

const afz_kernel* load_noop(KernelRegistry& r, const char* name, benchmark::State& state) {
  setenv("ATTNFUZZ_PYTHON", ATTNFUZZ_TEST_PYTHON, 0);
  setenv("ATTNFUZZ_PYTHONPATH", ATTNFUZZ_SOURCE_DIR "/python", 0);
  std::string error;
  const std::string spec =
      std::string(ATTNFUZZ_PYTHON_PLUGIN) + "#" ATTNFUZZ_SOURCE_DIR "/tests/python/bridge_kernels.py:" + name;
  if (!r.load_library(spec, &error)) {
    state.SkipWithError(error.c_str());
    return nullptr;
  }
  return r.entries().back().kernel;
}

void bridge_call(benchmark::State& state, const char* target) {
  KernelRegistry registry;
  const afz_kernel* k = load_noop(registry, target, state);
  if (!k) return;
  ParseError parse_error;
  const Case c = *parse_case(kSmallCase, &parse_error);
  Materialized m(c);
  char error[512];
  for (auto _ : state) {
    const int rc = k->run(k, &m.problem(), error, sizeof error);
    if (rc != 0) {
      state.SkipWithError(error);
      break;
    }
  }
}

void BM_BridgeCall_numpy(benchmark::State& state) { bridge_call(state, "noop"); }
void BM_BridgeCall_torch(benchmark::State& state) { bridge_call(state, "noop_torch"); }
BENCHMARK(BM_BridgeCall_numpy)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BridgeCall_torch)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace afz
