// `--shard K/N`: N processes, GPUs or machines run disjoint parts of one
// seeded campaign.  Shard K of N takes the contiguous case range
// [first + floor(K C / N), first + floor((K+1) C / N)) of the campaign's
// C cases: contiguous, so each shard's report is an ordinary campaign
// report over its own range and `report merge` (which requires disjoint
// first_case ranges) rebuilds exactly the report of the C cases run at once.
// Ranges need a case count: a time-limited campaign has no C to split.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace afz {

struct ShardSpec {
  int index = 0;  // K, 0-based
  int count = 1;  // N
};

// Largest N accepted: far above any cluster, small enough that no count
// times case index can overflow.
inline constexpr int kMaxShards = 1 << 20;

// "K/N" with 0 <= K < N <= kMaxShards; nullopt and a one-line *error otherwise.
std::optional<ShardSpec> parse_shard(std::string_view text, std::string* error);

struct CaseRange {
  int64_t first = 0, cases = 0;
};

// Shard K's part of the campaign [first, first + cases).
CaseRange shard_range(const ShardSpec& s, int64_t first, int64_t cases);

// `--cells A-B` of an audit: the matrix cells [A, B), 0 <= A < B.
struct CellRange {
  int64_t first = 0, end = 0;
};
// nullopt and a one-line *error for anything but two whole numbers A < B.
std::optional<CellRange> parse_cell_range(std::string_view text, std::string* error);

}  // namespace afz
