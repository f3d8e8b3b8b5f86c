#include "harness/case/mask_patterns.h"

namespace afz {

bool pattern_masks(const MaskPattern& p, const CounterRng& rng, int b, int i, int j) {
  auto arg = [&](size_t n, int64_t fallback) { return n < p.args.size() ? p.args[n] : fallback; };
  if (p.kind == "rows_every") {
    const int64_t k = arg(0, 7);
    return k > 0 && i % k == arg(1, 0);
  }
  if (p.kind == "cols_every") {
    const int64_t k = arg(0, 7);
    return k > 0 && j % k == arg(1, 0);
  }
  if (p.kind == "band") {  // keep lo <= j - i <= hi
    const int64_t d = int64_t(j) - i;
    return d < arg(0, 0) || d > arg(1, 0);
  }
  if (p.kind == "block") {  // mask the half-open rectangle [i0, i1) x [j0, j1)
    return i >= arg(0, 0) && i < arg(1, 0) && j >= arg(2, 0) && j < arg(3, 0);
  }
  if (p.kind == "key_block") {  // key block k of size bc empty for rows [i0, i1]
    const int64_t bc = arg(0, 64);
    const int64_t blk = arg(3, 0);
    return bc > 0 && i >= arg(1, 0) && i <= arg(2, 0) && j / bc == blk;
  }
  if (p.kind == "random") {
    const uint64_t counter = (uint64_t(b) << 42) ^ (uint64_t(i) << 21) ^ uint64_t(j);
    return int64_t(rng.below(counter, 1000)) < arg(0, 500);
  }
  return false;
}

}  // namespace afz
