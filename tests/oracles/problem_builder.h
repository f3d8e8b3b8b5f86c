// Hand-built attention problems for the oracle tests: exact control over
// every value (tie cases, extreme magnitudes), independent of the case
// format and of the fuzz generators.
//
// Values are stored through afz::store (rounded to the tensor's dtype) into
// buffers laid out BHSD or BSHD; everything outside the valid region is
// poisoned with NaN, so an oracle that reads padding produces NaN or throws.
// The logical (already rounded) values are kept for the tests' own
// reference computations.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "harness/case/rng.h"
#include "kernels/abi/attnfuzz_kernel.h"
#include "kernels/abi/dtype.h"

namespace afz::test {

struct Shape {
  int batch = 1, heads_q = 1, heads_kv = 1, d = 4, dv = 4;
  std::vector<int32_t> seqlens_q{1}, seqlens_k{1};
  afz_dtype dtype = AFZ_F32;  // q, k and v
  bool bshd = false;          // BSHD strides instead of BHSD
};

class TestProblem {
 public:
  explicit TestProblem(const Shape& s) : s_(s) {
    for (int32_t n : s.seqlens_q) max_sq_ = std::max(max_sq_, n);
    for (int32_t n : s.seqlens_k) max_sk_ = std::max(max_sk_, n);
    q_ = Tensor(s, s.heads_q, max_sq_, s.d);
    k_ = Tensor(s, s.heads_kv, max_sk_, s.d);
    v_ = Tensor(s, s.heads_kv, max_sk_, s.dv);
    lse_out_.assign(size_t(s.batch) * s.heads_q * std::max(max_sq_, 1), 0.0f);
    o_out_.assign(size_t(s.batch) * s.heads_q * std::max(max_sq_, 1) * s.dv * 4, 0);
  }
  TestProblem(const TestProblem&) = delete;
  TestProblem& operator=(const TestProblem&) = delete;

  const Shape& shape() const { return s_; }
  int max_sq() const { return max_sq_; }
  int max_sk() const { return max_sk_; }

  // Store one element (rounded to the dtype); returns the stored value.
  double set_q(int b, int h, int i, int x, double v) { return q_.set(b, h, i, x, v); }
  double set_k(int b, int h, int j, int x, double v) { return k_.set(b, h, j, x, v); }
  double set_v(int b, int h, int j, int x, double v) { return v_.set(b, h, j, x, v); }
  double q(int b, int h, int i, int x) const { return q_.get(b, h, i, x); }
  double k(int b, int h, int j, int x) const { return k_.get(b, h, j, x); }
  double v(int b, int h, int j, int x) const { return v_.get(b, h, j, x); }

  // Uniform values on [-amp_*, amp_*) in every valid position.
  void fill_uniform(uint64_t seed, double amp_q, double amp_k, double amp_v) {
    fill(q_, s_.heads_q, s_.seqlens_q, s_.d, CounterRng(seed, 1), amp_q);
    fill(k_, s_.heads_kv, s_.seqlens_k, s_.d, CounterRng(seed, 2), amp_k);
    fill(v_, s_.heads_kv, s_.seqlens_k, s_.dv, CounterRng(seed, 3), amp_v);
  }

  void set_scale(float scale) { scale_ = scale; }
  void set_softcap(float cap) { softcap_ = cap; }
  void set_window(int left, int right, afz_align align) {
    has_window_ = true;
    window_left_ = left;
    window_right_ = right;
    align_ = align;
  }
  // keep(b, h, i, j): the key takes part.  Stored as u8 [b][h][i][j].
  void set_bool_mask(const std::function<bool(int, int, int, int)>& keep) {
    bool_mask_.assign(mask_elems(), 0);
    for_each_mask_element([&](int b, int h, int i, int j, size_t e) { bool_mask_[e] = keep(b, h, i, j) ? 1 : 0; });
  }
  // add(b, h, i, j) as fp32 [b][h][i][j] (rounded to fp32).
  void set_add_mask(const std::function<double(int, int, int, int)>& add) {
    add_mask_.assign(mask_elems(), std::numeric_limits<float>::quiet_NaN());
    for_each_mask_element([&](int b, int h, int i, int j, size_t e) {
      store(AFZ_F32, &add_mask_[e], add(b, h, i, j));
    });
  }
  bool keep(int b, int h, int i, int j) const {
    return bool_mask_.empty() || bool_mask_[mask_index(b, h, i, j)] != 0;
  }
  double add(int b, int h, int i, int j) const {
    return add_mask_.empty() ? 0.0 : double(add_mask_[mask_index(b, h, i, j)]);
  }
  float scale() const { return scale_; }
  float softcap() const { return softcap_; }
  bool has_window() const { return has_window_; }
  int window_left() const { return window_left_; }
  int window_right() const { return window_right_; }
  afz_align align() const { return align_; }

