// cudnn.sdpa [bwd] in the harness: registered as the backward of the forward
// kernel of the same name (so `--kernel cudnn.sdpa --pass bwd` pairs them),
// with the library version found at run time; and, on a machine with a GPU,
// the case files of tests/kernels/cudnn/cases judged against the backward
// oracle (cpu.bwd.fa2's semantics), as `attnfuzz run --kernel cudnn.sdpa
// --pass bwd CASE` does.  The GPU part skips without a GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "harness/case/case_io.h"
#include "harness/run/backward_runner.h"
#include "harness/run/gpu/gpu_run.h"
#include "kernels/cudnn/cudnn_api.h"
#include "kernels/cudnn/cudnn_sdpa_bwd_kernel.h"
#include "kernels/registry.h"
#include "oracles/backward_oracle.h"

namespace afz {
namespace {

TEST(CudnnSdpaBwdRegistry, PairsWithTheForwardOfTheSameNameAndRecordsTheLibrary) {
  const KernelRegistry r = KernelRegistry::with_builtins();
  const BackwardKernelEntry* e = r.backward_entry("cudnn.sdpa");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->kernel, &cudnn::cudnn_sdpa_backward_kernel());
  EXPECT_EQ(e->origin, "builtin");
  EXPECT_EQ(e->version, cudnn_library_version());
  EXPECT_NE(r.find("cudnn.sdpa"), nullptr);  // the forward it pairs with
  EXPECT_EQ(r.backward_entry("cudnn.sdpa.raw"), nullptr);
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CudnnSdpaBwdOnGpu, CaseFilesPassAgainstTheBackwardOracle) {
  if (const std::string no_gpu = gpu::gpu_unavailable_reason(); !no_gpu.empty()) GTEST_SKIP() << no_gpu;
  if (!cudnn::cudnn_library().loaded) GTEST_SKIP() << cudnn::cudnn_library().describe();
  const auto fast = make_fast_backward_oracle();
  const auto precise = make_escalation_backward_oracle();
  const std::filesystem::path dir = std::filesystem::path(ATTNFUZZ_SOURCE_DIR) / "tests/kernels/cudnn/cases";
  int passed = 0, files = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().extension() != ".case") continue;
    ++files;
    ParseError err;
    const std::optional<Case> c = parse_case(read_file(f.path()), &err);
    ASSERT_TRUE(c) << err.format(f.path().string());
    const BackwardOutcome o = run_backward_case(cudnn::cudnn_sdpa_backward_kernel(), *c, *fast, precise.get());
    EXPECT_FALSE(is_failure(o.verdict.cls))
        << f.path().filename() << ": " << verdict_name(o.verdict.cls) << ": " << o.verdict.detail;
    passed += o.verdict.cls == VerdictClass::Pass;
    std::printf("%s: %s %s\n", f.path().filename().c_str(), std::string(verdict_name(o.verdict.cls)).c_str(),
                o.verdict.detail.c_str());
  }
  EXPECT_GT(files, 0);
  EXPECT_GT(passed, 0) << "every case was declined: cuDNN ran none of them";
}

}  // namespace
}  // namespace afz
