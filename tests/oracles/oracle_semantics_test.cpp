// What every oracle tier computes: visibility (seqlens, causal and window
// alignment, boolean and additive masks), GQA, softcap before the additive
// mask, empty rows (O = 0 exactly, LSE = -inf), strided layouts, and the
// errors on bad input.  Each tier is checked against an independent long
// double reference (oracle_test_util.h) that spells the ABI out again.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "oracles/oracle.h"
#include "tests/oracles/oracle_test_util.h"
#include "tests/oracles/problem_builder.h"

namespace afz::test {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
// Long double (64-bit significand) softmax is good to ~2^-60 of cond on these
// moderate scores; the tiers are far better, so 2^-50 cannot false-alarm and
// still catches any semantic slip (a wrong key changes o at the 1e-3 level).
constexpr double kRefTolerance = 0x1p-50;

// Every row of every tier against the long double reference.
void check_against_reference(TestProblem& t, const std::string& what) {
  const afz_problem p = t.problem();
  for (auto& tier : all_tiers()) {
    const OracleResult r = tier.oracle->compute(p);
    const std::string tag = what + " [" + tier.name + "]";
    expect_no_nan(r, tag);
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_q; ++h)
        for (int i = 0; i < p.max_seqlen_q; ++i) {
          const int64_t ri = r.row_index(b, h, i);
          const RefRow ref = reference_row(t, b, h, i);
          ASSERT_EQ(bool(r.empty[ri]), ref.empty) << tag << " b=" << b << " h=" << h << " i=" << i;
          for (int x = 0; x < p.head_dim_v; ++x) {
            const int64_t e = ri * p.head_dim_v + x;
            if (ref.empty) {
              EXPECT_TRUE(r.o[e].hi == 0 && r.o[e].lo == 0 && !std::signbit(r.o[e].hi)) << tag << " empty row o";
              EXPECT_EQ(r.o_err[e], 0.0) << tag;
              EXPECT_EQ(r.cond[e], 0.0) << tag;
              continue;
            }
            const long double diff = ((long double)r.o[e].hi + r.o[e].lo) - ref.o[x];
            EXPECT_LE(std::fabs(double(diff)), kRefTolerance * r.cond[e] + r.o_err[e])
                << tag << " b=" << b << " h=" << h << " i=" << i << " x=" << x;
          }
          if (ref.empty) {
            EXPECT_EQ(r.lse[ri].hi, kNegInf) << tag;
            EXPECT_EQ(r.visible_keys[ri], 0) << tag;
            continue;
          }
          const long double dl = ((long double)r.lse[ri].hi + r.lse[ri].lo) - ref.lse;
          EXPECT_LE(std::fabs(double(dl)), kRefTolerance * std::max(1.0, std::fabs(r.lse[ri].hi)) + r.lse_err[ri])
              << tag << " lse b=" << b << " h=" << h << " i=" << i;
        }
  }
}

// The configurations, as data: a shape and what to do to the problem.
struct Config {
  const char* name;
  Shape shape;
  std::function<void(TestProblem&)> setup;
};

