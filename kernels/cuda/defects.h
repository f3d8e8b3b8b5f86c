// The one defect a GPU mutant is built with.  The kernels are templates over
// this enum, so a mutant is the same source with exactly one line changed
// (each `if constexpr (kDefect == ...)` below marks that line); the correct
// kernels are Defect::None.
#pragma once

namespace afz::cuda {

enum class Defect {
  None,
  NoAccRescale,           // l is rescaled by alpha, the accumulator is not
  MInitZero,              // running max starts at 0 instead of -inf
  NoEmptyRowGuard,        // no m_ref = 0 for rows whose running max is -inf: -inf - (-inf) = NaN
  PartialBlockUnmasked,   // keys past seqlen_k in the last, partial block take part
  CausalOffByOne,         // the right edge of the causal / window band admits one key too many
  SplitMergeNoRescale,    // split-KV partials merged without exp(m_s - M) (merge kernel only)
};

}  // namespace afz::cuda
