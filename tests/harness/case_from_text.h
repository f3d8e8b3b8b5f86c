// A case from the body of a case file (the lines after "attnfuzz-case 1"),
// for tests that write their cases inline; a parse error fails the test.
#pragma once
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "harness/case/case.h"

namespace afz::testing {

inline Case case_from_text(const std::string& body) {
  ParseError err;
  std::optional<Case> c = parse_case("attnfuzz-case 1\n" + body, &err);
  if (!c) ADD_FAILURE() << err.format("case") << "\n" << body;
  return c.value_or(Case{});
}

}  // namespace afz::testing
