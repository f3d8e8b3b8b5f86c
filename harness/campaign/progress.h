// Live progress of long runs: one updating line on a terminal, plain
// periodic lines otherwise (CI logs, pipes), so a log stays readable and a
// person at a terminal sees cases/s, failures and time left at a glance.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace afz {

struct ProgressSnapshot {
  double elapsed_s = 0;
  int64_t cases = 0;
  int64_t case_limit = -1;     // -1: none
  double time_limit_s = -1;    // -1: none
  int64_t new_failures = 0;    // signatures first seen in this run
  int64_t failing_cases = 0;
  int64_t unsupported = 0;     // kernel runs declined
  std::vector<std::pair<std::string, int64_t>> per_class;  // cases per generator class
};

// "12.3s  4021 cases  327/s  fail 2 new (5 cases)  unsup 310  left 47s | shapes 1000 late_max 990 ..."
std::string format_progress(const ProgressSnapshot& s);

class ProgressLine {
 public:
  enum class Mode { Off, Terminal, Plain };
  // Terminal when `out` is a tty, else Plain.
  static Mode detect(std::FILE* out);

  ProgressLine(std::FILE* out, Mode mode);
  ~ProgressLine() { finish(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Rate-limited: a terminal redraws at most every kTerminalPeriod, plain
  // output prints a line every kPlainPeriod.
  void update(const ProgressSnapshot& s);
  // A message of its own (a failure found) without garbling the live line.
  void message(const std::string& line);
  // Ends the live line (prints the last state once more).
  void finish();

 private:
  std::FILE* out_;
  Mode mode_;
  double last_ = -1;
  bool drawn_ = false;
  ProgressSnapshot latest_;
  bool have_latest_ = false;
};

}  // namespace afz
