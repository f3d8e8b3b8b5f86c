// The PyTorch adapters (kernels/torch) on whatever libtorch is installed;
// CI runs them on Debian 12's CPU-only libtorch 1.13.
//
//   * the plugin loads through the harness's KernelRegistry, with and without
//     a '#ops=' configuration, and declares its five GPU kernels;
//   * operators of the test's own library (afztest_ops.cpp) run through the
//     op-by-name path on the CPU in three calling conventions (BHSD with
//     masks, BSHD with swapped returns, packed varlen with windows) and match
//     a direct double-precision softmax, then pass the harness itself
//     (generated cases, oracle, verdict);
//   * malformed .ops files give one-line file:line errors;
//   * on a CPU-only torch the GPU kernels decline with a clear reason;
//   * the five backward kernels load under the forward kernels' names, with
//     the caps their operators take (torch.flash_varlen: its forward's), and
//     supports() declines what they cannot run (the varlen packing itself is
//     packed_tokens_test.cpp's).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <torch/version.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "harness/case/backward_problem.h"
#include "harness/case/case.h"
#include "harness/case/generators.h"
#include "harness/case/materialize.h"
#include "harness/run/runner.h"
#include "kernels/abi/dtype.h"
#include "kernels/registry.h"
#include "tests/kernels/test_problem.h"

namespace afz {
namespace {

namespace fs = std::filesystem;
using testing::Layout;
using testing::ProblemSpec;
using testing::TestProblem;

constexpr const char* kPlugin = ATTNFUZZ_TORCH_PLUGIN;
constexpr const char* kTestOps = ATTNFUZZ_TORCH_TESTOPS;
constexpr const char* kBuiltinNames[] = {"torch.flash", "torch.efficient", "torch.cudnn", "torch.math",
                                         "torch.flash_varlen"};
constexpr double kInf = std::numeric_limits<double>::infinity();

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

// The plugin's exported functions, called directly (the registry calls them
// the same way; dlopen returns the one handle the registry also gets).
struct Plugin {
  void* handle = dlopen(kPlugin, RTLD_NOW | RTLD_LOCAL);
  afz_configure_fn configure = handle ? reinterpret_cast<afz_configure_fn>(dlsym(handle, AFZ_PLUGIN_CONFIGURE_SYMBOL)) : nullptr;
  afz_get_kernels_fn kernels = handle ? reinterpret_cast<afz_get_kernels_fn>(dlsym(handle, AFZ_PLUGIN_SYMBOL)) : nullptr;
  afz_library_version_fn version = handle ? reinterpret_cast<afz_library_version_fn>(dlsym(handle, AFZ_PLUGIN_VERSION_SYMBOL)) : nullptr;

