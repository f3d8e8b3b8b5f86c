// The CPU mutant zoo: the reference kernels with exactly one defect each
// (defects.h), registered as kernels of origin "mutant".  `attnfuzz mutants`
// (harness/campaign/mutant_gate.h) runs a campaign against each: a mutant that
// survives is a blind spot of the harness.
//
// A mutant declares exactly its parent's caps, precision and conventions
// (both come from cpu::emulating_kernel), so nothing but its outputs tells
// the harness that it is broken.
#pragma once
#include <string_view>
#include <vector>

#include "kernels/abi/attnfuzz_kernel.h"

namespace afz {

struct MutantInfo {
  afz_kernel kernel;   // name "cpu.mutant.<defect>"
  const char* parent;  // the reference kernel it was cut from, e.g. "cpu.tiled"
  const char* defect;  // one line: what is wrong
  const char* shows_on;  // one line: the inputs that expose it
};

// The zoo, in a fixed order (the gate's rows follow it).
const std::vector<MutantInfo>& cpu_mutants();
const MutantInfo* find_mutant(std::string_view name);

inline constexpr std::string_view kMutantOrigin = "mutant";

}  // namespace afz
