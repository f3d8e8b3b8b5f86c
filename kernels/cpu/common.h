// What every CPU kernel shares: reading an afz_problem (strided tensors of any
// input dtype, seqlens, GQA, window, masks), scoring a tile of (query, key)
// pairs with tensor-core precision, and writing O and LSE.
//
// Precision emulated (declared in kEmulatedPrecision):
//   inputs are dtype values, loaded exactly into fp32;
//   s = fp32(q.k) accumulated in fp32 in key order, times scale in fp32,
//       softcap c tanh(s / c) in fp32, then + the additive mask (fp32);
//   P = exp(s - m) in fp32; l sums that fp32 P; P is rounded to V's dtype
//       before the P.V product (a tensor-core GEMM takes P in the input dtype);
//       the product of two fp16 / bf16 values is exact in fp32;
//   m, l and the accumulator are fp32; O = acc / l rounded once to O's dtype;
//   LSE = m + log(l) in fp32.
#pragma once
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "kernels/abi/attnfuzz_kernel.h"
#include "kernels/abi/dtype.h"
#include "kernels/cpu/steps.h"

namespace afz::cpu {

inline constexpr afz_caps kEmulatedCaps = {
    AFZ_CAP_CAUSAL_TOP_LEFT | AFZ_CAP_CAUSAL_BOTTOM_RIGHT | AFZ_CAP_WINDOW | AFZ_CAP_BOOL_MASK |
        AFZ_CAP_ADD_MASK | AFZ_CAP_VARLEN | AFZ_CAP_GQA | AFZ_CAP_SOFTCAP | AFZ_CAP_LSE |
        AFZ_CAP_STRIDED | AFZ_CAP_DV_NE_D,
    (1u << AFZ_F32) | (1u << AFZ_F16) | (1u << AFZ_BF16),
    (1u << AFZ_F32) | (1u << AFZ_F16) | (1u << AFZ_BF16),
    /*min_head_dim=*/1, /*max_head_dim=*/1024, /*head_dim_multiple=*/1,
    /*max_seqlen=*/0};

// glibc's expf is within 1 ulp.
inline constexpr afz_precision kEmulatedPrecision = {AFZ_F32, AFZ_P_DTYPE_OF_V, AFZ_F32,
                                                     /*exp_ulps=*/1.0f, /*flush_subnormals=*/0,
                                                     /*l_from_unrounded_p=*/1};

inline constexpr afz_conventions kEmulatedConventions = {AFZ_MASKED_ROW_ZERO,
                                                         AFZ_EMPTY_LSE_NEG_INF};

using RunFn = int (*)(const afz_kernel*, const afz_problem*, char*, size_t);

// An afz_kernel with the emulating kernels' caps, precision and conventions;
// `config` (the kernel's block sizes) is handed back through self->user.
afz_kernel emulating_kernel(const char* name, const char* description, RunFn run,
                            const void* config);

// Copies msg into the ABI's (buf, len) error channel as one line.
void write_message(char* buf, size_t len, const std::string& msg);

// Why a problem is malformed (null pointers, heads not divisible, a seqlen
// outside its extent...), or "" when a kernel can run it.
std::string problem_error(const afz_problem& p);

// Runs body() after validating the problem; turns a malformed problem or an
// exception (out of memory) into the ABI's "return 1 and one line".
template <class Body>
int guarded_run(const afz_problem* p, char* error, size_t error_len, Body body) {
  if (!p) {
    write_message(error, error_len, "null problem");
    return 1;
  }
  if (std::string why = problem_error(*p); !why.empty()) {
    write_message(error, error_len, why);
    return 1;
  }
  try {
    body(*p);
  } catch (const std::exception& e) {
    write_message(error, error_len, e.what());
    return 1;
  }
  return 0;
}

// The element [b][h][s][x] of t, in elements from t.data.
inline int64_t element_offset(const afz_tensor& t, int64_t b, int64_t h, int64_t s, int64_t x) {
  return b * t.stride[0] + h * t.stride[1] + s * t.stride[2] + x * t.stride[3];
}

// n elements along the last dimension, loaded exactly into fp32 (fp32, fp16
// and bf16 values are all fp32 values).
void load_row(const afz_tensor& t, int64_t b, int64_t h, int64_t s, int n, float* out);

// Exact fp16 / bf16 -> fp32 from the bits (the kernels' hot loads; dtype.h's
// load() is the reference they are tested against).
inline float bf16_to_float(uint16_t h) { return float_of(uint32_t(h) << 16); }
float f16_to_float(uint16_t h);

// fp32 -> the nearest fp16 / bf16 value (ties to even), returned as fp32:
// what a kernel's cvt of P does before the P.V GEMM.  Equal to
// round_to(t, double(x)) for every x, which the tests check.
float round_float_to_bf16(float x);
float round_float_to_f16(float x);

// P before the P.V product: rounded to V's dtype (identity for fp32).
struct RoundPTo {
  afz_dtype dtype;
  float operator()(float p) const {
    switch (dtype) {
      case AFZ_F32: return p;
      case AFZ_BF16: return round_float_to_bf16(p);
      case AFZ_F16: return round_float_to_f16(p);
      default: return float(round_to(dtype, double(p)));
    }
  }
};

// One (sequence b, query head h) of a problem: its lengths, its KV head, the
// window offset of its alignment, and access to its rows.
struct HeadView {
  const afz_problem& p;
  int b, h, kv_head;
  int seqlen_q, seqlen_k;
  int64_t offset;  // 0 top-left, seqlen_k - seqlen_q bottom-right

