#include "harness/campaign/corpus.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "harness/campaign/campaign.h"
#include "harness/case/case_file.h"
#include "harness/case/generators.h"
#include "kernels/registry.h"
#include "tests/harness/planted_kernel.h"
#include "tests/temp_dir.h"

namespace afz {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;

Case small(int sk) {
  Case c;
  c.kernel = "k";
  c.seqlens_q = {1};
  c.seqlens_k = {sk};
  c.head_dim = c.head_dim_v = 4;
  return c;
}

TEST(Corpus, SavesKeepsTheSmallestAndResumes) {
  TempDir dir("afz-corpus");
  std::string error, path;
  {
    std::optional<Corpus> corpus = Corpus::open(dir.str(), &error);
    ASSERT_TRUE(corpus) << error;
    EXPECT_FALSE(fs::exists(dir.path)) << "nothing found, nothing created";
    EXPECT_EQ(corpus->save(small(50), "k|numeric_mismatch|dtype=bf16|q1.k64", "raw1", &path, &error),
              Corpus::Saved::New);
    const std::string first_path = path;
    EXPECT_TRUE(fs::exists(path));
    // Larger: kept out, but its raw signature is remembered.
    EXPECT_EQ(corpus->save(small(60), "k|numeric_mismatch|dtype=bf16|q1.k64", "raw2", &path, &error),
              Corpus::Saved::KeptExisting);
    EXPECT_EQ(path, first_path);
    // Smaller: replaces the file in place.
    EXPECT_EQ(corpus->save(small(40), "k|numeric_mismatch|dtype=bf16|q1.k64", "raw3", &path, &error),
              Corpus::Saved::Smaller);
    EXPECT_EQ(path, first_path);
    EXPECT_EQ(corpus->save(small(3), "k|nan_inf|dtype=bf16|q1.k16", "raw4", &path, &error), Corpus::Saved::New);
    EXPECT_EQ(corpus->size(), 2u);
  }
  const std::optional<Corpus> reopened = Corpus::open(dir.str(), &error);
  ASSERT_TRUE(reopened) << error;
  EXPECT_EQ(reopened->size(), 2u);
  EXPECT_TRUE(reopened->load_errors().empty());
  const CorpusEntry* e = reopened->find("k|numeric_mismatch|dtype=bf16|q1.k64");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->c.seqlens_k, std::vector<int32_t>{40});
  for (const char* raw : {"raw1", "raw2", "raw3"}) EXPECT_EQ(reopened->find_seen(raw), e) << raw;
  EXPECT_EQ(reopened->find_seen("raw4"), reopened->find("k|nan_inf|dtype=bf16|q1.k16"));
  EXPECT_EQ(reopened->find_seen("never"), nullptr);
  std::string error2;
  auto files = list_case_files(dir.str(), &error2);
  ASSERT_TRUE(files);
  EXPECT_EQ(files->size(), 2u);
}

TEST(Corpus, ListsCaseFilesSortedAndReportsBadFolders) {
  TempDir dir("afz-corpus-list");
  fs::create_directories(dir.path / "sub");
  for (const char* name : {"b.case", "a.case", "notes.txt", "c.case.tmp"}) std::ofstream(dir.path / name) << "x";
  std::string error;
  auto files = list_case_files(dir.str(), &error);
  ASSERT_TRUE(files) << error;
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ(fs::path((*files)[0]).filename(), "a.case");
  EXPECT_EQ(fs::path((*files)[1]).filename(), "b.case");
  EXPECT_FALSE(list_case_files((dir.path / "missing").string(), &error));
  EXPECT_NE(error.find("cannot read the folder"), std::string::npos) << error;
  // Malformed files do not stop a corpus from opening; they are listed.
  const std::optional<Corpus> corpus = Corpus::open(dir.str(), &error);
  ASSERT_TRUE(corpus) << error;
  EXPECT_EQ(corpus->load_errors().size(), 2u);
}

struct ResumeFixture : ::testing::Test {
  testing::PlantedKernel broken{"planted.k37"};
  Runner runner{RunOptions{}};
  ResumeFixture() { broken.defect = testing::more_than_37_keys; }

  CampaignOptions options(const std::string& corpus) const {
    CampaignOptions o;
    o.kernels = {{&broken.k, "builtin"}};
    o.seed = 5;
    o.cases = 20;
    std::string error;
    o.mix = *GeneratorMix::parse("shapes,late_max,masking", &error);
    o.corpus_dir = corpus;
    o.minimize_options.max_runs = 150;
    return o;
  }
};

