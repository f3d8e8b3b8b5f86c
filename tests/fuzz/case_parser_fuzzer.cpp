// libFuzzer target for the case parser (harness/case/case_io.cpp).
//
// Any bytes go in.  The parser must return a case or an error without
// crashing, leaking, hanging or allocating without bound (ASan, UBSan and
// libFuzzer's -rss_limit_mb/-malloc_limit_mb police that).  Whatever parses
// must also be a fixed point of the canonical form:
//   parse(write(c)) == c   and   write(parse(write(c))) == write(c).
// Deterministic and free of I/O: a finding replays from its input alone.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "harness/case/case.h"

namespace {

// A broken invariant is a finding; trap so libFuzzer saves the input.
void require(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  afz::ParseError error;
  const std::optional<afz::Case> parsed = afz::parse_case(text, &error);
  if (!parsed) {
    // Errors point inside the file and read as one line.
    require(error.line >= 0 && !error.message.empty());
    require(error.format("f").find('\n') == std::string::npos);
    return 0;
  }
  require(!afz::validate_case(*parsed));  // parse_case validates what it returns

  const std::string written = afz::write_case(*parsed);
  const std::optional<afz::Case> reparsed = afz::parse_case(written, &error);
  require(reparsed.has_value());
  require(*reparsed == *parsed);
  require(afz::write_case(*reparsed) == written);
  return 0;
}
