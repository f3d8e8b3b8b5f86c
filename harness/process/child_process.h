// Another program run to completion or to a deadline, its output captured:
// gnuplot for the report's plots, `attnfuzz repro` for --confirm-alone.
//
// `--confirm-alone` runs each failure's repro as a fresh `attnfuzz repro`
// process.  That process starts GPU workers of its own, so the child is
// made the leader of a new process group and a timeout kills the group: a
// hung kernel in a grandchild cannot outlive it or keep its output pipe open.
#pragma once
#include <string>
#include <vector>

namespace afz {

struct ChildRun {
  bool started = false;   // false: `error` says why (the program is missing, fork failed)
  int exit_code = -1;     // its exit status; -1 when a signal ended it
  int signal = 0;         // the signal that ended it (SIGKILL after a timeout)
  bool timed_out = false; // it outlived the deadline and was killed
  std::string output;     // stdout and stderr as written, at most kMaxChildOutput bytes
  std::string error;
  double seconds = 0;
};

// A chatty child is cut here (what it printed first is kept): a repro's
// verdict lines come first.
inline constexpr size_t kMaxChildOutput = size_t(1) << 20;

// Runs argv[0] (a path) with argv, stdin from /dev/null, for at most
// timeout_s seconds (<= 0: no limit).
ChildRun run_child(const std::vector<std::string>& argv, double timeout_s);

// The last line of `output` with a character outside `blank`: what a
// program that stopped early said last ("" when none).
std::string last_line(const std::string& output, const char* blank = " \t");

}  // namespace afz
