#include "harness/campaign/in_flight.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include <fmt/format.h>

#include "harness/case/atomic_file.h"

namespace afz {

namespace {

// "2026-12-02T13:05:01.123456Z": the form `dmesg --time-format iso` prints
// (there in local time with its offset; the H200's is UTC).
std::string utc_now_iso() {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const auto us = duration_cast<microseconds>(now.time_since_epoch()).count();
  const std::time_t secs = std::time_t(us / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:06d}Z", date, int(us % 1000000));
}

}  // namespace

InFlightLog::InFlightLog(std::string path, std::string header, std::string history_path)
    : path_(std::move(path)), header_(std::move(header)) {
  std::lock_guard<std::mutex> lock(mu_);
  write_locked();
  if (history_path.empty()) return;
  // Written afresh, as the report folder's other files are by each audit.
  history_ = std::fopen(history_path.c_str(), "w");
  // A history that cannot be opened costs the history, never the sweep.
  if (!history_) std::fprintf(stderr, "attnfuzz: in-flight history: cannot open %s\n", history_path.c_str());
}

InFlightLog::~InFlightLog() {
  if (history_) std::fclose(history_);
}

void InFlightLog::started(int64_t index, const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  running_[index] = line;
  write_locked();
  append_history_locked("start", line);
}

void InFlightLog::finished(int64_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = running_.find(index);
  if (it == running_.end()) return;
  append_history_locked("end  ", it->second);
  running_.erase(it);
  write_locked();
}

void InFlightLog::append_history_locked(const char* event, const std::string& line) {
  if (!history_) return;
  // Flushed line by line: the process may be killed, or hang in the driver, at the next call.
  std::fprintf(history_, "%s %s %s\n", utc_now_iso().c_str(), event, line.c_str());
  std::fflush(history_);
}

std::string InFlightLog::text() const {
  std::lock_guard<std::mutex> lock(mu_);
  return format_locked();
}

std::string InFlightLog::format_locked() const {
  std::string out = header_;
  for (const auto& entry : running_) out += entry.second + "\n";
  return out;
}

void InFlightLog::write_locked() const {
  if (path_.empty()) return;
  std::string error;
  // A record that cannot be written costs the record, never the sweep.
  if (!write_file_atomically(path_, format_locked(), &error))
    std::fprintf(stderr, "attnfuzz: in-flight record: %s\n", error.c_str());
}

}  // namespace afz
