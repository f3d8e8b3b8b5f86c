#include "harness/case/materialize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "harness/case/case_io.h"
#include "harness/case/generators.h"
#include "harness/case/tensor_views.h"
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


namespace afz {
namespace {

// The bits a buffer must hold: round_bits of the logical value at every
// valid position of every (b, h) that maps to it (broadcast K and V: several
// map to one, with equal values), the case's poison everywhere else, up to
// the buffer's end.  What the materializer wrote when it poisoned whole
// buffers first and stored valid positions after; the one-pass scatter must
// leave the same bytes.
struct BufferCheck {
  const uint8_t* base;
  int64_t elements;
  std::vector<int> written;  // per element: 0 poison expected, 1 a value
  std::vector<uint32_t> expect;
};

void expect_tensor(BufferCheck& buf, const afz_tensor& t, const std::vector<double>& logical, int batch, int heads,
                   int seq, int row, const std::vector<int32_t>& seqlens, afz_dtype in) {
  const int64_t offset = (static_cast<const uint8_t*>(t.data) - buf.base) / size_of(in);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int s = 0; s < seqlens[size_t(b)]; ++s)
        for (int x = 0; x < row; ++x) {
          const int64_t at = offset + b * t.stride[0] + h * t.stride[1] + s * t.stride[2] + x * t.stride[3];
          ASSERT_LT(at, buf.elements);
          buf.written[size_t(at)] = 1;
          buf.expect[size_t(at)] = round_bits(format_of(in), logical[((size_t(b) * heads + h) * seq + s) * row + x]);
        }
}

uint32_t element_bits(const uint8_t* at, int size) {
  uint32_t w = 0;
  std::memcpy(&w, at, size_t(size));  // little-endian: the low bytes are the element
  return w;
}

void expect_every_byte(const Case& c) {
  SCOPED_TRACE(write_case(c));
  Materialized m(c);
  const afz_problem& p = m.problem();
  const LogicalTensors& x = m.logical();
  const TensorViews v = tensor_views(c);
  const afz_dtype in = c.in_dtype;
  const int esz = size_of(in);
  uint32_t poison = quiet_nan_bits(in);
  if (c.poison == Poison::Inf) poison = inf_bits(in, false);
  if (c.poison == Poison::None) poison = 0;
  auto make = [&](const void* data, const View& view, int64_t elements) {
    BufferCheck b;
    b.base = static_cast<const uint8_t*>(data) - view.offset * esz;
    b.elements = std::max<int64_t>(elements, 64 / esz);  // an empty tensor's minimum allocation
    b.written.assign(size_t(b.elements), 0);
    b.expect.assign(size_t(b.elements), poison);
    return b;
  };
  std::vector<BufferCheck> buffers;
  if (c.layout == Layout::PackedQKV) {
    buffers.push_back(make(p.q.data, v.q, v.packed_elements));
    expect_tensor(buffers[0], p.q, x.q, c.batch, c.heads_q, x.sq, c.head_dim, c.seqlens_q, in);
    expect_tensor(buffers[0], p.k, x.k, c.batch, c.heads_kv, x.sk, c.head_dim, c.seqlens_k, in);
    expect_tensor(buffers[0], p.v, x.v, c.batch, c.heads_kv, x.sk, c.head_dim_v, c.seqlens_k, in);
  } else {
    buffers.push_back(make(p.q.data, v.q, v.q_elements));
    buffers.push_back(make(p.k.data, v.k, v.k_elements));
    buffers.push_back(make(p.v.data, v.v, v.v_elements));
    expect_tensor(buffers[0], p.q, x.q, c.batch, c.heads_q, x.sq, c.head_dim, c.seqlens_q, in);
    expect_tensor(buffers[1], p.k, x.k, c.batch, c.heads_kv, x.sk, c.head_dim, c.seqlens_k, in);
    expect_tensor(buffers[2], p.v, x.v, c.batch, c.heads_kv, x.sk, c.head_dim_v, c.seqlens_k, in);
  }
  for (const BufferCheck& b : buffers)
    for (int64_t n = 0; n < b.elements; ++n)
      ASSERT_EQ(element_bits(b.base + n * esz, esz), b.expect[size_t(n)])
          << "element " << n << (b.written[size_t(n)] ? " (a value)" : " (poison)");
}

TEST(Materialize, EveryBufferByteIsValueOrPoison) {
  Case c = small_case();
  c.seqlens_q = {5, 3};
  c.seqlens_k = {7, 2};
  for (Layout l : {Layout::BHSD, Layout::BSHD, Layout::PackedQKV})
    for (int gap : {0, 3})
      for (KvBroadcast kv : {KvBroadcast::None, KvBroadcast::Heads, KvBroadcast::Batch})
        for (Poison poison : {Poison::NaN, Poison::Inf, Poison::None})
          for (afz_dtype in : {AFZ_BF16, AFZ_F16, AFZ_F32, AFZ_F8E4M3}) {
            if (l == Layout::PackedQKV && kv != KvBroadcast::None) continue;
            c.layout = l, c.row_gap = gap, c.kv_broadcast = kv, c.poison = poison, c.in_dtype = in;
            expect_every_byte(c);
          }
}

// Every class of the forward mix: its shapes, transforms and distributions.
TEST(Materialize, GeneratedCasesHoldValueOrPoison) {
  constexpr int kCasesPerClass = 4;
  constexpr uint64_t kSeed = 11;
  for (const GeneratorDef& g : generator_table())
    for (int i = 0; i < kCasesPerClass; ++i) expect_every_byte(generate_with(g, kSeed, uint64_t(i)));
}

// A tensor past 2^31 elements: its strides, offsets and extents in int64,
// checked without allocating it.  65 sequences x 16 heads x 16384 x 128 =
// 2,181,038,080 elements, and the packed buffer three times that.
TEST(Materialize, ViewsPastInt32Elements) {
  Case c;
  c.batch = 65;
  c.heads_q = c.heads_kv = 16;
  c.seqlens_q.assign(65, 16384);
  c.seqlens_k.assign(65, 16384);
  c.head_dim = c.head_dim_v = 128;
  const int64_t per_tensor = int64_t{65} * 16 * 16384 * 128;
  ASSERT_GT(per_tensor, int64_t{1} << 31);
  EXPECT_FALSE(validate_case(c).has_value()) << "the case limit must admit a tensor past 2^31 elements";
  for (Layout l : {Layout::BHSD, Layout::BSHD}) {
    c.layout = l;
    const TensorViews v = tensor_views(c);
    EXPECT_EQ(v.q_elements, per_tensor);
    EXPECT_EQ(v.o_elements, per_tensor);
    EXPECT_EQ(v.q.at(64, 15, 16383, 127), per_tensor - 1) << "the last element is the buffer's last";
    EXPECT_EQ(v.o.at(64, 15, 16383, 127), per_tensor - 1);
    EXPECT_EQ(v.lse_elements, int64_t{65} * 16 * 16384);
  }
  c.layout = Layout::BHSD;
  EXPECT_EQ(tensor_views(c).q.at(64, 0, 0, 0), int64_t{64} * 16 * 16384 * 128);  // 2^31: one past INT32_MAX
  c.layout = Layout::PackedQKV;
  c.row_gap = 8;
  const TensorViews v = tensor_views(c);
  const int64_t row = 128 + 8, heads = 16 * 3;
  EXPECT_EQ(v.packed_elements, int64_t{65} * 16384 * heads * row);
  EXPECT_EQ(v.v.at(64, 15, 16383, 127), v.packed_elements - 8 - 1) << "V's last value, before the final gap";
}

}  // namespace
}  // namespace afz

#include <mutex>
#include <utility>

#include "harness/case/parallel_chunks.h"

namespace afz {
namespace {

// Huge tensors are split over threads: the chunks must cover [0, n) exactly
// once (what makes the split invisible in the bits), and small ranges must
// stay one chunk on the calling thread.
TEST(Materialize, ChunksCoverTheRangeOnce) {
  for (int64_t n : {int64_t{0}, int64_t{1}, kParallelElements - 1, kParallelElements + 3, 3 * kParallelElements}) {
    std::mutex lock;
    std::vector<std::pair<int64_t, int64_t>> chunks;
    for_each_chunk(n, 1, [&](int64_t begin, int64_t end) {
      std::lock_guard<std::mutex> hold(lock);
      chunks.emplace_back(begin, end);
    });
    std::sort(chunks.begin(), chunks.end());
    int64_t next = 0;
    for (const auto& [begin, end] : chunks) {
      EXPECT_EQ(begin, next) << "n " << n;
      EXPECT_LT(begin, end);
      next = end;
    }
    EXPECT_EQ(next, n);
    if (n < kParallelElements) EXPECT_LE(chunks.size(), 1u) << "n " << n;
  }
}

}  // namespace
}  // namespace afz
