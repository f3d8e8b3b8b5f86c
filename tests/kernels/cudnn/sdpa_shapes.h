// Host problems for the cudnn.sdpa tests: shapes, strides, masks and seq
// lengths only.  The graph description reads no tensor, so data pointers are
// distinct fake addresses (16-byte aligned, never dereferenced).
#pragma once
#include <cstdint>
#include <vector>

#include "attnfuzz_kernel.h"

namespace afz::cudnn::testing {

enum class Layout { BHSD, BSHD, PackedQKV };

struct Shape {
  int batch = 2, heads_q = 4, heads_kv = 4, d = 64, dv = 64, sq = 48, skv = 80;
  afz_dtype dtype = AFZ_BF16;
  Layout layout = Layout::BHSD;
  bool lse = true;
};

inline void* fake_pointer(uintptr_t n) { return reinterpret_cast<void*>(uintptr_t(0x100000) * (n + 1)); }

class ShapeProblem {
 public:
  explicit ShapeProblem(const Shape& s) : s_(s), seq_q_(size_t(s.batch), s.sq), seq_k_(size_t(s.batch), s.skv) {
    p_.abi_version = AFZ_ABI_VERSION;
    p_.batch = s.batch;
    p_.heads_q = s.heads_q;
    p_.heads_kv = s.heads_kv;
    p_.head_dim = s.d;
    p_.head_dim_v = s.dv;
    p_.max_seqlen_q = s.sq;
    p_.max_seqlen_k = s.skv;
    p_.seqlens_q = seq_q_.data();
    p_.seqlens_k = seq_k_.data();
    p_.scale = 0.125f;
    p_.window_left = p_.window_right = -1;
    layout(s);
    if (s.lse) {
      p_.lse = &lse_;
      p_.lse_stride[0] = int64_t(s.heads_q) * s.sq;
      p_.lse_stride[1] = s.sq;
      p_.lse_stride[2] = 1;
    }
  }
  ShapeProblem(const ShapeProblem&) = delete;
  ShapeProblem& operator=(const ShapeProblem&) = delete;

  afz_problem& problem() { return p_; }
  const afz_problem& problem() const { return p_; }
  const int32_t* seqlens_q() const { return seq_q_.data(); }
  const int32_t* seqlens_k() const { return seq_k_.data(); }

  ShapeProblem& seqlens(std::vector<int32_t> q, std::vector<int32_t> k) {
    seq_q_ = std::move(q);
    seq_k_ = std::move(k);
    p_.seqlens_q = seq_q_.data();
    p_.seqlens_k = seq_k_.data();
    return *this;
  }
  ShapeProblem& window(int left, int right, afz_align align) {
    p_.has_window = 1;
    p_.window_left = left;
    p_.window_right = right;
    p_.align = align;
    return *this;
  }
  ShapeProblem& causal(afz_align align) { return window(-1, 0, align); }
  // [b][h][i][j] masks; stride 0 along `broadcast_heads_and_batch` axes.
  ShapeProblem& add_mask(bool broadcast_heads_and_batch = false) {
    mask(&p_.add_mask, AFZ_F32, broadcast_heads_and_batch, 7);
    return *this;
  }
  ShapeProblem& bool_mask(bool broadcast_heads_and_batch = false) {
    mask(&p_.bool_mask, AFZ_U8, broadcast_heads_and_batch, 8);
    return *this;
  }

 private:
  void layout(const Shape& s) {
    const int64_t hq = s.heads_q, hk = s.heads_kv, d = s.d, dv = s.dv, sq = s.sq, sk = s.skv;
    auto set = [](afz_tensor* t, afz_dtype dt, uintptr_t n, int64_t s0, int64_t s1, int64_t s2) {
      t->data = fake_pointer(n);
      t->dtype = dt;
      t->stride[0] = s0;
      t->stride[1] = s1;
      t->stride[2] = s2;
      t->stride[3] = 1;
    };
    switch (s.layout) {
      case Layout::BHSD:
        set(&p_.q, s.dtype, 0, hq * sq * d, sq * d, d);
        set(&p_.k, s.dtype, 1, hk * sk * d, sk * d, d);
        set(&p_.v, s.dtype, 2, hk * sk * dv, sk * dv, dv);
        set(&p_.o, s.dtype, 3, hq * sq * dv, sq * dv, dv);
        break;
      case Layout::BSHD:
        set(&p_.q, s.dtype, 0, sq * hq * d, d, hq * d);
        set(&p_.k, s.dtype, 1, sk * hk * d, d, hk * d);
        set(&p_.v, s.dtype, 2, sk * hk * dv, dv, hk * dv);
        set(&p_.o, s.dtype, 3, sq * hq * dv, dv, hq * dv);
        break;
      case Layout::PackedQKV: {  // one [b][s][hq + 2 hk][d] buffer (d == dv, sq == skv)
        const int64_t row = (hq + 2 * hk) * d;
        set(&p_.q, s.dtype, 0, sq * row, d, row);
        set(&p_.k, s.dtype, 0, sq * row, d, row);
        set(&p_.v, s.dtype, 0, sq * row, d, row);
        set(&p_.o, s.dtype, 3, sq * hq * dv, dv, hq * dv);
        break;
      }
    }
  }

  void mask(afz_tensor* t, afz_dtype dt, bool broadcast, uintptr_t n) {
    t->data = fake_pointer(n);
    t->dtype = dt;
    t->stride[3] = 1;
    t->stride[2] = s_.skv;
    t->stride[1] = broadcast ? 0 : int64_t(s_.sq) * s_.skv;
    t->stride[0] = broadcast ? 0 : int64_t(s_.heads_q) * s_.sq * s_.skv;
  }

  Shape s_;
  std::vector<int32_t> seq_q_, seq_k_;
  afz_problem p_{};
  float lse_ = 0;
};

}  // namespace afz::cudnn::testing