  HeadView(const afz_problem& p, int b, int h);

  void load_q(int i, float* out) const { load_row(p.q, b, h, i, p.head_dim, out); }
  void load_k(int64_t j, float* out) const { load_row(p.k, b, kv_head, j, p.head_dim, out); }
  void load_v(int64_t j, float* out) const { load_row(p.v, b, kv_head, j, p.head_dim_v, out); }
  // count consecutive rows from s0 into out [count x n].
  void load_q_rows(int i0, int count, float* out) const;
  void load_kv_rows(int64_t j0, int count, float* k_out, float* v_out) const;

  // Visible keys of query i, clamped to the sequence: [first, last], maybe empty.
  template <class Steps = Fa2Steps>
  int64_t first_key(int64_t i) const {
    if (!p.has_window) return 0;
    return std::max<int64_t>(0, Steps::first_visible_key(i, offset, p.window_left));
  }
  template <class Steps = Fa2Steps>
  int64_t last_key(int64_t i) const {
    if (!p.has_window) return seqlen_k - 1;
    return std::min<int64_t>(seqlen_k - 1, Steps::last_visible_key(i, offset, p.window_right));
  }

  // The window and the boolean mask (nonzero keeps the key); the window test
  // is not clamped to the sequence, so a kernel that iterates past seqlen_k
  // sees what lies there.
  template <class Steps = Fa2Steps>
  bool visible(int64_t i, int64_t j) const {
    if (p.has_window && (j < Steps::first_visible_key(i, offset, p.window_left) ||
                         j > Steps::last_visible_key(i, offset, p.window_right)))
      return false;
    return !p.bool_mask.data || mask_keeps(i, j);
  }
  bool mask_keeps(int64_t i, int64_t j) const;
  float add_mask(int64_t i, int64_t j) const;

  // The score of (i, j) with the emulated precision, -inf when masked.
  template <class Steps = Fa2Steps>
  float score(int64_t i, int64_t j, const float* q, const float* k) const {
    if (!visible<Steps>(i, j)) return kNegInf<float>;
    float qk = 0.0f;
    for (int x = 0; x < p.head_dim; ++x) qk = qk + q[x] * k[x];
    float s = Steps::scaled_score(qk, p.scale);
    if (p.softcap != 0.0f) s = Steps::softcapped(s, p.softcap);
    if (p.add_mask.data) s = s + add_mask(i, j);  // after the softcap, as documented
    return s;
  }

  // S [rows x cols] for queries i0.. (Q [rows x d]) and keys j0.. (K [cols x d]).
  template <class Steps = Fa2Steps>
  void score_tile(int i0, int rows, const float* Q, int64_t j0, int cols, const float* K,
                  float* S) const {
    const int d = p.head_dim;
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c)
        S[int64_t(r) * cols + c] = score<Steps>(i0 + r, j0 + c, Q + int64_t(r) * d, K + int64_t(c) * d);
  }

  // O row i (dv values, rounded to O's dtype) and its LSE (if p.lse).
  void store_row(int i, const float* o, float lse) const;

  RoundPTo round_p() const { return RoundPTo{p.v.dtype}; }
};

// Key blocks a query tile [i0, i0 + rows) must visit, block boundaries at
// multiples of `block` from key 0 as in real kernels: blocks that the
// window leaves empty for every row of the tile are skipped (that skip is
// where causal attention gets close to 2x).  [first, end) in block indices.
template <class Steps = Fa2Steps>
void tile_key_blocks(const HeadView& view, int i0, int rows, int block, int64_t* first,
                     int64_t* end) {
  const int64_t lo = view.first_key<Steps>(i0);
  const int64_t hi = view.last_key<Steps>(int64_t(i0) + rows - 1);
  if (rows <= 0 || view.seqlen_k <= 0 || hi < lo) {
    *first = *end = 0;
    return;
  }
  *first = lo / block;
  *end = hi / block + 1;
}

}  // namespace afz::cpu
