// One case through one backward kernel, and the backward mutant gate.
//
// The backward path: materialize the case, run the backward ORACLE first
// (it computes the exact forward O and LSE on the way), hand the kernel
// that O rounded to the output dtype and the LSE rounded to fp32
// (backward_problem.h says why not a forward kernel's outputs), run it, and
// judge dQ, dK, dV element by element.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/case/case.h"
#include "harness/case/generators.h"
#include "harness/judge/verdict.h"
#include "harness/run/runner.h"
#include "oracles/backward_oracle.h"

namespace afz {

// As RunOptions::timeout_s for the forward.
inline constexpr double kDefaultBackwardTimeoutS = 60;

struct BackwardOutcome {
  Verdict verdict;
  std::string oracle;  // the tier whose result was judged
  Timing timing;
  bool reran = false;  // the kernel ran a second time to check its bits
};

// What run_backward_case throws when the backward oracle refuses the
// inputs (it takes finite inputs only: the gradients of inf do not exist).
struct NoExactGradients : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws std::runtime_error with a one-line message for unbuildable cases,
// NoExactGradients where the backward oracle refuses the inputs.  With `rerun`, a run that
// passes runs again on the same inputs and must give identical dQ, dK, dV
// bits, unless the kernel declares AFZ_CAP_NONDETERMINISTIC (atomics).
// A kernel with AFZ_CAP_GPU runs in this thread's worker process (harness/
// run/gpu): device pointers, guard margins, `timeout_s` before a hang verdict.
// With `dump_dir`, the case's tensors, the exact gradients and (where the
// kernel ran) the kernel's first-run gradients go there as .npy files
// (harness/case/tensor_dump.h), before the judge.
BackwardOutcome run_backward_case(const afz_backward_kernel& k, const Case& c, const BackwardOracle& oracle,
                                  const BackwardOracle* escalate, bool rerun = false,
                                  double timeout_s = kDefaultBackwardTimeoutS, const std::string& dump_dir = "");

// The gradient a backward failure is in: "dq", "dk" or "dv", the one its
// detail names (the judge's details start with the element or tensor,
// "dv[b=0 h=1 s=3 x=2] ..." or "dk written in padding ..."), else that of
// the worst element; "" when neither names one (a crash, a hang).
std::string failing_gradient(const Verdict& v);

struct BackwardGateRow {
  std::string kernel;
  bool killed = false, expected_kill = true;
  int64_t cases = 0;  // to the kill (inclusive), else cases run
  std::string verdict, detail, case_text;
};

// `attnfuzz mutants --pass bwd`'s core: each backward mutant against
// generated cases (`mix`, by default the backward default mix: the forward
// classes and the backward ones; seed `seed`) until the first failure or
// `budget` cases.
std::vector<BackwardGateRow> run_backward_gate(uint64_t seed, int64_t budget,
                                               const GeneratorMix& mix = GeneratorMix::defaults(Pass::Bwd));

}  // namespace afz
