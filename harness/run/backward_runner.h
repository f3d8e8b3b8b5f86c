// One case through one backward kernel, and the backward mutant gate.
//
// The backward path: materialize the case, run the backward ORACLE first
// (it computes the exact forward O and LSE on the way), hand the kernel
// that O rounded to the output dtype and the LSE rounded to fp32
// (backward_problem.h says why not a forward kernel's outputs), run it, and
// judge dQ, dK, dV element by element.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "harness/case/case.h"
#include "harness/case/generators.h"
#include "harness/judge/verdict.h"
#include "oracles/backward_oracle.h"

namespace afz {

struct BackwardOutcome {
  Verdict verdict;
  std::string oracle;  // the tier whose result was judged
};

// Throws std::runtime_error with a one-line message for unbuildable cases.
BackwardOutcome run_backward_case(const afz_backward_kernel& k, const Case& c, const BackwardOracle& oracle,
                                  const BackwardOracle* escalate);

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
