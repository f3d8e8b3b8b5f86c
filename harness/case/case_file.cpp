#include "harness/case/case_file.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "harness/case/atomic_file.h"
#include "harness/case/case_io.h"

namespace afz {

std::optional<Case> load_case_file(const std::string& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = path + ": cannot open the file";
    return std::nullopt;
  }
  std::string text;
  text.resize(kMaxCaseBytes + 1);
  in.read(text.data(), std::streamsize(text.size()));
  text.resize(size_t(in.gcount()));
  if (text.size() > kMaxCaseBytes) {
    *error = path + ": larger than " + std::to_string(kMaxCaseBytes) + " bytes; not a case file";
    return std::nullopt;
  }
  ParseError pe;
  std::optional<Case> c = parse_case(text, &pe);
  if (!c) {
    *error = pe.format(path);
    return std::nullopt;
  }
  return c;  // parse_case validates, transforms included, and names the line
}

bool save_case_file(const std::string& path, const Case& c, std::string* error) {
  return write_file_atomically(path, write_case(c), error);
}

}  // namespace afz
