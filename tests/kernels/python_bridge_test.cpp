// The Python kernel bridge (kernels/python, python/attnfuzz) end to end:
// kernels declared in tests/python/*.py, loaded through the plugin as the
// command line does, run by the harness's runner and campaign.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "harness/campaign/campaign.h"
#include "harness/case/case_file.h"
#include "harness/case/generators.h"
#include "kernels/registry.h"
#include "tests/temp_dir.h"

namespace afz {
namespace {

namespace fs = std::filesystem;

const std::string kPlugin = ATTNFUZZ_PYTHON_PLUGIN;
const std::string kKernels = std::string(ATTNFUZZ_SOURCE_DIR) + "/tests/python/bridge_kernels.py";
const std::string kMalformed = std::string(ATTNFUZZ_SOURCE_DIR) + "/tests/python/malformed_kernels.py";
// Quick classes (no 8K-key rows): a campaign of ~100 cases in seconds.
constexpr const char* kQuickClasses = "shapes=2,late_max=2,magnitude=1,masking=3,layouts=1";

// The interpreter CMake found with numpy, and this checkout's package.
struct PythonEnvironment : ::testing::Environment {
  void SetUp() override {
    ASSERT_STRNE(ATTNFUZZ_TEST_PYTHON, "") << "no Python 3 with numpy at configure time "
                                              "(.ci/install-deps.sh installs python3-numpy)";
    setenv("ATTNFUZZ_PYTHON", ATTNFUZZ_TEST_PYTHON, 1);
    setenv("ATTNFUZZ_PYTHONPATH", (std::string(ATTNFUZZ_SOURCE_DIR) + "/python").c_str(), 1);
  }
};
const auto* const kPythonEnvironment = ::testing::AddGlobalTestEnvironment(new PythonEnvironment);

std::string spec(const std::string& file, const std::string& name, const std::string& settings = "") {
  return kPlugin + "#" + file + ":" + name + settings;
}

const afz_kernel& load(KernelRegistry& r, const std::string& s, const std::string& name) {
  std::string error;
  EXPECT_TRUE(r.load_library(s, &error)) << error;
  const afz_kernel* k = r.find(name);
  if (!k) throw std::runtime_error("no kernel " + name + " after loading " + s + ": " + error);
  return *k;
}

using testing::TempDir;

CampaignOptions quick_campaign(std::vector<CampaignKernel> kernels, int64_t cases) {
  CampaignOptions o;
  o.kernels = std::move(kernels);
  o.seed = 5;
  o.cases = cases;
  std::string error;
  o.mix = *GeneratorMix::parse(kQuickClasses, &error);
  o.minimize_options.max_runs = 200;
  o.minimize_options.max_seconds = 1e9;
  return o;
}

int64_t failures_of(const Report& r) {
  int64_t n = 0;
  for (const ReportCell& c : r.cells) n += c.failed();
  return n;
}

// A causal case small enough to run everywhere: varlen, GQA, bottom-right.
Case causal_case() {
  ParseError error;
  auto parsed = parse_case(
      "attnfuzz-case 1\nbatch 2\nheads 2 1\nseqlen_q 5 3\nseqlen_k 7 3\nhead_dim 16\n"
      "dtype fp16\nscale 0.25\ncausal bottom_right\nseed 7\n",
      &error);
  if (!parsed) throw std::runtime_error("test case: " + error.format("causal_case"));
  return *parsed;
}

TEST(PythonBridge, DeclaredFieldsReachTheHarnessByName) {
  KernelRegistry r;
  const afz_kernel& k = load(r, spec(kKernels, "reference"), "py.numpy.reference");
  const uint32_t all = AFZ_CAP_CAUSAL_TOP_LEFT | AFZ_CAP_CAUSAL_BOTTOM_RIGHT | AFZ_CAP_WINDOW | AFZ_CAP_BOOL_MASK |
                       AFZ_CAP_ADD_MASK | AFZ_CAP_VARLEN | AFZ_CAP_GQA | AFZ_CAP_SOFTCAP | AFZ_CAP_LSE |
                       AFZ_CAP_STRIDED | AFZ_CAP_DV_NE_D;
  EXPECT_EQ(k.caps.flags, all);
  EXPECT_EQ(k.caps.in_dtypes, (1u << AFZ_F32) | (1u << AFZ_F16) | (1u << AFZ_BF16));
  EXPECT_EQ(k.caps.max_head_dim, 1024);
  EXPECT_EQ(k.precision.score_dtype, AFZ_F32);
  EXPECT_EQ(k.precision.exp_ulps, 1.0f);
  EXPECT_EQ(k.precision.l_from_unrounded_p, 1);
  EXPECT_EQ(k.conventions.empty_lse, AFZ_EMPTY_LSE_NEG_INF);
  EXPECT_NE(r.entry("py.numpy.reference")->version.find("numpy"), std::string::npos);
  EXPECT_EQ(r.entry("py.numpy.reference")->origin, spec(kKernels, "reference"));
}

TEST(PythonBridge, NumpyReferencePassesACampaign) {
  KernelRegistry r;
  const std::string s = spec(kKernels, "reference");
  const afz_kernel& k = load(r, s, "py.numpy.reference");
  Runner runner{RunOptions{}};
  CampaignOptions o = quick_campaign({{&k, s}}, 120);
  o.jobs = 2;  // two harness threads: two Python workers
  const Report report = run_campaign(o, runner);
  EXPECT_EQ(failures_of(report), 0) << (report.failures.empty() ? "" : report.failures[0].detail);
  int64_t passed = 0;
  for (const ReportCell& c : report.cells) passed += c.count(VerdictClass::Pass);
  EXPECT_GT(passed, 100);
}

TEST(PythonBridge, PlantedDefectIsKilledAndMinimized) {
  KernelRegistry r;
  const std::string s = spec(kKernels, "planted");
  const afz_kernel& k = load(r, s, "py.test.causal_off_by_one");
  TempDir corpus("attnfuzz-python-planted");
  Runner runner{RunOptions{}};
  CampaignOptions o = quick_campaign({{&k, s}}, 200);
  o.corpus_dir = corpus.path.string();
  o.stop_after_failures = 1;
  const Report report = run_campaign(o, runner);
  ASSERT_FALSE(report.failures.empty()) << "the causal off-by-one survived 200 cases";
  const ReportFailure& f = report.failures[0];
  EXPECT_TRUE(is_failure(f.verdict));
  EXPECT_LT(f.minimize.to_elements, f.minimize.from_elements);
  ASSERT_TRUE(fs::exists(f.case_file)) << f.case_file;
  EXPECT_NE(f.repro.find(s), std::string::npos) << f.repro;
  // The saved repro fails again through the bridge, and the reference passes it.
  std::string error;
  auto saved = load_case_file(f.case_file, &error);
  ASSERT_TRUE(saved) << error;
  EXPECT_TRUE(is_failure(runner.run(k, *saved).verdict.cls));
  const afz_kernel& ref = load(r, spec(kKernels, "reference"), "py.numpy.reference");
  EXPECT_EQ(runner.run(ref, *saved).verdict.cls, VerdictClass::Pass);
}

TEST(PythonBridge, RaiseSegfaultAndHangAreVerdictsAndTheCampaignGoesOn) {
  KernelRegistry r;
  const std::string faulty = spec(kKernels, "faulty", ",timeout=2");
  std::string error;
  ASSERT_TRUE(r.load_library(faulty, &error)) << error;
  const afz_kernel& ref = load(r, spec(kKernels, "reference"), "py.numpy.reference");
  Runner runner{RunOptions{}};
  const Case c = causal_case();
  for (int round = 0; round < 2; ++round) {  // the second round runs on restarted workers
    const Verdict raised = runner.run(*r.find("py.test.raises"), c).verdict;
    EXPECT_EQ(raised.cls, VerdictClass::Crash);
    EXPECT_NE(raised.detail.find("Python exception: ValueError: planted failure"), std::string::npos)
        << raised.detail;
    const Verdict died = runner.run(*r.find("py.test.segfaults"), c).verdict;
    EXPECT_EQ(died.cls, VerdictClass::Crash);
    EXPECT_NE(died.detail.find("signal 11"), std::string::npos) << died.detail;
    const Verdict hung = runner.run(*r.find("py.test.hangs"), c).verdict;
    EXPECT_EQ(hung.cls, VerdictClass::Hang) << hung.detail;
    EXPECT_EQ(runner.run(ref, c).verdict.cls, VerdictClass::Pass);
  }
  // A campaign over them all finishes with every case judged.
  CampaignOptions o = quick_campaign({{r.find("py.test.raises"), faulty}, {r.find("py.test.segfaults"), faulty},
                                      {r.find("py.test.hangs"), faulty}, {&ref, spec(kKernels, "reference")}},
                                     3);
  o.minimize = false;
  const Report report = run_campaign(o, runner);
  EXPECT_EQ(report.run.cases, 3);
  int64_t hangs = 0, crashes = 0, passes = 0;
  for (const ReportCell& cell : report.cells) {
    hangs += cell.count(VerdictClass::Hang);
    crashes += cell.count(VerdictClass::Crash);
    if (cell.kernel == "py.numpy.reference") passes += cell.count(VerdictClass::Pass) + cell.count(VerdictClass::Unsupported);
  }
  EXPECT_EQ(hangs, 3);
  EXPECT_EQ(crashes, 6);
  EXPECT_EQ(passes, 3);
}

TEST(PythonBridge, IsolatedRunsStartTheirOwnWorker) {
  KernelRegistry r;
  const afz_kernel& ref = load(r, spec(kKernels, "reference"), "py.numpy.reference");
  RunOptions isolated;
  isolated.isolate = true;
  Runner runner{isolated};
  const Case c = causal_case();
  EXPECT_EQ(runner.run(ref, c).verdict.cls, VerdictClass::Pass);
  EXPECT_EQ(Runner{RunOptions{}}.run(ref, c).verdict.cls, VerdictClass::Pass);  // the parent's worker still serves
}

TEST(PythonBridge, ADecliningKernelIsUnsupported) {
  KernelRegistry r;
  const afz_kernel& k = load(r, spec(kKernels, "declines"), "py.test.declines");
  const Verdict v = Runner{RunOptions{}}.run(k, causal_case()).verdict;
  EXPECT_EQ(v.cls, VerdictClass::Unsupported);
  EXPECT_EQ(v.detail, "this kernel declines every problem");
}

// The H200 modules import their library only when called: declaring them
// needs numpy alone, and without torch / jax they decline with the reason.
TEST(PythonBridge, GpuModulesDeclineWhereTheirLibraryIsMissing) {
  KernelRegistry r;
  std::string error;
  for (const char* target : {"flex:kernels", "sdpa:kernels", "jax_dpa:kernels", "triton_fa:kernel"})
    ASSERT_TRUE(r.load_library(kPlugin + "#attnfuzz.kernels." + target, &error)) << error;
  ASSERT_EQ(r.entries().size(), 9u);
  for (const KernelEntry& e : r.entries()) {
    const Verdict v = Runner{RunOptions{}}.run(*e.kernel, causal_case()).verdict;
    if (v.cls == VerdictClass::Pass) continue;  // this interpreter has the library after all
    EXPECT_EQ(v.cls, VerdictClass::Unsupported) << e.kernel->name << ": " << v.detail;
  }
}

// Each malformed declaration or configuration: one line naming what is wrong.
TEST(PythonBridge, MalformedDeclarationsGiveOneLineErrors) {
  const struct {
    std::string spec, expect;
  } cases[] = {
      {spec(kMalformed, "unknown_flag"), "caps.flags: unknown flag 'casual_top_left'"},
      {spec(kMalformed, "missing_precision"), "precision.exp_ulps: missing"},
      {spec(kMalformed, "bad_dtype"), "caps.in_dtypes: unknown dtype 'fp64'"},
      {spec(kMalformed, "unknown_field"), "conventions.masked_rows: unknown field"},
      {spec(kMalformed, "bad_head_dims"), "caps.max_head_dim: 0 is below 1"},
      {spec(kMalformed, "bad_convention"), "conventions.empty_lse: 'zero' is not one of"},
      {spec(kMalformed, "gpu_flag"), "'gpu' is not declared"},
      {spec(kMalformed, "bad_name"), "name: expected a non-empty name without spaces"},
      {spec(kMalformed, "not_a_kernel"), "expected an attnfuzz.Kernel or a list of them, got int"},
      {spec(kMalformed, "no_such_attribute"), "has no attribute 'no_such_attribute'"},
      {kPlugin + "#no_such_module_anywhere:kernel", "ModuleNotFoundError"},
      {spec(kKernels, "reference", ",timeout=soon"), "timeout=soon: expected a positive number"},
      {spec(kKernels, "reference", ",speed=fast"), "unknown setting 'speed=fast'"},
      {kPlugin + "#", "no Python target"},
      {kPlugin + "#reference", "expected module:name or path/to/file.py:name"},
  };
  for (const auto& c : cases) {
    KernelRegistry r;
    std::string error;
    EXPECT_FALSE(r.load_library(c.spec, &error)) << c.spec;
    EXPECT_NE(error.find(c.expect), std::string::npos) << "error: " << error << "\nexpected: " << c.expect;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    EXPECT_TRUE(r.entries().empty());
  }
}

TEST(PythonBridge, AWrongInterpreterIsOneLine) {
  KernelRegistry r;
  std::string error;
  setenv("ATTNFUZZ_PYTHON", "/nonexistent/python3", 1);
  EXPECT_FALSE(r.load_library(spec(kKernels, "reference"), &error));
  setenv("ATTNFUZZ_PYTHON", ATTNFUZZ_TEST_PYTHON, 1);
  EXPECT_NE(error.find("could not be started"), std::string::npos) << error;
}

}  // namespace
}  // namespace afz
