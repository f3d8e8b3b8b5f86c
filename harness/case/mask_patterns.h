// Explicit mask patterns (bool_mask / add_mask lines of a case): which
// (query i, key j) pairs of a sequence a pattern masks.
#pragma once
#include <cstdint>

#include "harness/case/case.h"
#include "harness/case/rng.h"

namespace afz {

// True where the pattern masks key j for query i of sequence b.
bool pattern_masks(const MaskPattern& p, const CounterRng& rng, int b, int i, int j);

}  // namespace afz
