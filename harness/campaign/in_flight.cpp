#include "harness/campaign/in_flight.h"

#include <cstdio>

#include "harness/case/atomic_file.h"

namespace afz {

InFlightLog::InFlightLog(std::string path, std::string header) : path_(std::move(path)), header_(std::move(header)) {
  std::lock_guard<std::mutex> lock(mu_);
  write_locked();
}

void InFlightLog::started(int64_t index, const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  running_[index] = line;
  write_locked();
}

void InFlightLog::finished(int64_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  running_.erase(index);
  write_locked();
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
