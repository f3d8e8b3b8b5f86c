// Whether two verdicts are the same in every field, bit for bit (the GPU
// verdict's tests and benchmark hold it to judge()'s).
#pragma once
#include <string>

#include "harness/judge/verdict.h"

namespace afz {

// "" when equal; else the first field that differs, with both values.
std::string verdict_difference(const Verdict& a, const Verdict& b);

}  // namespace afz
