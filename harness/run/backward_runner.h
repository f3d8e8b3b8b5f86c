// One case through one backward kernel, and the backward mutant gate.
//
// The backward path: materialize the case, run the backward ORACLE first
// (it computes the exact forward O and LSE on the way), hand the kernel
// that O and LSE (backward_problem.h says how they are rounded, and why not
// a forward kernel's outputs), run it, and judge dQ, dK, dV element by element.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "harness/case/case.h"
#include "harness/judge/verdict.h"
#include "oracles/backward_oracle.h"

namespace afz {

// As RunOptions::timeout_s for the forward.
inline constexpr double kDefaultBackwardTimeoutS = 60;

struct BackwardOutcome {
  Verdict verdict;
  std::string oracle;  // the tier whose result was judged
};

// Throws std::runtime_error with a one-line message for unbuildable cases.
// A kernel with AFZ_CAP_GPU runs in this thread's worker process (harness/
// run/gpu): device pointers, guard margins, `timeout_s` before a hang verdict.
BackwardOutcome run_backward_case(const afz_backward_kernel& k, const Case& c, const BackwardOracle& oracle,
                                  const BackwardOracle* escalate, double timeout_s = kDefaultBackwardTimeoutS);

struct BackwardGateRow {
  std::string kernel;
  bool killed = false, expected_kill = true;
  int64_t cases = 0;  // to the kill (inclusive), else cases run
  std::string verdict, detail, case_text;
};

// `attnfuzz mutants --pass bwd`'s core: each backward mutant against
// generated cases (the default generator mix, seed `seed`) until the first
// failure or `budget` cases.
std::vector<BackwardGateRow> run_backward_gate(uint64_t seed, int64_t budget);

}  // namespace afz
