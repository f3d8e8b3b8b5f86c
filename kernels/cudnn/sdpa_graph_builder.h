// The pieces both SDPA graphs are built from (sdpa_graph for the forward,
// sdpa_bwd_graph for the backward): the builder that numbers tensors and
// appends operations, stride helpers, and cudnn-frontend's mask patterns
// (padding, the causal/window bands), which the two passes apply alike.
#pragma once
#include <cudnn_graph.h>

#include <algorithm>
#include <string>
#include <utility>

#include "attnfuzz_kernel.h"
#include "kernels/cudnn/sdpa_graph.h"

namespace afz::cudnn {

constexpr int kAxes = 4;

inline bool is_b16(afz_dtype t) { return t == AFZ_F16 || t == AFZ_BF16; }

inline cudnnDataType_t io_type(afz_dtype t) { return t == AFZ_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF; }

inline Dims packed_strides(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }

// A stride along an extent-1 axis is never multiplied by an index other than
// 0, so it is arbitrary in the problem; cuDNN sees a packed-consistent one
// instead of whatever the harness left there (and the key does not split on it).
inline Dims normalized_strides(const Dims& dims, Dims strides) {
  for (int a = kAxes - 1; a >= 0; --a)
    if (dims[a] == 1) strides[a] = a == kAxes - 1 ? 1 : strides[a + 1] * dims[a + 1];
  return strides;
}

inline Dims strides_of(const afz_tensor& t) { return {t.stride[0], t.stride[1], t.stride[2], t.stride[3]}; }

// A mask's dims: 1 where its stride is 0 (a broadcast in the problem becomes
// a broadcast in the graph), the score dims elsewhere.
inline Dims broadcast_dims(const afz_tensor& t, const Dims& full) {
  Dims d = full;
  for (int a = 0; a < kAxes; ++a)
    if (t.stride[a] == 0) d[a] = 1;
  return d;
}

struct Window {
  bool right = false, left = false, bottom_right = false;
  int32_t right_shift = 0;  // window_right
  int32_t left_bound = 0;   // cudnn-frontend's left bound: keys j with j + left_bound > i stay, = window_left + 1
};

inline Window window_of(const afz_problem& p) {
  Window w;
  if (!p.has_window) return w;
  w.right = p.window_right >= 0;
  w.left = p.window_left >= 0;
  w.bottom_right = p.align == AFZ_ALIGN_BOTTOM_RIGHT && (w.right || w.left);
  w.right_shift = w.right ? p.window_right : 0;
  w.left_bound = w.left ? p.window_left + 1 : 0;
  return w;
}

class Builder {
 public:
  Builder(const afz_problem& p, const SdpaGraphOptions& o) : p_(p), o_(o) {}

  int64_t bound(Binding b, int64_t uid, std::string name, cudnnDataType_t dt, const Dims& dims, const Dims& strides) {
    GraphTensor t;
    t.uid = uid;
    t.name = std::move(name);
    t.dtype = dt;
    t.dims = dims;
    t.strides = normalized_strides(dims, strides);
    t.binding = b;
    t.alignment = o_.alignment[size_t(b)];
    g_.tensors.push_back(std::move(t));
    return uid;
  }

  int64_t virt(std::string name, cudnnDataType_t dt, const Dims& dims) {
    GraphTensor t;
    t.uid = next_uid_++;
    t.name = std::move(name);
    t.dtype = dt;
    t.dims = dims;
    t.strides = packed_strides(dims);
    t.is_virtual = true;
    g_.tensors.push_back(std::move(t));
    return g_.tensors.back().uid;
  }

  int64_t scalar_f32(std::string name, float v) { return scalar(std::move(name), CUDNN_DATA_FLOAT, v, 0); }
  int64_t scalar_i32(std::string name, int32_t v) { return scalar(std::move(name), CUDNN_DATA_INT32, 0.0f, v); }

  const Dims& dims_of(int64_t uid) const { return g_.tensor(uid)->dims; }

  // A pointwise op writing a new virtual tensor of the operands' broadcast dims.
  int64_t pointwise(std::string name, cudnnPointwiseMode_t mode, cudnnDataType_t compute, cudnnDataType_t out,
                    int64_t x, int64_t b = 0, int64_t t = 0) {
    Dims d = dims_of(x);
    for (int64_t in : {b, t})
      if (in)
        for (int a = 0; a < kAxes; ++a) d[a] = std::max(d[a], dims_of(in)[a]);
    const int64_t y = virt(name + ".out", out, d);
    pointwise_to(std::move(name), mode, compute, x, b, t, y);
    return y;
  }

