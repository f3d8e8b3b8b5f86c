// The scale-out manifests (deploy/): a Slurm array job and a Kubernetes
// Indexed Job that run `attnfuzz fuzz --shard K/N` and then merge.  They are
// not launched here; they are checked: shell syntax (bash -n), the shard
// count agreeing everywhere it is written, the index variable each
// scheduler sets, the merge step, YAML structure (a line-level check of the
// subset the manifest uses, plus PyYAML where it is installed), and the
// Slurm script run for real as its N array tasks and its merge on this
// machine with the built binary, its report equal to one run's cases.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "harness/report/report_views.h"
#include "tests/harness/report/report_fixture.h"

namespace afz {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string kSbatch = std::string(ATTNFUZZ_SOURCE_DIR) + "/deploy/slurm/attnfuzz-shards.sbatch";
const std::string kJob = std::string(ATTNFUZZ_SOURCE_DIR) + "/deploy/k8s/attnfuzz-shards.yaml";

int run_shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return status == -1 ? -1 : WEXITSTATUS(status);
}

bool have(const std::string& program) { return run_shell("command -v " + program + " >/dev/null 2>&1") == 0; }

// Every integer captured by `re` in `text`.
std::vector<int> all_numbers(const std::string& text, const std::regex& re) {
  std::vector<int> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back(std::stoi((*it)[1]));
  return out;
}