  // Configures; "" or the one-line error.
  std::string configure_with(const std::string& config) const {
    char error[1024] = {0};
    return configure(config.c_str(), error, sizeof error) == 0 ? "" : std::string(error[0] ? error : "(no message)");
  }
  std::map<std::string, const afz_kernel*> table() const {
    const afz_kernel* ks = nullptr;
    int n = 0;
    std::map<std::string, const afz_kernel*> out;
    if (kernels(&ks, &n) == 0)
      for (int i = 0; i < n; ++i) out[ks[i].name] = &ks[i];
    return out;
  }
  bool cuda_build() const { return std::string(version()).find("CPU only") == std::string::npos; }
};

const Plugin& plugin() {
  static const Plugin p;
  return p;
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("afz_torch_" + std::to_string(getpid()) + "_" + std::to_string(counter()++));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path f = path / name;
    std::ofstream(f) << text;
    return f.string();
  }
};

// The test's operators as attnfuzz kernels.
std::string test_ops_text() {
  return std::string("# The operators of tests/kernels/torch/afztest_ops.cpp\n") + "library " + kTestOps + "\n" + R"(
kernel afztest.bhsd
  op afztest::attn
  device cpu
  description naive fp32 attention: BHSD, fp32 bias with the boolean mask folded in, top-left causal, GQA
  dtypes f32 f16 bf16
  out_dtypes f32 f16 bf16
  caps causal_top_left bool_mask add_mask varlen gqa lse strided dv_ne_d
  precision score=f32 p=f32 acc=f32 exp_ulps=2 flush=0 l_from_unrounded_p=1
  conventions masked_row=zero empty_lse=neg_inf
  layout bhsd
  arg q = q
  arg k = k
  arg v = v
  arg bias = bias_f32
  arg scale = scale
  arg is_causal = is_causal
  return o 0
  return lse 1 bhs
end

kernel afztest.masks_apart    # the boolean mask as its own argument
  op afztest::attn
  device cpu
  dtypes f32 f16 bf16
  out_dtypes f32 f16 bf16
  caps causal_top_left bool_mask add_mask varlen gqa lse strided dv_ne_d
  precision score=f32 p=f32 acc=f32 exp_ulps=2 flush=0 l_from_unrounded_p=1
  layout bhsd
  arg q = q
  arg k = k
  arg v = v
  arg bias = bias_f32
  arg mask = mask
  arg scale = scale
  arg is_causal = is_causal
  return o 0
  return lse 1
end

kernel afztest.no_lse        # an LSE the kernel does not declare is never written
  op afztest::attn
  device cpu
  dtypes f32 f16 bf16
  out_dtypes f32 f16 bf16
  caps varlen gqa strided dv_ne_d
  precision score=f32 p=f32 acc=f32 exp_ulps=2 flush=0 l_from_unrounded_p=1
  arg q = q
  arg k = k
  arg v = v
  arg scale = scale
  return o 0
end

kernel afztest.bshd
  op afztest::attn_bshd
  device cpu
  dtypes f32 f16 bf16
  out_dtypes f32 f16 bf16
  head_dim 1 512
  caps varlen gqa lse strided dv_ne_d
  precision score=f32 p=f32 acc=f32 exp_ulps=2 flush=0 l_from_unrounded_p=1
  layout bshd contiguous
  arg q = q
  arg k = k
  arg v = v
  arg scale = scale
  return o 1
  return lse 0 bsh
end

kernel afztest.varlen
  op afztest::attn_varlen
  device cpu
  dtypes f32 f16 bf16
  out_dtypes f32 f16 bf16
  caps causal_bottom_right window varlen gqa lse strided dv_ne_d
  precision score=f32 p=f32 acc=f32 exp_ulps=2 flush=0 l_from_unrounded_p=1
  conventions masked_row=zero empty_lse=pos_inf
  layout packed
  arg q = q
  arg k = k
  arg v = v
  arg cu_seqlens_q = cu_seqlens_q
  arg cu_seqlens_k = cu_seqlens_k
  arg max_q = max_seqlen_q
  arg max_k = max_seqlen_k
  arg scale = scale
  arg is_causal = is_causal
  arg window_left = window_left
  arg window_right = window_right
  return o 0
  return lse 1 hs
end
)";
}

// The op kernels, configured once for the tests that run them.
std::map<std::string, const afz_kernel*> op_kernels() {
  static TempDir dir;
  static const std::string error = plugin().configure_with("ops=" + dir.write("afztest.ops", test_ops_text()));
  EXPECT_EQ(error, "");
  return plugin().table();
}

// ---------------------------------------------------------------------------

TEST(TorchPlugin, LoadsThroughTheRegistryWithItsFiveGpuKernels) {
  KernelRegistry r;
  std::string error;
  ASSERT_TRUE(r.load_library(kPlugin, &error)) << error;
  for (const char* name : kBuiltinNames) {
    const KernelEntry* e = r.entry(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->origin, kPlugin);
    EXPECT_EQ(e->version.rfind(std::string("PyTorch ") + TORCH_VERSION, 0), 0u) << e->version;
    const afz_kernel& k = *e->kernel;
    EXPECT_TRUE(k.caps.flags & AFZ_CAP_GPU) << name;
    EXPECT_FALSE(k.caps.flags & AFZ_CAP_NONDETERMINISTIC) << name << ": the forward passes are deterministic";
    EXPECT_NE(k.supports, nullptr);
    EXPECT_TRUE(one_line(k.description));
    EXPECT_EQ(k.precision.score_dtype, AFZ_F32);
    EXPECT_GT(k.precision.exp_ulps, 0.0f);
  }
  // LSE where the operator returns one; the math path returns none.
  EXPECT_FALSE(r.find("torch.math")->caps.flags & AFZ_CAP_LSE);
  EXPECT_TRUE(r.find("torch.flash")->caps.flags & AFZ_CAP_LSE);
  // FlashAttention's conventions differ from the memory-efficient kernel's.
  EXPECT_EQ(r.find("torch.flash")->conventions.empty_lse, AFZ_EMPTY_LSE_POS_INF);
  EXPECT_EQ(r.find("torch.efficient")->conventions.empty_lse, AFZ_EMPTY_LSE_ZERO);
}

TEST(TorchPlugin, LibraryVersionNamesTorch) {
  const std::string v = plugin().version();
  EXPECT_EQ(v.rfind(std::string("PyTorch ") + TORCH_VERSION, 0), 0u) << v;
  EXPECT_TRUE(one_line(v));
}

