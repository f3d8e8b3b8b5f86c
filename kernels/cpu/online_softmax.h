// The online-softmax recurrence for a tile of rows (seed 002), in the shape of
// FlashAttention's hopper/softmax.h: per-row m and l, and methods that are the
// maths steps.  One query is a tile of one row (seed 000).
//
// Templated on the scalar T: the kernels run it in fp32 with P rounded to the
// input dtype before P.V; the seed-document tests run it in pure double.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/steps.h"

namespace afz::cpu {

// Rounding of P before the P.V product; the identity in pure-T runs.
struct KeepP {
  template <typename T>
  T operator()(T p) const { return p; }
};

template <typename T, class Steps = Fa2Steps>
struct OnlineSoftmax {
  int rows;
  std::vector<T> row_max;    // m: running max of the row's visible scores
  std::vector<T> row_sum;    // l: sum of exp(s - m) over them
  std::vector<T> row_scale;  // alpha of the latest block
  std::vector<T> row_ref;    // m_ref of the latest block (the guarded max)
  std::vector<T> next_max;   // scratch: m' of the block being consumed

  explicit OnlineSoftmax(int rows_)
      : rows(rows_), row_max(rows_, Steps::template initial_max<T>()), row_sum(rows_, T(0)),
        row_scale(rows_, T(1)), row_ref(rows_, T(0)), next_max(rows_) {}

  // Step 1: m' = max(m, rowmax S), m_ref = guard(m'), alpha = exp(m - m_ref).
  void max_get_scale(const T* S, int cols) {
    Steps::row_max(S, rows, cols, row_max.data(), next_max.data());
    for (int r = 0; r < rows; ++r) {
      row_ref[r] = Steps::reference(next_max[r]);
      row_scale[r] = Steps::rescale_factor(row_max[r], row_ref[r]);
      row_max[r] = next_max[r];
    }
  }

  // Step 2: S <- P = exp(S - m_ref) in place, l <- alpha l + rowsum(P).
  // l sums the unrounded P (FlashAttention-2's convention; only the P.V
  // operand is rounded to the input dtype).
  void online_softmax(T* S, int cols) {
    for (int r = 0; r < rows; ++r) {
      T* s = S + int64_t(r) * cols;
      T block_sum = T(0);
      for (int c = 0; c < cols; ++c) {
        s[c] = Steps::probability(s[c], row_ref[r]);
        block_sum = block_sum + s[c];
      }
      row_sum[r] = Steps::rescaled_sum(row_sum[r], row_scale[r], block_sum);
    }
  }

  // Step 3: A <- diag(alpha) A.
  void rescale_o(T* acc, int dv) const {
    for (int r = 0; r < rows; ++r) Steps::rescale_acc(acc + int64_t(r) * dv, dv, row_scale[r]);
  }

  // A row that saw no visible key has l = 0 (every P was exp(-inf) = 0).
  bool empty(int r) const { return row_sum[r] == T(0); }

  // Step 4: the natural-log LSE, -inf for an empty row (log 0).
  T lse(int r) const { return empty(r) ? kNegInf<T> : Steps::log_sum_exp(row_max[r], row_sum[r]); }
};

// A += round(P) V for P [rows x cols], V [cols x dv], A [rows x dv].
template <typename T, class RoundP>
void accumulate_pv(const T* P, int rows, int cols, const T* V, int dv, RoundP round_p, T* acc) {
  for (int r = 0; r < rows; ++r) {
    T* a = acc + int64_t(r) * dv;
    for (int c = 0; c < cols; ++c) {
      const T p = round_p(P[int64_t(r) * cols + c]);
      // Masked and underflowed entries add exactly nothing (V rows here are
      // valid keys, finite), so skipping them changes no bit.
      if (p == T(0)) continue;
      const T* v = V + int64_t(c) * dv;
      for (int x = 0; x < dv; ++x) a[x] = a[x] + p * v[x];
    }
  }
}

// The FA2 tile: state (m, l, A), one key block at a time, one division at the
// end.
template <typename T, class Steps = Fa2Steps>
struct TileAccumulator {
  OnlineSoftmax<T, Steps> softmax;
  int dv;
  std::vector<T> acc;  // A: unnormalised output, rows x dv

  TileAccumulator(int rows, int dv_) : softmax(rows), dv(dv_), acc(int64_t(rows) * dv_, T(0)) {}
  int rows() const { return softmax.rows; }

