// Judging a kernel's outputs against the oracle, element by element.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "harness/case/materialize.h"
#include "harness/judge/error_stats.h"
#include "harness/judge/row_sample.h"
#include "harness/judge/verdict_class.h"
#include "kernels/abi/attnfuzz_kernel.h"
#include "oracles/oracle.h"

namespace afz {

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

// The steps judge() takes, for verdicts assembled elsewhere (gpu_verdict.h).
// The rows (ascending result rows) among `rows` whose elements the oracle's
// own error leaves undecided (to escalate).
std::vector<int64_t> undecided_rows(const afz_kernel& k, const Materialized& m, const OracleResult& r,
                                    const std::vector<int64_t>& rows);
// The listed rows (ascending) judged as they stand: no escalation, no coverage.
Verdict judge_rows(const afz_kernel& k, const Materialized& m, const OracleResult& r, const std::vector<int64_t>& rows);
// Appends a sampled verdict's coverage to its detail line.
void note_coverage(Verdict& v);

}  // namespace afz
