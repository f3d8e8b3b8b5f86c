#include "harness/judge/row_sample.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "harness/case/materialize.h"
#include "harness/judge/verdict.h"
#include "tests/harness/test_kernels.h"

namespace afz {
namespace {

// Two sequences of 300 and 70 queries, 3 heads, padding rows after the short one.
Case sampled_case() {
  Case c;
  c.batch = 2;
  c.heads_q = c.heads_kv = 3;
  c.seqlens_q = {300, 70};
  c.seqlens_k = {40, 9};
  c.head_dim = c.head_dim_v = 8;
  c.seed = 3;
  return c;
}

constexpr int kTile = 64;

bool edge(int i, int seqlen) { return i == 0 || i == seqlen - 1 || i % kTile == 0 || i % kTile == kTile - 1; }

TEST(RowSample, OffChecksEveryQueryRowAndNoPadding) {
  Materialized m(sampled_case());
  RowCoverage cov;
  const auto rows = checked_rows(m.problem(), RowSampling{}, &cov);
  EXPECT_FALSE(cov.sampled);
  EXPECT_EQ(cov.rows, 3 * (300 + 70));
  EXPECT_EQ(int64_t(rows.size()), cov.rows);
  EXPECT_EQ(cov.checked, cov.rows);
  EXPECT_EQ(cov.describe(), "rows checked: all 1110");
  // A budget above the row count is no sample either.
  EXPECT_EQ(checked_rows(m.problem(), RowSampling{5000, kTile, 1}, &cov).size(), rows.size());
  EXPECT_FALSE(cov.sampled);
}

TEST(RowSample, KeepsEveryEdgeAndExactlyTheBudget) {
  Materialized m(sampled_case());
  const afz_problem& p = m.problem();
  RowCoverage cov;
  const RowSampling s{200, kTile, 7};
  const auto rows = checked_rows(p, s, &cov);
  ASSERT_TRUE(cov.sampled);
  EXPECT_EQ(cov.checked, 200);
  EXPECT_EQ(int64_t(rows.size()), 200);
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
  const std::set<int64_t> in(rows.begin(), rows.end());
  EXPECT_EQ(in.size(), rows.size());
  int64_t edges = 0;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i < p.max_seqlen_q; ++i) {
        const int64_t r = (int64_t(b) * p.heads_q + h) * p.max_seqlen_q + i;
        if (i >= p.seqlens_q[b]) {
          EXPECT_EQ(in.count(r), 0u) << "padding row " << r;
          continue;
        }
        if (edge(i, p.seqlens_q[b])) {
          ++edges;
          EXPECT_EQ(in.count(r), 1u) << "edge row b=" << b << " h=" << h << " i=" << i;
        }
      }
  EXPECT_EQ(cov.edge_rows, edges);
  EXPECT_EQ(cov.describe(), "rows checked: 200 of 1110 (18.018%): " + std::to_string(edges) +
                                " at sequence or tile edges, " + std::to_string(200 - edges) + " sampled (seed 7)");
  // The same rows for the same seed, others for another.
  EXPECT_EQ(checked_rows(p, s, nullptr), rows);
  EXPECT_NE(checked_rows(p, RowSampling{200, kTile, 8}, nullptr), rows);
  // A budget below the edges keeps the edges alone.
  checked_rows(p, RowSampling{10, kTile, 7}, &cov);
  EXPECT_EQ(cov.checked, edges);
}

// judge() with sampling: a defect on an edge row is found, one on a row
// left out is not, and the element count is the checked rows'.
TEST(RowSample, JudgeChecksTheSampledRowsOnly) {
  const Case c = sampled_case();
  Materialized m(c);
  const RowSampling s{100, kTile, 7};
  RowCoverage cov;
  const auto rows = checked_rows(m.problem(), s, &cov);
  const std::set<int64_t> in(rows.begin(), rows.end());
  int skipped_i = -1;
  for (int i = 1; i < 300 && skipped_i < 0; ++i)
    if (!in.count(i)) skipped_i = i;  // b = 0, h = 0: r = i
  ASSERT_GE(skipped_i, 0);
  OracleResult r = make_fast_oracle()->compute(m.problem());
  testing::FakeKernel fake{c.in_dtype, c.out_dtype};
  fake.oracle = &r;
  auto run = [&](int bad_i) {
    fake.o_value = [bad_i](int b, int h, int i, int x, double e) { return b == 0 && h == 0 && i == bad_i && x == 0 ? e + 1 : e; };
    m.poison_outputs();
    char err[64];
    EXPECT_EQ(fake.k.run(&fake.k, &m.problem(), err, sizeof err), 0);
    return judge(fake.k, m, r, nullptr, s);
  };
  const Verdict at_edge = run(kTile - 1);
  EXPECT_EQ(at_edge.cls, VerdictClass::NumericMismatch);
  EXPECT_EQ(at_edge.worst.i, kTile - 1);
  EXPECT_EQ(at_edge.elements, int64_t(rows.size()) * c.head_dim_v);
  EXPECT_EQ(at_edge.coverage.checked, 100);
  EXPECT_TRUE(at_edge.coverage.sampled);
  EXPECT_NE(at_edge.detail.find("; rows checked: 100 of 1110"), std::string::npos) << at_edge.detail;
  EXPECT_EQ(run(skipped_i).cls, VerdictClass::Pass);
  // Without sampling the same defect is found.
  fake.o_value = [skipped_i](int b, int h, int i, int x, double e) { return b == 0 && h == 0 && i == skipped_i && x == 0 ? e + 1 : e; };
  m.poison_outputs();
  char err[64];
  fake.k.run(&fake.k, &m.problem(), err, sizeof err);
  EXPECT_EQ(judge(fake.k, m, r, nullptr).cls, VerdictClass::NumericMismatch);
}

}  // namespace
}  // namespace afz
