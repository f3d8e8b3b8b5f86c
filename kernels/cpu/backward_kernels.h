// The built-in backward kernels: the CPU references (cpu.bwd.fa2, and
// cpu.bwd.math for kernels that differentiate their own forward) and the
// backward mutant zoo (kernels/mutants/backward_defects.h), each with one
// defect.  afz_kernel's layout is ABI v1, so backward kernels are their own
// list (afz_backward_kernel), not entries of the forward KernelRegistry.
#pragma once
#include <string_view>
#include <vector>

#include "kernels/abi/attnfuzz_kernel.h"

namespace afz {

struct BackwardMutantInfo {
  afz_backward_kernel kernel;  // "cpu.bwd.mutant.<defect>"
  const char* defect;          // one line: what is wrong
  const char* shows_on;        // one line: the inputs that expose it
  bool expected_kill;          // false: not a defect at the bound (documented where it is defined)
};

const std::vector<afz_backward_kernel>& cpu_backward_kernels();
const std::vector<BackwardMutantInfo>& cpu_backward_mutants();
// A reference or mutant backward kernel by name, or nullptr.
const afz_backward_kernel* find_backward_kernel(std::string_view name);

}  // namespace afz