std::vector<Config> configs() {
  auto shape = [](int batch, int hq, int hkv, int d, int dv, std::vector<int32_t> sq, std::vector<int32_t> sk,
                  afz_dtype t = AFZ_F32, bool bshd = false) {
    Shape s;
    s.batch = batch, s.heads_q = hq, s.heads_kv = hkv, s.d = d, s.dv = dv;
    s.seqlens_q = std::move(sq), s.seqlens_k = std::move(sk), s.dtype = t, s.bshd = bshd;
    return s;
  };
  auto random = [](uint64_t seed) { return [seed](TestProblem& t) { t.fill_uniform(seed, 1.0, 1.0, 1.0); }; };
  return {
      {"plain", shape(1, 1, 1, 8, 8, {5}, {7}), random(1)},
      {"causal top-left, sq < sk", shape(1, 2, 2, 8, 4, {5}, {9}),
       [](TestProblem& t) { t.fill_uniform(2, 1, 1, 1); t.set_window(-1, 0, AFZ_ALIGN_TOP_LEFT); }},
      {"causal bottom-right, sq < sk", shape(1, 2, 2, 8, 4, {5}, {9}),
       [](TestProblem& t) { t.fill_uniform(3, 1, 1, 1); t.set_window(-1, 0, AFZ_ALIGN_BOTTOM_RIGHT); }},
      {"causal bottom-right, sq > sk: leading rows empty", shape(1, 1, 1, 4, 4, {7}, {3}),
       [](TestProblem& t) { t.fill_uniform(4, 1, 1, 1); t.set_window(-1, 0, AFZ_ALIGN_BOTTOM_RIGHT); }},
      {"sliding window (2, 1) bottom-right", shape(1, 1, 1, 4, 4, {6}, {10}),
       [](TestProblem& t) { t.fill_uniform(5, 1, 1, 1); t.set_window(2, 1, AFZ_ALIGN_BOTTOM_RIGHT); }},
      {"window (0, 0) top-left: rows past sk empty", shape(1, 1, 1, 4, 4, {6}, {3}),
       [](TestProblem& t) { t.fill_uniform(6, 1, 1, 1); t.set_window(0, 0, AFZ_ALIGN_TOP_LEFT); }},
      {"varlen with zero-length sequences and padding rows", shape(4, 2, 1, 4, 4, {3, 0, 2, 4}, {4, 5, 0, 1}),
       random(7)},
      {"GQA 6 query heads on 2 kv heads", shape(2, 6, 2, 8, 8, {3, 2}, {6, 4}), random(8)},
      {"MQA", shape(1, 4, 1, 8, 8, {3}, {5}), random(9)},
      {"BSHD layout, d != dv", shape(2, 2, 2, 8, 3, {4, 3}, {5, 6}, AFZ_F32, true), random(10)},
      {"fp16 inputs", shape(1, 2, 1, 16, 8, {4}, {9}, AFZ_F16), random(11)},
      {"bf16 inputs", shape(1, 2, 1, 16, 8, {4}, {9}, AFZ_BF16), random(12)},
      {"bool mask: every 3rd row fully masked, a band elsewhere", shape(1, 2, 2, 4, 4, {9}, {9}),
       [](TestProblem& t) {
         t.fill_uniform(13, 1, 1, 1);
         t.set_bool_mask([](int, int h, int i, int j) { return i % 3 != 0 && std::abs(i - j) <= 1 + h; });
       }},
      {"additive mask: -inf, lowest finite, -1e4 and ordinary values", shape(1, 1, 1, 4, 4, {6}, {8}),
       [](TestProblem& t) {
         t.fill_uniform(14, 1, 1, 1);
         t.set_add_mask([](int, int, int i, int j) {
           if (i == 0) return kNegInf;                        // whole row: empty
           if (i == 1) return -1e4;                          // whole row shifted: still softmax of the dots
           switch (j % 4) {
             case 0: return kNegInf;
             case 1: return -1e4;
             case 2: return 0.25 * j;
             default: return double(lowest_finite(AFZ_F32));
           }
         });
       }},
      {"softcap 2.5, additive mask added after it", shape(1, 1, 1, 8, 4, {4}, {6}),
       [](TestProblem& t) {
         t.fill_uniform(15, 3, 3, 1);
         t.set_softcap(2.5f);
         t.set_add_mask([](int, int, int i, int j) { return (i + j) % 3 == 0 ? -3.0 : 0.5; });
       }},
      {"negative softcap and scale (cap tanh(s/cap) is odd in cap)", shape(1, 1, 1, 8, 4, {3}, {5}),
       [](TestProblem& t) { t.fill_uniform(16, 2, 2, 1); t.set_softcap(-1.5f); t.set_scale(-0.75f); }},
  };
}

TEST(OracleSemantics, EveryTierMatchesTheReferenceOnEveryConfiguration) {
  for (const Config& c : configs()) {
    TestProblem t(c.shape);
    c.setup(t);
    SCOPED_TRACE(c.name);
    check_against_reference(t, c.name);
  }
}

