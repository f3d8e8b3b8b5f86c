// Shared checks for the oracle tests: the tiers, an independent long double
// reference written straight from the ABI's definitions, and comparisons.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "oracles/oracle.h"
#include "tests/oracles/problem_builder.h"

namespace afz::test {

struct NamedOracle {
  std::string name;
  std::unique_ptr<Oracle> oracle;
};

// Every tier this build has: fast, boost, and mpfr where MPFR was found.
inline std::vector<NamedOracle> all_tiers() {
  std::vector<NamedOracle> out;
  out.push_back({"fast", make_fast_oracle()});
  out.push_back({"boost", make_boost_oracle()});
  if (auto m = make_mpfr_oracle()) out.push_back({"mpfr", std::move(m)});
  return out;
}

// The two multiprecision tiers where both exist; else Boost twice is useless,
// so callers skip.
inline std::unique_ptr<Oracle> precise_tier() { return make_escalation_oracle(); }

// (a.hi + a.lo) - (b.hi + b.lo), accurate when a and b are close
// (a.hi - b.hi is then exact by Sterbenz).
inline double dd_diff(DD a, DD b) { return (a.hi - b.hi) + (a.lo - b.lo); }

// Key j takes part in row (b, h, i), spelled out from attnfuzz_kernel.h
// independently of oracles/problem_view.cpp.
inline bool ref_visible(const TestProblem& t, int b, int h, int i, int j) {
  const int sq = t.shape().seqlens_q[b], sk = t.shape().seqlens_k[b];
  if (i >= sq || j >= sk) return false;
  if (t.has_window()) {
    const long offset = t.align() == AFZ_ALIGN_BOTTOM_RIGHT ? long(sk) - sq : 0;
    if (t.window_left() >= 0 && j < i + offset - t.window_left()) return false;
    if (t.window_right() >= 0 && j > i + offset + t.window_right()) return false;
  }
  if (!t.keep(b, h, i, j)) return false;
  return t.add(b, h, i, j) != -std::numeric_limits<double>::infinity();
}

struct RefRow {
  bool empty = true;
  std::vector<long double> o;
  long double lse = -std::numeric_limits<long double>::infinity();
};

// Softmax attention of one row in long double (64-bit significand): an
// independent check of the semantics, accurate to ~1e-18 relative on
// moderate scores.
inline RefRow reference_row(const TestProblem& t, int b, int h, int i) {
  const Shape& s = t.shape();
  const int hk = h / (s.heads_q / s.heads_kv);
  RefRow row;
  row.o.assign(s.dv, 0.0L);
  std::vector<long double> score;
  std::vector<int> keys;
  for (int j = 0; j < (i < s.seqlens_q[b] ? s.seqlens_k[b] : 0); ++j) {
    if (!ref_visible(t, b, h, i, j)) continue;
    long double dot = 0;
    for (int x = 0; x < s.d; ++x) dot += (long double)t.q(b, h, i, x) * t.k(b, hk, j, x);
    long double sc = dot * t.scale();
    if (t.softcap() != 0) sc = t.softcap() * tanhl(sc / t.softcap());
    score.push_back(sc + t.add(b, h, i, j));
    keys.push_back(j);
  }
  if (keys.empty()) return row;
  row.empty = false;
  long double m = score[0];
  for (long double sc : score) m = std::max(m, sc);
  long double l = 0;
  for (size_t n = 0; n < keys.size(); ++n) {
    const long double w = expl(score[n] - m);
    l += w;
    for (int x = 0; x < s.dv; ++x) row.o[x] += w * t.v(b, hk, keys[n], x);
  }
  for (int x = 0; x < s.dv; ++x) row.o[x] /= l;
  row.lse = m + logl(l);
  return row;
}

// Nothing NaN; lse finite or (empty rows) -inf; bounds finite or +inf.
inline void expect_no_nan(const OracleResult& r, const std::string& what) {
  for (size_t e = 0; e < r.o.size(); ++e) {
    ASSERT_TRUE(std::isfinite(r.o[e].hi) && std::isfinite(r.o[e].lo)) << what << " o[" << e << "]";
    ASSERT_FALSE(std::isnan(r.cond[e]) || std::isnan(r.cond_score[e]) || std::isnan(r.cond_tiny[e]))
        << what << " cond[" << e << "]";
    ASSERT_FALSE(std::isnan(r.o_err[e])) << what << " o_err[" << e << "]";
  }
  for (int64_t ri = 0; ri < r.rows(); ++ri) {
    ASSERT_FALSE(std::isnan(r.lse[ri].hi) || std::isnan(r.lse[ri].lo)) << what << " lse[" << ri << "]";
    if (r.empty[ri]) ASSERT_EQ(r.lse[ri].hi, -std::numeric_limits<double>::infinity()) << what << " row " << ri;
    else ASSERT_TRUE(std::isfinite(r.lse[ri].hi)) << what << " lse[" << ri << "]";
    ASSERT_FALSE(std::isnan(r.lse_err[ri]) || std::isnan(r.lse_cond_score[ri])) << what << " row " << ri;
  }
}

// The listed rows (all rows when `rows` is empty) of a and b agree to
// `bits` bits: |o_a - o_b| <= 2^-bits cond for every element (cond =
// sum_j w_j |v_j| >= |o|, the scale of the convex combination: relative to
// |o| itself would demand the impossible where o cancels to ~0), and
// |lse_a - lse_b| <= 2^-bits max(1, |lse|) (lse is a log: its natural
// accuracy is absolute near 0 and relative for large scores).
inline void expect_agree_bits(const OracleResult& a, const OracleResult& b, int bits, const std::string& what,
                              std::vector<int64_t> rows = {}) {
  ASSERT_EQ(a.rows(), b.rows());
  ASSERT_EQ(a.dv, b.dv);
  if (rows.empty())
    for (int64_t ri = 0; ri < a.rows(); ++ri) rows.push_back(ri);
  const double tol = std::ldexp(1.0, -bits);
  for (int64_t ri : rows) {
    ASSERT_EQ(a.empty[ri], b.empty[ri]) << what << " row " << ri;
    for (int x = 0; x < a.dv; ++x) {
      const int64_t e = ri * a.dv + x;
      ASSERT_LE(std::fabs(dd_diff(a.o[e], b.o[e])), tol * a.cond[e])
          << what << " row " << ri << " x " << x << ": " << a.o[e].hi << " vs " << b.o[e].hi << " cond " << a.cond[e];
    }
    if (a.empty[ri]) continue;
    ASSERT_LE(std::fabs(dd_diff(a.lse[ri], b.lse[ri])), tol * std::max(1.0, std::fabs(a.lse[ri].hi)))
        << what << " row " << ri << ": lse " << a.lse[ri].hi << " vs " << b.lse[ri].hi;
  }
}

// The condition terms and row statistics of two tiers agree to a relative
// `rel` (they are double sums of the same weights, computed in different
// precisions and, for the fast tier, by different code).
inline void expect_same_condition_terms(const OracleResult& a, const OracleResult& b, double rel,
                                        const std::string& what) {
  auto near = [rel](double x, double y) { return std::fabs(x - y) <= rel * std::max(std::fabs(x), std::fabs(y)); };
  for (int64_t ri = 0; ri < a.rows(); ++ri) {
    EXPECT_EQ(a.visible_keys[ri], b.visible_keys[ri]) << what << " row " << ri;
    EXPECT_TRUE(near(a.lse_cond_score[ri], b.lse_cond_score[ri])) << what << " lse_cond_score row " << ri;
    EXPECT_TRUE(near(a.max_sigma[ri], b.max_sigma[ri])) << what << " max_sigma row " << ri;
    EXPECT_TRUE(near(a.max_abs_score[ri], b.max_abs_score[ri])) << what << " max_abs_score row " << ri;
    for (int x = 0; x < a.dv; ++x) {
      const int64_t e = ri * a.dv + x;
      EXPECT_TRUE(near(a.cond[e], b.cond[e])) << what << " cond row " << ri << " x " << x;
      EXPECT_TRUE(near(a.cond_score[e], b.cond_score[e])) << what << " cond_score row " << ri << " x " << x;
      EXPECT_TRUE(near(a.cond_tiny[e], b.cond_tiny[e])) << what << " cond_tiny row " << ri << " x " << x;
    }
  }
}

// Each value of `fast` lies within its own bound of the precise one (whose
// own, tiny, bound is added).  Returns the largest ratio |error| / bound seen.
inline double expect_within_bound(const OracleResult& fast, const OracleResult& precise, const std::string& what,
                                  std::vector<int64_t> rows = {}) {
  double worst = 0;
  if (rows.empty())
    for (int64_t ri = 0; ri < fast.rows(); ++ri) rows.push_back(ri);
  for (int64_t ri : rows) {
    EXPECT_EQ(fast.empty[ri], precise.empty[ri]) << what << " row " << ri;
    for (int x = 0; x < fast.dv; ++x) {
      const int64_t e = ri * fast.dv + x;
      const double err = std::fabs(dd_diff(fast.o[e], precise.o[e]));
      const double bound = fast.o_err[e] + precise.o_err[e];
      EXPECT_LE(err, bound) << what << " row " << ri << " x " << x << ": fast " << fast.o[e].hi << " precise "
                            << precise.o[e].hi;
      if (bound > 0) worst = std::max(worst, err / bound);
    }
    if (fast.empty[ri]) continue;
    const double err = std::fabs(dd_diff(fast.lse[ri], precise.lse[ri]));
    const double bound = fast.lse_err[ri] + precise.lse_err[ri];
    EXPECT_LE(err, bound) << what << " row " << ri << ": lse fast " << fast.lse[ri].hi << " precise "
                          << precise.lse[ri].hi;
    if (bound > 0) worst = std::max(worst, err / bound);
  }
  return worst;
}

}  // namespace afz::test
