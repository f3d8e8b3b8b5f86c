// Runs the built `attnfuzz` binary with arguments through the shell (globs
// expand), for tests of what a user sees: exit code and output.
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace afz::testing {

struct CliResult {
  int exit_code;
  std::string output;  // stdout, with stderr when merged
};

inline CliResult run_attnfuzz(const std::string& args, bool merge_stderr = true) {
  const std::string command =
      std::string(ATTNFUZZ_BINARY_DIR) + "/attnfuzz " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  CliResult r{-1, ""};
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return r;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) r.output += buf;
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace afz::testing