  void pointwise_to(std::string name, cudnnPointwiseMode_t mode, cudnnDataType_t compute, int64_t x, int64_t b,
                    int64_t t, int64_t y, int64_t axis = -1) {
    GraphOp op;
    op.kind = OpKind::Pointwise;
    op.name = std::move(name);
    op.mode = mode;
    op.compute = compute;
    op.axis = axis;
    op.x = x;
    op.b = b;
    op.t = t;
    op.y = y;
    g_.ops.push_back(std::move(op));
  }

  // Row (axis 2) or column (axis 3) index of every score, as int32.
  int64_t gen_index(std::string name, int64_t x, int64_t axis, cudnnDataType_t compute) {
    const int64_t y = virt(name + ".out", CUDNN_DATA_INT32, dims_of(x));
    pointwise_to(std::move(name), CUDNN_POINTWISE_GEN_INDEX, compute, x, 0, 0, y, axis);
    return y;
  }

  // A reduction over the key axis: [b, h, sq, skv] -> [b, h, sq, 1], fp32.
  int64_t reduce_keys(std::string name, cudnnReduceTensorOp_t r, int64_t x) {
    Dims d = dims_of(x);
    d[3] = 1;
    const int64_t y = virt(name + ".out", CUDNN_DATA_FLOAT, d);
    reduce_to(std::move(name), r, x, y);
    return y;
  }

  void reduce_to(std::string name, cudnnReduceTensorOp_t r, int64_t x, int64_t y) {
    GraphOp op;
    op.kind = OpKind::Reduction;
    op.name = std::move(name);
    op.reduce = r;
    op.compute = CUDNN_DATA_FLOAT;
    op.x = x;
    op.y = y;
    g_.ops.push_back(std::move(op));
  }

  void matmul(std::string name, int64_t a, int64_t b, int64_t c, int64_t m, int64_t n, int64_t k) {
    GraphOp op;
    op.kind = OpKind::Matmul;
    op.name = std::move(name);
    op.compute = CUDNN_DATA_FLOAT;
    op.x = a;
    op.b = b;
    op.y = c;
    op.m_override = m;
    op.n_override = n;
    op.k_override = k;
    g_.ops.push_back(std::move(op));
  }

  // A RESHAPE op writing a virtual tensor of the given dims, strides and
  // dtype: cudnn-frontend's transposes (P^T, dS^T, K from K^T) are
  // reshapes whose strides swap the last two axes.
  int64_t reshape(std::string name, int64_t x, const Dims& dims, const Dims& strides, cudnnDataType_t dt) {
    const int64_t y = virt(name + ".out", dt, dims);
    g_.tensors.back().strides = strides;
    GraphOp op;
    op.kind = OpKind::Reshape;
    op.name = std::move(name);
    op.x = x;
    op.y = y;
    g_.ops.push_back(std::move(op));
    return y;
  }

  // The tensor just added (to set what the helpers above leave default).
  GraphTensor& last_tensor() { return g_.tensors.back(); }

  SdpaGraph take() { return std::move(g_); }

 private:
  int64_t scalar(std::string name, cudnnDataType_t dt, float f, int32_t i) {
    GraphTensor t;
    t.uid = next_uid_++;
    t.name = std::move(name);
    t.dtype = dt;
    t.dims = {1, 1, 1, 1};
    t.strides = {1, 1, 1, 1};
    t.by_value = true;
    t.binding = Binding::Scalar;
    t.f32 = f;
    t.i32 = i;
    g_.tensors.push_back(std::move(t));
    return g_.tensors.back().uid;
  }

  const afz_problem& p_;
  const SdpaGraphOptions& o_;
  SdpaGraph g_;
  int64_t next_uid_ = kFirstInternalUid;
};

// The GEN_INDEX/CMP/BINARY_SELECT pattern of cudnn-frontend's padding mask:
// scores outside (seq_len_q, seq_len_kv) of their sequence become fill.
int64_t padding_mask(Builder& g, int64_t s, float fill);

// Keys j <= i + off + wr stay (cudnn-frontend's right-bound diagonal band).
int64_t right_bound(Builder& g, const afz_problem& p, const Window& w, bool padded, int64_t s, float fill);

// Keys j with j + wl + 1 - off > i stay (cudnn-frontend's left-bound band).
int64_t left_bound(Builder& g, const afz_problem& p, const Window& w, bool padded, int64_t s, float fill);

// The seq-len tensors [b, 1, 1, 1] of the padded path.
void bind_seqlens(Builder& g, int64_t batch);

// S = Q . K^T * scale (+ bias), then the padding mask (padded path) and the
// causal/window bands: what both passes compute before their softmax step.
// `scale` is the by-value scale scalar's uid (the backward reuses it).
int64_t masked_scores(Builder& g, const afz_problem& p, const SdpaGraphOptions& o, int64_t q, int64_t kt,
                      int64_t scale);

}  // namespace afz::cudnn
