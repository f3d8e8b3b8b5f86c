#include "harness/judge/verdict_compare.h"

#include <cstring>
#include <fmt/format.h>

namespace afz {

namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

std::string series_difference(const ErrorSeries& a, const ErrorSeries& b) {
  if (a.elements != b.elements || a.rows != b.rows) return fmt::format("counts {}/{} vs {}/{}", a.elements, a.rows, b.elements, b.rows);
  if (!same_bits(a.max_over_bound, b.max_over_bound) || !same_bits(a.max_ulps, b.max_ulps))
    return fmt::format("maxima {:a}/{:a} vs {:a}/{:a}", a.max_over_bound, a.max_ulps, b.max_over_bound, b.max_ulps);
  if (a.over_bound != b.over_bound || a.ulps != b.ulps) return "element histograms";
  if (a.by_key_position != b.by_key_position || a.by_score != b.by_score) return "row histograms";
  for (size_t i = 0; i < a.key_position_max.size(); ++i)
    if (!same_bits(a.key_position_max[i], b.key_position_max[i])) return fmt::format("key position max {}", i);
  for (size_t i = 0; i < a.score_max.size(); ++i)
    if (!same_bits(a.score_max[i], b.score_max[i])) return fmt::format("score max {}", i);
  return "";
}

}  // namespace

std::string verdict_difference(const Verdict& a, const Verdict& b) {
  if (a.cls != b.cls) return fmt::format("class {} vs {}", verdict_name(a.cls), verdict_name(b.cls));
  if (a.detail != b.detail) return fmt::format("detail '{}' vs '{}'", a.detail, b.detail);
  if (a.elements != b.elements || a.failing != b.failing || a.escalated_rows != b.escalated_rows)
    return fmt::format("elements/failing/escalated {}/{}/{} vs {}/{}/{}", a.elements, a.failing, a.escalated_rows,
                       b.elements, b.failing, b.escalated_rows);
  if (!same_bits(a.max_over_bound, b.max_over_bound) || !same_bits(a.max_abs_error, b.max_abs_error))
    return fmt::format("max over bound / abs error {:a}/{:a} vs {:a}/{:a}", a.max_over_bound, a.max_abs_error,
                       b.max_over_bound, b.max_abs_error);
  const WorstElement &w = a.worst, &v = b.worst;
  if (w.valid != v.valid || w.is_lse != v.is_lse || w.b != v.b || w.h != v.h || w.i != v.i || w.x != v.x ||
      !same_bits(w.kernel, v.kernel) || !same_bits(w.oracle, v.oracle) || !same_bits(w.error, v.error) ||
      !same_bits(w.bound, v.bound) || !same_bits(w.ulps, v.ulps) || !same_bits(w.over_bound, v.over_bound) ||
      w.tensor != v.tensor)
    return "worst " + w.format() + " vs " + v.format();
  if (a.o_dtype != b.o_dtype) return "o dtype";
  if (std::string d = series_difference(a.o_stats, b.o_stats); !d.empty()) return "o_stats: " + d;
  if (std::string d = series_difference(a.lse_stats, b.lse_stats); !d.empty()) return "lse_stats: " + d;
  if (a.coverage.describe() != b.coverage.describe())
    return "coverage '" + a.coverage.describe() + "' vs '" + b.coverage.describe() + "'";
  return "";
}

}  // namespace afz
