#include "harness/case/materialize.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/abi/dtype.h"
#include "oracles/oracle.h"

namespace afz {
namespace {

Case small_case() {
  Case c;
  c.batch = 2;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.seqlens_q = {5, 3};
  c.seqlens_k = {7, 0};
  c.head_dim = 8;
  c.head_dim_v = 8;
  c.seed = 42;
  return c;
}

TEST(Materialize, SameCaseSameBits) {
  const Case c = small_case();
  Materialized a(c), b(c);
  EXPECT_EQ(a.input_hash(), b.input_hash());
  Case d = c;
  d.seed = 43;
  EXPECT_NE(Materialized(d).input_hash(), a.input_hash());
}

TEST(Materialize, ValuesAreDtypeValues) {
  Case c = small_case();
  c.in_dtype = AFZ_F16;
  Materialized m(c);
  for (double v : m.logical().q) EXPECT_EQ(round_to(AFZ_F16, v), v);
}

// Every layout holds the same logical values at the strides it declares.
TEST(Materialize, LayoutsAgreeLogically) {
  Case c = small_case();
  c.seqlens_q = {6, 6};
  c.seqlens_k = {6, 6};
  c.heads_kv = 4;
  const Layout layouts[] = {Layout::BHSD, Layout::BSHD, Layout::PackedQKV};
  for (Layout l : layouts) {
    for (int gap : {0, 3}) {
      c.layout = l;
      c.row_gap = gap;
      Materialized m(c);
      const afz_problem& p = m.problem();
      for (int b = 0; b < 2; ++b)
        for (int h = 0; h < 4; ++h)
          for (int s = 0; s < 6; ++s)
            for (int x = 0; x < 8; ++x) {
              const auto* q = static_cast<const uint8_t*>(p.q.data) +
                              (b * p.q.stride[0] + h * p.q.stride[1] + s * p.q.stride[2] + x * p.q.stride[3]) * 2;
              ASSERT_EQ(load(AFZ_BF16, q), m.logical().q[((b * 4 + h) * 6 + s) * 8 + x]);
            }
      Case bhsd = c;
      bhsd.layout = Layout::BHSD;
      bhsd.row_gap = 0;
      EXPECT_EQ(m.input_hash(), Materialized(bhsd).input_hash()) << "layout must not change values";
    }
  }
}

TEST(Materialize, PaddingAndGapsArePoisoned) {
  Case c = small_case();
  c.row_gap = 2;
  Materialized m(c);
  const afz_problem& p = m.problem();
  auto q_at = [&](int b, int h, int s, int x) {
    return load(AFZ_BF16, static_cast<const uint8_t*>(p.q.data) +
                              (b * p.q.stride[0] + h * p.q.stride[1] + s * p.q.stride[2] + x * p.q.stride[3]) * 2);
  };
  EXPECT_FALSE(std::isnan(q_at(1, 0, 2, 0)));
  EXPECT_TRUE(std::isnan(q_at(1, 0, 3, 0))) << "past seqlens_q[1] = 3";
  EXPECT_TRUE(std::isnan(q_at(0, 0, 0, 8))) << "the row gap";
  c.poison = Poison::Inf;
  Materialized mi(c);
  const auto* k = static_cast<const uint8_t*>(mi.problem().k.data);
  EXPECT_TRUE(std::isinf(load(AFZ_BF16, k + (1 * mi.problem().k.stride[0]) * 2))) << "seqlens_k[1] = 0";
}

TEST(Materialize, OutputsStartPoisoned) {
  Materialized m(small_case());
  EXPECT_EQ(m.o_bits_at(0, 0, 0, 0), kPoisonBF16);
  EXPECT_EQ(bits_of(m.lse_at(1, 3, 2)), kPoisonF32);
}

TEST(Materialize, BroadcastKvHasStrideZero) {
  Case c = small_case();
  c.kv_broadcast = KvBroadcast::Heads;
  Materialized m(c);
  EXPECT_EQ(m.problem().k.stride[1], 0);
  EXPECT_EQ(m.problem().v.stride[1], 0);
  const LogicalTensors& x = m.logical();
  EXPECT_EQ(x.k[((0 * 2 + 1) * 7 + 3) * 8 + 5], x.k[((0 * 2 + 0) * 7 + 3) * 8 + 5]);
  c.kv_broadcast = KvBroadcast::Batch;
  Materialized mb(c);
  EXPECT_EQ(mb.problem().k.stride[0], 0);
}

TEST(Materialize, WindowVisibility) {
  Case c = small_case();
  c.seqlens_q = {3, 3};
  c.seqlens_k = {7, 7};
  c.has_window = true;
  c.window_left = -1;
  c.window_right = 0;  // causal
  c.align = AFZ_ALIGN_BOTTOM_RIGHT;
  Materialized br(c);
  EXPECT_TRUE(br.visible(0, 0, 0, 4));   // j <= i + 7 - 3
  EXPECT_FALSE(br.visible(0, 0, 0, 5));
  c.align = AFZ_ALIGN_TOP_LEFT;
  Materialized tl(c);
  EXPECT_TRUE(tl.visible(0, 0, 0, 0));
  EXPECT_FALSE(tl.visible(0, 0, 0, 1));
  c.window_left = 1;
  Materialized w(c);
  EXPECT_FALSE(w.visible(0, 0, 2, 0));
  EXPECT_TRUE(w.visible(0, 0, 2, 1));
}

TEST(Materialize, MaskPatterns) {
  Case c = small_case();
  c.bool_mask = MaskPattern{"rows_every", {2, 1}};
  c.add_mask = AddMask{{"cols_every", {3, 0}}, AddValueKind::Lowest, 0};
  Materialized m(c);
  EXPECT_FALSE(m.visible(0, 0, 1, 0));
  EXPECT_TRUE(m.visible(0, 0, 2, 0));
  EXPECT_EQ(m.add_mask_at(0, 0, 0, 3), -0x1.fep127);
  EXPECT_EQ(m.add_mask_at(0, 0, 0, 4), 0.0);
}

// few_rows keeps or zeroes whole rows (the last dimension), about PERMIL per
// mille of them, the kept ones drawn as normal 1.
TEST(Materialize, FewRowsKeepsWholeRows) {
  Case c = small_case();
  c.seqlens_k = {400, 400};
  c.values_v = Distribution{"few_rows", 250};
  Materialized m(c);
  const LogicalTensors& x = m.logical();
  int kept = 0;
  for (int j = 0; j < x.sk; ++j) {
    int nonzero = 0;
    for (int e = 0; e < x.dv; ++e) nonzero += x.V(0, 0, j, e) != 0;
    EXPECT_TRUE(nonzero == 0 || nonzero == x.dv) << "row " << j << ": " << nonzero << " of " << x.dv;
    kept += nonzero > 0;
  }
  // 250 per mille of 400 rows: 100 expected, 60..140 is many deviations out.
  EXPECT_GT(kept, 60);
  EXPECT_LT(kept, 140);
}

// Pinned: these hashes hold on every compiler and machine.  A change here
// means saved corpora no longer reproduce: bump the case format version.
TEST(Materialize, PinnedHashes) {
  Case a = small_case();
  Case b = small_case();
  b.in_dtype = AFZ_F16;
  b.transforms = {Transform{"late_max", {{"count", 2}, {"boost", 30}}}};
  Case c = small_case();
  c.in_dtype = AFZ_F32;
  c.values_v = Distribution{"uniform", 4};
  c.transforms = {Transform{"special_values", {{"kind", 1}}}};
  Case d = small_case();
  d.values_q = Distribution{"int", 3};
  d.bool_mask = MaskPattern{"random", {300}};
  EXPECT_EQ(Materialized(a).input_hash(), 0x235fa851deab0b07ull);
  EXPECT_EQ(Materialized(b).input_hash(), 0x07f306cf168381f6ull);
  EXPECT_EQ(Materialized(c).input_hash(), 0x9edfb1a50815ca67ull);
  EXPECT_EQ(Materialized(d).input_hash(), 0x811b9bf19d8066feull);
}

}  // namespace
}  // namespace afz

namespace afz {
namespace {

// Every sequence of length zero: still a valid problem with real pointers
// (the oracle and kernels must see an empty batch, not a null tensor).
TEST(Materialize, AllSequencesEmptyStillHavePointers) {
  Case c;
  c.batch = 2;
  c.seqlens_q = {0, 0};
  c.seqlens_k = {0, 0};
  Materialized m(c);
  EXPECT_NE(m.problem().q.data, nullptr);
  EXPECT_NE(m.problem().k.data, nullptr);
  EXPECT_NE(m.problem().o.data, nullptr);
  EXPECT_NE(m.problem().lse, nullptr);
  const OracleResult r = make_fast_oracle()->compute(m.problem());
  EXPECT_EQ(r.rows(), 0);
}

}  // namespace
}  // namespace afz
