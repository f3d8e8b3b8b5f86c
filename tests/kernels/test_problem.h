// A small builder of afz_problem for the kernel tests: logical values from
// the counter RNG, rounded to the input dtype, scattered into BHSD or BSHD
// memory with optional row gaps and K/V broadcast over heads; padding and gaps
// hold NaN (a kernel that reads them turns NaN); outputs start as poison so
// unwritten elements are recognisable.  Also a direct softmax in double over
// the same rounded inputs, the yardstick for the emulating kernels.
// (Written before harness/case/materialize.cpp existed; it deliberately needs no
// Case.)
#pragma once
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "harness/case/rng.h"
#include "kernels/abi/attnfuzz_kernel.h"
#include "kernels/abi/dtype.h"

namespace afz::testing {

inline constexpr uint32_t kOutPoisonF32 = 0x7fa5a5a5u;  // signalling NaNs no arithmetic makes
inline constexpr uint32_t kOutPoisonF16 = 0x7d5au;
inline constexpr uint32_t kOutPoisonBF16 = 0x7fa5u;

inline uint32_t out_poison_bits(afz_dtype t) {
  return t == AFZ_F32 ? kOutPoisonF32 : t == AFZ_F16 ? kOutPoisonF16 : kOutPoisonBF16;
}

enum class Layout { BHSD, BSHD };
enum class Tensor { Q = 0, K = 1, V = 2 };

struct ProblemSpec {
  int batch = 1, heads_q = 1, heads_kv = 1, d = 16, dv = 16;
  std::vector<int> seqlens_q{8}, seqlens_k{8};
  afz_dtype in = AFZ_F32, out = AFZ_F32;
  float scale = 0;  // 0: fp32(1/sqrt(d))
  float softcap = 0;
  bool has_window = false;
  int window_left = -1, window_right = -1;
  afz_align align = AFZ_ALIGN_BOTTOM_RIGHT;
  std::function<bool(int b, int i, int j)> bool_mask;   // keep?  broadcast over heads
  std::function<float(int b, int i, int j)> add_mask;   // broadcast over heads
  Layout layout = Layout::BHSD;
  int row_gap = 0;                // extra elements after each row
  bool kv_broadcast_heads = false;  // K, V with stride 0 across kv heads
  bool with_lse = true;
  uint64_t seed = 1;
  double q_sigma = 1, k_sigma = 1, v_sigma = 1;
  // Optional override of a logical value (before rounding).
  std::function<double(Tensor, int b, int h, int s, int x, double generated)> value;
};

class TestProblem {
 public:
  explicit TestProblem(ProblemSpec s) : s_(std::move(s)) { build(); }
  TestProblem(const TestProblem&) = delete;
  TestProblem& operator=(const TestProblem&) = delete;

  const ProblemSpec& spec() const { return s_; }
  afz_problem& problem() { return p_; }
  int sq() const { return sq_; }
  int sk() const { return sk_; }

  // Logical inputs as the kernel sees them (rounded to the input dtype).
  double q(int b, int h, int i, int x) const { return lq_[((int64_t(b) * s_.heads_q + h) * sq_ + i) * s_.d + x]; }
  double k(int b, int hk, int j, int x) const { return lk_[((int64_t(b) * s_.heads_kv + hk) * sk_ + j) * s_.d + x]; }
  double v(int b, int hk, int j, int x) const { return lv_[((int64_t(b) * s_.heads_kv + hk) * sk_ + j) * s_.dv + x]; }

  bool visible(int b, int i, int j) const {
    const int64_t offset = s_.align == AFZ_ALIGN_BOTTOM_RIGHT ? int64_t(s_.seqlens_k[b]) - s_.seqlens_q[b] : 0;
    if (s_.has_window) {
      if (s_.window_left >= 0 && j < i + offset - s_.window_left) return false;
      if (s_.window_right >= 0 && j > i + offset + s_.window_right) return false;
    }
    return !s_.bool_mask || s_.bool_mask(b, i, j);
  }

