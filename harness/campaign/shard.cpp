#include "harness/campaign/shard.h"

#include <charconv>

namespace afz {
namespace {

template <class Int = int>
std::optional<Int> whole(std::string_view s) {
  Int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<ShardSpec> parse_shard(std::string_view text, std::string* error) {
  const size_t slash = text.find('/');
  const std::optional<int> k = slash == std::string_view::npos ? std::nullopt : whole(text.substr(0, slash));
  const std::optional<int> n = slash == std::string_view::npos ? std::nullopt : whole(text.substr(slash + 1));
  if (!k || !n) {
    *error = "--shard: expected K/N such as 0/4 (shard K of N, counted from 0), got '" + std::string(text) + "'";
    return std::nullopt;
  }
  if (*n < 1 || *n > kMaxShards || *k < 0 || *k >= *n) {
    *error = "--shard: " + std::string(text) + " does not exist: K must be in [0, N) and N in [1, " +
             std::to_string(kMaxShards) + "]";
    return std::nullopt;
  }
  return ShardSpec{*k, *n};
}

CaseRange shard_range(const ShardSpec& s, int64_t first, int64_t cases) {
  // cases * index stays far inside int64 (cases < 2^40 in any real run,
  // index < 2^20); floor division splits as evenly as whole cases allow.
  const int64_t lo = cases * s.index / s.count, hi = cases * (s.index + 1) / s.count;
  return {first + lo, hi - lo};
}

std::optional<CellRange> parse_cell_range(std::string_view text, std::string* error) {
  const size_t dash = text.find('-');
  const auto a = dash == std::string_view::npos ? std::nullopt : whole<int64_t>(text.substr(0, dash));
  const auto b = dash == std::string_view::npos ? std::nullopt : whole<int64_t>(text.substr(dash + 1));
  if (!a || !b || *a < 0 || *a >= *b) {
    *error = "--cells: expected A-B with 0 <= A < B such as 9184-11527 (the cells [A, B)), got '" +
             std::string(text) + "'";
    return std::nullopt;
  }
  return CellRange{*a, *b};
}

}  // namespace afz
