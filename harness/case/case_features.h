// What a case exercises and how big it is, read off the case alone: the
// feature names a failure signature is made of, the coarse shape class, and
// the size the minimizer and the corpus compare repros by.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "harness/case/case.h"

namespace afz {

// Sorted feature names, e.g. {"causal_br", "dtype=bf16", "t:late_max"}.
std::vector<std::string> case_features(const Case& c);
// Coarse size bucket of the longest query and key sequences, e.g. "q1.k64"
// (bucket upper bounds: queries 0, 1, 128, big; keys 0, 1, 16, 64, 128, 512,
// 2048, big), so a bug that needs several key blocks and one that shows
// with a single key get different signatures.
std::string shape_class(const Case& c);

// Lexicographic size: input elements first (what a person has to read and
// the kernel has to chew), then the number of features beyond a plain case.
struct CaseSize {
  int64_t elements = 0;
  int features = 0;
  auto operator<=>(const CaseSize&) const = default;
};
CaseSize case_size(const Case& c);

// True when the case parses back and validates: candidates that do not are
// skipped without running anything.
bool case_is_buildable(const Case& c);

}  // namespace afz