TEST(TorchPlugin, ConfigurationThroughTheRegistry) {
  TempDir dir;
  dir.write("afztest.ops", test_ops_text());
  // The registry splits "path#config" at the last '#' only when no '/'
  // follows it, so the .ops file is named relative to the working directory.
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path);
  KernelRegistry r;
  std::string error;
  const bool loaded = r.load_library(std::string(kPlugin) + "#ops=afztest.ops", &error);
  KernelRegistry bad;
  std::string bad_error, item_error;
  const bool missing = bad.load_library(std::string(kPlugin) + "#ops=missing.ops", &bad_error);
  const bool unknown = bad.load_library(std::string(kPlugin) + "#colour=blue", &item_error);
  fs::current_path(cwd);

  ASSERT_TRUE(loaded) << error;
  for (const char* name :
       {"afztest.bhsd", "afztest.masks_apart", "afztest.no_lse", "afztest.bshd", "afztest.varlen", "torch.flash"})
    EXPECT_NE(r.find(name), nullptr) << name;
  EXPECT_EQ(r.entry("afztest.bhsd")->origin, std::string(kPlugin) + "#ops=afztest.ops");
  EXPECT_FALSE(r.find("afztest.bhsd")->caps.flags & AFZ_CAP_GPU);
  EXPECT_TRUE(r.find("afztest.varlen")->caps.flags & AFZ_CAP_WINDOW);

  EXPECT_FALSE(missing);
  EXPECT_TRUE(one_line(bad_error));
  EXPECT_NE(bad_error.find("configuration refused: missing.ops: cannot read the file"), std::string::npos) << bad_error;
  EXPECT_FALSE(unknown);
  EXPECT_NE(item_error.find("configuration item 'colour=blue'"), std::string::npos) << item_error;
}

// ---- The op-by-name path against a direct computation ----------------------

struct Expect {
  double empty_lse;         // the kernel's convention for rows without keys
  bool lse_written = true;  // false: the kernel has no LSE and must leave the buffer alone
};

// Runs kernel `name` on the problem and compares every valid element with
// the double-precision softmax; padding rows must stay poisoned.  Returns
// the number of rows without a visible key it checked.
int check_against_reference(const std::string& name, ProblemSpec spec, Expect expect) {
  SCOPED_TRACE(name);
  const auto ks = op_kernels();
  if (!ks.count(name)) {
    ADD_FAILURE() << "no kernel " << name;
    return -1;
  }
  const afz_kernel& k = *ks.at(name);
  TestProblem t(std::move(spec));
  EXPECT_EQ(unsupported_reason(k, t.problem()), "");
  if (const std::string e = testing::run_kernel(k, t); !e.empty()) {
    ADD_FAILURE() << e;
    return -1;
  }
  const TestProblem::Reference ref = t.reference();
  const ProblemSpec& s = t.spec();
  // fp32 throughout, then one rounding to the output dtype.
  const double out_eps = s.out == AFZ_F32 ? 0x1p-24 : s.out == AFZ_F16 ? 0x1p-11 : 0x1p-8;
  constexpr double kF32Work = 1e-5;  // fp32 GEMMs and exp over these short rows, relative to sum p|v|/l
  int checked = 0, empty_rows = 0;
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads_q; ++h)
      for (int i = 0; i < t.sq(); ++i) {
        const int64_t row = t.lse_index(b, h, i);
        if (i >= s.seqlens_q[b]) {
          for (int x = 0; x < s.dv; ++x)
            if (t.o_bits(b, h, i, x) != testing::out_poison_bits(s.out)) {
              ADD_FAILURE() << "padding row written " << b << ',' << h << ',' << i;
              return -1;
            }
          if (t.lse_bits(b, h, i) != testing::kOutPoisonF32) {
            ADD_FAILURE() << "padding LSE written " << b << ',' << h << ',' << i;
            return -1;
          }
          continue;
        }
        if (!expect.lse_written && t.lse_bits(b, h, i) != testing::kOutPoisonF32) {
          ADD_FAILURE() << "LSE written by a kernel without one " << b << ',' << h << ',' << i;
          return -1;
        }
        if (ref.empty[row]) {
          ++empty_rows;
          for (int x = 0; x < s.dv; ++x)
            if (t.o(b, h, i, x) != 0.0) {
              ADD_FAILURE() << "empty row " << b << ',' << h << ',' << i << " holds " << t.o(b, h, i, x);
              return -1;
            }
          if (expect.lse_written) {
            EXPECT_EQ(double(t.lse(b, h, i)), expect.empty_lse) << "empty row " << b << ',' << h << ',' << i;
          }
          continue;
        }
        for (int x = 0; x < s.dv; ++x) {
          const double want = ref.o[row * s.dv + x], cond = ref.cond[row * s.dv + x];
          const double tol = (kF32Work + out_eps) * std::max(cond, std::fabs(want)) + 1e-30;
          if (!(std::fabs(t.o(b, h, i, x) - want) <= tol)) {
            ADD_FAILURE() << "O[" << b << ',' << h << ',' << i << ',' << x << "] = " << t.o(b, h, i, x) << ", want "
                          << want << " within " << tol;
            return -1;
          }
          ++checked;
        }
        if (expect.lse_written) {
          EXPECT_NEAR(double(t.lse(b, h, i)), ref.lse[row], kF32Work * (1 + std::fabs(ref.lse[row])))
              << "LSE[" << b << ',' << h << ',' << i << ']';
        }
      }
  EXPECT_GT(checked, 0);
  return empty_rows;
}

