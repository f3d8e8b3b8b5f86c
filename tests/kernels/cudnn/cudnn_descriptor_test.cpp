// Every backend descriptor of the SDPA graph, created and finalized by the
// real libcudnn for a range of problems: tensors, pointwise / matmul /
// reduction descriptors and operations, the operation graph, a variant pack.
// None of it needs a GPU or a handle, so a wrong attribute (its name, type or
// count, an enum value the descriptor does not take) fails here on a CPU-only
// machine instead of on the H200.  cuDNN 9.19 checks shapes (broadcasts,
// matmul dims) only later, in the engine heuristics: sdpa_graph_test checks
// them on the graph description.  Skips where libcudnn does not load.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cudnn/backend_descriptor.h"
#include "kernels/cudnn/cudnn_api.h"
#include "kernels/cudnn/mask_bias.h"
#include "kernels/cudnn/sdpa_graph.h"
#include "kernels/cudnn/sdpa_lowering.h"
#include "tests/kernels/cudnn/sdpa_shapes.h"

namespace afz::cudnn {
namespace {

using testing::Layout;
using testing::Shape;
using testing::ShapeProblem;

#define AFZ_REQUIRE_CUDNN()                                                     \
  do {                                                                          \
    if (!cudnn_library().loaded) GTEST_SKIP() << cudnn_library().describe();    \
  } while (0)

struct Case {
  std::string name;
  Shape shape;
  std::function<void(ShapeProblem&)> edit;
};

std::vector<Case> cases() {
  auto shape = [](auto f) {
    Shape s;
    f(s);
    return s;
  };
  auto none = [](ShapeProblem&) {};
  return {
      {"bhsd_bf16", Shape{}, none},
      {"bhsd_fp16_d128", shape([](Shape& s) { s.dtype = AFZ_F16, s.d = s.dv = 128; }), none},
      {"bshd_d256", shape([](Shape& s) { s.layout = Layout::BSHD, s.d = s.dv = 256; }), none},
      {"packed_qkv", shape([](Shape& s) { s.layout = Layout::PackedQKV, s.skv = s.sq, s.heads_kv = 2; }), none},
      {"gqa", shape([](Shape& s) { s.heads_q = 8, s.heads_kv = 2; }), none},
      {"mqa_dv_ne_d", shape([](Shape& s) { s.heads_q = 8, s.heads_kv = 1, s.dv = 32; }), none},
      {"no_lse", shape([](Shape& s) { s.lse = false; }), none},
      {"single_row", shape([](Shape& s) { s.batch = 1, s.sq = 1; }), none},
      {"varlen", Shape{}, [](ShapeProblem& p) { p.seqlens({48, 0}, {1, 80}); }},
      {"causal_top_left", Shape{}, [](ShapeProblem& p) { p.causal(AFZ_ALIGN_TOP_LEFT); }},
      {"causal_bottom_right", Shape{}, [](ShapeProblem& p) { p.causal(AFZ_ALIGN_BOTTOM_RIGHT); }},
      {"causal_bottom_right_varlen", Shape{},
       [](ShapeProblem& p) { p.causal(AFZ_ALIGN_BOTTOM_RIGHT).seqlens({40, 48}, {80, 12}); }},
      {"window_top_left", Shape{}, [](ShapeProblem& p) { p.window(16, 0, AFZ_ALIGN_TOP_LEFT); }},
      {"window_shifted_right", Shape{}, [](ShapeProblem& p) { p.window(16, 4, AFZ_ALIGN_TOP_LEFT); }},
      {"window_left_only_bottom_right", Shape{}, [](ShapeProblem& p) { p.window(8, -1, AFZ_ALIGN_BOTTOM_RIGHT); }},
      {"window_bottom_right_varlen", Shape{},
       [](ShapeProblem& p) { p.window(8, 2, AFZ_ALIGN_BOTTOM_RIGHT).seqlens({3, 48}, {80, 70}); }},
      {"additive_mask", Shape{}, [](ShapeProblem& p) { p.add_mask(); }},
      {"additive_mask_broadcast", Shape{}, [](ShapeProblem& p) { p.add_mask(true); }},
      {"boolean_mask", Shape{}, [](ShapeProblem& p) { p.bool_mask(); }},
      {"both_masks_causal_varlen", Shape{},
       [](ShapeProblem& p) { p.add_mask(true).bool_mask().causal(AFZ_ALIGN_TOP_LEFT).seqlens({5, 48}, {80, 9}); }},
      {"boolean_mask_broadcast_window", Shape{},
       [](ShapeProblem& p) { p.bool_mask(true).window(4, 4, AFZ_ALIGN_TOP_LEFT); }},
  };
}

// As the kernel does: a boolean mask reaches the graph merged into the bias.
void merge_bool_mask(afz_problem& p) {
  if (!p.bool_mask.data) return;
  const Dims full = {p.batch, p.heads_q, p.max_seqlen_q, p.max_seqlen_k};
  const std::vector<uint8_t> keep(size_t(mask_span_elements(p.bool_mask, full)), 1);
  std::vector<float> add(p.add_mask.data ? size_t(mask_span_elements(p.add_mask, full)) : 0, 0.5f);
  const MaskBias bias = merge_masks(p, keep.data(), add.empty() ? nullptr : add.data());
  p.bool_mask = afz_tensor{};
  p.add_mask.data = testing::fake_pointer(9);
  p.add_mask.dtype = AFZ_F32;
  const Dims st = bias.strides();
  std::copy(st.begin(), st.end(), p.add_mask.stride);
}

void lower_all(const afz_problem& p, bool padded, const std::string& name) {
  const CudnnLibrary& lib = cudnn_library();
  SdpaGraphOptions o;
  o.padded = padded;
  o.cudnn_version = lib.version;
  const SdpaGraph g = build_sdpa_graph(p, o);
  SCOPED_TRACE(name + (padded ? " (padded)" : ""));
  try {
    const LoweredGraph lowered = lower_sdpa_graph(lib.api, g);
    EXPECT_EQ(lowered.tensors.size(), g.tensors.size());
    EXPECT_EQ(lowered.operations.size(), g.ops.size());
    // cuDNN 9 finalizes an operation graph without a handle
    // (CUDNN_ATTR_OPERATIONGRAPH_HANDLE is deprecated): the whole graph's
    // consistency (uids, producers, shapes) is checked here too.
    const BackendDescriptor graph = make_operation_graph(lib.api, lowered, nullptr);
    EXPECT_TRUE(graph);

    std::vector<int64_t> uids;
    std::vector<void*> pointers;
    for (const GraphTensor& t : g.tensors)
      if (!t.is_virtual) {
        uids.push_back(t.uid);
        pointers.push_back(t.by_value ? const_cast<void*>(t.value()) : testing::fake_pointer(uintptr_t(t.uid)));
      }
    const BackendDescriptor pack = make_variant_pack(lib.api, uids, pointers, testing::fake_pointer(99));
    EXPECT_TRUE(pack);
  } catch (const CudnnCallError& e) {
    ADD_FAILURE() << e.what();
  }
}

TEST(CudnnDescriptors, EveryTensorAndOperationFinalizes) {
  AFZ_REQUIRE_CUDNN();
  for (const Case& c : cases()) {
    ShapeProblem sp(c.shape);
    c.edit(sp);
    merge_bool_mask(sp.problem());
    lower_all(sp.problem(), needs_padding(sp.problem(), sp.seqlens_q(), sp.seqlens_k()), c.name);
    lower_all(sp.problem(), true, c.name);  // every case also on the padded path
  }
}

TEST(CudnnDescriptors, LowestFillOfOldVersionsFinalizesToo) {
  AFZ_REQUIRE_CUDNN();
  Shape s;
  ShapeProblem sp(s);
  sp.window(16, 0, AFZ_ALIGN_BOTTOM_RIGHT);
  SdpaGraphOptions o;
  o.cudnn_version = 90900;
  EXPECT_NO_THROW(lower_sdpa_graph(cudnn_library().api, build_sdpa_graph(sp.problem(), o)));
}

TEST(CudnnDescriptors, AFailureNamesTheDescriptorTheAttributeAndCudnnsReason) {
  AFZ_REQUIRE_CUDNN();
  BackendDescriptor t(cudnn_library().api, CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor 'dims as floats' (uid 7)");
  const float dims[4] = {1, 2, 3, 4};
  try {
    t.set(AFZ_CUDNN_ATTR(CUDNN_ATTR_TENSOR_DIMENSIONS), CUDNN_TYPE_FLOAT, 4, dims);
    ADD_FAILURE() << "cuDNN took fp32 tensor dimensions";
  } catch (const CudnnCallError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("tensor 'dims as floats' (uid 7): cudnnBackendSetAttribute(CUDNN_ATTR_TENSOR_DIMENSIONS): "
                         "CUDNN_STATUS_BAD_PARAM",
                         0),
              0u)
        << what;
    EXPECT_EQ(e.status(), CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace afz::cudnn
