// `--shard K/N`: parsing and the split of a campaign into contiguous,
// disjoint case ranges that cover it exactly.
#include <gtest/gtest.h>

#include "harness/campaign/shard.h"

namespace afz {
namespace {

TEST(Shard, ParsesKOfN) {
  std::string error;
  const std::optional<ShardSpec> s = parse_shard("3/8", &error);
  ASSERT_TRUE(s) << error;
  EXPECT_EQ(s->index, 3);
  EXPECT_EQ(s->count, 8);
  EXPECT_TRUE(parse_shard("0/1", &error));
  for (const char* bad : {"", "3", "8/8", "-1/4", "1/0", "a/b", "1/2/3", "1/ 2", "+1/2", "1/99999999999"}) {
    error.clear();
    EXPECT_FALSE(parse_shard(bad, &error)) << bad;
    EXPECT_NE(error.find("--shard"), std::string::npos) << bad << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos);
  }
}

TEST(Shard, ParsesCellRanges) {
  std::string error;
  const std::optional<CellRange> r = parse_cell_range("9184-11527", &error);
  ASSERT_TRUE(r) << error;
  EXPECT_EQ(r->first, 9184);
  EXPECT_EQ(r->end, 11527);
  for (const char* bad : {"", "5", "5-5", "6-5", "-1-4", "a-b", "1-2-3", "1- 2", "1/2"}) {
    error.clear();
    EXPECT_FALSE(parse_cell_range(bad, &error)) << bad;
    EXPECT_NE(error.find("--cells"), std::string::npos) << bad << ": " << error;
  }
}

// The N ranges follow one another without gap or overlap from `first`,
// cover every case, and differ in size by at most one.
TEST(Shard, RangesPartitionTheCampaign) {
  for (int64_t cases : {0, 1, 7, 36, 1000, 200001})
    for (int n : {1, 2, 3, 8, 13})
      for (int64_t first : {0, 5}) {
        int64_t next = first, smallest = INT64_MAX, largest = 0;
        for (int k = 0; k < n; ++k) {
          const CaseRange r = shard_range({k, n}, first, cases);
          EXPECT_EQ(r.first, next) << "shard " << k << "/" << n << " of " << cases;
          next = r.first + r.cases;
          smallest = std::min(smallest, r.cases);
          largest = std::max(largest, r.cases);
        }
        EXPECT_EQ(next, first + cases);
        EXPECT_LE(largest - smallest, 1);
      }
}

}  // namespace
}  // namespace afz