  afz_problem problem() {
    afz_problem p{};
    p.abi_version = AFZ_ABI_VERSION;
    p.batch = s_.batch;
    p.heads_q = s_.heads_q;
    p.heads_kv = s_.heads_kv;
    p.head_dim = s_.d;
    p.head_dim_v = s_.dv;
    p.max_seqlen_q = max_sq_;
    p.max_seqlen_k = max_sk_;
    p.seqlens_q = s_.seqlens_q.data();
    p.seqlens_k = s_.seqlens_k.data();
    p.scale = scale_;
    p.softcap = softcap_;
    p.window_left = window_left_;
    p.window_right = window_right_;
    p.has_window = has_window_;
    p.align = align_;
    p.bool_mask = mask_tensor(bool_mask_.empty() ? nullptr : bool_mask_.data(), AFZ_U8);
    p.add_mask = mask_tensor(add_mask_.empty() ? nullptr : add_mask_.data(), AFZ_F32);
    p.q = q_.tensor();
    p.k = k_.tensor();
    p.v = v_.tensor();
    p.o = {o_out_.data(), AFZ_F32, {int64_t(s_.heads_q) * max_sq_ * s_.dv, int64_t(max_sq_) * s_.dv, s_.dv, 1}};
    p.lse = lse_out_.data();
    p.lse_stride[0] = int64_t(s_.heads_q) * max_sq_;
    p.lse_stride[1] = max_sq_;
    p.lse_stride[2] = 1;
    return p;
  }

 private:
  struct Tensor {
    afz_dtype dtype = AFZ_F32;
    int heads = 0, seq = 0, dim = 0;
    int64_t stride[4] = {};
    std::vector<uint8_t> bytes;
    std::vector<double> logical;  // [b][h][s][x]
    Tensor() = default;
    Tensor(const Shape& s, int heads_, int seq_, int dim_) : dtype(s.dtype), heads(heads_), seq(seq_), dim(dim_) {
      if (s.bshd) {
        stride[0] = int64_t(seq) * heads * dim; stride[1] = dim; stride[2] = int64_t(heads) * dim; stride[3] = 1;
      } else {
        stride[0] = int64_t(heads) * seq * dim; stride[1] = int64_t(seq) * dim; stride[2] = dim; stride[3] = 1;
      }
      const size_t n = size_t(s.batch) * heads * seq * dim;
      bytes.resize(std::max<size_t>(n, 1) * size_of(dtype));
      for (size_t e = 0; e < n; ++e) store(dtype, &bytes[e * size_of(dtype)], std::numeric_limits<double>::quiet_NaN());
      logical.assign(n, std::numeric_limits<double>::quiet_NaN());
    }
    size_t logical_index(int b, int h, int s, int x) const {
      return ((size_t(b) * heads + h) * seq + s) * dim + x;
    }
    double set(int b, int h, int s, int x, double value) {
      const int64_t off = b * stride[0] + h * stride[1] + s * stride[2] + x * stride[3];
      store(dtype, &bytes[size_t(off) * size_of(dtype)], value);
      return logical[logical_index(b, h, s, x)] = load(dtype, &bytes[size_t(off) * size_of(dtype)]);
    }
    double get(int b, int h, int s, int x) const { return logical[logical_index(b, h, s, x)]; }
    afz_tensor tensor() {
      afz_tensor t{};
      t.data = bytes.data();
      t.dtype = dtype;
      for (int a = 0; a < 4; ++a) t.stride[a] = stride[a];
      return t;
    }
  };

  void fill(Tensor& t, int heads, const std::vector<int32_t>& seqlens, int dim, const CounterRng& rng, double amp) {
    uint64_t counter = 0;
    for (int b = 0; b < s_.batch; ++b)
      for (int h = 0; h < heads; ++h)
        for (int s = 0; s < seqlens[b]; ++s)
          for (int x = 0; x < dim; ++x) t.set(b, h, s, x, amp * rng.symmetric(counter++));
  }

  size_t mask_elems() const { return size_t(s_.batch) * s_.heads_q * std::max(max_sq_, 1) * std::max(max_sk_, 1); }
  size_t mask_index(int b, int h, int i, int j) const {
    return ((size_t(b) * s_.heads_q + h) * max_sq_ + i) * max_sk_ + j;
  }
  template <class F>
  void for_each_mask_element(F f) {
    for (int b = 0; b < s_.batch; ++b)
      for (int h = 0; h < s_.heads_q; ++h)
        for (int i = 0; i < s_.seqlens_q[b]; ++i)
          for (int j = 0; j < s_.seqlens_k[b]; ++j) f(b, h, i, j, mask_index(b, h, i, j));
  }
  afz_tensor mask_tensor(void* data, afz_dtype dtype) const {
    afz_tensor t{};
    t.data = data;
    t.dtype = dtype;
    t.stride[0] = int64_t(s_.heads_q) * max_sq_ * max_sk_;
    t.stride[1] = int64_t(max_sq_) * max_sk_;
    t.stride[2] = max_sk_;
    t.stride[3] = 1;
    return t;
  }

  Shape s_;
  int max_sq_ = 0, max_sk_ = 0;
  Tensor q_, k_, v_;
  float scale_ = 1.0f, softcap_ = 0.0f;
  bool has_window_ = false;
  int window_left_ = -1, window_right_ = -1;
  afz_align align_ = AFZ_ALIGN_TOP_LEFT;
  std::vector<uint8_t> bool_mask_;
  std::vector<float> add_mask_;
  std::vector<uint8_t> o_out_;
  std::vector<float> lse_out_;
};

}  // namespace afz::test