TEST(TorchPlugin, BhsdOperatorWithGqaCausalAndRaggedBatch) {
  ProblemSpec s;
  s.batch = 3;
  s.heads_q = 4;
  s.heads_kv = 2;
  s.d = 16;
  s.dv = 24;
  s.seqlens_q = {7, 3, 0};
  s.seqlens_k = {9, 0, 5};  // sequence 1 has queries and no key: empty rows
  s.has_window = true;       // causal, top-left
  s.window_right = 0;
  s.align = AFZ_ALIGN_TOP_LEFT;
  EXPECT_GT(check_against_reference("afztest.bhsd", s, {-kInf}), 0);
}

ProblemSpec masked_spec() {
  ProblemSpec s;
  s.batch = 2;
  s.heads_q = 2;
  s.heads_kv = 2;
  s.d = 32;
  s.dv = 32;
  s.seqlens_q = {6, 6};
  s.seqlens_k = {11, 11};
  s.in = AFZ_BF16;
  s.out = AFZ_BF16;
  s.layout = Layout::BSHD;
  s.row_gap = 3;
  s.kv_broadcast_heads = true;
  // Row 2 of sequence 0 sees no key at all; -inf and finite additive values elsewhere.
  s.bool_mask = [](int b, int i, int j) { return !(b == 0 && i == 2) && (j % 3 != 1); };
  s.add_mask = [](int, int i, int j) { return (i + j) % 4 == 0 ? -kInf : (i + j) % 4 == 1 ? -3.0f : 0.0f; };
  return s;
}

TEST(TorchPlugin, MasksFoldedIntoTheBiasStridedBshdBroadcastKv) {
  EXPECT_GT(check_against_reference("afztest.bhsd", masked_spec(), {-kInf}), 0);
}

TEST(TorchPlugin, BooleanMaskAsItsOwnArgument) {
  EXPECT_GT(check_against_reference("afztest.masks_apart", masked_spec(), {-kInf}), 0);
}

// The attnfuzz worker hands every GPU kernel an LSE buffer; a kernel that
// returns none (torch.math, or this one) must leave it as it found it.
TEST(TorchPlugin, AnLseBufferIsLeftAloneByAKernelWithoutOne) {
  ProblemSpec s;
  s.batch = 2;
  s.heads_q = 2;
  s.heads_kv = 1;
  s.seqlens_q = {5, 3};
  s.seqlens_k = {4, 6};
  ASSERT_TRUE(s.with_lse);
  EXPECT_EQ(check_against_reference("afztest.no_lse", s, {-kInf, /*lse_written=*/false}), 0);
}

TEST(TorchPlugin, BshdOperatorWithSwappedReturns) {
  ProblemSpec s;
  s.batch = 2;
  s.heads_q = 3;
  s.heads_kv = 1;
  s.d = 8;
  s.dv = 8;
  s.seqlens_q = {5, 5};
  s.seqlens_k = {12, 12};
  s.out = AFZ_F16;
  EXPECT_EQ(check_against_reference("afztest.bshd", s, {-kInf}), 0);
}

TEST(TorchPlugin, PackedVarlenOperatorWithWindowsAndEmptySequences) {
  ProblemSpec s;
  s.batch = 4;
  s.heads_q = 4;
  s.heads_kv = 2;
  s.d = 16;
  s.dv = 16;
  s.seqlens_q = {4, 0, 9, 3};
  s.seqlens_k = {10, 3, 2, 0};  // sequence 2: bottom-right leaves early rows empty; 3: no keys
  s.in = AFZ_F16;
  s.out = AFZ_F32;
  s.has_window = true;
  s.window_left = 3;
  s.window_right = 1;
  s.align = AFZ_ALIGN_BOTTOM_RIGHT;
  EXPECT_GT(check_against_reference("afztest.varlen", s, {kInf}), 0);
  s.window_left = -1;  // causal
  s.window_right = 0;
  EXPECT_GT(check_against_reference("afztest.varlen", s, {kInf}), 0);
}

