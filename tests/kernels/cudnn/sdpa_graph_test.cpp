// The cuDNN SDPA graph as data (kernels/cudnn/sdpa_graph): tensors, dims,
// strides, operations and their order for the layouts, masks and alignments
// the adapter claims, the plan-cache key, the padded-path decision and the
// reasons supports() gives.  No cuDNN needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cudnn/mask_bias.h"
#include "kernels/cudnn/sdpa_graph.h"
#include "tests/kernels/cudnn/graph_lookup.h"
#include "tests/kernels/cudnn/sdpa_shapes.h"

namespace afz::cudnn {
namespace {

using testing::Layout;
using testing::Shape;
using testing::op;
using testing::tensor;
using testing::ShapeProblem;

constexpr size_t kCudnn9_19 = 91900;

SdpaGraph graph_of(const afz_problem& p, bool padded, size_t version = kCudnn9_19) {
  SdpaGraphOptions o;
  o.padded = padded;
  o.cudnn_version = version;
  return build_sdpa_graph(p, o);
}

bool has_op(const SdpaGraph& g, const std::string& name) {
  return std::any_of(g.ops.begin(), g.ops.end(), [&](const GraphOp& o) { return o.name == name; });
}

std::vector<std::string> op_names(const SdpaGraph& g) {
  std::vector<std::string> v;
  for (const GraphOp& o : g.ops) v.push_back(o.name);
  return v;
}

// The scalar operand of an op (its B input).
const GraphTensor& scalar_b(const SdpaGraph& g, const std::string& name) { return tensor(g, op(g, name).b); }

// Structural invariants every graph must satisfy: unique uids, operands that
// exist, each virtual tensor written once before it is read, bound inputs
// never written, O (and Stats) written once, broadcast-consistent pointwise
// dims, matmul dims that fit, by-value scalars of dims 1.
void expect_well_formed(const SdpaGraph& g) {
  std::set<int64_t> uids;
  for (const GraphTensor& t : g.tensors) {
    EXPECT_TRUE(uids.insert(t.uid).second) << "duplicate uid " << t.uid;
    for (int a = 0; a < 4; ++a) EXPECT_GE(t.dims[a], 1) << t.name;
    if (t.by_value) {
      EXPECT_EQ(t.dims, (Dims{1, 1, 1, 1})) << t.name;
      EXPECT_EQ(t.binding, Binding::Scalar) << t.name;
    }
    EXPECT_FALSE(t.is_virtual && t.by_value) << t.name;
    EXPECT_EQ(t.is_virtual, t.binding == Binding::None) << t.name;
  }
  std::map<int64_t, int> writes;
  std::set<int64_t> written;
  for (const GraphOp& o : g.ops) {
    for (int64_t in : {o.x, o.b, o.t, o.m_override, o.n_override, o.k_override}) {
      if (!in) continue;
      const GraphTensor* t = g.tensor(in);
      ASSERT_NE(t, nullptr) << o.name << " reads missing uid " << in;
      if (t->is_virtual) {
        EXPECT_TRUE(written.count(in)) << o.name << " reads " << t->name << " before it is written";
      }
    }
    const GraphTensor* y = g.tensor(o.y);
    ASSERT_NE(y, nullptr) << o.name << " writes missing uid " << o.y;
    EXPECT_FALSE(y->by_value) << o.name;
    EXPECT_TRUE(y->is_virtual || y->binding == Binding::O || y->binding == Binding::Stats) << o.name;
    ++writes[o.y];
    written.insert(o.y);
    if (o.kind == OpKind::Pointwise) {
      Dims want = tensor(g, o.x).dims;
      for (int64_t in : {o.b, o.t})
        if (in)
          for (int a = 0; a < 4; ++a) want[a] = std::max(want[a], tensor(g, in).dims[a]);
      EXPECT_EQ(y->dims, want) << o.name;
      EXPECT_EQ(o.axis >= 0, o.mode == CUDNN_POINTWISE_GEN_INDEX) << o.name;
    }
    if (o.kind == OpKind::Matmul) {
      const Dims &a = tensor(g, o.x).dims, &b = tensor(g, o.b).dims, &c = y->dims;
      EXPECT_EQ(a[3], b[2]) << o.name;
      EXPECT_EQ(a[2], c[2]) << o.name;
      EXPECT_EQ(b[3], c[3]) << o.name;
      for (int i = 0; i < 2; ++i) EXPECT_EQ(c[i] % b[i], 0) << o.name;
    }
    if (o.kind == OpKind::Reduction) {
      Dims want = tensor(g, o.x).dims;
      want[3] = 1;
      EXPECT_EQ(y->dims, want) << o.name;
    }
  }
  for (const auto& [uid, n] : writes) EXPECT_EQ(n, 1) << tensor(g, uid).name << " written " << n << " times";
  EXPECT_EQ(writes.count(kUidO), 1u);
}

TEST(CudnnSdpaGraph, DenseBhsdIsMatmulScaleSoftmaxMatmul) {
  Shape s;
  s.dv = 32;
  ShapeProblem sp(s);
  const SdpaGraph g = graph_of(sp.problem(), false);
  expect_well_formed(g);
  EXPECT_EQ(op_names(g), (std::vector<std::string>{"bmm1 Q.K^T", "attn_scale", "softmax.max", "softmax.sub",
                                                   "softmax.exp", "softmax.sum", "softmax.log", "softmax.stats",
                                                   "softmax.div", "bmm2 P.V"}));
  const GraphTensor& q = tensor(g, kUidQ);
  EXPECT_EQ(q.dims, (Dims{2, 4, 48, 64}));
  EXPECT_EQ(q.strides, (Dims{4 * 48 * 64, 48 * 64, 64, 1}));
  EXPECT_EQ(q.dtype, CUDNN_DATA_BFLOAT16);
  // K^T: K read transposed, s and d strides swapped.
  const GraphTensor& kt = tensor(g, kUidK);
  EXPECT_EQ(kt.dims, (Dims{2, 4, 64, 80}));
  EXPECT_EQ(kt.strides, (Dims{4 * 80 * 64, 80 * 64, 1, 64}));
  EXPECT_EQ(tensor(g, kUidV).dims, (Dims{2, 4, 80, 32}));
  EXPECT_EQ(tensor(g, kUidO).dims, (Dims{2, 4, 48, 32}));
  const GraphTensor& stats = tensor(g, kUidStats);
  EXPECT_EQ(stats.dims, (Dims{2, 4, 48, 1}));
  EXPECT_EQ(stats.dtype, CUDNN_DATA_FLOAT);
  EXPECT_FALSE(stats.is_virtual);

  const GraphOp& bmm1 = op(g, "bmm1 Q.K^T");
  EXPECT_EQ(bmm1.x, kUidQ);
  EXPECT_EQ(bmm1.b, kUidK);
  EXPECT_EQ(bmm1.compute, CUDNN_DATA_FLOAT);
  EXPECT_EQ(bmm1.m_override, 0);
  EXPECT_EQ(tensor(g, bmm1.y).dtype, CUDNN_DATA_FLOAT);
  EXPECT_EQ(tensor(g, bmm1.y).dims, (Dims{2, 4, 48, 80}));
  // The scale is a by-value fp32 scalar (one plan serves any scale).
  const GraphTensor& scale = scalar_b(g, "attn_scale");
  EXPECT_TRUE(scale.by_value);
  EXPECT_EQ(scale.dtype, CUDNN_DATA_FLOAT);
  EXPECT_EQ(scale.f32, 0.125f);
  // Softmax: max and sum over keys in fp32, stats = max + log(sum), P in bf16 for bmm2.
  EXPECT_EQ(op(g, "softmax.max").reduce, CUDNN_REDUCE_TENSOR_MAX);
  EXPECT_EQ(op(g, "softmax.sum").reduce, CUDNN_REDUCE_TENSOR_ADD);
  EXPECT_EQ(op(g, "softmax.stats").y, kUidStats);
  EXPECT_EQ(op(g, "softmax.stats").x, op(g, "softmax.max").y);
  EXPECT_EQ(op(g, "softmax.stats").b, op(g, "softmax.log").y);
  const GraphOp& div = op(g, "softmax.div");
  EXPECT_EQ(tensor(g, div.y).dtype, CUDNN_DATA_BFLOAT16);
  const GraphOp& bmm2 = op(g, "bmm2 P.V");
  EXPECT_EQ(bmm2.x, div.y);
  EXPECT_EQ(bmm2.b, kUidV);
  EXPECT_EQ(bmm2.y, kUidO);
}

TEST(CudnnSdpaGraph, Fp16IsHalfThroughout) {
  Shape s;
  s.dtype = AFZ_F16;
  ShapeProblem sp(s);
  const SdpaGraph g = graph_of(sp.problem(), false);
  for (int64_t uid : {int64_t(kUidQ), int64_t(kUidK), int64_t(kUidV), int64_t(kUidO)})
    EXPECT_EQ(tensor(g, uid).dtype, CUDNN_DATA_HALF);
  EXPECT_EQ(tensor(g, op(g, "softmax.div").y).dtype, CUDNN_DATA_HALF);
}

TEST(CudnnSdpaGraph, BshdAndPackedQkvStrides) {
  {
    Shape s;
    s.layout = Layout::BSHD;
    ShapeProblem sp(s);
    const SdpaGraph g = graph_of(sp.problem(), false);
    expect_well_formed(g);
    EXPECT_EQ(tensor(g, kUidQ).strides, (Dims{48 * 4 * 64, 64, 4 * 64, 1}));
    EXPECT_EQ(tensor(g, kUidK).strides, (Dims{80 * 4 * 64, 64, 1, 4 * 64}));
    EXPECT_EQ(tensor(g, kUidO).strides, (Dims{48 * 4 * 64, 64, 4 * 64, 1}));
  }
  {
    Shape s;
    s.layout = Layout::PackedQKV;
    s.skv = s.sq;
    s.heads_kv = 2;
    ShapeProblem sp(s);
    const SdpaGraph g = graph_of(sp.problem(), false);
    expect_well_formed(g);
    const int64_t row = (4 + 2 * 2) * 64;
    EXPECT_EQ(tensor(g, kUidQ).strides, (Dims{48 * row, 64, row, 1}));
    EXPECT_EQ(tensor(g, kUidK).strides, (Dims{48 * row, 64, 1, row}));
    EXPECT_EQ(tensor(g, kUidV).strides, (Dims{48 * row, 64, row, 1}));
  }
}

TEST(CudnnSdpaGraph, GqaAndMqaBroadcastKvHeadsThroughTheMatmuls) {
  for (int hk : {2, 1}) {
    Shape s;
    s.heads_q = 8;
    s.heads_kv = hk;
    ShapeProblem sp(s);
    const SdpaGraph g = graph_of(sp.problem(), false);
    expect_well_formed(g);
    EXPECT_EQ(tensor(g, kUidK).dims[1], hk);
    EXPECT_EQ(tensor(g, kUidV).dims[1], hk);
    EXPECT_EQ(tensor(g, op(g, "bmm1 Q.K^T").y).dims[1], 8);
  }
}

TEST(CudnnSdpaGraph, StridesOfExtentOneAxesAreNormalized) {
  Shape s;
  s.batch = 1;
  s.sq = 1;
  ShapeProblem sp(s);
  sp.problem().q.stride[0] = 12345;  // never multiplied by a nonzero index
  sp.problem().q.stride[2] = 777;
  const SdpaGraph g = graph_of(sp.problem(), false);
  EXPECT_EQ(tensor(g, kUidQ).strides, (Dims{4 * 1 * 64, 64, 64, 1}));
  sp.problem().q.stride[0] = 1;
  EXPECT_EQ(graph_of(sp.problem(), false).key(), g.key());
}

TEST(CudnnSdpaGraph, PaddedPathHasSeqLenTensorsOverridesAndThePaddingMask) {
  Shape s;
  ShapeProblem sp(s);
  sp.seqlens({48, 17}, {80, 0});
  const SdpaGraph g = graph_of(sp.problem(), true);
  expect_well_formed(g);
  for (int64_t uid : {int64_t(kUidSeqLenQ), int64_t(kUidSeqLenKv)}) {
    const GraphTensor& t = tensor(g, uid);
    EXPECT_EQ(t.dtype, CUDNN_DATA_INT32);
    EXPECT_EQ(t.dims, (Dims{2, 1, 1, 1}));
    EXPECT_EQ(t.strides, (Dims{1, 1, 1, 1}));
  }
  const GraphOp& bmm1 = op(g, "bmm1 Q.K^T");
  EXPECT_EQ(bmm1.m_override, kUidSeqLenQ);
  EXPECT_EQ(bmm1.n_override, kUidSeqLenKv);
  EXPECT_EQ(bmm1.k_override, 0);
  const GraphOp& bmm2 = op(g, "bmm2 P.V");
  EXPECT_EQ(bmm2.m_override, kUidSeqLenQ);
  EXPECT_EQ(bmm2.n_override, 0);
  EXPECT_EQ(bmm2.k_override, kUidSeqLenKv);

  EXPECT_EQ(op(g, "padding.row").axis, 2);
  EXPECT_EQ(op(g, "padding.col").axis, 3);
  EXPECT_EQ(op(g, "padding.row").compute, CUDNN_DATA_INT32);
  EXPECT_EQ(tensor(g, op(g, "padding.row").y).dtype, CUDNN_DATA_INT32);
  EXPECT_EQ(op(g, "padding.row<seq_len_q").mode, CUDNN_POINTWISE_CMP_LT);
  EXPECT_EQ(op(g, "padding.row<seq_len_q").b, kUidSeqLenQ);
  EXPECT_EQ(op(g, "padding.col<seq_len_kv").b, kUidSeqLenKv);
  EXPECT_EQ(op(g, "padding.and").mode, CUDNN_POINTWISE_LOGICAL_AND);
  const GraphOp& select = op(g, "padding.select");
  EXPECT_EQ(select.mode, CUDNN_POINTWISE_BINARY_SELECT);
  EXPECT_EQ(select.x, op(g, "attn_scale").y);
  EXPECT_EQ(select.t, op(g, "padding.and").y);
  EXPECT_EQ(tensor(g, select.t).dtype, CUDNN_DATA_BOOLEAN);
  EXPECT_TRUE(std::isinf(tensor(g, select.b).f32) && tensor(g, select.b).f32 < 0);
  EXPECT_EQ(op(g, "softmax.max").x, select.y);
}

TEST(CudnnSdpaGraph, FillIsMinusInfinityFrom9_10AndTheLowestFloatBefore) {
  Shape s;
  ShapeProblem sp(s);
  sp.causal(AFZ_ALIGN_TOP_LEFT);
  EXPECT_EQ(scalar_b(graph_of(sp.problem(), false, 91000), "right_bound.select").f32,
            -std::numeric_limits<float>::infinity());
  EXPECT_EQ(scalar_b(graph_of(sp.problem(), false, 90900), "right_bound.select").f32,
            std::numeric_limits<float>::lowest());
}

TEST(CudnnSdpaGraph, CausalTopLeftComparesRowsAndColumns) {
  Shape s;
  ShapeProblem sp(s);
  sp.causal(AFZ_ALIGN_TOP_LEFT);
  const SdpaGraph g = graph_of(sp.problem(), false);
  expect_well_formed(g);
  EXPECT_EQ(op(g, "right_bound.row").axis, 2);
  EXPECT_EQ(op(g, "right_bound.col").axis, 3);
  const GraphOp& keep = op(g, "right_bound.row>=col");
  EXPECT_EQ(keep.mode, CUDNN_POINTWISE_CMP_GE);
  EXPECT_EQ(keep.x, op(g, "right_bound.row").y);  // no shift at all: i >= j
  EXPECT_EQ(keep.b, op(g, "right_bound.col").y);
  EXPECT_FALSE(has_op(g, "right_bound.row+s_kv"));
  EXPECT_FALSE(has_op(g, "right_bound.row+window_right"));
  EXPECT_FALSE(has_op(g, "left_bound.select"));
  EXPECT_EQ(op(g, "softmax.max").x, op(g, "right_bound.select").y);
}

TEST(CudnnSdpaGraph, CausalBottomRightShiftsRowsBySkvMinusSq) {
  Shape s;
  ShapeProblem sp(s);
  sp.causal(AFZ_ALIGN_BOTTOM_RIGHT);
  {  // fixed lengths: by-value int32 scalars
    const SdpaGraph g = graph_of(sp.problem(), false);
    expect_well_formed(g);
    const GraphTensor& skv = scalar_b(g, "right_bound.row+s_kv");
    EXPECT_EQ(skv.dtype, CUDNN_DATA_INT32);
    EXPECT_EQ(skv.i32, 80);
    EXPECT_EQ(scalar_b(g, "right_bound.row+s_kv-s_q").i32, 48);
    EXPECT_EQ(op(g, "right_bound.row+s_kv-s_q").mode, CUDNN_POINTWISE_SUB);
    EXPECT_EQ(op(g, "right_bound.row>=col").x, op(g, "right_bound.row+s_kv-s_q").y);
  }
  {  // padded: per-sequence lengths from the seq-len tensors
    sp.seqlens({40, 48}, {80, 33});
    const SdpaGraph g = graph_of(sp.problem(), true);
    expect_well_formed(g);
    EXPECT_EQ(op(g, "right_bound.row+s_kv").b, kUidSeqLenKv);
    EXPECT_EQ(op(g, "right_bound.row+s_kv-s_q").b, kUidSeqLenQ);
    EXPECT_EQ(op(g, "right_bound.row+s_kv").compute, CUDNN_DATA_INT32);
  }
}

TEST(CudnnSdpaGraph, WindowRightShiftIsAnInt32Scalar) {
  Shape s;
  ShapeProblem sp(s);
  sp.window(-1, 3, AFZ_ALIGN_TOP_LEFT);
  const SdpaGraph g = graph_of(sp.problem(), false);
  expect_well_formed(g);
  EXPECT_EQ(scalar_b(g, "right_bound.row+window_right").i32, 3);
  EXPECT_FALSE(has_op(g, "left_bound.select"));
}

TEST(CudnnSdpaGraph, SlidingWindowLeftBoundIsWindowLeftPlusOne) {
  Shape s;
  ShapeProblem sp(s);
  {  // top-left: keep j + (wl + 1) > i as an fp32 add
    sp.window(16, 0, AFZ_ALIGN_TOP_LEFT);
    const SdpaGraph g = graph_of(sp.problem(), false);
    expect_well_formed(g);
    const GraphTensor& w = scalar_b(g, "left_bound.col+window");
    EXPECT_EQ(w.dtype, CUDNN_DATA_FLOAT);
    EXPECT_EQ(w.f32, 17.0f);
    const GraphOp& keep = op(g, "left_bound.col>row");
    EXPECT_EQ(keep.mode, CUDNN_POINTWISE_CMP_GT);
    EXPECT_EQ(keep.x, op(g, "left_bound.col+window").y);
    EXPECT_EQ(keep.b, op(g, "left_bound.row").y);
    // Right bound first, the left bound on its output.
    EXPECT_EQ(op(g, "left_bound.select").x, op(g, "right_bound.select").y);
  }
  {  // bottom-right, fixed lengths: one fp32 constant wl + 1 - (skv - sq)
    sp.window(16, 0, AFZ_ALIGN_BOTTOM_RIGHT);
    const SdpaGraph g = graph_of(sp.problem(), false);
    expect_well_formed(g);
    EXPECT_EQ(scalar_b(g, "left_bound.col+window").f32, float(17 - 80 + 48));
  }
  {  // bottom-right, padded: int32 wl + 1, then - seq_len_kv + seq_len_q
    sp.window(16, -1, AFZ_ALIGN_BOTTOM_RIGHT);
    const SdpaGraph g = graph_of(sp.problem(), true);
    expect_well_formed(g);
    EXPECT_EQ(scalar_b(g, "left_bound.col+window").i32, 17);
    EXPECT_EQ(op(g, "left_bound.col+window-s_kv").b, kUidSeqLenKv);
    EXPECT_EQ(op(g, "left_bound.col+window-s_kv+s_q").b, kUidSeqLenQ);
    EXPECT_FALSE(has_op(g, "right_bound.select"));
  }
}

TEST(CudnnSdpaGraph, AdditiveMaskIsTheBiasAdd) {
  Shape s;
  ShapeProblem sp(s);
  sp.add_mask(/*broadcast_heads_and_batch=*/true);
  const SdpaGraph g = graph_of(sp.problem(), false);
  expect_well_formed(g);
  const GraphTensor& bias = tensor(g, kUidBias);
  EXPECT_EQ(bias.dtype, CUDNN_DATA_FLOAT);
  EXPECT_EQ(bias.dims, (Dims{1, 1, 48, 80}));  // stride 0 becomes a broadcast dim
  EXPECT_EQ(bias.strides, (Dims{48 * 80, 48 * 80, 80, 1}));
  const GraphOp& add = op(g, "bias_add");
  EXPECT_EQ(add.mode, CUDNN_POINTWISE_ADD);
  EXPECT_EQ(add.x, op(g, "attn_scale").y);
  EXPECT_EQ(add.b, kUidBias);
  EXPECT_EQ(op(g, "softmax.max").x, add.y);
}

TEST(CudnnSdpaGraph, ABooleanMaskMustArriveAsTheBias) {
  Shape s;
  ShapeProblem sp(s);
  sp.bool_mask();
  EXPECT_THROW(graph_of(sp.problem(), false), std::invalid_argument);
}

TEST(CudnnSdpaGraph, MasksComeInTheFrontendsOrder) {
  Shape s;
  ShapeProblem sp(s);
  sp.add_mask().window(8, 2, AFZ_ALIGN_TOP_LEFT);
  const SdpaGraph g = graph_of(sp.problem(), true);
  expect_well_formed(g);
  const std::vector<std::string> order = {"attn_scale", "bias_add", "padding.select", "right_bound.select",
                                          "left_bound.select", "softmax.max"};
  const std::vector<std::string> names = op_names(g);
  size_t at = 0;
  for (const std::string& n : order) {
    const auto it = std::find(names.begin() + at, names.end(), n);
    ASSERT_NE(it, names.end()) << n << " missing or out of order";
    at = size_t(it - names.begin());
  }
}

TEST(CudnnSdpaGraph, WithoutLseTheStatsAreVirtual) {
  Shape s;
  s.lse = false;
  ShapeProblem sp(s);
  const SdpaGraph g = graph_of(sp.problem(), false);
  expect_well_formed(g);
  EXPECT_EQ(g.tensor(kUidStats), nullptr);
  EXPECT_TRUE(tensor(g, op(g, "softmax.stats").y).is_virtual);
}

TEST(CudnnSdpaGraph, KeyIgnoresScalarValuesAndSplitsOnStructure) {
  Shape s;
  ShapeProblem a(s), b(s);
  a.window(16, 0, AFZ_ALIGN_BOTTOM_RIGHT);
  b.window(100, 0, AFZ_ALIGN_BOTTOM_RIGHT);
  b.problem().scale = 0.5f;
  EXPECT_EQ(graph_of(a.problem(), false).key(), graph_of(b.problem(), false).key());
  b.seqlens({1, 2}, {3, 4});  // values of device tensors: not in the graph
  EXPECT_EQ(graph_of(a.problem(), true).key(), graph_of(b.problem(), true).key());

  const std::string base = graph_of(a.problem(), false).key();
  EXPECT_NE(graph_of(a.problem(), true).key(), base);
  b.window(16, 3, AFZ_ALIGN_BOTTOM_RIGHT);  // a shift node appears
  b.problem().scale = a.problem().scale;
  EXPECT_NE(graph_of(b.problem(), false).key(), base);
  SdpaGraphOptions misaligned;
  misaligned.cudnn_version = kCudnn9_19;
  misaligned.alignment[size_t(Binding::Q)] = 2;
  EXPECT_NE(build_sdpa_graph(a.problem(), misaligned).key(), base);
  Shape longer = s;
  longer.skv = 96;
  ShapeProblem c(longer);
  c.window(16, 0, AFZ_ALIGN_BOTTOM_RIGHT);
  EXPECT_NE(graph_of(c.problem(), false).key(), base);
}

TEST(CudnnSdpaGraph, PaddedPathForVarlenAndForMasksCudnnTakesOnlyPadded) {
  Shape s;
  ShapeProblem sp(s);
  EXPECT_FALSE(needs_padding(sp.problem(), sp.seqlens_q(), sp.seqlens_k()));
  sp.seqlens({48, 47}, {80, 80});
  EXPECT_TRUE(needs_padding(sp.problem(), sp.seqlens_q(), sp.seqlens_k()));
  sp.seqlens({48, 48}, {80, 0});
  EXPECT_TRUE(needs_padding(sp.problem(), sp.seqlens_q(), sp.seqlens_k()));

  Shape tall = s;
  tall.sq = 96;  // max_seqlen_q > max_seqlen_k
  ShapeProblem t(tall);
  t.causal(AFZ_ALIGN_TOP_LEFT);
  EXPECT_FALSE(needs_padding(t.problem(), t.seqlens_q(), t.seqlens_k()));
  t.causal(AFZ_ALIGN_BOTTOM_RIGHT);
  EXPECT_TRUE(needs_padding(t.problem(), t.seqlens_q(), t.seqlens_k()));
  t.window(4, -1, AFZ_ALIGN_TOP_LEFT);
  EXPECT_TRUE(needs_padding(t.problem(), t.seqlens_q(), t.seqlens_k()));
}

TEST(CudnnSdpaGraph, PointerAlignmentIsCappedAt16Bytes) {
  EXPECT_EQ(pointer_alignment(reinterpret_cast<void*>(0x1000)), 16);
  EXPECT_EQ(pointer_alignment(reinterpret_cast<void*>(0x1008)), 8);
  EXPECT_EQ(pointer_alignment(reinterpret_cast<void*>(0x1002)), 2);
  SdpaGraphOptions o;
  o.alignment[size_t(Binding::K)] = 4;
  Shape s;
  ShapeProblem sp(s);
  EXPECT_EQ(tensor(build_sdpa_graph(sp.problem(), o), kUidK).alignment, 4);
}

// ---- supports(): what the graph or cuDNN's support surface excludes ----

std::string reason(const afz_problem& p, size_t version = kCudnn9_19) { return sdpa_unsupported_reason(p, version); }

TEST(CudnnSdpaSupports, TakesTheClaimedFeatures) {
  for (Layout l : {Layout::BHSD, Layout::BSHD}) {
    Shape s;
    s.layout = l;
    s.heads_q = 8;
    s.heads_kv = 2;
    s.dv = 128;
    ShapeProblem sp(s);
    sp.seqlens({0, 48}, {80, 7}).window(16, 0, AFZ_ALIGN_BOTTOM_RIGHT);
    EXPECT_EQ(reason(sp.problem()), "");
    sp.window(16, 0, AFZ_ALIGN_TOP_LEFT).add_mask().bool_mask(true);
    EXPECT_EQ(reason(sp.problem()), "");
  }
}

TEST(CudnnSdpaSupports, DeclinesWhatTheGraphCannotExpress) {
  Shape s;
  {
    ShapeProblem sp(s);
    sp.problem().o.dtype = AFZ_F32;
    EXPECT_NE(reason(sp.problem()).find("share one dtype"), std::string::npos);
  }
  {
    ShapeProblem sp(s);
    sp.problem().softcap = 30.0f;
    EXPECT_NE(reason(sp.problem()).find("softcap"), std::string::npos);
  }
  {
    ShapeProblem sp(s);
    sp.problem().k.stride[1] = 0;  // K broadcast over heads
    EXPECT_EQ(reason(sp.problem()), "k: head stride 0 (a broadcast): cuDNN's SDPA takes no stride-0 Q/K/V/O");
  }
  {
    ShapeProblem sp(s);
    sp.problem().q.stride[3] = 2;
    EXPECT_NE(reason(sp.problem()).find("q: head-dim stride 2"), std::string::npos);
  }
  {
    ShapeProblem sp(s);
    sp.problem().v.stride[2] = 64 + 3;  // an odd row gap: cuDNN computes it wrongly
    sp.problem().v.stride[1] = 80 * 67;
    sp.problem().v.stride[0] = 4 * 80 * 67;
    EXPECT_NE(reason(sp.problem()).find("v: sequence stride 67 is not a multiple of 8 elements"), std::string::npos);
    EXPECT_EQ(sdpa_unsupported_reason(sp.problem(), kCudnn9_19, /*allow_unaligned_rows=*/true), "");
    sp.problem().v.stride[2] = -64;
    EXPECT_EQ(reason(sp.problem()), "v: sequence stride -64: cuDNN tensors take no negative strides");
  }
  {
    ShapeProblem sp(s);
    sp.problem().lse_stride[2] = 2;
    sp.problem().lse_stride[1] = 96;
    sp.problem().lse_stride[0] = 384;
    EXPECT_NE(reason(sp.problem()).find("LSE strides"), std::string::npos);
    EXPECT_EQ(reason(sp.problem(), 92600), "");
  }
  {
    ShapeProblem sp(s);
    sp.bool_mask();
    sp.problem().bool_mask.dtype = AFZ_F32;
    EXPECT_EQ(reason(sp.problem()), "boolean mask must be u8");
  }
  {
    ShapeProblem sp(s);
    sp.add_mask();
    sp.problem().add_mask.stride[3] = 2;
    EXPECT_NE(reason(sp.problem()).find("additive mask: key stride 2"), std::string::npos);
    sp.bool_mask();  // both masks are then read on the host, merged: any strides
    sp.problem().bool_mask.stride[3] = 3;
    EXPECT_EQ(reason(sp.problem()), "");
    sp.problem().bool_mask.stride[1] = -1;
    EXPECT_EQ(reason(sp.problem()), "boolean mask: negative strides are not taken");
  }
}

TEST(CudnnSdpaSupports, FollowsCudnnFrontendsSupportSurface) {
  Shape s;
  {
    ShapeProblem sp(s);
    EXPECT_NE(reason(sp.problem(), 91000).find("9.10.0"), std::string::npos);
    EXPECT_NE(reason(sp.problem(), 91001).find("9.10.1"), std::string::npos);
    EXPECT_EQ(reason(sp.problem(), 91002), "");
  }
  for (bool boolean : {false, true}) {  // the boolean mask is a bias too
    ShapeProblem sp(s);
    sp.causal(AFZ_ALIGN_BOTTOM_RIGHT);
    if (boolean)
      sp.bool_mask();
    else
      sp.add_mask();
    EXPECT_NE(reason(sp.problem()).find("bottom-right causal/window with an additive or boolean mask"),
              std::string::npos);
    sp.causal(AFZ_ALIGN_TOP_LEFT);
    EXPECT_EQ(reason(sp.problem()), "");
  }
  {  // cuDNN 9.14.0: non-causal sliding window over more than 1024 keys
    Shape big = s;
    big.skv = 2048;
    ShapeProblem sp(big);
    sp.window(64, 64, AFZ_ALIGN_TOP_LEFT);
    EXPECT_NE(reason(sp.problem(), 91400).find("9.14.0"), std::string::npos);
    EXPECT_EQ(reason(sp.problem(), 91401), "");
    sp.window(64, 0, AFZ_ALIGN_TOP_LEFT);
    EXPECT_EQ(reason(sp.problem(), 91400), "");
  }
  {  // before 9.10.2 a sliding window needed the causal right bound and no bias
    ShapeProblem sp(s);
    sp.window(16, -1, AFZ_ALIGN_TOP_LEFT);
    EXPECT_NE(reason(sp.problem(), 90900).find("before cuDNN 9.10.2"), std::string::npos);
    EXPECT_EQ(reason(sp.problem(), 91002), "");
  }
}

TEST(CudnnSdpaSupports, DeclinesAQuerySequenceWithoutKeys) {
  Shape s;
  ShapeProblem sp(s);
  sp.seqlens({48, 0}, {80, 0});  // no queries, no keys: nothing to compute, fine
  EXPECT_EQ(seqlen_unsupported_reason(sp.problem(), sp.seqlens_q(), sp.seqlens_k()), "");
  sp.seqlens({48, 5}, {80, 0});
  EXPECT_EQ(seqlen_unsupported_reason(sp.problem(), sp.seqlens_q(), sp.seqlens_k()),
            "sequence 1 has 5 queries and no key: cuDNN writes NaN to O and LSE for such rows "
            "(0 and -inf for masked rows)");
}

// ---- the boolean mask as a bias (mask_bias) ----

TEST(CudnnMaskBias, KeepSelectsTheAdditiveValueElseMinusInfinity) {
  Shape s;
  s.batch = 1;
  s.heads_q = s.heads_kv = 1;
  s.sq = 2;
  s.skv = 3;
  ShapeProblem sp(s);
  sp.bool_mask().add_mask();
  const uint8_t keep[] = {1, 0, 1, 0, 0, 1};
  const float inf = std::numeric_limits<float>::infinity();
  const float add[] = {0.5f, inf, -inf, 2.0f, 3.0f, -1.25f};
  const MaskBias b = merge_masks(sp.problem(), keep, add);
  EXPECT_EQ(b.dims, (Dims{1, 1, 2, 3}));
  EXPECT_EQ(b.values, (std::vector<float>{0.5f, -inf, -inf, -inf, -inf, -1.25f}));  // +inf masked stays -inf

  const MaskBias only = merge_masks(sp.problem(), keep, nullptr);
  EXPECT_EQ(only.values, (std::vector<float>{0.0f, -inf, 0.0f, -inf, -inf, 0.0f}));
}

TEST(CudnnMaskBias, BroadcastOnlyWhereEveryMaskBroadcasts) {
  Shape s;
  ShapeProblem sp(s);
  sp.bool_mask(/*broadcast_heads_and_batch=*/true);
  const Dims full = {2, 4, 48, 80};
  EXPECT_EQ(mask_span_elements(sp.problem().bool_mask, full), 48 * 80);
  std::vector<uint8_t> keep(48 * 80, 1);
  MaskBias b = merge_masks(sp.problem(), keep.data(), nullptr);
  EXPECT_EQ(b.dims, (Dims{1, 1, 48, 80}));
  EXPECT_EQ(b.strides(), (Dims{0, 0, 80, 1}));
  EXPECT_EQ(b.values.size(), size_t(48 * 80));

  sp.add_mask(/*broadcast_heads_and_batch=*/false);
  std::vector<float> add(size_t(mask_span_elements(sp.problem().add_mask, full)), 1.0f);
  b = merge_masks(sp.problem(), keep.data(), add.data());
  EXPECT_EQ(b.dims, full);
  EXPECT_EQ(b.strides(), (Dims{4 * 48 * 80, 48 * 80, 80, 1}));

  // The merged bias, as the kernel binds it, is a graph bias of the same dims.
  ShapeProblem bound(s);
  afz_problem& p = bound.problem();
  p.add_mask.data = testing::fake_pointer(9);
  p.add_mask.dtype = AFZ_F32;
  const Dims st = b.strides();
  std::copy(st.begin(), st.end(), p.add_mask.stride);
  EXPECT_EQ(tensor(graph_of(p, false), kUidBias).dims, full);
}

}  // namespace
}  // namespace afz::cudnn
