// `attnfuzz repro --minimize DIR FILE...`: a saved failure that fails again
// is shrunk and saved in DIR, one repro per signature, printed with its own
// repro line that fails again; a passing file saves nothing; an unusable
// folder is one line and exit 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "harness/case/case_file.h"
#include "harness/case/case_features.h"
#include "tests/harness/cli/cli_process.h"
#include "tests/temp_dir.h"

namespace afz {
namespace {

using testing::run_attnfuzz;

// 91,648 input elements through a backward mutant (dQ, dK miss the scale).
constexpr char kLargeBackward[] =
    "attnfuzz-case 1\nkernel cpu.bwd.mutant.ds_no_scale\npass bwd\nbatch 3\nheads 4\nseqlen_q 70 33 9\n"
    "seqlen_k 71 40 12\nhead_dim 64\ndtype bf16\ncausal bottom_right\n";

std::vector<std::string> case_files(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  if (!std::filesystem::exists(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".case") out.push_back(e.path().string());
  return out;
}

// The large case written into a fresh test folder; its path.
std::string write_large_case(const testing::TempDir& dir) {
  std::filesystem::create_directories(dir.path);
  const std::string path = dir.str() + "/large.case";
  std::ofstream(path) << kLargeBackward;
  return path;
}

TEST(ReproMinimize, SavesASmallerReproThatFailsAgain) {
  testing::TempDir dir("afz_repro_minimize");
  const std::string start = write_large_case(dir);
  const auto r = run_attnfuzz("repro --minimize " + dir.str() + "/min " + start);
  EXPECT_EQ(r.exit_code, 1) << r.output;  // the file fails again
  EXPECT_NE(r.output.find("  minimized: 91648 -> "), std::string::npos) << r.output;

  const std::vector<std::string> saved = case_files(dir.path / "min");
  ASSERT_EQ(saved.size(), 1u) << r.output;
  std::string err;
  const std::optional<Case> c = load_case_file(saved[0], &err);
  ASSERT_TRUE(c) << err;
  EXPECT_LT(case_size(*c).elements, 91648 / 100);
  EXPECT_EQ(c->kernel, "cpu.bwd.mutant.ds_no_scale");
  EXPECT_EQ(c->pass, Pass::Bwd);

  // Its printed repro line is the command that shows it again.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("    repro: attnfuzz (repro \\S+)\n"))) << r.output;
  const auto again = run_attnfuzz(m[1].str());
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("cpu.bwd.mutant.ds_no_scale [bwd]: numeric_mismatch"), std::string::npos) << again.output;

  // A second minimization of the same file finds its repro already there.
  const auto twice = run_attnfuzz("repro --minimize " + dir.str() + "/min " + start);
  EXPECT_NE(twice.output.find("the corpus already holds a repro of its signature"), std::string::npos) << twice.output;
  EXPECT_EQ(case_files(dir.path / "min").size(), 1u);
}

TEST(ReproMinimize, APassingFileSavesNothing) {
  testing::TempDir dir("afz_repro_minimize_pass");
  const std::string start = write_large_case(dir);
  const auto r = run_attnfuzz("repro --kernel cpu.bwd.fa2 --minimize " + dir.str() + "/min " + start);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("minimized:"), std::string::npos) << r.output;
  EXPECT_TRUE(case_files(dir.path / "min").empty());
}

TEST(ReproMinimize, AFolderThatIsAFileIsOneLine) {
  testing::TempDir dir("afz_repro_minimize_bad");
  const std::string start = write_large_case(dir), not_a_dir = dir.str() + "/file";
  std::ofstream(not_a_dir) << "x";
  const auto r = run_attnfuzz("repro --minimize " + not_a_dir + " " + start);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("attnfuzz: --minimize: "), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

}  // namespace
}  // namespace afz
