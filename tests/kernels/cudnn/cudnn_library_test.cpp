// Loading cuDNN (kernels/cudnn/cudnn_api): the library request, the failure
// messages, the version text, and cudnn.sdpa's declarations and refusal when
// no library loaded.  Runs with or without libcudnn.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "kernels/cudnn/cudnn_api.h"
#include "kernels/cudnn/cudnn_sdpa_kernel.h"
#include "tests/kernels/cudnn/sdpa_shapes.h"

namespace afz::cudnn {
namespace {

constexpr const char* kEnv = "ATTNFUZZ_CUDNN_LIB";

// Sets (or clears) the variable for one test and restores it after.
class ScopedEnv {
 public:
  explicit ScopedEnv(const char* value) {
    if (const char* old = std::getenv(kEnv)) old_ = old;
    if (value)
      setenv(kEnv, value, 1);
    else
      unsetenv(kEnv);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(kEnv, old_->c_str(), 1);
    else
      unsetenv(kEnv);
  }

 private:
  std::optional<std::string> old_;
};

TEST(CudnnLibrary, RequestIsTheEnvironmentOrTheSoname) {
  {
    ScopedEnv env(nullptr);
    EXPECT_EQ(cudnn_library_request(), "libcudnn.so.9");
  }
  {
    ScopedEnv env("");
    EXPECT_EQ(cudnn_library_request(), "libcudnn.so.9");
  }
  {
    ScopedEnv env("/opt/torch/lib/libcudnn.so.9");
    EXPECT_EQ(cudnn_library_request(), "/opt/torch/lib/libcudnn.so.9");
  }
}

TEST(CudnnLibrary, BogusPathFailsWithDlopensReason) {
  ScopedEnv env("/nonexistent/attnfuzz/libcudnn.so.9");
  const CudnnLibrary lib = load_cudnn(cudnn_library_request());
  EXPECT_FALSE(lib.loaded);
  EXPECT_EQ(lib.handle, nullptr);
  EXPECT_NE(lib.error.find("cannot dlopen '/nonexistent/attnfuzz/libcudnn.so.9'"), std::string::npos) << lib.error;
  EXPECT_NE(lib.error.find("No such file"), std::string::npos) << lib.error;
  EXPECT_NE(lib.error.find(kEnv), std::string::npos) << lib.error;
  EXPECT_EQ(lib.describe(), "cuDNN not loaded: " + lib.error);
  EXPECT_EQ(lib.error.find('\n'), std::string::npos);
}

TEST(CudnnLibrary, ALibraryThatIsNotCudnnIsRefusedByName) {
  const CudnnLibrary lib = load_cudnn("libm.so.6");
  EXPECT_FALSE(lib.loaded);
  EXPECT_NE(lib.error.find("has no cudnnGetVersion"), std::string::npos) << lib.error;
  EXPECT_NE(lib.error.find("libm"), std::string::npos) << lib.error;
}

TEST(CudnnLibrary, VersionText) {
  EXPECT_EQ(version_text(91900), "9.19.0");
  EXPECT_EQ(version_text(91400), "9.14.0");
  EXPECT_EQ(version_text(90100), "9.1.0");
  EXPECT_EQ(version_text(91002), "9.10.2");
  EXPECT_EQ(version_text(8907), "8.9.7");
}

TEST(CudnnLibrary, ProcessLibraryDescribesWhatItLoaded) {
  const CudnnLibrary& lib = cudnn_library();
  const std::string v = cudnn_library_version();
  EXPECT_EQ(v, lib.describe());
  if (!lib.loaded) GTEST_SKIP() << "libcudnn not loadable here: " << lib.error;
  EXPECT_GE(lib.version, kMinCudnnVersion);
  EXPECT_EQ(v, "cuDNN " + version_text(lib.version) + " (" + lib.path + ")");
  EXPECT_EQ(lib.path.front(), '/') << "the real file, not the soname: " << lib.path;
}

TEST(CudnnSdpaKernel, DeclaresItsCapabilitiesAndPrecision) {
  const afz_kernel& k = cudnn_sdpa_kernel();
  EXPECT_STREQ(k.name, "cudnn.sdpa");
  const uint32_t want = AFZ_CAP_CAUSAL_TOP_LEFT | AFZ_CAP_CAUSAL_BOTTOM_RIGHT | AFZ_CAP_WINDOW | AFZ_CAP_BOOL_MASK |
                        AFZ_CAP_ADD_MASK | AFZ_CAP_VARLEN | AFZ_CAP_GQA | AFZ_CAP_LSE | AFZ_CAP_STRIDED |
                        AFZ_CAP_DV_NE_D | AFZ_CAP_GPU;
  EXPECT_EQ(k.caps.flags, want);  // no softcap, deterministic
  EXPECT_EQ(k.caps.in_dtypes, (1u << AFZ_F16) | (1u << AFZ_BF16));
  EXPECT_EQ(k.caps.out_dtypes, (1u << AFZ_F16) | (1u << AFZ_BF16));
  EXPECT_EQ(k.caps.max_head_dim, 256);
  EXPECT_EQ(k.caps.head_dim_multiple, 8);
  EXPECT_EQ(k.precision.score_dtype, AFZ_F32);
  EXPECT_EQ(k.precision.p_dtype, AFZ_P_DTYPE_OF_V);
  EXPECT_EQ(k.precision.acc_dtype, AFZ_F32);
  EXPECT_EQ(k.precision.flush_subnormals, 1);
  EXPECT_EQ(k.precision.l_from_unrounded_p, 0);
  ASSERT_NE(k.supports, nullptr);
  ASSERT_NE(k.run, nullptr);
}

TEST(CudnnSdpaKernel, WithoutALibrarySupportsDeclinesWithTheLoadError) {
  testing::Shape s;
  testing::ShapeProblem sp(s);
  const CudnnLibrary missing = load_cudnn("/nonexistent/attnfuzz/libcudnn.so.9");
  const std::string why = cudnn_sdpa_unsupported_reason(sp.problem(), missing);
  EXPECT_EQ(why.rfind("cuDNN not loaded: cannot dlopen", 0), 0u) << why;
}

TEST(CudnnSdpaKernel, SupportsAnswersFromTheProcessLibrary) {
  testing::Shape s;
  testing::ShapeProblem sp(s);
  const afz_kernel& k = cudnn_sdpa_kernel();
  char reason[256] = {0};
  const int declined = k.supports(&k, &sp.problem(), reason, sizeof reason);
  if (!cudnn_library().loaded) {
    EXPECT_EQ(declined, 1);
    EXPECT_EQ(std::string(reason).rfind("cuDNN not loaded", 0), 0u) << reason;
    return;
  }
  EXPECT_EQ(declined, 0) << reason;
  sp.problem().softcap = 50.0f;
  EXPECT_EQ(k.supports(&k, &sp.problem(), reason, sizeof reason), 1);
  EXPECT_NE(std::string(reason).find("softcap"), std::string::npos) << reason;
}

// cudnn.sdpa declines what cuDNN is measured to get wrong; cudnn.sdpa.raw
// sends it, so an audit keeps the defect on record.
TEST(CudnnSdpaKernel, RawVariantSendsWhatTheGuardedKernelDeclines) {
  if (!cudnn_library().loaded) GTEST_SKIP() << "libcudnn not loadable here";
  const afz_kernel& guarded = cudnn_sdpa_kernel();
  const afz_kernel& raw = cudnn_sdpa_raw_kernel();
  EXPECT_STREQ(raw.name, "cudnn.sdpa.raw");
  EXPECT_EQ(raw.caps.flags, guarded.caps.flags);
  testing::Shape s;
  testing::ShapeProblem keyless(s);
  keyless.seqlens({48, 48}, {80, 0});
  char reason[256] = {0};
  EXPECT_EQ(guarded.supports(&guarded, &keyless.problem(), reason, sizeof reason), 1);
  EXPECT_NE(std::string(reason).find("no key"), std::string::npos) << reason;
  EXPECT_EQ(raw.supports(&raw, &keyless.problem(), reason, sizeof reason), 0) << reason;
  // A row stride one element past 64: not a multiple of 8.
  testing::ShapeProblem gap(s);
  for (afz_tensor* t : {&gap.problem().q, &gap.problem().k, &gap.problem().v, &gap.problem().o}) {
    t->stride[2] = s.d + 1;
    t->stride[1] = t->stride[2] * (t == &gap.problem().q || t == &gap.problem().o ? s.sq : s.skv);
    t->stride[0] = t->stride[1] * s.heads_q;
  }
  EXPECT_EQ(guarded.supports(&guarded, &gap.problem(), reason, sizeof reason), 1);
  EXPECT_EQ(raw.supports(&raw, &gap.problem(), reason, sizeof reason), 0) << reason;
}

}  // namespace
}  // namespace afz::cudnn