// A row that sees one key returns that key's value exactly, in every tier:
// its weight is exp(0) = 1 and the division by l = 1 is exact.
TEST(OracleSemantics, SingleVisibleKeyGivesItsValueExactly) {
  Shape s;
  s.d = 8, s.dv = 8, s.seqlens_q = {4}, s.seqlens_k = {4};
  TestProblem t(s);
  t.fill_uniform(21, 4, 4, 8);
  t.set_window(-1, 0, AFZ_ALIGN_TOP_LEFT);  // row 0 sees key 0 only
  const afz_problem p = t.problem();
  for (auto& tier : all_tiers()) {
    const OracleResult r = tier.oracle->compute(p);
    for (int x = 0; x < s.dv; ++x) {
      EXPECT_EQ(r.o[x].hi, t.v(0, 0, 0, x)) << tier.name;
      EXPECT_EQ(r.o[x].lo, 0.0) << tier.name;
    }
    long double s0 = 0;
    for (int x = 0; x < s.d; ++x) s0 += (long double)t.q(0, 0, 0, x) * t.k(0, 0, 0, x);
    const double lse_diff = double(((long double)r.lse[0].hi + r.lse[0].lo) - s0);
    EXPECT_NEAR(lse_diff, 0.0, 1e-18 * std::fabs(double(s0)) + r.lse_err[0])
        << tier.name;
    EXPECT_EQ(r.visible_keys[0], 1) << tier.name;
  }
}

// GQA maps query head h to kv head h / group: the same problem with K and V
// duplicated per query head (MHA) must give bit-identical results.
TEST(OracleSemantics, GqaEqualsDuplicatedHeads) {
  Shape g;
  g.heads_q = 6, g.heads_kv = 3, g.d = 8, g.dv = 8, g.seqlens_q = {3}, g.seqlens_k = {5};
  Shape m = g;
  m.heads_kv = 6;
  TestProblem tg(g), tm(m);
  tg.fill_uniform(31, 1, 1, 1);
  for (int h = 0; h < 6; ++h)
    for (int i = 0; i < 3; ++i)
      for (int x = 0; x < 8; ++x) tm.set_q(0, h, i, x, tg.q(0, h, i, x));
  for (int h = 0; h < 6; ++h)
    for (int j = 0; j < 5; ++j)
      for (int x = 0; x < 8; ++x) {
        tm.set_k(0, h, j, x, tg.k(0, h / 2, j, x));
        tm.set_v(0, h, j, x, tg.v(0, h / 2, j, x));
      }
  const afz_problem pg = tg.problem(), pm = tm.problem();
  for (auto& tier : all_tiers()) {
    const OracleResult a = tier.oracle->compute(pg), b = tier.oracle->compute(pm);
    for (size_t e = 0; e < a.o.size(); ++e) {
      EXPECT_EQ(a.o[e].hi, b.o[e].hi) << tier.name << " element " << e;
      EXPECT_EQ(a.o[e].lo, b.o[e].lo) << tier.name << " element " << e;
    }
  }
}

// compute_rows recomputes exactly what compute gives, row by row, and
// leaves the other rows alone.
TEST(OracleSemantics, ComputeRowsMatchesCompute) {
  Shape s;
  s.batch = 2, s.heads_q = 2, s.heads_kv = 1, s.d = 8, s.dv = 4, s.seqlens_q = {3, 2}, s.seqlens_k = {6, 4};
  TestProblem t(s);
  t.fill_uniform(41, 2, 2, 1);
  t.set_window(-1, 0, AFZ_ALIGN_BOTTOM_RIGHT);
  const afz_problem p = t.problem();
  for (auto& tier : all_tiers()) {
    const OracleResult full = tier.oracle->compute(p);
    OracleResult part;
    part.resize(p.batch, p.heads_q, p.max_seqlen_q, p.head_dim_v);
    const std::vector<int64_t> rows = {full.row_index(1, 1, 1), full.row_index(0, 0, 2), full.row_index(1, 0, 2)};
    tier.oracle->compute_rows(p, rows, part);
    for (int64_t ri = 0; ri < full.rows(); ++ri) {
      const bool listed = std::find(rows.begin(), rows.end(), ri) != rows.end();
      for (int x = 0; x < p.head_dim_v; ++x) {
        const int64_t e = ri * p.head_dim_v + x;
        if (listed) {
          EXPECT_EQ(part.o[e].hi, full.o[e].hi) << tier.name << " row " << ri;
          EXPECT_EQ(part.o[e].lo, full.o[e].lo) << tier.name << " row " << ri;
          EXPECT_EQ(part.o_err[e], full.o_err[e]) << tier.name << " row " << ri;
        } else {
          EXPECT_EQ(part.o[e].hi, 0.0) << tier.name << " row " << ri << " was not listed";
        }
      }
      if (listed) {
        EXPECT_EQ(part.lse[ri].hi, full.lse[ri].hi) << tier.name << " row " << ri;
      }
    }
  }
}