// ---- The same kernels through the harness: cases, oracle, verdict ----------

TEST(TorchPlugin, OperatorKernelsPassTheHarness) {
  const auto ks = op_kernels();
  std::string error;
  const std::optional<GeneratorMix> mix =
      GeneratorMix::parse("shapes=2,late_max=1,magnitude=1,masking=2,values=1,layouts=1,add_mask=1", &error);
  ASSERT_TRUE(mix) << error;
  const Runner runner{RunOptions{}};
  constexpr int kCases = 24;
  constexpr uint64_t kSeed = 20251201;
  for (const char* name : {"afztest.bhsd", "afztest.masks_apart", "afztest.bshd", "afztest.varlen"}) {
    const afz_kernel& k = *ks.at(name);
    std::map<std::string, int> verdicts;
    int passed = 0;
    for (int i = 0; i < kCases; ++i) {
      const GeneratedCase gc = generate_case(*mix, kSeed, uint64_t(i));
      const CaseOutcome out = runner.run(k, gc.c);
      EXPECT_FALSE(is_failure(out.verdict.cls))
          << name << " case " << i << " (" << gc.generator->name << "): " << verdict_name(out.verdict.cls) << ": "
          << out.verdict.detail << "\n"
          << write_case(gc.c);
      passed += out.verdict.cls == VerdictClass::Pass;
      ++verdicts[std::string(verdict_name(out.verdict.cls))];
    }
    std::string summary;
    for (const auto& [v, n] : verdicts) summary += " " + v + "=" + std::to_string(n);
    std::printf("[ harness  ] %-20s%s\n", name, summary.c_str());
    EXPECT_GT(passed, kCases / 4) << name << ": too few cases taken";
  }
}

// ---- Malformed .ops files --------------------------------------------------

struct BadFile {
  const char* what;
  std::string text;
  int line;
  const char* message;
};

std::string entry(const std::string& body) {
  return std::string("library ") + kTestOps + "\nkernel bad.one\n" + body + "end\n";
}
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  return text.replace(text.find(from), from.size(), to);
}
const char* kMinimal =
    "  op afztest::attn\n  device cpu\n  dtypes f32\n"
    "  precision score=f32 p=f32 acc=f32 exp_ulps=2 flush=0 l_from_unrounded_p=1\n"
    "  arg q = q\n  arg k = k\n  arg v = v\n  return o 0\n";

TEST(TorchPlugin, MalformedOpsFilesGiveOneLineErrorsWithFileAndLine) {
  const std::vector<BadFile> cases = {
      {"unknown directive", "library " + std::string(kTestOps) + "\nbogus thing\n", 2, "unknown directive 'bogus'"},
      {"no end", std::string("kernel bad.one\n  op afztest::attn\n"), 2, "kernel 'bad.one' (line 1) has no 'end'"},
      {"unknown capability", entry(std::string(kMinimal) + "  caps lse telepathy\n"), 11, "unknown capability 'telepathy'"},
      {"unknown source", entry("  arg scale = temperature\n"), 3, "unknown source 'temperature'"},
      {"precision key missing", entry("  precision score=f32 p=v acc=f32 exp_ulps=2 flush=1\n"), 3,
       "precision: missing l_from_unrounded_p="},
      {"bad dtype", entry("  dtypes f32 f64\n"), 3, "unknown dtype 'f64'"},
      {"head dims reversed", entry("  head_dim 64 8\n"), 3, "head_dim: MIN above MAX"},
      {"lse cap without return", entry(std::string(kMinimal) + "  caps lse\n"), 12, "caps lse needs 'return lse INDEX'"},
      {"no precision",
       entry("  op afztest::attn\n  device cpu\n  dtypes f32\n  arg q = q\n  arg k = k\n  arg v = v\n  return o 0\n"),
       10, "has no 'precision'"},
      {"missing operator", entry(replaced(kMinimal, "afztest::attn", "afztest::nope")), 3, "has no afztest::nope"},
      {"unknown argument", entry(std::string(kMinimal) + "  arg temperature = scale\n"), 11,
       "afztest::attn has no argument 'temperature'"},
      {"wrong type", entry(std::string(kMinimal) + "  arg scale = is_causal\n"), 11,
       "argument 'scale' is float, which this source cannot feed (it gives bool)"},
      {"bad literal for type", entry(std::string(kMinimal) + "  arg is_causal = const 3\n"), 11,
       "argument 'is_causal' is bool: '3' is not true or false"},
      {"return out of range", entry(replaced(kMinimal, "return o 0", "return o 5")), 10,
       "returns 2 value(s); index 5 is out of range"},
      {"unmapped argument without default",
       std::string("library ") + kTestOps +
           "\nkernel bad.one\n  op afztest::attn_bshd\n  device cpu\n  dtypes f32\n"
           "  precision score=f32 p=f32 acc=f32 exp_ulps=2 flush=0 l_from_unrounded_p=1\n"
           "  arg q = q\n  arg k = k\n  arg v = v\n  return o 1\nend\n",
       2, "argument 'scale' of afztest::attn_bshd has no default"},
      {"library missing", "library /nonexistent/libnothing.so\n", 1, "cannot load library /nonexistent/libnothing.so"},
      {"builtin name taken", std::string("kernel torch.flash\n") + kMinimal + "end\n", 1,
       "kernel 'torch.flash' is already a built-in kernel"},
  };
  TempDir dir;
  for (const BadFile& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string path = dir.write("bad.ops", c.text);
    const std::string error = plugin().configure_with("ops=" + path);
    ASSERT_FALSE(error.empty()) << "accepted:\n" << c.text;
    EXPECT_TRUE(one_line(error)) << error;
    const std::string where = path + ":" + std::to_string(c.line) + ": ";
    EXPECT_EQ(error.rfind(where, 0), 0u) << error << "\n  expected to start with " << where;
    EXPECT_NE(error.find(c.message), std::string::npos) << error << "\n  expected to contain " << c.message;
  }
  // A refused configuration leaves the kernels as they were.
  EXPECT_TRUE(plugin().table().count("torch.flash"));
}