// A restarted campaign with the same corpus finds the same bugs, knows
// them, and does not minimize them again.
TEST_F(ResumeFixture, RestartWithTheSameCorpusResumes) {
  TempDir dir("afz-corpus-resume");
  const Report first = run_campaign(options(dir.str()), runner);
  ASSERT_FALSE(first.failures.empty());
  EXPECT_EQ(first.new_failures(), int64_t(first.failures.size()));
  std::string error;
  const size_t files = list_case_files(dir.str(), &error)->size();
  EXPECT_EQ(files, first.failures.size());

  const Report second = run_campaign(options(dir.str()), runner);
  EXPECT_EQ(second.new_failures(), 0);
  ASSERT_EQ(second.failures.size(), first.failures.size());
  for (size_t i = 0; i < second.failures.size(); ++i) {
    const ReportFailure& f = second.failures[i];
    EXPECT_EQ(f.status, "known");
    EXPECT_EQ(f.signature, first.failures[i].signature);
    EXPECT_EQ(f.occurrences, first.failures[i].occurrences);
    // Its first raw signature is listed in the file, so it was taken from the
    // corpus; raw signatures past kSeenAsExamples are minimized again and
    // only bump the file's count (the repro itself stays).
    EXPECT_EQ(f.minimize.runs, 0) << "not minimized again";
    std::optional<Case> before = parse_case(first.failures[i].case_text, nullptr);
    std::optional<Case> now = load_case_file(f.case_file, &error);
    ASSERT_TRUE(before && now) << error;
    before->provenance.clear();
    now->provenance.clear();
    EXPECT_EQ(*now, *before) << "the saved repro is the first run's";
  }
  EXPECT_EQ(list_case_files(dir.str(), &error)->size(), files);
}

// However many raw signatures minimize to one repro, its file lists
// kSeenAsExamples of them and counts the rest.
TEST(Corpus, ProvenanceStaysBounded) {
  TempDir dir("afz-corpus-bounded");
  std::string error;
  std::optional<Corpus> corpus = Corpus::open(dir.str(), &error);
  ASSERT_TRUE(corpus) << error;
  Case c = generate_with(*find_generator("shapes"), 3, 0);
  c.kernel = "k";
  constexpr int kRaw = 40;
  std::string path;
  for (int n = 0; n < kRaw; ++n)
    ASSERT_TRUE(corpus->save(c, "k|numeric_mismatch|dtype=fp32|q1.k1", "raw" + std::to_string(n), &path, &error))
        << error;
  const std::optional<Case> saved = load_case_file(path, &error);
  ASSERT_TRUE(saved) << error;
  int listed = 0;
  std::string more;
  for (const std::string& p : saved->provenance) {
    listed += p.starts_with(kProvSeenAs) ? 1 : 0;
    if (p.starts_with(kProvSeenAsMore)) more = p.substr(kProvSeenAsMore.size());
  }
  EXPECT_EQ(listed, kSeenAsExamples);
  EXPECT_EQ(more, std::to_string(kRaw - kSeenAsExamples));
  // A smaller repro of the same signature inherits the list and the count.
  Case smaller = c;
  smaller.batch = 1;
  smaller.seqlens_q = {1};
  smaller.seqlens_k = {1};
  ASSERT_TRUE(corpus->save(smaller, "k|numeric_mismatch|dtype=fp32|q1.k1", "raw-new", &path, &error)) << error;
  const std::optional<Case> replaced = load_case_file(path, &error);
  ASSERT_TRUE(replaced) << error;
  EXPECT_NE(std::find(replaced->provenance.begin(), replaced->provenance.end(),
                      std::string(kProvSeenAsMore) + std::to_string(kRaw - kSeenAsExamples + 1)),
            replaced->provenance.end());
}

