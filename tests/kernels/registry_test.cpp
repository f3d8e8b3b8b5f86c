// KernelRegistry: built-ins, lookups, duplicate names, capability checks
// with one-line reasons, and plugins loaded from shared libraries.
#include "kernels/registry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "kernels/cpu/common.h"
#include "tests/kernels/test_problem.h"

namespace afz {
namespace {

using testing::Layout;
using testing::ProblemSpec;
using testing::TestProblem;

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

TEST(KernelRegistry, BuiltinsHoldTheReferenceKernels) {
  const KernelRegistry r = KernelRegistry::with_builtins();
  for (const char* name : {"cpu.direct", "cpu.online", "cpu.tiled", "cpu.tiled.br128_bc32", "cpu.tiled.br16_bc16",
                           "cpu.fa1", "cpu.splitkv", "cpu.splitkv.s16_bc16"}) {
    const afz_kernel* k = r.find(name);
    ASSERT_NE(k, nullptr) << name;
    EXPECT_STREQ(k->name, name);
    EXPECT_NE(k->run, nullptr);
    EXPECT_NE(std::string(k->description), "");
  }
  EXPECT_EQ(r.find("cpu.nonexistent"), nullptr);
  for (const KernelEntry& e : r.entries())
    if (e.kernel == r.find("cpu.direct")) {
      EXPECT_EQ(e.origin, "builtin");
    }
}

TEST(KernelRegistry, DuplicateNamesAreRefused) {
  KernelRegistry r;
  register_cpu_reference_kernels(r);
  const size_t before = r.entries().size();
  const afz_kernel again = *r.find("cpu.tiled");
  try {
    r.add(&again, "test");
    FAIL() << "a duplicate name was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(one_line(e.what()));
    EXPECT_NE(std::string(e.what()).find("duplicate kernel name cpu.tiled"), std::string::npos) << e.what();
  }
  EXPECT_EQ(r.entries().size(), before);
  afz_kernel nameless = again;
  nameless.name = "";
  EXPECT_THROW(r.add(&nameless, "test"), std::invalid_argument);
}

// A kernel that declares almost nothing: dense BHSD fp16, head dims 32..128
// in steps of 32, sequences up to 256, and a supports() hook that refuses
// scales above 1.
int refuse_large_scale(const afz_kernel*, const afz_problem* p, char* reason, size_t len) {
  if (p->scale <= 1.0f) return 0;
  cpu::write_message(reason, len, "scale above 1 is not implemented");
  return 1;
}
int never_run(const afz_kernel*, const afz_problem*, char*, size_t) { return 1; }

afz_kernel narrow_kernel() {
  afz_kernel k{};
  k.name = "narrow";
  k.description = "declares almost nothing";
  k.caps = {0, 1u << AFZ_F16, 1u << AFZ_F16, 32, 128, 32, 256};
  k.supports = refuse_large_scale;
  k.run = never_run;
  return k;
}

ProblemSpec narrow_ok() {
  ProblemSpec s;
  s.in = s.out = AFZ_F16;
  s.d = s.dv = 64;
  s.heads_q = s.heads_kv = 2;
  s.seqlens_q = {10}, s.seqlens_k = {20};
  return s;
}

TEST(UnsupportedReason, NamesTheMissingCapability) {
  const afz_kernel k = narrow_kernel();
  {
    TestProblem t(narrow_ok());
    EXPECT_EQ(unsupported_reason(k, t.problem()), "");
  }
  const std::vector<std::pair<std::function<void(ProblemSpec&)>, std::string>> cases = {
      {[](ProblemSpec& s) { s.in = AFZ_BF16; }, "q dtype bf16 not supported"},
      {[](ProblemSpec& s) { s.out = AFZ_F32; }, "output dtype fp32 not supported"},
      {[](ProblemSpec& s) { s.d = s.dv = 16; }, "head_dim 16 outside [32, 128]"},
      {[](ProblemSpec& s) { s.d = s.dv = 256; }, "head_dim 256 outside [32, 128]"},
      {[](ProblemSpec& s) { s.d = s.dv = 48; }, "head_dim 48 not a multiple of 32"},
      {[](ProblemSpec& s) { s.dv = 32; }, "head_dim_v != head_dim (AFZ_CAP_DV_NE_D)"},
      {[](ProblemSpec& s) { s.has_window = true, s.window_left = -1, s.window_right = 0; },
       "causal mask with bottom-right alignment (AFZ_CAP_CAUSAL_BOTTOM_RIGHT)"},
      {[](ProblemSpec& s) {
         s.has_window = true, s.window_left = -1, s.window_right = 0, s.align = AFZ_ALIGN_TOP_LEFT;
       },
       "causal mask with top-left alignment (AFZ_CAP_CAUSAL_TOP_LEFT)"},
      {[](ProblemSpec& s) { s.has_window = true, s.window_left = 8, s.window_right = 0; },
       "sliding window (AFZ_CAP_WINDOW)"},
      {[](ProblemSpec& s) { s.bool_mask = [](int, int, int) { return true; }; }, "boolean mask (AFZ_CAP_BOOL_MASK)"},
      {[](ProblemSpec& s) { s.add_mask = [](int, int, int) { return 0.0f; }; }, "additive mask (AFZ_CAP_ADD_MASK)"},
      {[](ProblemSpec& s) { s.batch = 2, s.seqlens_q = {10, 7}, s.seqlens_k = {20, 20}; },
       "variable or zero sequence lengths (AFZ_CAP_VARLEN)"},
      {[](ProblemSpec& s) { s.seqlens_q = {10}, s.seqlens_k = {0}; }, "(AFZ_CAP_VARLEN)"},
      {[](ProblemSpec& s) { s.heads_kv = 1; }, "heads_q != heads_kv (AFZ_CAP_GQA)"},
      {[](ProblemSpec& s) { s.softcap = 30; }, "softcap (AFZ_CAP_SOFTCAP)"},
      {[](ProblemSpec& s) { s.layout = Layout::BSHD; }, "strides other than dense BHSD (AFZ_CAP_STRIDED)"},
      {[](ProblemSpec& s) { s.row_gap = 8; }, "strides other than dense BHSD (AFZ_CAP_STRIDED)"},
      {[](ProblemSpec& s) { s.kv_broadcast_heads = true; }, "strides other than dense BHSD (AFZ_CAP_STRIDED)"},
      {[](ProblemSpec& s) { s.seqlens_k = {300}; }, "sequence length 300 above the kernel's 256"},
      {[](ProblemSpec& s) { s.scale = 2.0f; }, "scale above 1 is not implemented"},
  };
  for (const auto& [change, want] : cases) {
    ProblemSpec s = narrow_ok();
    change(s);
    TestProblem t(s);
    const std::string why = unsupported_reason(k, t.problem());
    EXPECT_NE(why.find(want), std::string::npos) << "want '" << want << "', got '" << why << "'";
    EXPECT_TRUE(one_line(why));
  }
}

TEST(UnsupportedReason, StridesMatterOnlyAlongExtentsAboveOne) {
  // batch 1: the batch stride addresses nothing, so any value is dense.
  const afz_kernel k = narrow_kernel();
  TestProblem t(narrow_ok());
  t.problem().q.stride[0] = 12345;
  EXPECT_EQ(unsupported_reason(k, t.problem()), "");
  t.problem().q.stride[2] = 0;  // rows broadcast: not dense
  EXPECT_NE(unsupported_reason(k, t.problem()), "");
}

TEST(UnsupportedReason, ReferenceKernelsTakeEverythingTheyDeclare) {
  const KernelRegistry r = KernelRegistry::with_builtins();
  ProblemSpec s;
  s.in = AFZ_BF16, s.out = AFZ_F16, s.heads_q = 4, s.heads_kv = 2, s.d = 24, s.dv = 40;
  s.batch = 2, s.seqlens_q = {5, 0}, s.seqlens_k = {9, 3}, s.softcap = 10, s.layout = Layout::BSHD, s.row_gap = 2;
  s.has_window = true, s.window_left = 3, s.window_right = 1, s.align = AFZ_ALIGN_TOP_LEFT;
  s.bool_mask = [](int, int i, int j) { return i != j; };
  s.add_mask = [](int, int, int j) { return -float(j); };
  TestProblem t(s);
  EXPECT_EQ(unsupported_reason(*r.find("cpu.tiled"), t.problem()), "");
}

#if defined(ATTNFUZZ_PLUGIN_EXAMPLE)
TEST(PluginLoading, LoadsAndRunsTheExamplePlugin) {
  KernelRegistry r = KernelRegistry::with_builtins();
  std::string error;
  ASSERT_TRUE(r.load_library(ATTNFUZZ_PLUGIN_EXAMPLE, &error)) << error;
  const afz_kernel* k = r.find("example.naive_fp32");
  ASSERT_NE(k, nullptr);
  bool origin_is_path = false;
  for (const KernelEntry& e : r.entries())
    if (e.kernel == k) origin_is_path = e.origin == ATTNFUZZ_PLUGIN_EXAMPLE;
  EXPECT_TRUE(origin_is_path);
  EXPECT_EQ(r.entry("example.naive_fp32")->version, "plugin example 1.0 (libm expf)");

  // It declines what it does not claim, and agrees with cpu.direct on fp32.
  ProblemSpec s;
  s.heads_q = 2, s.heads_kv = 2, s.d = s.dv = 32, s.seqlens_q = {21}, s.seqlens_k = {50};
  {
    ProblemSpec bf = s;
    bf.in = bf.out = AFZ_BF16;
    TestProblem t(bf);
    EXPECT_EQ(unsupported_reason(*k, t.problem()), "q dtype bf16 not supported");
  }
  TestProblem t(s);
  ASSERT_EQ(unsupported_reason(*k, t.problem()), "");
  ASSERT_EQ(testing::run_kernel(*k, t), "");
  std::vector<double> plugin_o;
  std::vector<float> plugin_lse;
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 21; ++i) {
      plugin_lse.push_back(t.lse(0, h, i));
      for (int x = 0; x < 32; ++x) plugin_o.push_back(t.o(0, h, i, x));
    }
  t.poison_outputs();
  ASSERT_EQ(testing::run_kernel(*r.find("cpu.direct"), t), "");
  size_t n = 0, m = 0;
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 21; ++i) {
      EXPECT_NEAR(plugin_lse[m++], t.lse(0, h, i), 1e-5);
      for (int x = 0; x < 32; ++x) EXPECT_NEAR(plugin_o[n++], t.o(0, h, i, x), 1e-6);
    }
}