// ---- The GPU kernels on this torch -----------------------------------------

ProblemSpec gpu_shaped(int sq, int sk) {
  ProblemSpec s;
  s.batch = 2;
  s.heads_q = 4;
  s.heads_kv = 4;
  s.d = 64;
  s.dv = 64;
  s.seqlens_q = {sq, sq};
  s.seqlens_k = {sk, sk};
  s.in = AFZ_BF16;
  s.out = AFZ_BF16;
  return s;
}

TEST(TorchPlugin, GpuKernelsDeclineOnACpuOnlyTorch) {
  if (plugin().cuda_build()) GTEST_SKIP() << "this torch has CUDA: the H200 probe runs these kernels";
  const auto ks = plugin().table();
  for (const char* name : kBuiltinNames) {
    SCOPED_TRACE(name);
    const afz_kernel& k = *ks.at(name);
    TestProblem t(gpu_shaped(16, 16));
    ASSERT_EQ(unsupported_reason(k, t.problem()), "") << "a plain bf16 problem fits the declared caps";
    char error[512] = {0};
    ASSERT_EQ(k.run(&k, &t.problem(), error, sizeof error), AFZ_RUN_UNSUPPORTED) << error;
    const std::string why = error;
    EXPECT_TRUE(one_line(why));
    const std::string torch_is = std::string("torch ") + TORCH_VERSION;
    const bool missing_op = why.find(torch_is + " has no aten::") != std::string::npos;
    const bool missing_arg = why.find(torch_is + "'s aten::") != std::string::npos &&
                             why.find("has no argument") != std::string::npos;
    const bool no_cuda = why == torch_is + " was built without CUDA";
    EXPECT_TRUE(missing_op || missing_arg || no_cuda) << why;
    EXPECT_EQ(t.o_bits(0, 0, 0, 0), testing::out_poison_bits(AFZ_BF16)) << "a declined run wrote O";
  }
}

TEST(TorchPlugin, SupportsDeclinesTheOtherCausalAlignment) {
  const auto ks = plugin().table();
  auto reason = [&](const char* name, ProblemSpec s) {
    TestProblem t(std::move(s));
    return unsupported_reason(*ks.at(name), t.problem());
  };
  ProblemSpec s = gpu_shaped(8, 16);
  s.has_window = true;  // causal
  s.window_right = 0;
  s.align = AFZ_ALIGN_TOP_LEFT;
  EXPECT_NE(reason("torch.flash", s).find("aligns causal and window masks bottom-right"), std::string::npos);
  EXPECT_EQ(reason("torch.efficient", s), "");
  s.align = AFZ_ALIGN_BOTTOM_RIGHT;
  EXPECT_EQ(reason("torch.flash", s), "");
  EXPECT_NE(reason("torch.efficient", s).find("top-left"), std::string::npos);
  // Where seqlen_q == seqlen_k the two alignments are the same mask.
  ProblemSpec square = gpu_shaped(16, 16);
  square.has_window = true;
  square.window_right = 0;
  square.align = AFZ_ALIGN_TOP_LEFT;
  EXPECT_EQ(reason("torch.flash", square), "");
  square.window_left = 4;  // a sliding window: flash_varlen only
  EXPECT_EQ(reason("torch.flash_varlen", square), "");
  EXPECT_NE(reason("torch.flash", square), "");
  // O comes back in the input dtype.
  ProblemSpec f32_out = gpu_shaped(16, 16);
  f32_out.out = AFZ_F32;
  EXPECT_NE(reason("torch.efficient", f32_out), "");
  EXPECT_NE(reason("torch.cudnn", f32_out), "");
}

