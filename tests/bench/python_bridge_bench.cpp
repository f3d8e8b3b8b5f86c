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
#include <map>
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

const afz_kernel* load_noop(KernelRegistry& r, const char* name, std::string* error) {
  setenv("ATTNFUZZ_PYTHON", ATTNFUZZ_TEST_PYTHON, 0);
  setenv("ATTNFUZZ_PYTHONPATH", ATTNFUZZ_SOURCE_DIR "/python", 0);
  const std::string spec =
      std::string(ATTNFUZZ_PYTHON_PLUGIN) + "#" ATTNFUZZ_SOURCE_DIR "/tests/python/bridge_kernels.py:" + name;
  if (!r.load_library(spec, error)) return nullptr;
  return r.entries().back().kernel;
}

// The kernel and its worker, loaded once per process: each repetition of
// the benchmark reuses them, so the worker's start and the module's import
// (seconds for torch) are no per-call cost.
struct LoadedKernel {
  KernelRegistry registry;
  const afz_kernel* kernel = nullptr;
  std::string error;
};

LoadedKernel& loaded(const char* name) {
  static std::map<std::string, LoadedKernel> kernels;
  auto [it, fresh] = kernels.try_emplace(name);
  if (fresh) it->second.kernel = load_noop(it->second.registry, name, &it->second.error);
  return it->second;
}

void bridge_call(benchmark::State& state, const char* target) {
  LoadedKernel& l = loaded(target);
  if (!l.kernel) {
    state.SkipWithError(l.error.c_str());
    return;
  }
  const afz_kernel* k = l.kernel;
  ParseError parse_error;
  const Case c = *parse_case(kSmallCase, &parse_error);
  Materialized m(c);
  char error[512];
  // One call first, outside the timing: the worker's first call starts the
  // interpreter's side (imports, first views).
  if (k->run(k, &m.problem(), error, sizeof error) != 0) {
    state.SkipWithError(error);
    return;
  }
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