TEST(PluginLoading, BadLibrariesGiveOneLineErrorsAndChangeNothing) {
  KernelRegistry r = KernelRegistry::with_builtins();
  const size_t before = r.entries().size();
  const std::string text_file = std::string(ATTNFUZZ_SOURCE_DIR) + "/kernels/plugin_example/plugin_example.c";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/nonexistent/libnothing.so", "/nonexistent/libnothing.so: no such file"},
      {text_file, text_file + ": cannot load: "},
      {ATTNFUZZ_PLUGIN_BAD_ABI, "built for kernel ABI version 999, attnfuzz speaks version 1"},
      {ATTNFUZZ_PLUGIN_NO_KERNELS, "missing symbol attnfuzz_kernels"},
  };
  for (const auto& [path, want] : cases) {
    std::string error;
    EXPECT_FALSE(r.load_library(path, &error)) << path;
    EXPECT_NE(error.find(want), std::string::npos) << "want '" << want << "', got '" << error << "'";
    EXPECT_EQ(error.rfind(path, 0), 0u) << "the error names the file: " << error;
    EXPECT_TRUE(one_line(error)) << error;
    std::printf("%s\n", error.c_str());
  }
  EXPECT_EQ(r.entries().size(), before);

  std::string error;
  ASSERT_TRUE(r.load_library(ATTNFUZZ_PLUGIN_EXAMPLE, &error)) << error;
  EXPECT_FALSE(r.load_library(ATTNFUZZ_PLUGIN_EXAMPLE, &error));
  EXPECT_NE(error.find("duplicate kernel name example.naive_fp32 (already from "), std::string::npos) << error;
  EXPECT_TRUE(one_line(error));
  EXPECT_EQ(r.entries().size(), before + 1);
}

