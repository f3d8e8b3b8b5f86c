// A scratch folder for one test, named after the test and this process, and
// removed again (before use, in case a killed run left it, and after).
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

namespace afz::testing {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string str() const { return path.string(); }
};

}  // namespace afz::testing