  // S: the block's scores [rows x cols], masked ones -inf; overwritten by P.
  template <class RoundP = KeepP>
  void consume(T* S, int cols, const T* V, RoundP round_p = {}) {
    softmax.max_get_scale(S, cols);
    softmax.online_softmax(S, cols);
    softmax.rescale_o(acc.data(), dv);
    accumulate_pv(S, rows(), cols, V, dv, round_p, acc.data());
  }

  // O = diag(l)^-1 A, and 0 for empty rows (0/0 would be NaN); lse may be null.
  void finalize(T* O, T* lse) const {
    for (int r = 0; r < rows(); ++r) {
      const bool empty = softmax.empty(r);
      for (int x = 0; x < dv; ++x) {
        const int64_t e = int64_t(r) * dv + x;
        O[e] = empty ? T(0) : Steps::normalised(acc[e], softmax.row_sum[r]);
      }
      if (lse) lse[r] = softmax.lse(r);
    }
  }
};

// FlashAttention-1's form: the output is kept normalised, so each block
// rescales it by l alpha / l' and adds P V / l' (a divide per element per
// block, which FA2 removed).  Same statistics as the FA2 tile.
template <typename T, class Steps = Fa2Steps>
struct NormalisedTile {
  OnlineSoftmax<T, Steps> softmax;
  int dv;
  std::vector<T> out;    // O, normalised after every block; rows x dv
  std::vector<T> pv;     // this block's round(P) V
  std::vector<T> l_old;  // l before this block

  NormalisedTile(int rows, int dv_)
      : softmax(rows), dv(dv_), out(int64_t(rows) * dv_, T(0)), pv(int64_t(rows) * dv_), l_old(rows) {}
  int rows() const { return softmax.rows; }

  template <class RoundP = KeepP>
  void consume(T* S, int cols, const T* V, RoundP round_p = {}) {
    l_old = softmax.row_sum;
    softmax.max_get_scale(S, cols);
    softmax.online_softmax(S, cols);
    std::fill(pv.begin(), pv.end(), T(0));
    accumulate_pv(S, rows(), cols, V, dv, round_p, pv.data());
    for (int r = 0; r < rows(); ++r) {
      const T l_new = softmax.row_sum[r];
      if (l_new == T(0)) continue;  // nothing visible yet: O stays 0 (0/0 would be NaN)
      const T ratio = Steps::normalised_ratio(l_old[r], softmax.row_scale[r], l_new);
      T* o = out.data() + int64_t(r) * dv;
      const T* add = pv.data() + int64_t(r) * dv;
      for (int x = 0; x < dv; ++x) o[x] = o[x] * ratio + add[x] / l_new;
    }
  }

  void finalize(T* O, T* lse) const {
    std::copy(out.begin(), out.end(), O);  // empty rows were never touched: 0
    if (lse)
      for (int r = 0; r < rows(); ++r) lse[r] = softmax.lse(r);
  }
};

// Split-KV (FlashDecoding): each split of the keys leaves a partial
// (m, l, A) for the same rows; the merge references them all to the largest
// m with the rescaling rule.  Splits that saw no key have m = -inf and l = 0.
template <typename T, class Steps = Fa2Steps>
void merge_splits(const std::vector<TileAccumulator<T, Steps>>& parts, T* O, T* lse) {
  const int rows = parts.front().rows(), dv = parts.front().dv;
  for (int r = 0; r < rows; ++r) {
    T m = kNegInf<T>;
    for (const auto& part : parts) m = std::max(m, part.softmax.row_max[r]);
    // Every split empty: m = -inf, and exp(-inf - (-inf)) would be NaN.
    const T m_ref = Steps::reference(m);
    T l = T(0);
    T* o = O + int64_t(r) * dv;
    std::fill(o, o + dv, T(0));
    for (const auto& part : parts) {
      const T w = Steps::merge_factor(part.softmax.row_max[r], m_ref);
      l = l + w * part.softmax.row_sum[r];
      const T* a = part.acc.data() + int64_t(r) * dv;
      for (int x = 0; x < dv; ++x) o[x] = o[x] + w * a[x];
    }
    const bool empty = l == T(0);
    for (int x = 0; x < dv; ++x) o[x] = empty ? T(0) : Steps::normalised(o[x], l);
    if (lse) lse[r] = empty ? kNegInf<T> : Steps::log_sum_exp(m, l);
  }
}

}  // namespace afz::cpu
