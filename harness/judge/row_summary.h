// What a RowJudge (verdict_summary.h) takes and returns, on its own: no
// host-only headers, so that the GPU's code (harness/judge/gpu, C++17 under
// nvcc) can include it.
#pragma once
#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "harness/judge/bound_steps.h"
#include "harness/judge/error_stats.h"
#include "harness/judge/verdict_class.h"

namespace afz {

inline constexpr int64_t kNoRow = std::numeric_limits<int64_t>::max();

struct VerdictSummary {
  int64_t elements = 0, failing = 0;
  std::array<int64_t, kVerdictClasses> first_row;  // lowest row that raised each class, kNoRow: none
  double max_over_bound = 0;  // largest error / bound (NaN never: judge()'s std::max drops it)
  double max_abs_error = 0;
  int64_t worst_row = kNoRow; // lowest row with an element at max_over_bound; kNoRow: nothing tracked
  ErrorSeries o_stats, lse_stats;
  VerdictSummary() { first_row.fill(kNoRow); }
};

// The checked rows (ascending) and, per position, ErrorBound::begin_row's
// outcome: the row's factors, or not modelled (the declared precision
// cannot resolve it).  Empty rows have neither.
struct RowModel {
  std::vector<int64_t> rows;
  std::vector<bound_steps::RowFactors> factors;
  std::vector<uint8_t> modelled;
};

}  // namespace afz
