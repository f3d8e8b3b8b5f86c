// Seed 000 as tests: the one-query online recurrence equals direct softmax
// in double, and stays finite where softmax without the max overflows.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness/case/rng.h"
#include "kernels/cpu/dense.h"

namespace afz::cpu {
namespace {

constexpr int kKeys = 1000;  // deliberately not a multiple of the block
constexpr int kBlock = 128;
constexpr int kDim = 64;
constexpr double kScale = 0.125;  // 1 / sqrt(64), exact

struct OneQuery {
  std::vector<double> q, K, V;
  OneQuery(uint64_t seed, double q_magnitude) : q(kDim), K(kKeys * kDim), V(kKeys * kDim) {
    const CounterRng rng(seed, 0);
    uint64_t n = 0;
    for (double& x : q) x = rng.normal(n++) * q_magnitude;
    for (double& x : K) x = rng.normal(n++);
    for (double& x : V) x = rng.normal(n++);
  }
};

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

bool all_finite(const std::vector<double>& a) {
  for (double x : a)
    if (!std::isfinite(x)) return false;
  return true;
}

TEST(SeedOnlineSoftmax, EqualsDirectSoftmaxInDoubleOn1000Keys) {
  for (uint64_t seed : {1, 2, 3}) {
    const OneQuery t(seed, 1.0);
    std::vector<double> online(kDim), direct(kDim);
    dense::online_attention(t.q.data(), t.K.data(), t.V.data(), kKeys, kDim, kDim, kScale, kBlock,
                            online.data());
    dense::direct_attention(t.q.data(), t.K.data(), t.V.data(), kKeys, kDim, kDim, kScale, direct.data());
    const double err = max_abs_diff(online, direct);
    EXPECT_LE(err, 1e-15) << "seed " << seed;
    RecordProperty("max_abs_error_seed" + std::to_string(seed), std::to_string(err));
    std::printf("online vs direct, seed %llu: max abs error %.3g\n", (unsigned long long)seed, err);
  }
}

TEST(SeedOnlineSoftmax, NoNaNAtScoreMagnitude1e4WhereUnshiftedOverflows) {
  // q scaled so that the scores q.k / 8 have magnitude about 1e4.
  const OneQuery t(7, 1e4);
  double max_score = 0;
  for (int j = 0; j < kKeys; ++j)
    max_score = std::max(max_score, std::fabs(dense::dot(t.q.data(), &t.K[j * kDim], kDim) * kScale));
  ASSERT_GT(max_score, 1e4);

  std::vector<double> unshifted(kDim), online(kDim), direct(kDim);
  dense::unshifted_attention(t.q.data(), t.K.data(), t.V.data(), kKeys, kDim, kDim, kScale, unshifted.data());
  EXPECT_FALSE(all_finite(unshifted)) << "exp(1e4) should overflow double, and inf / inf is NaN";
  EXPECT_TRUE(std::isnan(unshifted[0]));

  dense::online_attention(t.q.data(), t.K.data(), t.V.data(), kKeys, kDim, kDim, kScale, kBlock, online.data());
  dense::direct_attention(t.q.data(), t.K.data(), t.V.data(), kKeys, kDim, kDim, kScale, direct.data());
  ASSERT_TRUE(all_finite(online));
  ASSERT_TRUE(all_finite(direct));
  const double err = max_abs_diff(online, direct);
  EXPECT_LE(err, 1e-15);
  // At this magnitude one key takes all the weight (every other p underflows
  // to 0): both forms return that key's value row exactly, as the seed says.
  EXPECT_EQ(err, 0.0);
  std::printf("online vs direct at |s| ~ 1e4: max abs error %.3g\n", err);
}

struct ZeroInitSteps : Fa2Steps {
  template <typename T>
  static T initial_max() { return T(0); }
};

TEST(SeedOnlineSoftmax, RecurrenceIsExactForAllNegativeRows) {
  // Every score below -1000: with m starting at -inf the reference follows
  // the row down and nothing underflows (m = 0 would make every p zero).
  const OneQuery t(11, 1.0);
  // Shift all scores by -2000 through a constant extra key dimension.
  std::vector<double> q2(kDim + 1), K2(kKeys * (kDim + 1));
  for (int x = 0; x < kDim; ++x) q2[x] = t.q[x];
  q2[kDim] = -2000.0 * 8;
  for (int j = 0; j < kKeys; ++j) {
    for (int x = 0; x < kDim; ++x) K2[j * (kDim + 1) + x] = t.K[j * kDim + x];
    K2[j * (kDim + 1) + kDim] = 1.0;
  }
  std::vector<double> shifted(kDim), plain(kDim);
  dense::online_attention(q2.data(), K2.data(), t.V.data(), kKeys, kDim + 1, kDim, kScale, kBlock, shifted.data());
  dense::direct_attention(t.q.data(), t.K.data(), t.V.data(), kKeys, kDim, kDim, kScale, plain.data());
  EXPECT_LE(max_abs_diff(shifted, plain), 1e-12);
  // The same recurrence with m starting at 0 references every score to 0:
  // exp(-2000) underflows, l = 0, and the row comes out empty.
  std::vector<double> zero_init(kDim);
  dense::online_attention<double, ZeroInitSteps>(q2.data(), K2.data(), t.V.data(), kKeys, kDim + 1, kDim, kScale,
                                                 kBlock, zero_init.data());
  EXPECT_GT(max_abs_diff(zero_init, plain), 0.01);
}

}  // namespace
}  // namespace afz::cpu