// `path#config`: the text after '#' goes to attnfuzz_configure, whose
// refusal is a one-line error naming the whole spec; the spec is the origin.
TEST(PluginLoading, ConfigurationGoesToTheConfigureHook) {
  KernelRegistry r = KernelRegistry::with_builtins();
  const size_t before = r.entries().size();
  const std::string spec = std::string(ATTNFUZZ_PLUGIN_EXAMPLE) + "#ops=nothing.ops";
  std::string error;
  EXPECT_FALSE(r.load_library(spec, &error));
  EXPECT_EQ(error, spec + ": configuration refused: the plugin example takes no configuration (got 'ops=nothing.ops')");
  EXPECT_EQ(r.entries().size(), before);
  // A configuration does not get a library of another ABI through.
  const std::string no_hook = std::string(ATTNFUZZ_PLUGIN_BAD_ABI) + "#x";
  EXPECT_FALSE(r.load_library(no_hook, &error));
  // An empty configuration is the library alone.
  ASSERT_TRUE(r.load_library(std::string(ATTNFUZZ_PLUGIN_EXAMPLE) + "#", &error)) << error;
  EXPECT_EQ(r.entry("example.naive_fp32")->origin, std::string(ATTNFUZZ_PLUGIN_EXAMPLE) + "#");
  // The GPU worker loads a plugin kernel from its registered origin, config included.
  EXPECT_EQ(registered_origin(r.find("example.naive_fp32")), std::string(ATTNFUZZ_PLUGIN_EXAMPLE) + "#");
  EXPECT_EQ(registered_origin(r.find("cpu.tiled")), "builtin");
}
#endif

}  // namespace
}  // namespace afz

namespace afz {
namespace {

// The configuration may hold '/' and '#' (the Python bridge's
// #path/to/file.py:name); the library path ends at the first '#' that
// leaves an existing file.
TEST(PluginLoading, SpecSplitsAtTheFirstHashAfterAFile) {
  const std::string lib = ATTNFUZZ_PLUGIN_EXAMPLE;
  EXPECT_EQ(split_library_spec(lib), std::make_pair(lib, std::string()));
  EXPECT_EQ(split_library_spec(lib + "#dir/file.py:k"), std::make_pair(lib, std::string("dir/file.py:k")));
  EXPECT_EQ(split_library_spec(lib + "#a#b/c"), std::make_pair(lib, std::string("a#b/c")));
  EXPECT_EQ(split_library_spec(lib + "#"), std::make_pair(lib, std::string()));
  EXPECT_EQ(split_library_spec("/no/such.so#x/y").first, "/no/such.so");
}

}  // namespace
}  // namespace afz