  double o(int b, int h, int i, int x) const { return load(s_.out, o_.data() + o_offset(b, h, i, x) * size_of(s_.out)); }
  uint32_t o_bits(int b, int h, int i, int x) const {
    uint32_t bits = 0;
    std::memcpy(&bits, o_.data() + o_offset(b, h, i, x) * size_of(s_.out), size_of(s_.out));
    return bits;
  }
  float lse(int b, int h, int i) const { return lse_[lse_index(b, h, i)]; }
  uint32_t lse_bits(int b, int h, int i) const { return bits_of(lse(b, h, i)); }
  // Every byte of O's buffer (row gaps and padding included), for "untouched" checks.
  const std::vector<uint8_t>& o_storage() const { return o_; }
  int64_t o_offset(int b, int h, int i, int x) const {
    return b * p_.o.stride[0] + h * p_.o.stride[1] + i * p_.o.stride[2] + x * p_.o.stride[3];
  }
  int64_t lse_index(int b, int h, int i) const { return (int64_t(b) * s_.heads_q + h) * sq_ + i; }

  void poison_outputs() {
    for (int64_t e = 0; e < int64_t(o_.size()) / size_of(s_.out); ++e)
      store_bits(s_.out, o_.data() + e * size_of(s_.out), out_poison_bits(s_.out));
    for (float& x : lse_) x = float_of(kOutPoisonF32);
  }

  // Direct softmax in double over the rounded inputs, with the fp32 score
  // pipeline's steps done in double.  rows(b, h, i) -> dv outputs and LSE.
  struct Reference {
    std::vector<double> o, lse, cond;  // cond: sum p|v| / sum p per element
    std::vector<double> score_mag;     // per row: max over visible keys of scale sum|q k| + |cap| + |a|
    std::vector<int> keys;             // per row: visible keys
    std::vector<bool> empty;
  };
  Reference reference() const {
    Reference r;
    const int64_t rows = int64_t(s_.batch) * s_.heads_q * sq_;
    r.o.assign(rows * s_.dv, 0.0);
    r.cond.assign(rows * s_.dv, 0.0);
    r.lse.assign(rows, -std::numeric_limits<double>::infinity());
    r.empty.assign(rows, true);
    r.score_mag.assign(rows, 0.0);
    r.keys.assign(rows, 0);
    const int group = s_.heads_q / s_.heads_kv;
    for (int b = 0; b < s_.batch; ++b)
      for (int h = 0; h < s_.heads_q; ++h)
        for (int i = 0; i < s_.seqlens_q[b]; ++i) {
          const int64_t row = lse_index(b, h, i);
          std::vector<double> sc(s_.seqlens_k[b], -std::numeric_limits<double>::infinity());
          std::vector<double> mag(s_.seqlens_k[b], 0.0);
          double m = -std::numeric_limits<double>::infinity();
          for (int j = 0; j < s_.seqlens_k[b]; ++j) {
            if (!visible(b, i, j)) continue;
            const double a = s_.add_mask ? double(s_.add_mask(b, i, j)) : 0.0;
            if (a == -std::numeric_limits<double>::infinity()) continue;  // masked by the additive mask
            double dot = 0;
            for (int x = 0; x < s_.d; ++x) {
              dot += q(b, h, i, x) * k(b, h / group, j, x);
              mag[j] += std::fabs(q(b, h, i, x) * k(b, h / group, j, x));
            }
            double sj = dot * double(p_.scale);
            if (s_.softcap != 0) sj = double(s_.softcap) * std::tanh(sj / double(s_.softcap));
            sj += a;
            sc[j] = sj;
            // What an fp32 score pipeline rounds: the products, the scaled
            // sum, the softcap, and the final sum with the mask.
            mag[j] = mag[j] * std::fabs(double(p_.scale)) + s_.softcap + std::fabs(sj);
            m = std::max(m, sj);
            r.keys[row] += 1;
          }
          if (m == -std::numeric_limits<double>::infinity()) continue;
          r.empty[row] = false;
          double l = 0;
          std::vector<double> acc(s_.dv, 0.0), cond(s_.dv, 0.0);
          for (int j = 0; j < s_.seqlens_k[b]; ++j) {
            const double pj = std::exp(sc[j] - m);
            // Keys whose weight is negligible cannot move the output however
            // their score is rounded (a "lowest" mask value, say).
            if (pj > 0x1p-60) r.score_mag[row] = std::max(r.score_mag[row], mag[j]);
            l += pj;
            for (int x = 0; x < s_.dv; ++x) {
              acc[x] += pj * v(b, h / group, j, x);
              cond[x] += pj * std::fabs(v(b, h / group, j, x));
            }
          }
          for (int x = 0; x < s_.dv; ++x) {
            r.o[row * s_.dv + x] = acc[x] / l;
            r.cond[row * s_.dv + x] = cond[x] / l;
          }
          r.lse[row] = m + std::log(l);
        }
    return r;
  }

