#include "harness/campaign/progress.h"

#include <algorithm>
#include <fmt/format.h>
#include <unistd.h>

namespace afz {
namespace {

// Redraw a terminal line five times a second: smooth, yet cheap.
constexpr double kTerminalPeriod = 0.2;
// A plain line every ten seconds keeps CI logs short.
constexpr double kPlainPeriod = 10.0;
// Terminals: clear to the end of the line after a carriage return.
constexpr const char* kClearLine = "\r\033[K";

std::string seconds(double s) {
  if (s < 120) return fmt::format("{:.1f}s", s);
  if (s < 7200) return fmt::format("{}m{:02}s", int(s) / 60, int(s) % 60);
  return fmt::format("{}h{:02}m", int(s) / 3600, int(s) / 60 % 60);
}

}  // namespace

std::string format_progress(const ProgressSnapshot& s) {
  const double rate = s.elapsed_s > 0 ? double(s.cases) / s.elapsed_s : 0;
  std::string line = fmt::format("{}  {} cases  {:.0f}/s  fail {} new ({} cases)  unsup {}", seconds(s.elapsed_s),
                                 s.cases, rate, s.new_failures, s.failing_cases, s.unsupported);
  // Time left: the time limit, or the case limit at the current rate.
  double left = -1;
  if (s.time_limit_s >= 0) left = std::max(0.0, s.time_limit_s - s.elapsed_s);
  if (s.case_limit >= 0 && rate > 0) {
    const double by_cases = double(s.case_limit - s.cases) / rate;
    left = left < 0 ? by_cases : std::min(left, by_cases);
  }
  if (left >= 0) line += "  left " + seconds(left);
  if (!s.per_class.empty()) {
    line += " |";
    for (const auto& [name, n] : s.per_class) line += fmt::format(" {} {}", name, n);
  }
  return line;
}

ProgressLine::Mode ProgressLine::detect(std::FILE* out) { return isatty(fileno(out)) ? Mode::Terminal : Mode::Plain; }

ProgressLine::ProgressLine(std::FILE* out, Mode mode) : out_(out), mode_(mode) {}

void ProgressLine::update(const ProgressSnapshot& s) {
  latest_ = s;
  have_latest_ = true;
  if (mode_ == Mode::Off) return;
  const double period = mode_ == Mode::Terminal ? kTerminalPeriod : kPlainPeriod;
  if (last_ >= 0 && s.elapsed_s - last_ < period) return;
  last_ = s.elapsed_s;
  if (mode_ == Mode::Terminal) {
    fmt::print(out_, "{}{}", kClearLine, format_progress(s));
    drawn_ = true;
  } else {
    fmt::print(out_, "progress: {}\n", format_progress(s));
  }
  std::fflush(out_);
}

void ProgressLine::message(const std::string& line) {
  if (mode_ == Mode::Terminal && drawn_) fmt::print(out_, "{}", kClearLine);
  fmt::print(out_, "{}\n", line);
  if (mode_ == Mode::Terminal && have_latest_) fmt::print(out_, "{}", format_progress(latest_));
  std::fflush(out_);
}

void ProgressLine::finish() {
  if (mode_ == Mode::Off || !have_latest_) return;
  if (mode_ == Mode::Terminal) {
    fmt::print(out_, "{}{}\n", kClearLine, format_progress(latest_));
  } else {
    fmt::print(out_, "progress: {}\n", format_progress(latest_));
  }
  std::fflush(out_);
  have_latest_ = false;
  drawn_ = false;
}

}  // namespace afz
