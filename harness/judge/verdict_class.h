// The verdict classes, on their own so that code built for the GPU
// (harness/judge/verdict_steps.h) can name them without the host headers.
#pragma once

namespace afz {

// Ordered by severity: a case's class is the most severe one found.
enum class VerdictClass {
  Pass,
  Unsupported,       // the kernel declined: never a failure
  NumericMismatch,   // an element beyond its bound
  NanInf,            // NaN or Inf where the oracle is finite
  SemanticMismatch,  // masked row not per convention, LSE convention broken
  Unwritten,         // poison survived in the output
  OutOfBounds,       // wrote outside the valid output (padding, guards)
  Nondeterministic,  // a second run differs bit-wise
  Crash,             // the kernel reported an error, faulted or died
  Hang,              // exceeded the per-case time limit
};
inline constexpr int kVerdictClasses = int(VerdictClass::Hang) + 1;

}  // namespace afz
