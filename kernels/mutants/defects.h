// The defects of the mutant zoo: each a Steps type that derives from the
// correct Fa2Steps (kernels/cpu/steps.h) and hides the one step it gets
// wrong.  The kernels, the tile loop and the statistics code are the
// reference kernels' own, instantiated on these types (mutant_kernels.cpp),
// so a mutant differs from its parent in exactly the lines below.
//
// Every defect is a "common mistake" of the seed documents
// (../shared/seeds/000_*.txt, 002_*.txt) or a classic of real kernels; the
// comment of each says what breaks and which inputs show it, which is what
// the generators must produce for `attnfuzz mutants` to kill it.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/abi/dtype.h"
#include "kernels/cpu/steps.h"

namespace afz::mutants {

using cpu::Fa2Steps;
using cpu::kNegInf;

// Seed 000: "Rescaling l but not the accumulator".  Terms already in A stay
// referenced to the old max: the output is wrong by a factor that depends on
// block order, on rows whose max arrives after their first block.
struct AccNotRescaled : Fa2Steps {
  template <typename T>
  static void rescale_acc(T*, int, T) {}
};

// The mirror image: A is rescaled, l is not.  The old blocks' weight in l
// stays referenced to the old max, so every later max inflates the sum.
struct SumNotRescaled : Fa2Steps {
  template <typename T>
  static T rescaled_sum(T l, T, T block_sum) { return l + block_sum; }
};

// Seed 000: "Initializing m = 0 instead of -inf".  The reference never drops
// below 0, so a row whose scores all lie below fp32's exp underflow (about
// -87) gets P = 0 everywhere, l = 0, and comes out as an empty row.
struct MaxStartsAtZero : Fa2Steps {
  template <typename T>
  static T initial_max() { return T(0); }
};

// Seed 002: the missing m_ref guard.  A row that has seen no visible key yet
// (a window or mask empties the tile's first block for it) computes
// -inf - (-inf) = NaN for alpha and P, and the NaN stays in l and A.
// Plain causal attention from position 0 never triggers it.
struct NoMRefGuard : Fa2Steps {
  template <typename T>
  static T reference(T m_new) { return m_new; }
};

// Seed 002: "leaving NaN handling to the final division, after the NaN has
// already reached the accumulator".  No m_ref guard, but a NaN l is taken
// for an empty row at the end (O = 0, LSE = -inf).  That repairs rows with
// no visible key at all, so fully masked rows no longer show the defect;
// rows that see nothing in the tile's first key block and something later
// still lose every key (alpha = 0 times NaN is NaN) and come out as 0.
struct NanFixedAtEnd : NoMRefGuard {
  template <typename T>
  static T normalised(T acc, T l) { return std::isnan(l) ? T(0) : Fa2Steps::normalised(acc, l); }
  template <typename T>
  static T log_sum_exp(T m, T l) { return std::isnan(l) ? kNegInf<T> : Fa2Steps::log_sum_exp(m, l); }
};

// Seed 002: "one scalar max for the whole tile".  Exact in exact arithmetic,
// but a row far below the tile's max underflows: exp(s - M) = 0 for every
// key, l = 0, the row comes out empty.  Needs rows of very different scale
// inside one query tile.
struct OneMaxPerTile : Fa2Steps {
  template <typename T>
  static void row_max(const T* S, int rows, int cols, const T* m_old, T* m_new) {
    T tile_max = kNegInf<T>;
    for (int r = 0; r < rows; ++r) {
      tile_max = std::max(tile_max, m_old[r]);
      for (int c = 0; c < cols; ++c) tile_max = std::max(tile_max, S[r * cols + c]);
    }
    for (int r = 0; r < rows; ++r) m_new[r] = tile_max;
  }
};

// Seed 002: "dividing by l inside the loop and then rescaling the normalized
// output by the wrong ratio" (FA1 done wrong): the old output is rescaled by
// alpha alone, forgetting that it was divided by the old l, not the new one.
struct Fa1WrongRatio : Fa2Steps {
  template <typename T>
  static T normalised_ratio(T, T alpha, T) { return alpha; }
};

// Seed 002: "why is l kept in FP32": the running sum rounded to bf16 after
// every update.  8 significant bits: past 256 an increment of 1 rounds away,
// and every update costs up to 2^-9 of l, which the fp32 LSE shows at once.
struct SumInBf16 : Fa2Steps {
  template <typename T>
  static T rescaled_sum(T l, T alpha, T block_sum) {
    return T(round_to(AFZ_BF16, double(Fa2Steps::rescaled_sum(l, alpha, block_sum))));
  }
};

// Seed 000: softmax without the max subtraction.  P = exp(s) and nothing is
// ever rescaled (the reference is always 0, so alpha = 1 and the LSE is
// log l); exact while exp(s) stays finite and normal, but past fp32's
// overflow (s > 88.7) it is Inf / Inf = NaN, past fp16's (s > 11.09) the P
// rounded for the P.V product is Inf, and rows below -87 underflow to empty.
struct NoMaxSubtraction : Fa2Steps {
  template <typename T>
  static T reference(T) { return T(0); }
  template <typename T>
  static T rescale_factor(T, T) { return T(1); }
  template <typename T>
  static T log_sum_exp(T, T l) { return std::log(l); }
};

// Seed 002: "testing only with N a multiple of the block size": the last
// key block is loaded in full, up to the allocated extent (max seqlen of
// the batch) instead of the sequence's own length.  The keys past seqlen_k
// are padding, which the harness poisons with NaN or Inf.
struct PartialBlockUnmasked : Fa2Steps {
  static int block_keys(int64_t j0, int block, int /*seqlen_k*/, int allocated_k) {
    return int(std::min<int64_t>(block, allocated_k - j0));
  }
};

// The causal (and window) right edge one key too far: query i also sees key
// i + offset + right + 1, the first key of its future.
struct CausalOffByOne : Fa2Steps {
  static int64_t last_visible_key(int64_t i, int64_t offset, int64_t right) {
    return Fa2Steps::last_visible_key(i, offset, right < 0 ? right : right + 1);
  }
};

// The softmax scale (1/sqrt(d) by default) never applied: scores are q.k.
struct ScaleDropped : Fa2Steps {
  template <typename T>
  static T scaled_score(T qk, T) { return qk; }
};

// The LSE in log2 units (what an exp2-based kernel keeps internally) handed
// out as if it were natural: the backward pass's exp(S - LSE) is then wrong.
struct LseInLog2 : Fa2Steps {
  template <typename T>
  static T log_sum_exp(T m, T l) {
    constexpr T kLog2e = T(1.4426950408889634);  // log2(e): converts m to log2 units
    return m * kLog2e + std::log2(l);
  }
};

// exp2 where exp belongs, without folding log2(e) into the scale (the
// FlashAttention trick is exp2(s log2 e - m log2 e)): a softmax of s ln 2,
// too flat by a factor ln 2 in every score difference.
struct Exp2WithoutLog2e : Fa2Steps {
  template <typename T>
  static T rescale_factor(T m_old, T m_ref) { return std::exp2(m_old - m_ref); }
  template <typename T>
  static T probability(T s, T m_ref) { return std::exp2(s - m_ref); }
};

// Seed 000's split-KV merge without the rescaling rule: every split's (l, A)
// is added with weight 1, as if all splits shared one max.
struct MergeWithoutRescale : Fa2Steps {
  template <typename T>
  static T merge_factor(T, T) { return T(1); }
};

}  // namespace afz::mutants
