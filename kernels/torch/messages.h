// One-line messages across the C ABI: the harness shows them as verdict
// details and repro hints, where a stray newline would break the line format.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

namespace afz::torchk {

// The first line of a (possibly multi-line) message, without trailing blanks:
// torch's errors carry a backtrace or a hint paragraph after the first line.
inline std::string first_line(const std::string& s) {
  std::string line = s.substr(0, s.find_first_of("\r\n"));
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.pop_back();
  return line;
}

// Copies msg (its first line) into a caller's buffer, always terminated.
inline void write_message(char* buf, size_t len, const std::string& msg) {
  if (!buf || len == 0) return;
  const std::string line = first_line(msg);
  const size_t n = std::min(len - 1, line.size());
  std::memcpy(buf, line.data(), n);
  buf[n] = '\0';
}

}  // namespace afz::torchk
