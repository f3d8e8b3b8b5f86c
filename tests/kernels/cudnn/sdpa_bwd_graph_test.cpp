// The cuDNN SDPA backward graph as data (kernels/cudnn/sdpa_bwd_graph):
// cudnn-frontend's node sequence, the transposed operands, the fp32 dQ
// accumulator, GQA's sums over the group, the padded path's overrides and
// second padding mask; its descriptors finalized by the real libcudnn where
// it loads; and cudnn.sdpa [bwd]'s declarations and supports() answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cudnn/cudnn_api.h"
#include "kernels/cudnn/cudnn_sdpa_bwd_kernel.h"
#include "kernels/cudnn/sdpa_bwd_graph.h"
#include "kernels/cudnn/sdpa_lowering.h"
#include "tests/kernels/cudnn/graph_lookup.h"
#include "tests/kernels/cudnn/sdpa_shapes.h"

namespace afz::cudnn {
namespace {

using testing::Shape;
using testing::op;
using testing::tensor;
using testing::ShapeProblem;

constexpr size_t kCudnn9_19 = 91900;

SdpaGraph bwd_graph(const afz_problem& p, bool padded, afz_dtype o_dtype = AFZ_BF16) {
  SdpaGraphOptions o;
  o.padded = padded;
  o.cudnn_version = kCudnn9_19;
  return build_sdpa_bwd_graph(p, o, o_dtype);
}

std::vector<std::string> op_names(const SdpaGraph& g) {
  std::vector<std::string> v;
  for (const GraphOp& o : g.ops) v.push_back(o.name);
  return v;
}

size_t index_of(const SdpaGraph& g, const std::string& name) {
  const std::vector<std::string> names = op_names(g);
  return size_t(std::find(names.begin(), names.end(), name) - names.begin());
}

// Every operand exists, each virtual tensor is written once before it is
// read, only the gradients and the accumulator are written among bound
// tensors, each exactly once.
void expect_well_formed(const SdpaGraph& g) {
  std::set<int64_t> uids, written;
  for (const GraphTensor& t : g.tensors) EXPECT_TRUE(uids.insert(t.uid).second) << "duplicate uid " << t.uid;
  std::map<int64_t, int> writes;
  const std::set<Binding> outputs = {Binding::DQ, Binding::DK, Binding::DV, Binding::DQAccum};
  for (const GraphOp& o : g.ops) {
    for (int64_t in : {o.x, o.b, o.t, o.m_override, o.n_override, o.k_override}) {
      if (!in) continue;
      const GraphTensor* t = g.tensor(in);
      ASSERT_NE(t, nullptr) << o.name << " reads missing uid " << in;
      if (t->is_virtual || t->binding == Binding::DQAccum) EXPECT_TRUE(written.count(in)) << o.name << " reads " << t->name;
    }
    const GraphTensor* y = g.tensor(o.y);
    ASSERT_NE(y, nullptr) << o.name;
    EXPECT_TRUE(y->is_virtual || outputs.count(y->binding)) << o.name << " writes " << y->name;
    ++writes[o.y];
    written.insert(o.y);
    if (o.kind == OpKind::Matmul) {
      const Dims &a = tensor(g, o.x).dims, &b = tensor(g, o.b).dims, &c = y->dims;
      EXPECT_EQ(a[3], b[2]) << o.name;
      EXPECT_EQ(a[2], c[2]) << o.name;
      EXPECT_EQ(b[3], c[3]) << o.name;
    }
  }
  for (const auto& [uid, n] : writes) EXPECT_EQ(n, 1) << tensor(g, uid).name;
  for (int64_t uid : {int64_t(kUidDQ), int64_t(kUidDK), int64_t(kUidDV), int64_t(kUidDQAccum)})
    EXPECT_EQ(writes.count(uid), 1u) << tensor(g, uid).name;
}

TEST(CudnnSdpaBwdGraph, DenseMhaIsTheFrontendsNodeSequence) {
  Shape s;
  s.dv = 32;
  ShapeProblem sp(s);
  const SdpaGraph g = bwd_graph(sp.problem(), false);
  expect_well_formed(g);
  EXPECT_EQ(op_names(g),
            (std::vector<std::string>{"mul_dO_O", "reduce_dO_O", "softmax_sum", "bmm1 Q.K^T", "attn_scale",
                                      "sub_stats", "exp_s", "reshape_P", "bmm dV = P^T.dO", "bmm dP = dO.V^T",
                                      "dP_dropout_mask", "sub_dP_softmax_sum", "mul_dP_exp_s", "mul_dS_attn_scale",
                                      "reshape_dS", "bmm dK = dS^T.Q", "reshape_K", "bmm dQ = dS.K", "identity_dQ"}));
  // K and V are read transposed: their s and d strides swapped.
  EXPECT_EQ(tensor(g, kUidK).dims, (Dims{2, 4, 64, 80}));
  EXPECT_EQ(tensor(g, kUidK).strides, (Dims{4 * 80 * 64, 80 * 64, 1, 64}));
  EXPECT_EQ(tensor(g, kUidV).dims, (Dims{2, 4, 32, 80}));
  EXPECT_EQ(tensor(g, kUidV).strides, (Dims{4 * 80 * 32, 80 * 32, 1, 32}));
  EXPECT_EQ(tensor(g, kUidDO).dims, (Dims{2, 4, 48, 32}));
  EXPECT_EQ(tensor(g, kUidStats).dims, (Dims{2, 4, 48, 1}));
  EXPECT_EQ(tensor(g, kUidStats).dtype, CUDNN_DATA_FLOAT);
  // D = rowsum(dO * O) in fp32, scaled by the by-value one of the no-dropout pattern.
  EXPECT_EQ(op(g, "mul_dO_O").x, kUidDO);
  EXPECT_EQ(op(g, "mul_dO_O").b, kUidO);
  EXPECT_EQ(tensor(g, op(g, "reduce_dO_O").y).dims, (Dims{2, 4, 48, 1}));
  const GraphTensor& one = tensor(g, op(g, "softmax_sum").b);
  EXPECT_TRUE(one.by_value);
  EXPECT_EQ(one.f32, 1.0f);
  EXPECT_EQ(op(g, "dP_dropout_mask").b, one.uid);
  // P = exp(S - Stats): the stats are subtracted, not recomputed.
  EXPECT_EQ(op(g, "sub_stats").b, kUidStats);
  EXPECT_EQ(op(g, "exp_s").mode, CUDNN_POINTWISE_EXP);
  // P^T in bf16 for the dV GEMM, a transposed view of the dense P.
  const GraphTensor& p_t = tensor(g, op(g, "reshape_P").y);
  EXPECT_EQ(p_t.dims, (Dims{2, 4, 80, 48}));
  EXPECT_EQ(p_t.strides, (Dims{4 * 48 * 80, 48 * 80, 1, 80}));
  EXPECT_EQ(p_t.dtype, CUDNN_DATA_BFLOAT16);
  EXPECT_EQ(op(g, "bmm dV = P^T.dO").x, p_t.uid);
  EXPECT_EQ(op(g, "bmm dV = P^T.dO").y, kUidDV);
  // dS = (dP - D) * P * scale; the scale scalar is the one S was scaled by.
  EXPECT_EQ(op(g, "sub_dP_softmax_sum").b, op(g, "softmax_sum").y);
  EXPECT_EQ(op(g, "mul_dP_exp_s").b, op(g, "exp_s").y);
  EXPECT_EQ(op(g, "mul_dS_attn_scale").b, op(g, "attn_scale").b);
  EXPECT_EQ(tensor(g, op(g, "attn_scale").b).f32, 0.125f);
  EXPECT_EQ(op(g, "bmm dK = dS^T.Q").y, kUidDK);
  EXPECT_EQ(op(g, "bmm dK = dS^T.Q").b, kUidQ);
  // dQ: dS (fp32) times K (reshaped back from K^T) into the fp32 accumulator, then rounded.
  const GraphTensor& k = tensor(g, op(g, "reshape_K").y);
  EXPECT_EQ(k.dims, (Dims{2, 4, 80, 64}));
  EXPECT_EQ(k.strides, (Dims{4 * 80 * 64, 80 * 64, 64, 1}));
  EXPECT_EQ(op(g, "bmm dQ = dS.K").x, op(g, "mul_dS_attn_scale").y);
  EXPECT_EQ(op(g, "bmm dQ = dS.K").y, kUidDQAccum);
  const GraphTensor& acc = tensor(g, kUidDQAccum);
  EXPECT_EQ(acc.dtype, CUDNN_DATA_FLOAT);
  EXPECT_FALSE(acc.is_virtual);
  EXPECT_TRUE(acc.reorder_f16x16);
  EXPECT_EQ(op(g, "identity_dQ").mode, CUDNN_POINTWISE_IDENTITY);
  EXPECT_EQ(op(g, "identity_dQ").x, kUidDQAccum);
  EXPECT_EQ(op(g, "identity_dQ").y, kUidDQ);
  for (int64_t uid : {int64_t(kUidDQ), int64_t(kUidDK), int64_t(kUidDV), int64_t(kUidO)})
    EXPECT_EQ(tensor(g, uid).dtype, CUDNN_DATA_BFLOAT16) << tensor(g, uid).name;
}

TEST(CudnnSdpaBwdGraph, GqaGradientsArePerQueryHeadThenSummedOverTheGroup) {
  Shape s;
  s.heads_q = 8;
  s.heads_kv = 2;
  s.dtype = AFZ_F16;
  ShapeProblem sp(s);
  const SdpaGraph g = bwd_graph(sp.problem(), false, AFZ_F16);
  expect_well_formed(g);
  for (const char* grad : {"bmm dV = P^T.dO", "bmm dK = dS^T.Q"}) {
    const GraphTensor& per_head = tensor(g, op(g, grad).y);
    EXPECT_TRUE(per_head.is_virtual) << grad;
    EXPECT_EQ(per_head.dims[1], 8) << grad;
    EXPECT_EQ(per_head.dtype, CUDNN_DATA_HALF) << grad;
    const GraphOp& sum = op(g, std::string(grad) + ".sum_over_group");
    EXPECT_EQ(sum.kind, OpKind::Reduction);
    EXPECT_EQ(sum.reduce, CUDNN_REDUCE_TENSOR_ADD);
    EXPECT_EQ(sum.x, per_head.uid);
  }
  EXPECT_EQ(op(g, "bmm dV = P^T.dO.sum_over_group").y, kUidDV);
  EXPECT_EQ(op(g, "bmm dK = dS^T.Q.sum_over_group").y, kUidDK);
  EXPECT_EQ(tensor(g, kUidDK).dims, (Dims{2, 2, 80, 64}));
  // dQ needs no sum: K broadcasts over the group in the matmul.
  EXPECT_EQ(op(g, "bmm dQ = dS.K").y, kUidDQAccum);
}

TEST(CudnnSdpaBwdGraph, PaddedPathOverridesEveryGemmAndMasksPaddingAgainAfterTheStats) {
  Shape s;
  ShapeProblem sp(s);
  sp.seqlens({48, 20}, {80, 33});
  const SdpaGraph g = bwd_graph(sp.problem(), true);
  expect_well_formed(g);
  struct Want {
    const char* name;
    int64_t m, n, k;
  };
  for (const Want& w : {Want{"bmm1 Q.K^T", kUidSeqLenQ, kUidSeqLenKv, 0},
                        Want{"bmm dV = P^T.dO", kUidSeqLenKv, 0, kUidSeqLenQ},
                        Want{"bmm dP = dO.V^T", kUidSeqLenQ, kUidSeqLenKv, 0},
                        Want{"bmm dK = dS^T.Q", kUidSeqLenKv, 0, kUidSeqLenQ},
                        Want{"bmm dQ = dS.K", kUidSeqLenQ, 0, kUidSeqLenKv}}) {
    EXPECT_EQ(op(g, w.name).m_override, w.m) << w.name;
    EXPECT_EQ(op(g, w.name).n_override, w.n) << w.name;
    EXPECT_EQ(op(g, w.name).k_override, w.k) << w.name;
  }
  std::vector<size_t> selects;
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (g.ops[i].name == "padding.select") selects.push_back(i);
  ASSERT_EQ(selects.size(), 2u);
  EXPECT_LT(selects[0], index_of(g, "sub_stats"));
  EXPECT_GT(selects[1], index_of(g, "sub_stats"));
  EXPECT_LT(selects[1], index_of(g, "exp_s"));
  // -inf from cuDNN 9.10, as in the forward.
  EXPECT_EQ(tensor(g, g.ops[selects[1]].b).f32, mask_fill_value(kCudnn9_19));
}

TEST(CudnnSdpaBwdGraph, MasksComeBeforeTheStatsAsInTheForward) {
  Shape s;
  ShapeProblem sp(s);
  sp.causal(AFZ_ALIGN_BOTTOM_RIGHT).add_mask();
  const SdpaGraph g = bwd_graph(sp.problem(), false);
  expect_well_formed(g);
  EXPECT_LT(index_of(g, "bias_add"), index_of(g, "right_bound.select"));
  EXPECT_LT(index_of(g, "right_bound.select"), index_of(g, "sub_stats"));
  EXPECT_EQ(op(g, "sub_stats").x, op(g, "right_bound.select").y);
  EXPECT_EQ(tensor(g, kUidBias).dtype, CUDNN_DATA_FLOAT);
}

TEST(CudnnSdpaBwdGraph, AnUnroundedOIsDeclaredFp32AndSplitsTheKey) {
  Shape s;
  ShapeProblem sp(s);
  const SdpaGraph rounded = bwd_graph(sp.problem(), false, AFZ_BF16);
  const SdpaGraph exact = bwd_graph(sp.problem(), false, AFZ_F32);
  EXPECT_EQ(tensor(exact, kUidO).dtype, CUDNN_DATA_FLOAT);
  EXPECT_NE(rounded.key(), exact.key());
  sp.problem().scale = 0.5f;  // a by-value scalar: the same plan
  EXPECT_EQ(bwd_graph(sp.problem(), false, AFZ_BF16).key(), rounded.key());
}

TEST(CudnnSdpaBwdGraph, ABooleanMaskMustArriveAsTheBias) {
  Shape s;
  ShapeProblem sp(s);
  sp.bool_mask();
  EXPECT_THROW(bwd_graph(sp.problem(), false), std::invalid_argument);
}

#define AFZ_REQUIRE_CUDNN()                                                  \
  do {                                                                       \
    if (!cudnn_library().loaded) GTEST_SKIP() << cudnn_library().describe(); \
  } while (0)

// Every descriptor (the reshapes and the reordered accumulator included)
// and the operation graph finalize in the real library.
TEST(CudnnSdpaBwdDescriptors, EveryTensorAndOperationFinalizes) {
  AFZ_REQUIRE_CUDNN();
  struct Case {
    const char* name;
    Shape shape;
    bool padded;
    void (*edit)(ShapeProblem&);
  };
  Shape gqa;
  gqa.heads_q = 8, gqa.heads_kv = 2;
  Shape d128;
  d128.d = d128.dv = 128;
  const std::vector<Case> cases = {
      {"dense", Shape{}, false, [](ShapeProblem&) {}},
      {"gqa", gqa, false, [](ShapeProblem&) {}},
      {"d128", d128, false, [](ShapeProblem&) {}},
      {"varlen_causal", Shape{}, true, [](ShapeProblem& p) { p.causal(AFZ_ALIGN_TOP_LEFT).seqlens({48, 3}, {80, 9}); }},
      {"bottom_right_window", Shape{}, true, [](ShapeProblem& p) { p.window(8, 2, AFZ_ALIGN_BOTTOM_RIGHT); }},
      {"additive_mask", Shape{}, false, [](ShapeProblem& p) { p.add_mask(true); }},
  };
  const CudnnLibrary& lib = cudnn_library();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ShapeProblem sp(c.shape);
    c.edit(sp);
    SdpaGraphOptions o;
    o.padded = c.padded;
    o.cudnn_version = lib.version;
    try {
      const SdpaGraph g = build_sdpa_bwd_graph(sp.problem(), o, c.shape.dtype);
      const LoweredGraph lowered = lower_sdpa_graph(lib.api, g);
      EXPECT_EQ(lowered.operations.size(), g.ops.size());
      EXPECT_TRUE(make_operation_graph(lib.api, lowered, nullptr));
    } catch (const CudnnCallError& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

// A backward problem over the shapes of a ShapeProblem (fake pointers).
struct BwdShape {
  explicit BwdShape(ShapeProblem& sp) {
    const afz_problem& f = sp.problem();
    p.fwd = &f;
    p.dout = f.o;
    p.out = f.o;
    p.lse = f.lse;
    for (int a = 0; a < 3; ++a) p.lse_stride[a] = f.lse_stride[a];
    p.dq = f.q;
    p.dk = f.k;
    p.dv = f.v;
    for (afz_tensor* g : {&p.dq, &p.dk, &p.dv}) g->dtype = AFZ_F32;
  }
  afz_backward_problem p{};
};

TEST(CudnnSdpaBwdKernel, DeclaresTheForwardsNameNondeterminismAndPrecision) {
  const afz_backward_kernel& k = cudnn_sdpa_backward_kernel();
  EXPECT_STREQ(k.name, "cudnn.sdpa");
  EXPECT_TRUE(k.caps.flags & AFZ_CAP_NONDETERMINISTIC);  // dQ summed with atomics
  EXPECT_TRUE(k.caps.flags & AFZ_CAP_GPU);
  EXPECT_TRUE(k.caps.flags & AFZ_CAP_CAUSAL_BOTTOM_RIGHT);
  EXPECT_TRUE(k.caps.flags & AFZ_CAP_GQA);
  EXPECT_FALSE(k.caps.flags & AFZ_CAP_SOFTCAP);
  EXPECT_EQ(k.caps.in_dtypes, (1u << AFZ_F16) | (1u << AFZ_BF16));
  EXPECT_EQ(k.precision.score_dtype, AFZ_F32);
  EXPECT_EQ(k.precision.p_dtype, AFZ_P_DTYPE_OF_V);
  EXPECT_EQ(k.precision.acc_dtype, AFZ_F32);
  ASSERT_NE(k.supports, nullptr);
  ASSERT_NE(k.run, nullptr);
}

TEST(CudnnSdpaBwdKernel, WithoutALibrarySupportsDeclinesWithTheLoadError) {
  Shape s;
  ShapeProblem sp(s);
  BwdShape b(sp);
  const CudnnLibrary missing = load_cudnn("/nonexistent/attnfuzz/libcudnn.so.9");
  const std::string why = cudnn_sdpa_backward_unsupported_reason(b.p, missing);
  EXPECT_EQ(why.rfind("cuDNN not loaded: cannot dlopen", 0), 0u) << why;
}

TEST(CudnnSdpaBwdKernel, SupportsTakesStridedInputsAndDeclinesWhatTheGraphCannotTake) {
  AFZ_REQUIRE_CUDNN();
  const CudnnLibrary& lib = cudnn_library();
  Shape s;
  s.layout = testing::Layout::BSHD;
  {
    ShapeProblem sp(s);
    BwdShape b(sp);
    EXPECT_EQ(cudnn_sdpa_backward_unsupported_reason(b.p, lib), "");
    // A row gap the forward declines: the backward packs its inputs.
    for (afz_tensor* t : {&sp.problem().q, &sp.problem().k, &sp.problem().v}) t->stride[2] += 3;
    EXPECT_EQ(cudnn_sdpa_backward_unsupported_reason(b.p, lib), "");
  }
  {
    ShapeProblem sp(s);
    sp.problem().softcap = 30.0f;
    BwdShape b(sp);
    EXPECT_NE(cudnn_sdpa_backward_unsupported_reason(b.p, lib).find("softcap"), std::string::npos);
  }
  {
    ShapeProblem sp(s);
    BwdShape b(sp);
    b.p.dout.dtype = AFZ_F32;
    EXPECT_NE(cudnn_sdpa_backward_unsupported_reason(b.p, lib).find("dO must have the input dtype"),
              std::string::npos);
  }
  {
    ShapeProblem sp(s);
    sp.seqlens({48, 48}, {80, 0});
    BwdShape b(sp);
    EXPECT_NE(cudnn_sdpa_backward_unsupported_reason(b.p, lib).find("no key"), std::string::npos);
  }
  {
    Shape wide = s;
    wide.d = wide.dv = 256;
    ShapeProblem sp(wide);
    BwdShape b(sp);
    const std::string why = cudnn_sdpa_backward_unsupported_reason(b.p, lib);
    if (lib.version < 92300)
      EXPECT_NE(why.find("above 128"), std::string::npos) << why;
    else
      EXPECT_EQ(why, "");
  }
  {
    ShapeProblem sp(s);
    sp.causal(AFZ_ALIGN_BOTTOM_RIGHT).add_mask();
    BwdShape b(sp);
    EXPECT_NE(cudnn_sdpa_backward_unsupported_reason(b.p, lib).find("bottom-right"), std::string::npos);
  }
}

}  // namespace
}  // namespace afz::cudnn
