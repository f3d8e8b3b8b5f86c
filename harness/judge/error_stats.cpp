#include "harness/judge/error_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace afz {

double LogAxis::lower(int bin) const {
  if (bin <= 0) return 0;
  if (bin == 1) return std::numeric_limits<double>::denorm_min();
  return std::ldexp(1.0, lo_exp + bin - 2);
}

double LogAxis::upper(int bin) const {
  if (bin <= 0) return 0;
  if (bin >= bins() - 1) return std::numeric_limits<double>::infinity();
  return std::ldexp(1.0, lo_exp + bin - 1);
}

double LogAxis::center(int bin) const {
  if (bin <= 0) return 0;
  // The open-ended bins are drawn one octave beyond their finite edge.
  if (bin == 1) return std::ldexp(1.0, lo_exp - 1);
  if (bin == bins() - 1) return std::ldexp(1.0, hi_exp) * std::sqrt(2.0);
  return lower(bin) * std::sqrt(2.0);
}

void ErrorSeries::allocate_rows() {
  if (!by_key_position.empty()) return;
  by_key_position.assign(size_t(kKeyPositionBins) * kErrorBins, 0);
  by_score.assign(size_t(kScoreBins) * kErrorBins, 0);
}

int64_t ErrorSeries::key_position_count(int key_bin, int error_bin) const {
  return by_key_position.empty() ? 0 : by_key_position[size_t(key_bin) * kErrorBins + size_t(error_bin)];
}

int64_t ErrorSeries::score_count(int score_bin, int error_bin) const {
  return by_score.empty() ? 0 : by_score[size_t(score_bin) * kErrorBins + size_t(error_bin)];
}

// std::max would drop a NaN on one side and keep it on the other; a NaN
// maximum says "off the scale", like the top bin.
static double max_of(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return std::max(a, b);
}

void ErrorSeries::add_element(double over, double u) {
  ++elements;
  ++over_bound[size_t(kErrorAxis.index(over))];
  ++ulps[size_t(kErrorAxis.index(u))];
  max_over_bound = max_of(max_over_bound, over);
  max_ulps = max_of(max_ulps, u);
}

void ErrorSeries::add_row(double row_over, int key_bin, double max_abs_score) {
  ++rows;
  allocate_rows();
  const size_t e = size_t(kErrorAxis.index(row_over));
  if (key_bin >= 0 && key_bin < kKeyPositionBins) {
    ++by_key_position[size_t(key_bin) * kErrorBins + e];
    key_position_max[size_t(key_bin)] = max_of(key_position_max[size_t(key_bin)], row_over);
  }
  const size_t s = size_t(kScoreAxis.index(max_abs_score));
  ++by_score[s * kErrorBins + e];
  score_max[s] = max_of(score_max[s], row_over);
}

void ErrorSeries::merge(const ErrorSeries& o) {
  elements += o.elements;
  rows += o.rows;
  max_over_bound = max_of(max_over_bound, o.max_over_bound);
  max_ulps = max_of(max_ulps, o.max_ulps);
  for (size_t i = 0; i < over_bound.size(); ++i) over_bound[i] += o.over_bound[i];
  for (size_t i = 0; i < ulps.size(); ++i) ulps[i] += o.ulps[i];
  if (!o.by_key_position.empty()) {
    allocate_rows();
    for (size_t i = 0; i < by_key_position.size(); ++i) by_key_position[i] += o.by_key_position[i];
    for (size_t i = 0; i < by_score.size(); ++i) by_score[i] += o.by_score[i];
  }
  for (size_t i = 0; i < key_position_max.size(); ++i)
    key_position_max[i] = max_of(key_position_max[i], o.key_position_max[i]);
  for (size_t i = 0; i < score_max.size(); ++i) score_max[i] = max_of(score_max[i], o.score_max[i]);
}

}  // namespace afz
