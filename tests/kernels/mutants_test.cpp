// The mutant zoo and its gate.
//
// Each mutant is killed, through the real harness (materialize, oracle,
// verdict), by a hand-written case aimed at its defect, and every reference
// kernel passes every one of those cases: the cases are fair and the
// defects are real.  Mutants declare exactly their parent's caps, precision,
// conventions and block sizes.  The gate kills a real mutant and fails on a
// harmless "mutant" that is the reference kernel itself.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "harness/campaign/corpus.h"
#include "harness/campaign/mutant_gate.h"
#include "harness/case/case_file.h"
#include "harness/run/runner.h"
#include "kernels/cpu/splitkv.h"
#include "kernels/cpu/tiled.h"
#include "kernels/mutants/mutants.h"
#include "kernels/registry.h"

namespace afz {
namespace {

// A case aimed at a defect: the mutants it must kill.
struct AimedCase {
  const char* why;
  std::vector<const char*> kills;
  const char* text;
};

const std::vector<AimedCase>& aimed_cases() {
  static const std::vector<AimedCase> cases = {
      {"late maxima: the largest scores in the last keys of a three-block row",
       {"cpu.mutant.acc_not_rescaled", "cpu.mutant.l_not_rescaled", "cpu.mutant.splitkv_merge_unscaled"},
       "attnfuzz-case 1\nseqlen_q 4\nseqlen_k 300\nhead_dim 16\ndtype fp32\n"
       "transform late_max count=2 boost=20\nseed 0x11\n"},
      {"ordinary scores over four key blocks: every block adds a comparable share of l",
       {"cpu.mutant.fa1_wrong_ratio"},
       "attnfuzz-case 1\nseqlen_q 4\nseqlen_k 200\nhead_dim 16\ndtype fp32\nseed 0x1b\n"},
      {"every score near -200: below fp32's exp underflow without the max subtracted",
       {"cpu.mutant.max_init_zero", "cpu.mutant.no_max_subtraction"},
       "attnfuzz-case 1\nseqlen_q 3\nseqlen_k 40\nhead_dim 16\ndtype fp32\n"
       "transform shift_scores offset=-200\nseed 0x12\n"},
      {"a narrow causal window: the second query tile's rows see nothing in its first key block",
       {"cpu.mutant.no_mref_guard", "cpu.mutant.nan_fixed_at_end"},
       "attnfuzz-case 1\nseqlen_q 100\nseqlen_k 100\nhead_dim 8\ndtype fp32\nwindow 2 0 top_left\nseed 0x13\n"},
      {"rows at +100 and -100 inside one query tile",
       {"cpu.mutant.tile_scalar_max"},
       "attnfuzz-case 1\nseqlen_q 8\nseqlen_k 24\nhead_dim 16\ndtype fp32\n"
       "transform row_contrast amp=100\nseed 0x14\n"},
      {"a flat row of 3000 keys: l grows to about 3000",
       {"cpu.mutant.l_in_bf16"},
       "attnfuzz-case 1\nseqlen_q 2\nseqlen_k 3000\nhead_dim 16\ndtype fp32\n"
       "transform flat eps=0.0009765625\nseed 0x15\n"},
      {"fp16 scores near +20: exp(s) past fp16's 65504 before the P.V product",
       {"cpu.mutant.no_max_subtraction"},
       "attnfuzz-case 1\nseqlen_q 3\nseqlen_k 20\nhead_dim 16\ndtype fp16\n"
       "transform shift_scores offset=20\nseed 0x16\n"},
      {"varlen: a 40-key sequence next to a 100-key one, NaN in its padding",
       {"cpu.mutant.partial_block_unmasked"},
       "attnfuzz-case 1\nbatch 2\nseqlen_q 3\nseqlen_k 100 40\nhead_dim 16\ndtype fp32\npoison nan\nseed 0x17\n"},
      {"causal, top-left",
       {"cpu.mutant.causal_off_by_one"},
       "attnfuzz-case 1\nseqlen_q 20\nseqlen_k 20\nhead_dim 16\ndtype fp32\ncausal top_left\nseed 0x18\n"},
      {"a plain small case: scale 1/4, LSE checked, scores spread",
       {"cpu.mutant.scale_dropped", "cpu.mutant.lse_log2", "cpu.mutant.exp2_no_log2e"},
       "attnfuzz-case 1\nseqlen_q 8\nseqlen_k 8\nhead_dim 16\ndtype fp32\nseed 0x19\n"},
  };
  return cases;
}

Case parse_or_die(const char* text) {
  ParseError e;
  std::optional<Case> c = parse_case(text, &e);
  if (!c) throw std::runtime_error(e.format("<aimed case>"));
  return *c;
}

const Runner& runner() {
  static const Runner r{RunOptions{}};
  return r;
}

TEST(MutantZoo, EveryDefectIsRegisteredOnceWithOriginMutant) {
  const KernelRegistry reg = KernelRegistry::with_builtins();
  std::set<std::string> names;
  for (const MutantInfo& m : cpu_mutants()) {
    EXPECT_TRUE(names.insert(m.kernel.name).second) << m.kernel.name;
    EXPECT_EQ(std::string(m.kernel.name).rfind("cpu.mutant.", 0), 0u) << m.kernel.name;
    EXPECT_EQ(reg.find(m.kernel.name), &m.kernel);
    EXPECT_EQ(find_mutant(m.kernel.name), &m);
  }
  for (const KernelEntry& e : reg.entries()) {
    // The GPU zoo (gpu.mutant.*, registered where a device is present) has
    // its own table and tests; every other mutant must be in the CPU table.
    if (e.origin != kMutantOrigin || std::string(e.kernel->name).rfind("gpu.", 0) == 0) continue;
    EXPECT_TRUE(names.count(e.kernel->name)) << e.kernel->name;
  }
  EXPECT_GE(names.size(), 12u);  // the list, at least
}

// Nothing but the outputs may tell the harness that a mutant is broken.
TEST(MutantZoo, MutantsDeclareExactlyTheirParentsCapsAndBlockSizes) {
  const KernelRegistry reg = KernelRegistry::with_builtins();
  for (const MutantInfo& m : cpu_mutants()) {
    SCOPED_TRACE(m.kernel.name);
    const afz_kernel* parent = reg.find(m.parent);
    ASSERT_NE(parent, nullptr) << m.parent;
    const afz_caps &a = m.kernel.caps, &b = parent->caps;
    EXPECT_EQ(a.flags, b.flags);
    EXPECT_EQ(a.in_dtypes, b.in_dtypes);
    EXPECT_EQ(a.out_dtypes, b.out_dtypes);
    EXPECT_EQ(a.min_head_dim, b.min_head_dim);
    EXPECT_EQ(a.max_head_dim, b.max_head_dim);
    EXPECT_EQ(a.head_dim_multiple, b.head_dim_multiple);
    EXPECT_EQ(a.max_seqlen, b.max_seqlen);
    const afz_precision &p = m.kernel.precision, &q = parent->precision;
    EXPECT_EQ(p.score_dtype, q.score_dtype);
    EXPECT_EQ(p.p_dtype, q.p_dtype);
    EXPECT_EQ(p.acc_dtype, q.acc_dtype);
    EXPECT_EQ(p.exp_ulps, q.exp_ulps);
    EXPECT_EQ(p.flush_subnormals, q.flush_subnormals);
    EXPECT_EQ(m.kernel.conventions.masked_row_output, parent->conventions.masked_row_output);
    EXPECT_EQ(m.kernel.conventions.empty_lse, parent->conventions.empty_lse);
    EXPECT_EQ(m.kernel.supports, parent->supports);
    ASSERT_NE(m.kernel.user, nullptr);
    ASSERT_NE(parent->user, nullptr);
    if (std::string(m.parent) == "cpu.splitkv") {
      const auto& x = *static_cast<const cpu::SplitKvConfig*>(m.kernel.user);
      const auto& y = *static_cast<const cpu::SplitKvConfig*>(parent->user);
      EXPECT_EQ(x.splits, y.splits);
      EXPECT_EQ(x.br, y.br);
      EXPECT_EQ(x.bc, y.bc);
    } else {
      const auto& x = *static_cast<const cpu::TiledConfig*>(m.kernel.user);
      const auto& y = *static_cast<const cpu::TiledConfig*>(parent->user);
      EXPECT_EQ(x.br, y.br);
      EXPECT_EQ(x.bc, y.bc);
    }
  }
}

TEST(MutantZoo, EveryMutantHasAnAimedCase) {
  std::set<std::string> aimed;
  for (const AimedCase& a : aimed_cases()) aimed.insert(a.kills.begin(), a.kills.end());
  for (const MutantInfo& m : cpu_mutants()) EXPECT_TRUE(aimed.count(m.kernel.name)) << m.kernel.name;
}

TEST(MutantZoo, EveryReferenceKernelPassesTheAimedCases) {
  const KernelRegistry reg = KernelRegistry::with_builtins();
  for (const AimedCase& a : aimed_cases()) {
    const Case c = parse_or_die(a.text);
    for (const KernelEntry& e : reg.entries()) {
      if (e.origin != "builtin" || std::string(e.kernel->name).rfind("cpu.", 0) != 0) continue;
      const CaseOutcome out = runner().run(*e.kernel, c);
      EXPECT_EQ(out.verdict.cls, VerdictClass::Pass)
          << e.kernel->name << " on \"" << a.why << "\": " << verdict_name(out.verdict.cls) << " "
          << out.verdict.detail;
    }
  }
}

TEST(MutantZoo, EachMutantIsKilledByItsAimedCase) {
  for (const AimedCase& a : aimed_cases()) {
    const Case c = parse_or_die(a.text);
    for (const char* name : a.kills) {
      const MutantInfo* m = find_mutant(name);
      ASSERT_NE(m, nullptr) << name;
      const CaseOutcome out = runner().run(m->kernel, c);
      EXPECT_TRUE(is_failure(out.verdict.cls)) << name << " survived \"" << a.why << "\"";
      std::printf("%-36s %-18s by: %s\n", name, std::string(verdict_name(out.verdict.cls)).c_str(), a.why);
    }
  }
}

// The FA1 ratio error hides under a late maximum: alpha ~ e^-20 wipes the
// old output either way, and the answer is the last keys' average.
TEST(MutantZoo, LateMaximaHideTheFa1RatioError) {
  const Case late = parse_or_die(aimed_cases().front().text);
  const CaseOutcome out = runner().run(find_mutant("cpu.mutant.fa1_wrong_ratio")->kernel, late);
  EXPECT_EQ(out.verdict.cls, VerdictClass::Pass) << out.verdict.detail;
}

// A mutant whose defect needs a feature survives cases without it: the
// defects are specific, not random noise that any case would expose.
TEST(MutantZoo, DefectsNeedTheirTrigger) {
  const Case plain = parse_or_die(aimed_cases().back().text);  // one block, no mask, moderate scores
  for (const char* name : {"cpu.mutant.acc_not_rescaled", "cpu.mutant.l_not_rescaled", "cpu.mutant.max_init_zero",
                           "cpu.mutant.no_mref_guard", "cpu.mutant.tile_scalar_max", "cpu.mutant.no_max_subtraction",
                           "cpu.mutant.partial_block_unmasked", "cpu.mutant.causal_off_by_one",
                           "cpu.mutant.splitkv_merge_unscaled", "cpu.mutant.fa1_wrong_ratio"}) {
    const CaseOutcome out = runner().run(find_mutant(name)->kernel, plain);
    EXPECT_EQ(out.verdict.cls, VerdictClass::Pass) << name << ": " << out.verdict.detail;
  }
}

// Fully masked rows expose the missing guard, but not a kernel that patches
// NaN rows at the end: that one needs a row whose first visible key comes
// after a key block it saw nothing in.
TEST(MutantZoo, NaNPatchedAtTheEndSurvivesFullyMaskedRowsOnly) {
  const Case masked_rows = parse_or_die(
      "attnfuzz-case 1\nseqlen_q 9\nseqlen_k 100\nhead_dim 8\ndtype fp32\nbool_mask rows_every 3 1\nseed 0x1a\n");
  EXPECT_TRUE(is_failure(runner().run(find_mutant("cpu.mutant.no_mref_guard")->kernel, masked_rows).verdict.cls));
  const CaseOutcome out = runner().run(find_mutant("cpu.mutant.nan_fixed_at_end")->kernel, masked_rows);
  EXPECT_EQ(out.verdict.cls, VerdictClass::Pass) << out.verdict.detail;
}

// corpora/mutants holds the gate's minimized kills: each still kills the
// mutant it names and passes every reference kernel (what `attnfuzz replay
// corpora/mutants` and `replay corpora/mutants --kernel all` check in CI).
TEST(MutantCorpus, EverySavedKillStillKillsItsMutantAndNoReference) {
  const std::string dir = std::string(ATTNFUZZ_SOURCE_DIR) + "/corpora/mutants";
  std::string error;
  const std::optional<std::vector<std::string>> files = list_case_files(dir, &error);
  ASSERT_TRUE(files) << error;
  const KernelRegistry reg = KernelRegistry::with_builtins();
  std::set<std::string> killed;
  for (const std::string& file : *files) {
    SCOPED_TRACE(file);
    const std::optional<Case> c = load_case_file(file, &error);
    ASSERT_TRUE(c) << error;
    EXPECT_FALSE(c->provenance.empty());
    const MutantInfo* m = find_mutant(c->kernel);
    ASSERT_NE(m, nullptr) << "names no mutant: " << c->kernel;
    EXPECT_TRUE(is_failure(runner().run(m->kernel, *c).verdict.cls));
    killed.insert(c->kernel);
    for (const KernelEntry& e : reg.entries()) {
      if (e.origin != "builtin" || std::string(e.kernel->name).rfind("cpu.", 0) != 0) continue;
      const CaseOutcome out = runner().run(*e.kernel, *c);
      EXPECT_EQ(out.verdict.cls, VerdictClass::Pass) << e.kernel->name << ": " << out.verdict.detail;
    }
  }
  for (const MutantInfo& m : cpu_mutants()) EXPECT_TRUE(killed.count(m.kernel.name)) << m.kernel.name << " has no saved kill";
}

class TempDir {
 public:
  explicit TempDir(const std::string& tag)
      : path_(std::filesystem::temp_directory_path() / ("attnfuzz_" + tag + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

TEST(MutantGate, KillsARealMutantAndSavesTheMinimizedCase) {
  TempDir corpus("mutant_gate_kill");
  MutantGateOptions o;
  o.seed = 7;
  o.budget_cases = 200;
  o.time_per_mutant_s = 20;
  o.corpus_dir = corpus.str();
  o.minimize_options.max_seconds = 5;
  const MutantInfo* m = find_mutant("cpu.mutant.causal_off_by_one");
  ASSERT_NE(m, nullptr);
  const MutantGateResult r = run_mutant_gate({{&m->kernel, std::string(kMutantOrigin)}}, o, runner());
  ASSERT_EQ(r.rows.size(), 1u);
  const MutantRow& row = r.rows[0];
  ASSERT_TRUE(row.killed) << "survived " << row.cases << " cases";
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(r.killed, 1);
  EXPECT_GE(row.cases, 1);
  EXPECT_LE(row.cases, o.budget_cases);
  ASSERT_TRUE(row.kill);
  EXPECT_TRUE(is_failure(row.kill->verdict));
  // The campaign stopped at the kill: the killing case is the last one run.
  EXPECT_EQ(row.campaign.run.cases, row.cases);
  ASSERT_TRUE(r.median_s && r.worst_s);
  EXPECT_EQ(*r.median_s, row.seconds);
  // Saved with provenance, naming the mutant, and it still kills it.
  std::string error;
  std::optional<Case> saved = load_case_file(row.kill->case_file, &error);
  ASSERT_TRUE(saved) << error;
  EXPECT_EQ(saved->kernel, m->kernel.name);
  EXPECT_FALSE(saved->provenance.empty());
  EXPECT_TRUE(saved->has_window) << "a causal defect needs a causal case";
  EXPECT_TRUE(is_failure(runner().run(m->kernel, *saved).verdict.cls));
  EXPECT_NE(row.case_summary.find("causal"), std::string::npos) << row.case_summary;

  const Report rep = mutant_gate_report(r, o, runner().oracle_name(), 1.0);
  EXPECT_EQ(rep.run.kind, "mutants");
  ASSERT_EQ(rep.mutants.size(), 1u);
  EXPECT_TRUE(rep.mutants[0].killed);
  EXPECT_EQ(rep.mutants[0].cases_to_kill, row.cases);
  EXPECT_EQ(rep.run.stop_reason, "kills");
  EXPECT_TRUE(rep.passed()) << "a mutant run passes on its kills";
}

// The gate's reason to exist: a "mutant" that is in fact correct survives,
// and the gate fails.
TEST(MutantGate, FailsWhenAMutantSurvives) {
  static const cpu::TiledConfig kConfig{64, 64};
  const afz_kernel harmless =
      cpu::emulating_kernel("test.harmless_mutant", "the reference itself", cpu::tiled_entry<cpu::Fa2Steps>, &kConfig);
  MutantGateOptions o;
  o.seed = 3;
  o.budget_cases = 25;
  o.time_per_mutant_s = 20;
  const MutantGateResult r = run_mutant_gate({{&harmless, "test"}}, o, runner());
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_FALSE(r.rows[0].killed);
  EXPECT_EQ(r.rows[0].cases, 25);
  EXPECT_EQ(r.rows[0].stop_reason, "cases");
  EXPECT_EQ(r.survived, 1);
  EXPECT_FALSE(r.passed());
  EXPECT_FALSE(r.median_s);
  const Report rep = mutant_gate_report(r, o, runner().oracle_name(), 1.0);
  ASSERT_EQ(rep.mutants.size(), 1u);
  EXPECT_FALSE(rep.mutants[0].killed);
  EXPECT_EQ(rep.mutants[0].cases_to_kill, -1);
  EXPECT_EQ(rep.run.stop_reason, "cases");
  EXPECT_FALSE(rep.passed());
}

// A mutant that declines every case (a GPU mutant without a device) tells
// nothing about the generators: untested, neither killed nor a survivor,
// and a gate that tested nothing fails.
TEST(MutantGate, AMutantThatDeclinesEverythingIsUntested) {
  static const cpu::TiledConfig kConfig{64, 64};
  afz_kernel declines = cpu::emulating_kernel("test.declines_all", "takes no dtype", cpu::tiled_entry<cpu::Fa2Steps>,
                                              &kConfig);
  declines.caps.in_dtypes = 0;
  MutantGateOptions o;
  o.budget_cases = 10;
  const MutantInfo* real = find_mutant("cpu.mutant.scale_dropped");
  MutantGateResult r = run_mutant_gate({{&declines, "test"}}, o, runner());
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_TRUE(r.rows[0].untested);
  EXPECT_FALSE(r.rows[0].killed);
  EXPECT_EQ(r.untested, 1);
  EXPECT_EQ(r.survived, 0);
  EXPECT_FALSE(r.passed()) << "nothing was tested";
  r = run_mutant_gate({{&declines, "test"}, {&real->kernel, "mutant"}}, o, runner());
  EXPECT_EQ(r.untested, 1);
  EXPECT_EQ(r.killed, 1);
  EXPECT_TRUE(r.passed());
  const Report rep = mutant_gate_report(r, o, runner().oracle_name(), 1.0);
  ASSERT_EQ(rep.mutants.size(), 1u);
  EXPECT_EQ(rep.mutants[0].kernel, real->kernel.name);
  EXPECT_TRUE(rep.passed());
}

TEST(MutantGate, RejectsUnusableOptions) {
  MutantGateOptions o;
  EXPECT_THROW(run_mutant_gate({}, o, runner()), std::runtime_error);
  const afz_kernel& k = cpu_mutants().front().kernel;
  o.budget_cases = 0;
  EXPECT_THROW(run_mutant_gate({{&k, "mutant"}}, o, runner()), std::runtime_error);
  o.budget_cases = 10;
  o.time_per_mutant_s = 0;
  EXPECT_THROW(run_mutant_gate({{&k, "mutant"}}, o, runner()), std::runtime_error);
}

TEST(MutantGate, CaseSummaryNamesTheIngredients) {
  const Case c = parse_or_die(
      "attnfuzz-case 1\nbatch 2\nheads 4 2\nseqlen_q 1 3\nseqlen_k 65 40\nhead_dim 64 32\ndtype bf16 fp32\n"
      "causal bottom_right\nadd_mask -1e4 rows_every 3 1\nlayout bshd\npoison inf\n"
      "transform late_max count=5 boost=20\n");
  EXPECT_EQ(case_summary(c),
            "b2 hq4/hkv2 q=1,3 k=65,40 d=64/32 bf16->fp32 causal(br) add_mask(-10000 rows_every 3 1) bshd "
            "poison(inf) t:late_max(count=5,boost=20)");
  EXPECT_EQ(median_of({3, 1, 2}), 2);
  EXPECT_EQ(median_of({4, 1, 2, 3}), 2.5);
  EXPECT_EQ(median_of({}), 0);
}

}  // namespace
}  // namespace afz