TEST(DeployManifests, SlurmArrayJobShardsAndMerges) {
  const std::string s = slurp(kSbatch);
  ASSERT_FALSE(s.empty()) << kSbatch;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(s, m, std::regex(R"(#SBATCH --array=0-(\d+)\n)")));
  const int tasks = std::stoi(m[1]) + 1;
  ASSERT_TRUE(std::regex_search(s, m, std::regex(R"(readonly SHARDS=(\d+)\n)")));
  EXPECT_EQ(std::stoi(m[1]), tasks) << "SHARDS must equal the number of array tasks";
  EXPECT_NE(s.find(R"(k="${SLURM_ARRAY_TASK_ID:?)"), std::string::npos);
  EXPECT_NE(s.find(R"(--shard "$k/$SHARDS")"), std::string::npos);
  EXPECT_NE(s.find(R"(--cases "$CASES")"), std::string::npos) << "--shard splits a case count";
  EXPECT_NE(s.find("report merge"), std::string::npos);
  if (!have("bash")) GTEST_SKIP() << "no bash: syntax not checked";
  EXPECT_EQ(run_shell("bash -n '" + kSbatch + "'"), 0);
}

// The script itself, run as its array tasks (SLURM_ARRAY_TASK_ID set by
// hand) and then as the merge, with the binary built beside the tests.
TEST(DeployManifests, SlurmScriptRunsAsItsTasksAndMerges) {
  const std::string binary = std::string(ATTNFUZZ_BINARY_DIR) + "/attnfuzz";
  if (!std::filesystem::exists(binary) || !have("bash"))
    GTEST_SKIP() << "needs bash and the attnfuzz binary (" << binary << "): build the attnfuzz target";
  std::smatch m;
  const std::string s = slurp(kSbatch);
  ASSERT_TRUE(std::regex_search(s, m, std::regex(R"(readonly SHARDS=(\d+)\n)")));
  const int shards = std::stoi(m[1]);
  const std::string out = testing::temp_folder("slurm-dry-run");
  // Small classes and one case per shard keep the whole run around a second.
  const std::string env = "ATTNFUZZ='" + binary + "' KERNELS=cpu.tiled SEED=4 CASES=" + std::to_string(shards) +
                          " OUT='" + out + "' ATTNFUZZ_GNUPLOT=/nonexistent";
  for (int k = 0; k < shards; ++k)
    ASSERT_EQ(run_shell(env + " SLURM_ARRAY_TASK_ID=" + std::to_string(k) + " bash '" + kSbatch + "' >/dev/null"), 0)
        << "task " << k;
  ASSERT_EQ(run_shell(env + " bash '" + kSbatch + "' merge >/dev/null"), 0);
  std::string error;
  const std::optional<Report> merged = read_report_folder(out + "/merged", &error);
  ASSERT_TRUE(merged) << error;
  EXPECT_EQ(merged->run.cases, shards);
  EXPECT_EQ(merged->run.first_case, 0);
  ASSERT_EQ(merged->cases.size(), size_t(shards));
  for (int i = 0; i < shards; ++i) EXPECT_EQ(merged->cases[size_t(i)].index, i);
}

// YAML as the manifest writes it: spaces only, indentation in steps of two,
// every line a comment, a document separator, `key:`, `key: value`, a list
// item, or the continuation of a folded block (`>-`) indented below its key.
std::vector<std::string> yaml_structure_problems(const std::string& text) {
  std::vector<std::string> problems;
  const std::regex mapping(R"(( *)(- )?[A-Za-z_][A-Za-z0-9_]*:( .*)?)");
  const std::regex item(R"(( *)- .+)");
  std::istringstream in(text);
  std::string line;
  int n = 0, block_indent = -1;
  while (std::getline(in, line)) {
    ++n;
    const size_t indent = line.find_first_not_of(' ');
    if (indent == std::string::npos) continue;
    if (line.find('\t') != std::string::npos) problems.push_back(std::to_string(n) + ": tab");
    if (block_indent >= 0 && int(indent) > block_indent) continue;  // folded block text
    block_indent = -1;
    if (line[indent] == '#' || line == "---") continue;
    if (indent % 2 != 0) problems.push_back(std::to_string(n) + ": odd indentation");
    if (!std::regex_match(line, mapping) && !std::regex_match(line, item))
      problems.push_back(std::to_string(n) + ": not a mapping or list line: " + line);
    if (line.ends_with(">-") || line.ends_with("|")) block_indent = int(indent);
  }
  return problems;
}

TEST(DeployManifests, KubernetesIndexedJobShardsAndMerges) {
  const std::string y = slurp(kJob);
  ASSERT_FALSE(y.empty()) << kJob;
  for (const std::string& p : yaml_structure_problems(y)) ADD_FAILURE() << kJob << ":" << p;
  // The check itself rejects tabs, odd indentation and lines that are no YAML of the subset.
  EXPECT_FALSE(yaml_structure_problems("a:\n\tb: 1\n").empty());
  EXPECT_FALSE(yaml_structure_problems("a:\n   b: 1\n").empty());
  EXPECT_FALSE(yaml_structure_problems("a b c\n").empty());
  EXPECT_TRUE(yaml_structure_problems("a:\n  - b: 1\n    c: >-\n      x y\n").empty());

  EXPECT_NE(y.find("kind: Job"), std::string::npos);
  EXPECT_NE(y.find("completionMode: Indexed"), std::string::npos);
  const std::vector<int> completions = all_numbers(y, std::regex(R"(\n *completions: (\d+)\n)"));
  const std::vector<int> parallelism = all_numbers(y, std::regex(R"(\n *parallelism: (\d+)\n)"));
  const std::vector<int> shards = all_numbers(y, std::regex(R"(name: SHARDS\n *value: \"(\d+)\")"));
  ASSERT_EQ(completions.size(), 1u);
  ASSERT_EQ(parallelism.size(), 1u);
  ASSERT_EQ(shards.size(), 3u) << "the shard Job, the merge Job's wait and its merge each read SHARDS";
  for (int n : shards) EXPECT_EQ(n, completions[0]) << "SHARDS must equal completions";
  EXPECT_EQ(parallelism[0], completions[0]);
  EXPECT_NE(y.find(R"(--shard "$JOB_COMPLETION_INDEX/$SHARDS")"), std::string::npos);
  EXPECT_NE(y.find(R"(--cases "$CASES")"), std::string::npos);
  EXPECT_NE(y.find("attnfuzz report merge"), std::string::npos);
  if (!have("python3") || run_shell("python3 -c 'import yaml' 2>/dev/null") != 0)
    GTEST_SKIP() << "PyYAML not installed: the line-level check above stands alone";
  EXPECT_EQ(run_shell("python3 -c 'import sys, yaml; d = list(yaml.safe_load_all(open(sys.argv[1]))); "
                      "assert [x[\"kind\"] for x in d] == [\"Job\", \"Job\"]; "
                      "assert d[0][\"spec\"][\"completionMode\"] == \"Indexed\"' '" +
                      kJob + "'"),
            0);
}

}  // namespace
}  // namespace afz
