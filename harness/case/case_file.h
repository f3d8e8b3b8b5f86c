// Loading case files from disk with one-line errors.
#pragma once
#include <optional>
#include <string>

#include "harness/case/case.h"

namespace afz {

// Reads (at most kMaxCaseBytes, case_io.h), parses and validates.  On
// failure returns nullopt and sets *error to "file:line: field 'f': message".
std::optional<Case> load_case_file(const std::string& path, std::string* error);
// Writes atomically (temporary file + rename), so a kill mid-write never
// leaves a truncated case behind.
bool save_case_file(const std::string& path, const Case& c, std::string* error);

}  // namespace afz