// `attnfuzz replay`: exit 0 while the corpus passes, 1 once a case fails,
// 2 for a malformed file or an unknown kernel.
TEST_F(ResumeFixture, ReplayExitCodes) {
  TempDir dir("afz-corpus-replay");
  const Report found = run_campaign(options(dir.str()), runner);
  ASSERT_FALSE(found.failures.empty());
  testing::PlantedKernel fixed("planted.fixed");
  KernelRegistry registry;
  registry.add(&broken.k, "test");
  registry.add(&fixed.k, "test");

  ReplayOptions o;
  o.dirs = {dir.str()};
  // Each file names planted.k37, which still fails.
  ReplayResult still = replay_corpus(o, registry, runner, nullptr, nullptr);
  EXPECT_EQ(still.exit_code(), 1);
  EXPECT_EQ(still.failed, int64_t(found.failures.size()));
  EXPECT_EQ(still.report.failures.size(), found.failures.size());
  EXPECT_EQ(still.report.failures[0].repro, "attnfuzz repro " + still.report.failures[0].case_file);

  // Against the fixed kernel every repro passes.
  o.kernels = {{&fixed.k, "test"}};
  ReplayResult green = replay_corpus(o, registry, runner, nullptr, nullptr);
  EXPECT_EQ(green.exit_code(), 0);
  EXPECT_EQ(green.passed, int64_t(found.failures.size()));
  EXPECT_EQ(green.report.run.kind, "replay");

  // A file naming an unknown kernel, and a malformed one: bad input.
  Case stray = small(3);
  stray.kernel = "no.such.kernel";
  std::string error;
  ASSERT_TRUE(save_case_file((dir.path / "stray.case").string(), stray, &error)) << error;
  o.kernels.clear();
  EXPECT_EQ(replay_corpus(o, registry, runner, nullptr, nullptr).exit_code(), 2);
  fs::remove(dir.path / "stray.case");
  std::ofstream(dir.path / "broken.case") << "attnfuzz-case 1\nbatch zero\n";
  o.kernels = {{&fixed.k, "test"}};
  EXPECT_EQ(replay_corpus(o, registry, runner, nullptr, nullptr).exit_code(), 2);
  o.dirs = {(dir.path / "missing").string()};
  EXPECT_EQ(replay_corpus(o, registry, runner, nullptr, nullptr).exit_code(), 2);
}

// Replay runs each file through the pass it records: a saved backward
// failure fails again under its backward kernel, reported as "NAME [bwd]"
// with pass "bwd"; --pass and named backward kernels override the file.
TEST(Replay, RunsEachFileThroughItsPass) {
  TempDir dir("afz-corpus-replay-pass");
  fs::create_directories(dir.path);
  const KernelRegistry registry = KernelRegistry::with_builtins();
  const Runner runner{RunOptions{}};
  std::string error;
  Case c = small(5);
  c.kernel = "cpu.bwd.mutant.lse_log2";
  c.pass = Pass::Bwd;
  ASSERT_TRUE(save_case_file((dir.path / "bwd.case").string(), c, &error)) << error;

  ReplayOptions o;
  o.dirs = {dir.str()};
  const ReplayResult saved = replay_corpus(o, registry, runner, nullptr, nullptr);
  EXPECT_EQ(saved.exit_code(), 1);
  ASSERT_EQ(saved.report.kernels.size(), 1u);
  EXPECT_EQ(saved.report.kernels[0].name, "cpu.bwd.mutant.lse_log2 [bwd]");
  EXPECT_EQ(saved.report.kernels[0].pass, "bwd");
  ASSERT_EQ(saved.report.failures.size(), 1u);
  EXPECT_EQ(saved.report.failures[0].repro, "attnfuzz repro " + (dir.path / "bwd.case").string());

  // The reference backward kernel named instead: it passes.
  o.backward_kernels = {"cpu.bwd.fa2"};
  EXPECT_EQ(replay_corpus(o, registry, runner, nullptr, nullptr).exit_code(), 0);

  // --pass fwd: the file's kernel is no forward kernel, a one-line bad input.
  o.backward_kernels.clear();
  o.pass = Pass::Fwd;
  EXPECT_EQ(replay_corpus(o, registry, runner, nullptr, nullptr).exit_code(), 2);

  // --pass both with a forward and a backward kernel: both run, and the
  // backward failure's repro asks for the backward pass alone.
  o.pass = Pass::Both;
  o.kernels = {{registry.find("cpu.tiled"), "builtin"}};
  o.backward_kernels = {"cpu.bwd.mutant.lse_log2"};
  c.pass = Pass::Fwd;
  ASSERT_TRUE(save_case_file((dir.path / "bwd.case").string(), c, &error)) << error;
  const ReplayResult both = replay_corpus(o, registry, runner, nullptr, nullptr);
  EXPECT_EQ(both.runs, 2);
  EXPECT_EQ(both.passed, 1);
  ASSERT_EQ(both.report.failures.size(), 1u);
  EXPECT_EQ(both.report.failures[0].repro,
            "attnfuzz repro --pass bwd --kernel cpu.bwd.mutant.lse_log2 " + (dir.path / "bwd.case").string());
}

}  // namespace
}  // namespace afz
