// Shrinking a failing case to a small one that fails the same way.
//
// Greedy reduction over a table of reducers (fewer sequences, fewer heads,
// dropped masks/transforms/layout features, shorter sequences, smaller head
// dims, default value distributions).  A candidate is kept when it is
// strictly smaller in CaseSize and `still_fails` holds for it; the campaign's
// predicate is "the same kernel gives the same verdict class".  Every kept
// candidate lowers a well-founded measure, so the loop ends on its own; the
// run and time budgets bound the effort on slow kernels.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "harness/case/case.h"
#include "harness/case/case_features.h"

namespace afz {

struct MinimizeOptions {
  int max_runs = 400;         // predicate evaluations
  double max_seconds = 30;    // wall time
};

struct MinimizeResult {
  Case best;
  CaseSize from, to;
  int runs = 0;               // predicate evaluations
  int accepted = 0;           // candidates kept
  double seconds = 0;
  bool exhausted = false;     // stopped by a budget, not by a fixed point
};

using StillFails = std::function<bool(const Case&)>;

MinimizeResult minimize_case(const Case& start, const StillFails& still_fails, const MinimizeOptions& options);

}  // namespace afz
