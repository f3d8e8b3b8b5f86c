// How every oracle tier reads an afz_problem: one implementation of the
// semantics, so that the three tiers can only differ in their arithmetic.
//
//   * rows r = (b * heads_q + h) * max_seqlen_q + i; query i of sequence b
//     exists iff i < seqlens_q[b] (padding rows are empty);
//   * key j is visible to it iff j < seqlens_k[b], it lies in the causal /
//     sliding-window band (attnfuzz_kernel.h: with offset 0 for top-left or
//     seqlens_k[b] - seqlens_q[b] for bottom-right alignment,
//     i + offset - window_left <= j <= i + offset + window_right, a negative
//     side unbounded), the boolean mask is nonzero there (when given), and
//     the additive mask there is not -inf (exp(-inf) is exactly 0);
//   * GQA: query head h reads key/value head h / (heads_q / heads_kv);
//   * the additive mask is added after the softcap.
// Elements are read through the problem's pointers and strides with
// afz::load, so the oracles see exactly the bits the kernel sees.  Inputs
// are never read outside the valid region: the harness poisons it.
//
// Malformed problems and non-finite inputs on a visible path throw
// std::invalid_argument with a one-line message; the exact result of
// attention over an Inf or NaN input is undefined, so no oracle guesses one.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/abi/attnfuzz_kernel.h"
#include "oracles/oracle.h"

namespace afz::oracle_detail {

// One query row: its result index and coordinates.
struct RowId {
  int64_t r = 0;
  int b = 0, h = 0, i = 0;
};

class ProblemView {
 public:
  explicit ProblemView(const afz_problem& p);  // validates, throws std::invalid_argument

  const afz_problem& problem() const { return p_; }
  int64_t rows() const { return int64_t(p_.batch) * p_.heads_q * p_.max_seqlen_q; }
  RowId row(int64_t r) const;
  int kv_head(int h) const { return h / group_; }
  int head_dim() const { return p_.head_dim; }
  int head_dim_v() const { return p_.head_dim_v; }
  double scale() const { return p_.scale; }
  double softcap() const { return p_.softcap; }
  int seqlen_k(int b) const { return p_.seqlens_k[b]; }

  // The keys row `id` sees, ascending, with their additive-mask values (0
  // without a mask).  Empty for padding rows and fully masked rows.
  void visible_keys(const RowId& id, std::vector<int32_t>& keys, std::vector<double>& add) const;
  // q[b][h][i][0, d) into out[0, d); throws if an element is not finite.
  void load_q(const RowId& id, double* out) const;

  // Sizes `out` for this problem (every row empty until computed).
  void prepare(OracleResult& out) const;
  // compute_rows: `out` must have this problem's shape and every listed row
  // must exist; throws std::invalid_argument otherwise.
  void check_rows(const OracleResult& out, const std::vector<int64_t>& rows) const;

 private:
  const afz_problem& p_;
  int group_ = 1;
};

// K and V of one (sequence, kv head), copied into contiguous row-major float
// arrays: every supported input dtype (fp32, fp16, bf16, e4m3) is a subset
// of fp32, so the copy is exact and halves the memory traffic of doubles.
// Rows are padded with zeros to a multiple of `pad` elements (zeros add
// nothing to a dot product).  Loading is skipped when the head is already
// there, which is the common case: the rows of a head, and the heads of a
// GQA group, come one after another.
class KvCache {
 public:
  KvCache(const ProblemView& view, int pad);
  void load(int b, int hk);
  const float* k(int j) const { return k_.data() + int64_t(j) * k_stride_; }
  const float* v(int j) const { return v_.data() + int64_t(j) * v_stride_; }
  int k_stride() const { return k_stride_; }
  int v_stride() const { return v_stride_; }
  // Throws unless row j of both K and V is finite (checked only for keys
  // that some row sees: a masked key's value is irrelevant).
  void require_finite(int j) const;

 private:
  const ProblemView& view_;
  int k_stride_, v_stride_;
  int b_ = -1, hk_ = -1;
  std::vector<float> k_, v_;
  std::vector<uint8_t> finite_;
};

// sigma_j without the mask and softcap terms: scale * sum_x |q_x k_x|, in
// double (a bound's coefficient, so a relative error of d u is immaterial).
double scaled_abs_dot(const double* q, const float* k, int d, double scale);

// The verdict's condition terms of one row, accumulated in double from the
// normalized weights w_j = exp(s_j - m) / l of whichever tier computed them.
class CondTerms {
 public:
  void begin(int dv);
  // A visible key with weight w (possibly 0 after underflow), sigma_j and |s_j|.
  void add_key(double w, double sigma, double abs_score, const float* v);
  // Writes cond, cond_score, cond_tiny (dividing sum|v_j| by l), the row
  // terms and the key count.
  void finish(double l, int64_t r, OracleResult& out) const;

 private:
  int dv_ = 0, n_ = 0;
  std::vector<double> cond_, cond_score_, abs_v_;
  double lse_cond_score_ = 0, max_abs_score_ = 0, max_sigma_ = 0;
  double max_w_ = -1;  // w_j = exp(s_j - m) / l is largest where s_j is
  int max_key_ = -1;
};

// Writes row r as empty: o = 0 exactly, lse = -inf, no keys, no error.
void write_empty_row(OracleResult& out, int64_t r);

}  // namespace afz::oracle_detail