 private:
  // Element strides of a [b][h][s][x] tensor with `heads` heads, `seq` rows
  // and `width` columns in the spec's layout.
  void strides(int heads, int seq, int width, int64_t (&st)[4], int64_t* elements) const {
    const int64_t row = width + s_.row_gap;
    if (s_.layout == Layout::BHSD) {
      st[3] = 1; st[2] = row; st[1] = row * seq; st[0] = row * seq * heads;
    } else {
      st[3] = 1; st[1] = row; st[2] = row * heads; st[0] = row * heads * seq;
    }
    *elements = st[0] * s_.batch;
  }

  double generated(Tensor t, int b, int h, int s, int x, int width, double sigma) const {
    const CounterRng rng(s_.seed, uint64_t(t));
    const uint64_t counter = ((uint64_t(b) * 1024 + h) * 65536 + s) * 4096 + x;
    (void)width;
    double value = rng.normal(counter) * sigma;
    if (s_.value) value = s_.value(t, b, h, s, x, value);
    return round_to(s_.in, value);
  }

  // Allocates a tensor full of NaN and writes the valid rows.
  void fill(Tensor t, int heads, int seq, int width, const std::vector<int>& lens, double sigma,
            std::vector<uint8_t>& storage, std::vector<double>& logical, afz_tensor& out) {
    int64_t elements;
    out.dtype = s_.in;
    strides(heads, seq, width, out.stride, &elements);
    const bool broadcast = t != Tensor::Q && s_.kv_broadcast_heads;
    if (broadcast) {
      out.stride[1] = 0;
      if (s_.layout == Layout::BSHD) {
        out.stride[2] = width + s_.row_gap;
        out.stride[0] = out.stride[2] * seq;
      } else {
        out.stride[0] = out.stride[2] * seq;
      }
      elements = out.stride[0] * s_.batch;
    }
    const int sz = size_of(s_.in);
    storage.assign(std::max<int64_t>(elements, 1) * sz, 0);
    for (int64_t e = 0; e < elements; ++e) store_bits(s_.in, storage.data() + e * sz, quiet_nan_bits(s_.in));
    logical.assign(int64_t(s_.batch) * heads * seq * width, std::nan(""));
    for (int b = 0; b < s_.batch; ++b)
      for (int h = 0; h < heads; ++h)
        for (int s = 0; s < lens[b]; ++s)
          for (int x = 0; x < width; ++x) {
            const double value = generated(t, b, broadcast ? 0 : h, s, x, width, sigma);
            logical[((int64_t(b) * heads + h) * seq + s) * width + x] = value;
            const int64_t off = b * out.stride[0] + h * out.stride[1] + s * out.stride[2] + x * out.stride[3];
            store(s_.in, storage.data() + off * sz, value);
          }
    out.data = storage.data();
  }

