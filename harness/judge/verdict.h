// Judging a kernel's outputs against the oracle, element by element.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "harness/case/materialize.h"
#include "harness/judge/error_stats.h"
#include "harness/judge/row_sample.h"
#include "kernels/abi/attnfuzz_kernel.h"
#include "oracles/oracle.h"

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
std::string_view verdict_name(VerdictClass c);
bool is_failure(VerdictClass c);

struct WorstElement {
  bool valid = false;
  bool is_lse = false;
  int b = 0, h = 0, i = 0, x = 0;
  double kernel = 0, oracle = 0;
  double error = 0, bound = 0;
  double ulps = 0;          // error in ulps of the output dtype at the oracle value
  double over_bound = 0;    // error / bound
  // A backward gradient ("dq", "dk", "dv"; i is its row s, x its column);
  // empty: o, or the LSE where is_lse.
  std::string tensor;
  std::string format() const;  // one line, hex floats where bits matter
};

struct Verdict {
  VerdictClass cls = VerdictClass::Pass;
  std::string detail;       // one line
  WorstElement worst;       // the element with the largest error / bound
  int64_t elements = 0, failing = 0, escalated_rows = 0;
  double max_over_bound = 0;
  double max_abs_error = 0; // for FlashAttention's own rule, reported beside ours
  // Error statistics of every judged element (error_stats.h): O in its
  // output dtype, the LSE in fp32.  Reports add them up per kernel.
  afz_dtype o_dtype = AFZ_F32;
  ErrorSeries o_stats, lse_stats;
  // A backward verdict's per-element error / bound of dQ, dK, dV (in the
  // order of kGradientNames; ulps of fp32 at the element), for the report's
  // "dq", "dk", "dv" series.
  std::array<ErrorSeries, 3> grad_stats;
  // Which rows were judged: all, or a sample (row_sample.h) whose coverage
  // every statement about the case must quote.
  RowCoverage coverage;
};

// The gradients of a backward verdict, as WorstElement::tensor names them.
inline constexpr std::array<std::string_view, 3> kGradientNames = {"dq", "dk", "dv"};

// Compares the kernel's outputs in m with oracle r.  Rows the fast tier
// cannot decide are recomputed with `escalate` (may be null).  With
// `sampling` active only the rows checked_rows() picks are judged (and r
// need hold only those); the verdict's coverage says which.
Verdict judge(const afz_kernel& k, const Materialized& m, OracleResult& r, const Oracle* escalate,
              const RowSampling& sampling = {});

}  // namespace afz