// ---- The backward operators (backward_kernels.cpp) ---------------------

constexpr const char* kBackwardNames[] = {"torch.flash", "torch.efficient", "torch.cudnn", "torch.math",
                                          "torch.flash_varlen"};

Case backward_case(const std::string& body) {
  ParseError err;
  std::optional<Case> c = parse_case("attnfuzz-case 1\n" + body, &err);
  if (!c) ADD_FAILURE() << err.format("case");
  return c.value_or(Case{});
}

// supports() of a backward kernel on a case, "" when it takes it.
std::string backward_refusal(const afz_backward_kernel& k, const std::string& body) {
  Materialized m(backward_case(body));
  BackwardMaterialized bm(m);
  char reason[512] = {0};
  return k.supports(&k, &bm.problem(), reason, sizeof reason) == 0 ? "" : std::string(reason);
}

TEST(TorchPlugin, BackwardKernelsLoadUnderTheForwardNames) {
  KernelRegistry r;
  std::string error;
  ASSERT_TRUE(r.load_library(kPlugin, &error)) << error;
  for (const char* name : kBackwardNames) {
    SCOPED_TRACE(name);
    const BackwardKernelEntry* e = r.backward_entry(name);
    ASSERT_NE(e, nullptr);
    ASSERT_NE(r.find(name), nullptr) << "--pass both pairs it with the forward kernel of the same name";
    EXPECT_EQ(e->origin, kPlugin);
    const afz_backward_kernel& k = *e->kernel;
    EXPECT_TRUE(k.caps.flags & AFZ_CAP_GPU);
    EXPECT_TRUE(k.caps.flags & AFZ_CAP_GRADS_IN_INPUT_DTYPE) << "torch returns gradients in the input dtype";
    EXPECT_FALSE(k.caps.flags & AFZ_CAP_LSE) << "a backward reads the LSE, it writes none";
    EXPECT_TRUE(one_line(k.description));
    EXPECT_EQ(k.conventions.empty_lse, r.find(name)->conventions.empty_lse) << "the forward's convention";
  }
  // Autograd differentiates the math path's own fp32 forward (its own P and
  // D, not the O and LSE given); the fused operators read what they are given.
  EXPECT_TRUE(r.find_backward("torch.math")->caps.flags & AFZ_CAP_BWD_OWN_FORWARD);
  EXPECT_FALSE(r.find_backward("torch.flash")->caps.flags & AFZ_CAP_BWD_OWN_FORWARD);
  // The fused backward passes reduce dQ with atomics; the math path's
  // autograd graph has none.
  EXPECT_TRUE(r.find_backward("torch.flash")->caps.flags & AFZ_CAP_NONDETERMINISTIC);
  EXPECT_TRUE(r.find_backward("torch.flash_varlen")->caps.flags & AFZ_CAP_NONDETERMINISTIC);
  EXPECT_FALSE(r.find_backward("torch.math")->caps.flags & AFZ_CAP_NONDETERMINISTIC);
}

TEST(TorchPlugin, FlashVarlenBackwardDeclaresWhatItsForwardTakes) {
  KernelRegistry r;
  std::string error;
  ASSERT_TRUE(r.load_library(kPlugin, &error)) << error;
  const afz_backward_kernel& bwd = *r.find_backward("torch.flash_varlen");
  const afz_kernel& fwd = *r.find("torch.flash_varlen");
  // Varlen natively, windows and causal bottom-right, GQA: the forward's
  // caps less the LSE it writes.
  EXPECT_EQ(bwd.caps.flags & ~uint32_t(AFZ_CAP_NONDETERMINISTIC | AFZ_CAP_GRADS_IN_INPUT_DTYPE),
            fwd.caps.flags & ~uint32_t(AFZ_CAP_LSE));
  for (uint32_t cap : {AFZ_CAP_VARLEN, AFZ_CAP_WINDOW, AFZ_CAP_CAUSAL_BOTTOM_RIGHT, AFZ_CAP_GQA})
    EXPECT_TRUE(bwd.caps.flags & cap) << cap;
  EXPECT_FALSE(bwd.caps.flags & AFZ_CAP_DV_NE_D) << "mha_varlen_bwd checks v's head size against q's";
  EXPECT_EQ(bwd.caps.in_dtypes, fwd.caps.in_dtypes);
  EXPECT_EQ(bwd.caps.max_head_dim, fwd.caps.max_head_dim);
  EXPECT_EQ(bwd.caps.head_dim_multiple, fwd.caps.head_dim_multiple);
  // FlashAttention-2's precision model and its +inf LSE for empty rows, as
  // the dense torch.flash backward declares them.
  const afz_backward_kernel& flash = *r.find_backward("torch.flash");
  EXPECT_EQ(std::memcmp(&bwd.precision, &flash.precision, sizeof bwd.precision), 0);
  EXPECT_EQ(bwd.conventions.empty_lse, AFZ_EMPTY_LSE_POS_INF);
}

