// The include graph points one way: CLI -> campaign -> report / run -> judge
// -> case -> kernels / oracles -> the ABI and its dtypes.  Every quoted
// include of every source file is checked against the layer table below
// (data, not code: a new folder gets one row).  Headers are included by
// their path from the repository root, so the include text names its layer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Layer {
  const char* name;
  std::vector<const char*> folders;  // path prefixes from the repository root
  std::set<std::string> may_include; // other layers below it (itself always)
};

// Lowest first.  kernels/cudnn and kernels/torch are kernels like the others:
// on the ABI alone.
const std::vector<Layer> kLayers = {
    {"abi", {"kernels/abi/"}, {}},
    {"process", {"harness/process/"}, {}},
    {"oracles", {"oracles/"}, {"abi"}},
    {"kernels", {"kernels/"}, {"abi"}},
    {"case", {"harness/case/"}, {"abi", "oracles"}},
    {"judge", {"harness/judge/"}, {"abi", "oracles", "case"}},
    {"run", {"harness/run/"}, {"abi", "oracles", "kernels", "case", "judge", "process"}},
    {"report", {"harness/report/"}, {"abi", "case", "judge", "process"}},
    {"campaign", {"harness/campaign/"}, {"abi", "oracles", "kernels", "case", "judge", "run", "report", "process"}},
    {"cli", {"harness/cli/"}, {"abi", "oracles", "kernels", "case", "judge", "run", "report", "campaign", "process"}},
};

// The layer of a repository path: the longest matching folder prefix.
const Layer* layer_of(const std::string& path) {
  const Layer* best = nullptr;
  size_t best_len = 0;
  for (const Layer& l : kLayers)
    for (const char* f : l.folders)
      if (path.rfind(f, 0) == 0 && std::string(f).size() > best_len) best = &l, best_len = std::string(f).size();
  return best;
}

bool is_source(const fs::path& p) {
  const std::string e = p.extension().string();
  return e == ".h" || e == ".cpp" || e == ".cu" || e == ".cuh" || e == ".c";
}

struct Violation {
  std::string file, include, why;
};

std::vector<Violation> check_tree(const fs::path& root) {
  static const std::regex kInclude(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<Violation> out;
  for (const char* top : {"harness", "kernels", "oracles"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      if (!entry.is_regular_file() || !is_source(entry.path())) continue;
      const std::string rel = fs::relative(entry.path(), root).generic_string();
      const Layer* from = layer_of(rel);
      if (!from) continue;
      std::ifstream in(entry.path());
      std::string line;
      while (std::getline(in, line)) {
        std::smatch m;
        if (!std::regex_search(line, m, kInclude)) continue;
        const std::string inc = m[1].str();
        // The ABI header is also included bare (plugins see only kernels/abi).
        if (inc == "attnfuzz_kernel.h") continue;
        const std::string sibling = (entry.path().parent_path() / inc).lexically_normal().generic_string();
        const bool from_root = fs::exists(root / inc);
        const bool same_dir = !from_root && fs::exists(root / sibling);
        if (!from_root && !same_dir) {
          out.push_back({rel, inc, "names no file from the repository root (include by root path)"});
          continue;
        }
        if (same_dir) continue;  // a file beside it: same layer
        const Layer* to = layer_of(inc);
        if (!to || to == from) continue;
        if (!from->may_include.count(to->name))
          out.push_back({rel, inc, std::string(from->name) + " may not include " + to->name});
      }
    }
  }
  return out;
}

TEST(Layering, IncludesPointDown) {
  const std::vector<Violation> v = check_tree(ATTNFUZZ_SOURCE_DIR);
  for (const Violation& x : v) ADD_FAILURE() << x.file << ": #include \"" << x.include << "\": " << x.why;
  EXPECT_TRUE(v.empty());
}

// The checker itself: a planted upward include is caught.
TEST(Layering, CatchesAnUpwardInclude) {
  const fs::path root = fs::temp_directory_path() / "attnfuzz_layering_test";
  fs::remove_all(root);
  for (const char* d : {"harness/case", "harness/campaign", "kernels/abi", "oracles"}) fs::create_directories(root / d);
  std::ofstream(root / "harness/campaign/campaign.h") << "#pragma once\n";
  std::ofstream(root / "kernels/abi/dtype.h") << "#pragma once\n";
  std::ofstream(root / "harness/case/case.h") << "#include \"kernels/abi/dtype.h\"\n#include \"harness/campaign/campaign.h\"\n";
  const std::vector<Violation> v = check_tree(root);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].file, "harness/case/case.h");
  EXPECT_EQ(v[0].why, "case may not include campaign");
  fs::remove_all(root);
}

}  // namespace
