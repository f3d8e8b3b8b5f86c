// Seed 002 as tests: the FA2 tile recurrence in pure double against direct
// softmax with 1,000 keys (a partial last block), Br = 128, d = 64.  Plus
// the m_ref guard, the FA1 form and the split-KV merge, also in double.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness/case/rng.h"
#include "kernels/cpu/dense.h"

namespace afz::cpu {
namespace {

constexpr int kKeys = 1000;
constexpr int kRows = 128;  // Br
constexpr int kDim = 64;
constexpr int kBc = 64;
constexpr double kScale = 0.125;  // 1 / sqrt(64)
constexpr double kSeedBound = 5.2e-15;

struct TileCase {
  std::vector<double> Q, K, V;
  explicit TileCase(uint64_t seed) : Q(kRows * kDim), K(kKeys * kDim), V(kKeys * kDim) {
    const CounterRng rng(seed, 0);
    uint64_t n = 0;
    for (double& x : Q) x = rng.normal(n++);
    for (double& x : K) x = rng.normal(n++);
    for (double& x : V) x = rng.normal(n++);
  }
  // Direct softmax per row, causal iff key j <= q0 + r.
  std::vector<double> direct(int q0, bool causal) const {
    std::vector<double> O(kRows * kDim);
    for (int r = 0; r < kRows; ++r)
      dense::direct_attention(&Q[r * kDim], K.data(), V.data(), kKeys, kDim, kDim, kScale,
                              [&](int j) { return !causal || j <= q0 + r; }, &O[r * kDim]);
    return O;
  }
  std::vector<double> tiled(int q0, bool causal) const {
    std::vector<double> O(kRows * kDim);
    dense::flash_tile(Q.data(), kRows, K.data(), V.data(), kKeys, kDim, kDim, kScale, q0, causal, kBc, O.data());
    return O;
  }
};

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

void expect_seed_bound(const TileCase& t, int q0, bool causal, const char* what) {
  const double err = max_abs_diff(t.tiled(q0, causal), t.direct(q0, causal));
  EXPECT_LE(err, kSeedBound) << what;
  std::printf("tiled vs direct, %s: max abs error %.3g\n", what, err);
}

TEST(SeedTiledSoftmax, NonCausal) { expect_seed_bound(TileCase(21), 0, false, "non-causal"); }

TEST(SeedTiledSoftmax, CausalAtTileOffsets) {
  const TileCase t(22);
  expect_seed_bound(t, 0, true, "causal q0 = 0");
  expect_seed_bound(t, 300, true, "causal q0 = 300");
  expect_seed_bound(t, 872, true, "causal q0 = 872");  // the tile ends on the last key
}

TEST(SeedTiledSoftmax, LargestScoresInTheLastFiveKeys) {
  TileCase t(23);
  // A shared direction in dimension 0: every query has q0 = 4, the last five
  // keys k0 = 24, the others keep their N(0,1) value, so those five keys
  // score about 12 above the rest and the max arrives in the partial last block.
  for (int r = 0; r < kRows; ++r) t.Q[r * kDim] = 4.0;
  for (int j = kKeys - 5; j < kKeys; ++j) t.K[j * kDim] = 24.0;
  for (int r = 0; r < kRows; ++r) {
    int argmax = 0;
    double best = -INFINITY;
    for (int j = 0; j < kKeys; ++j) {
      const double s = dense::dot(&t.Q[r * kDim], &t.K[j * kDim], kDim);
      if (s > best) best = s, argmax = j;
    }
    ASSERT_GE(argmax, kKeys - 5) << "row " << r;
  }
  expect_seed_bound(t, 0, false, "late maxima");
}

// A tile whose row 0 sees nothing in the first key block (a sliding window
// would do that) while row 1 does: the running max of row 0 is still -inf
// when the first block is consumed.
template <class Steps>
std::vector<double> tile_with_empty_first_block() {
  const int cols = 4, dv = 2;
  TileAccumulator<double, Steps> tile(2, dv);
  const double V1[] = {1, 2, 3, 4, 5, 6, 7, 8};
  const double V2[] = {-1, 1, 2, -2, 0.5, 0.25, 3, 3};
  double S1[] = {kNegInf<double>, kNegInf<double>, kNegInf<double>, kNegInf<double>, 0.5, 1.5, -2.0, 0.0};
  double S2[] = {0.25, -1.0, 2.0, 1.0, 0.5, 0.5, 0.5, 0.5};
  tile.consume(S1, cols, V1);
  tile.consume(S2, cols, V2);
  std::vector<double> O(2 * dv), lse(2);
  tile.finalize(O.data(), lse.data());
  O.insert(O.end(), lse.begin(), lse.end());
  return O;
}

struct NoGuardSteps : Fa2Steps {
  template <typename T>
  static T reference(T m) { return m; }
};

TEST(TileRecurrence, MRefGuardKeepsRowsWithoutVisibleKeysFinite) {
  const std::vector<double> guarded = tile_with_empty_first_block<Fa2Steps>();
  for (double x : guarded) EXPECT_TRUE(std::isfinite(x));
  // Row 0 only saw block 2: direct softmax of (0.25, -1, 2, 1) over V2.
  const double s[] = {0.25, -1.0, 2.0, 1.0}, v0[] = {-1, 2, 0.5, 3}, v1[] = {1, -2, 0.25, 3};
  double l = 0, o0 = 0, o1 = 0;
  for (int j = 0; j < 4; ++j) {
    const double p = std::exp(s[j] - 2.0);
    l += p, o0 += p * v0[j], o1 += p * v1[j];
  }
  EXPECT_NEAR(guarded[0], o0 / l, 1e-15);
  EXPECT_NEAR(guarded[1], o1 / l, 1e-15);
  EXPECT_NEAR(guarded[4], 2.0 + std::log(l), 1e-15);
  // Without the guard, -inf - (-inf) = NaN reaches row 0 for good.
  const std::vector<double> unguarded = tile_with_empty_first_block<NoGuardSteps>();
  EXPECT_TRUE(std::isnan(unguarded[0]));
  EXPECT_TRUE(std::isfinite(unguarded[2]));  // row 1 had keys from the start
}

TEST(TileRecurrence, EmptyRowGivesZeroAndNegativeInfinityLse) {
  TileAccumulator<double> tile(1, 3);
  double S[] = {kNegInf<double>, kNegInf<double>};
  const double V[] = {1, 2, 3, 4, 5, 6};
  tile.consume(S, 2, V);
  double O[3], lse;
  tile.finalize(O, &lse);
  for (double x : O) {
    EXPECT_EQ(x, 0.0);
    EXPECT_FALSE(std::signbit(x));
  }
  EXPECT_EQ(lse, kNegInf<double>);
}

TEST(TileRecurrence, Fa1FormAndSplitMergeMatchDirectInDouble) {
  const TileCase t(24);
  const std::vector<double> direct = t.direct(300, true);
  // FA1: normalised output every block.
  NormalisedTile<double> fa1(kRows, kDim);
  // Split-KV: the key blocks in 4 runs, merged.
  std::vector<TileAccumulator<double>> parts;
  for (int s = 0; s < 4; ++s) parts.emplace_back(kRows, kDim);
  std::vector<double> S(kRows * kBc), S_copy;
  const int blocks = (kKeys + kBc - 1) / kBc, per_split = (blocks + 3) / 4;
  for (int blk = 0; blk < blocks; ++blk) {
    const int j0 = blk * kBc, cols = std::min(kBc, kKeys - j0);
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < cols; ++c)
        S[r * cols + c] = j0 + c <= 300 + r ? dense::dot(&t.Q[r * kDim], &t.K[(j0 + c) * kDim], kDim) * kScale
                                            : kNegInf<double>;
    S_copy = S;
    fa1.consume(S.data(), cols, &t.V[j0 * kDim]);
    parts[blk / per_split].consume(S_copy.data(), cols, &t.V[j0 * kDim]);
  }
  std::vector<double> O(kRows * kDim), lse(kRows);
  fa1.finalize(O.data(), lse.data());
  EXPECT_LE(max_abs_diff(O, direct), 1e-14);
  merge_splits(parts, O.data(), lse.data());
  EXPECT_LE(max_abs_diff(O, direct), kSeedBound);
}

TEST(TileRecurrence, SplitMergeWithEmptySplits) {
  // Two splits, the first empty for every row (m = -inf): weight 0, no NaN.
  std::vector<TileAccumulator<double>> parts;
  parts.emplace_back(1, 2);
  parts.emplace_back(1, 2);
  double S[] = {1.0, 3.0};
  const double V[] = {1, 0, 0, 1};
  parts[1].consume(S, 2, V);
  double O[2], lse;
  merge_splits(parts, O, &lse);
  const double p0 = std::exp(1.0 - 3.0), l = p0 + 1.0;
  EXPECT_NEAR(O[0], p0 / l, 1e-16);
  EXPECT_NEAR(O[1], 1.0 / l, 1e-16);
  EXPECT_NEAR(lse, 3.0 + std::log(l), 1e-15);
  // All splits empty: the merged row is empty.
  std::vector<TileAccumulator<double>> none;
  none.emplace_back(1, 2);
  none.emplace_back(1, 2);
  merge_splits(none, O, &lse);
  EXPECT_EQ(O[0], 0.0);
  EXPECT_EQ(O[1], 0.0);
  EXPECT_EQ(lse, kNegInf<double>);
}

}  // namespace
}  // namespace afz::cpu