TEST(TorchPlugin, BackwardSupportsDeclinesWhatItsOperatorCannotRun) {
  KernelRegistry r;
  std::string error;
  ASSERT_TRUE(r.load_library(kPlugin, &error)) << error;
  const std::string mha = "heads 2 2\nseqlen_q 16\nseqlen_k 16\nhead_dim 16\ndtype bf16\nseed 1\n";
  for (const char* name : kBackwardNames) EXPECT_EQ(backward_refusal(*r.find_backward(name), mha), "") << name;
  // GQA: FlashAttention-2 and cuDNN sum the group themselves (the bound
  // charges FlashAttention's per-head rounding); the memory-efficient
  // operator takes one head count.
  const std::string gqa = "heads 4 2\nseqlen_q 16\nseqlen_k 16\nhead_dim 16\ndtype bf16\nseed 1\n";
  for (const char* name : {"torch.flash", "torch.flash_varlen", "torch.cudnn", "torch.math"})
    EXPECT_EQ(backward_refusal(*r.find_backward(name), gqa), "") << name;
  EXPECT_NE(backward_refusal(*r.find_backward("torch.efficient"), gqa).find("one head count"), std::string::npos);
  // The alignment the operator does not implement, where it matters.
  const std::string br = "seqlen_q 8\nseqlen_k 16\nhead_dim 16\ndtype bf16\ncausal bottom_right\nseed 1\n";
  EXPECT_EQ(backward_refusal(*r.find_backward("torch.flash"), br), "");
  EXPECT_EQ(backward_refusal(*r.find_backward("torch.flash_varlen"), br), "");
  EXPECT_NE(backward_refusal(*r.find_backward("torch.efficient"), br).find("top-left"), std::string::npos);
  // Sliding windows: bottom-right as FlashAttention aligns them, in a ragged
  // batch with an empty sequence; top-left only where the two coincide.
  const std::string ragged = "batch 3\nheads 4 2\nseqlen_q 8 0 5\nseqlen_k 16 4 0\nhead_dim 16\ndtype bf16\nseed 1\n";
  EXPECT_EQ(backward_refusal(*r.find_backward("torch.flash_varlen"), ragged + "window 3 1\n"), "");
  EXPECT_NE(backward_refusal(*r.find_backward("torch.flash_varlen"), ragged + "window 3 1 top_left\n")
                .find("bottom-right"),
            std::string::npos);
  // O is taken in the input dtype.
  EXPECT_NE(backward_refusal(*r.find_backward("torch.flash_varlen"), "dtype bf16 fp32\nseed 1\n"), "");
}

TEST(TorchPlugin, BackwardKernelsDeclineOnACpuOnlyTorch) {
  if (plugin().cuda_build()) GTEST_SKIP() << "this torch has CUDA: the H200 runs these kernels";
  KernelRegistry r;
  std::string error;
  ASSERT_TRUE(r.load_library(kPlugin, &error)) << error;
  for (const char* name : kBackwardNames) {
    SCOPED_TRACE(name);
    const afz_backward_kernel& k = *r.find_backward(name);
    Materialized m(backward_case("seqlen_q 8\nseqlen_k 8\nhead_dim 16\ndtype bf16\nseed 1\n"));
    BackwardMaterialized bm(m);
    char why[512] = {0};
    ASSERT_EQ(k.run(&k, &bm.problem(), why, sizeof why), AFZ_RUN_UNSUPPORTED) << why;
    const std::string torch_is = std::string("torch ") + TORCH_VERSION;
    EXPECT_TRUE(std::string(why) == torch_is + " was built without CUDA" ||
                std::string(why).find(torch_is + " has no aten::") != std::string::npos)
        << why;
    std::string where;
    EXPECT_TRUE(bm.padding_untouched(&where)) << where;
  }
}

}  // namespace
}  // namespace afz