  void build() {
    sq_ = 0;
    sk_ = 0;
    for (int b = 0; b < s_.batch; ++b) {
      sq_ = std::max(sq_, s_.seqlens_q[b]);
      sk_ = std::max(sk_, s_.seqlens_k[b]);
    }
    p_ = afz_problem{};
    p_.abi_version = AFZ_ABI_VERSION;
    p_.batch = s_.batch;
    p_.heads_q = s_.heads_q;
    p_.heads_kv = s_.heads_kv;
    p_.head_dim = s_.d;
    p_.head_dim_v = s_.dv;
    p_.max_seqlen_q = sq_;
    p_.max_seqlen_k = sk_;
    p_.seqlens_q = s_.seqlens_q.data();
    p_.seqlens_k = s_.seqlens_k.data();
    p_.scale = s_.scale != 0 ? s_.scale : float(1.0 / std::sqrt(double(s_.d)));
    p_.softcap = s_.softcap;
    p_.has_window = s_.has_window;
    p_.window_left = s_.window_left;
    p_.window_right = s_.window_right;
    p_.align = s_.align;
    fill(Tensor::Q, s_.heads_q, sq_, s_.d, s_.seqlens_q, s_.q_sigma, q_store_, lq_, p_.q);
    fill(Tensor::K, s_.heads_kv, sk_, s_.d, s_.seqlens_k, s_.k_sigma, k_store_, lk_, p_.k);
    fill(Tensor::V, s_.heads_kv, sk_, s_.dv, s_.seqlens_k, s_.v_sigma, v_store_, lv_, p_.v);

    int64_t elements;
    p_.o.dtype = s_.out;
    strides(s_.heads_q, sq_, s_.dv, p_.o.stride, &elements);
    o_.assign(std::max<int64_t>(elements, 1) * size_of(s_.out), 0);
    p_.o.data = o_.data();
    lse_.assign(std::max<int64_t>(int64_t(s_.batch) * s_.heads_q * sq_, 1), 0.0f);
    if (s_.with_lse) {
      p_.lse = lse_.data();
      p_.lse_stride[0] = int64_t(s_.heads_q) * sq_;
      p_.lse_stride[1] = sq_;
      p_.lse_stride[2] = 1;
    }
    // Masks: [b][h][i][j] with head stride 0; padding holds "keep" and NaN,
    // which only a kernel reading past the sequence would see.
    const int64_t plane = int64_t(sq_) * sk_;
    if (s_.bool_mask) {
      bool_.assign(std::max<int64_t>(plane * s_.batch, 1), 1);
      for (int b = 0; b < s_.batch; ++b)
        for (int i = 0; i < s_.seqlens_q[b]; ++i)
          for (int j = 0; j < s_.seqlens_k[b]; ++j) bool_[b * plane + int64_t(i) * sk_ + j] = s_.bool_mask(b, i, j);
      p_.bool_mask = afz_tensor{bool_.data(), AFZ_U8, {plane, 0, sk_, 1}};
    }
    if (s_.add_mask) {
      add_.assign(std::max<int64_t>(plane * s_.batch, 1), std::numeric_limits<float>::quiet_NaN());
      for (int b = 0; b < s_.batch; ++b)
        for (int i = 0; i < s_.seqlens_q[b]; ++i)
          for (int j = 0; j < s_.seqlens_k[b]; ++j) add_[b * plane + int64_t(i) * sk_ + j] = s_.add_mask(b, i, j);
      p_.add_mask = afz_tensor{add_.data(), AFZ_F32, {plane, 0, sk_, 1}};
    }
    poison_outputs();
  }

  ProblemSpec s_;
  int sq_ = 0, sk_ = 0;
  afz_problem p_{};
  std::vector<uint8_t> q_store_, k_store_, v_store_, o_;
  std::vector<double> lq_, lk_, lv_;
  std::vector<float> lse_;
  std::vector<uint8_t> bool_;
  std::vector<float> add_;
};

// Runs k on the problem; returns the kernel's error line ("" on success).
inline std::string run_kernel(const afz_kernel& k, TestProblem& t) {
  char error[256] = {0};
  if (k.run(&k, &t.problem(), error, sizeof error) != 0) return error[0] ? error : "failed without a message";
  return "";
}

}  // namespace afz::testing