// A key hidden by the boolean mask may hold anything, even NaN: the oracle
// must not look at it (its weight is exactly 0, its value irrelevant).
TEST(OracleSemantics, MaskedKeysAreNeverUsed) {
  Shape s;
  s.d = 4, s.dv = 4, s.seqlens_q = {2}, s.seqlens_k = {3};
  TestProblem t(s);
  t.fill_uniform(51, 1, 1, 1);
  for (int x = 0; x < 4; ++x) {
    t.set_k(0, 0, 1, x, std::numeric_limits<double>::quiet_NaN());
    t.set_v(0, 0, 1, x, std::numeric_limits<double>::infinity());
  }
  t.set_bool_mask([](int, int, int, int j) { return j != 1; });
  const afz_problem p = t.problem();
  for (auto& tier : all_tiers()) {
    OracleResult r;
    ASSERT_NO_THROW(r = tier.oracle->compute(p)) << tier.name;
    expect_no_nan(r, tier.name);
  }
}

// Bad input: one line, starting with "oracle:", thrown as invalid_argument.
void expect_one_line_error(const std::function<void()>& f, const std::string& needle, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << what << ": no error";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("oracle: ", 0), 0u) << what << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << what << ": " << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << what << ": " << msg;
  }
}

TEST(OracleSemantics, BadInputGivesOneLineErrors) {
  Shape s;
  s.d = 4, s.dv = 4, s.seqlens_q = {2}, s.seqlens_k = {3};
  for (auto& tier : all_tiers()) {
    const Oracle& o = *tier.oracle;
    {
      TestProblem t(s);
      t.fill_uniform(61, 1, 1, 1);
      t.set_q(0, 0, 1, 2, std::numeric_limits<double>::infinity());
      const afz_problem p = t.problem();
      expect_one_line_error([&] { o.compute(p); }, "q[b=0][h=0][1][2]", tier.name + " inf in q");
    }
    {
      TestProblem t(s);
      t.fill_uniform(62, 1, 1, 1);
      t.set_v(0, 0, 2, 3, std::numeric_limits<double>::quiet_NaN());
      const afz_problem p = t.problem();
      expect_one_line_error([&] { o.compute(p); }, "v[b=0][h=0][2][3]", tier.name + " NaN in v");
    }
    {
      TestProblem t(s);
      t.fill_uniform(63, 1, 1, 1);
      t.set_add_mask([](int, int, int i, int j) {
        return i == 1 && j == 0 ? std::numeric_limits<double>::infinity() : 0.0;
      });
      const afz_problem p = t.problem();
      expect_one_line_error([&] { o.compute(p); }, "+inf", tier.name + " +inf additive mask");
    }
    {
      TestProblem t(s);
      t.fill_uniform(64, 1, 1, 1);
      afz_problem p = t.problem();
      p.heads_q = 3, p.heads_kv = 2;
      expect_one_line_error([&] { o.compute(p); }, "heads_q", tier.name + " heads");
      p = t.problem();
      const int32_t too_long[] = {5};
      p.seqlens_q = too_long;
      expect_one_line_error([&] { o.compute(p); }, "seqlens_q[0]", tier.name + " seqlen");
      p = t.problem();
      p.scale = std::numeric_limits<float>::quiet_NaN();
      expect_one_line_error([&] { o.compute(p); }, "scale", tier.name + " scale");
      p = t.problem();
      p.abi_version = 99;
      expect_one_line_error([&] { o.compute(p); }, "ABI version", tier.name + " abi");
      p = t.problem();
      OracleResult wrong;
      wrong.resize(1, 1, 1, 4);
      expect_one_line_error([&] { o.compute_rows(p, {0}, wrong); }, "not sized", tier.name + " shape");
      OracleResult right = o.compute(p);
      expect_one_line_error([&] { o.compute_rows(p, {7}, right); }, "row 7", tier.name + " row index");
    }
  }
  if (have_mpfr()) {
    expect_one_line_error([] { make_mpfr_oracle(10); }, "precision", "mpfr precision");
  } else {
    EXPECT_EQ(make_mpfr_oracle(), nullptr);
  }
}

TEST(OracleSemantics, EscalationTierIsMpfrWhenBuilt) {
  const auto o = make_escalation_oracle();
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->name().rfind(have_mpfr() ? "mpfr" : "boost", 0), 0u) << o->name();
}

}  // namespace
}  // namespace afz::test
