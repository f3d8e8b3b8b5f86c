// The steps of the online-softmax recurrence, one small static function each.
//
// Every CPU kernel is a template over a Steps type; Fa2Steps is the correct
// recurrence of the seed documents.  A mutant (kernels/mutants) derives from
// Fa2Steps and hides exactly one function, so each defect is a few lines
// against the known-good kernel, e.g. the missing m_ref guard:
//
//     struct NoGuardSteps : Fa2Steps {
//       template <typename T> static T reference(T m) { return m; }
//     };
//     ... run = tiled_entry<NoGuardSteps> ...
//
// The functions are templates on the scalar T so the same steps run in fp32
// inside the kernels and in pure double in the seed-document tests.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace afz::cpu {

template <typename T>
inline constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// A window bound that no key index reaches: a negative window side means
// "unbounded", and comparing against this keeps the test branch-free.
inline constexpr int64_t kUnboundedKey = int64_t{1} << 40;

struct Fa2Steps {
  // ---- scores --------------------------------------------------------------

  template <typename T>
  static T scaled_score(T qk, T scale) { return qk * scale; }

  template <typename T>
  static T softcapped(T s, T cap) { return cap * std::tanh(s / cap); }

  // The ABI's window: key j is visible to query i iff
  //   i + offset - left <= j <= i + offset + right,
  // offset = 0 (top-left) or seqlen_k - seqlen_q (bottom-right).
  static int64_t first_visible_key(int64_t i, int64_t offset, int64_t left) {
    return left < 0 ? -kUnboundedKey : i + offset - left;
  }
  static int64_t last_visible_key(int64_t i, int64_t offset, int64_t right) {
    return right < 0 ? kUnboundedKey : i + offset + right;
  }

  // How many keys the block starting at j0 covers.  A partial last block
  // stops at seqlen_k: the padding behind it holds poison.  (allocated_k is
  // where memory ends; only a defective kernel reads up to it.)
  static int block_keys(int64_t j0, int block, int seqlen_k, int /*allocated_k*/) {
    return int(std::min<int64_t>(block, seqlen_k - j0));
  }

  // ---- statistics ----------------------------------------------------------

  // m starts at -inf: the max of nothing.  Starting at 0 would clamp every
  // all-negative row's reference to 0 and underflow its exponentials.
  template <typename T>
  static T initial_max() { return kNegInf<T>; }

  // m' = max(m, rowmax(S)), each row on its own: a shared tile max would be
  // exact in exact arithmetic but underflows rows far below the tile max.
  template <typename T>
  static void row_max(const T* S, int rows, int cols, const T* m_old, T* m_new) {
    for (int r = 0; r < rows; ++r) {
      T m = m_old[r];
      for (int c = 0; c < cols; ++c) m = std::max(m, S[r * cols + c]);
      m_new[r] = m;
    }
  }

  // The m_ref guard: a row that has seen no visible key still has m = -inf,
  // and -inf - (-inf) is NaN, which would reach alpha, P, l and the
  // accumulator for good.  Referencing such a row to 0 gives alpha = exp(-inf)
  // = 0 and P = exp(-inf) = 0: the correct empty contribution.
  template <typename T>
  static T reference(T m_new) { return m_new == kNegInf<T> ? T(0) : m_new; }

  // alpha = exp(m_old - m_ref): 1 when the max did not move, 0 on a row's
  // first visible block (m_old = -inf).
  template <typename T>
  static T rescale_factor(T m_old, T m_ref) { return std::exp(m_old - m_ref); }

  // P = exp(s - m_ref) <= 1: never overflows, whatever |s|.  Masked scores
  // are -inf and give exactly 0.
  template <typename T>
  static T probability(T s, T m_ref) { return std::exp(s - m_ref); }

  // l' = alpha l + rowsum(P), in T (fp32 in the kernels: in bf16 an
  // increment of 1 rounds away once l passes 256).
  template <typename T>
  static T rescaled_sum(T l, T alpha, T block_sum) { return alpha * l + block_sum; }

  // A' = diag(alpha) A: every term already in the accumulator was referenced
  // to the old max, exactly like the terms of l.
  template <typename T>
  static void rescale_acc(T* acc_row, int n, T alpha) {
    for (int x = 0; x < n; ++x) acc_row[x] = acc_row[x] * alpha;
  }

  // FA2: one division per output element, after the last block.
  template <typename T>
  static T normalised(T acc, T l) { return acc / l; }

  // Natural log: the backward pass recomputes P = exp(S - LSE).
  template <typename T>
  static T log_sum_exp(T m, T l) { return m + std::log(l); }

  // ---- FA1: the output is kept normalised -----------------------------------

  // O' = (l alpha / l') O + P V / l': the old output was divided by l, which
  // the new block turns into alpha l.
  template <typename T>
  static T normalised_ratio(T l_old, T alpha, T l_new) { return l_old * alpha / l_new; }

  // ---- split-KV merge ------------------------------------------------------

  // Weight of a split's (l, acc) referenced to the merged max: the same
  // rescaling rule across splits.  An empty split has m = -inf: weight 0.
  template <typename T>
  static T merge_factor(T m_split, T m_ref) { return std::exp(m_split - m_ref); }
};

}  // namespace afz::cpu
