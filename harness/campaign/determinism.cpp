#include "harness/campaign/determinism.h"

#include "harness/case/rng.h"

namespace afz {
namespace {

// A stream of the campaign seed that no generator draws from (generators
// use stream `index`, counters from 0): the choice cannot correlate with
// what the case holds.  The constant is ASCII "rerun".
constexpr uint64_t kRerunStream = 0x72657275'6eULL;

}  // namespace

bool reruns_case(uint64_t seed, uint64_t index, int share) {
  if (share <= 0) return false;
  return CounterRng(seed ^ kRerunStream, index).below(0, uint64_t(share)) == 0;
}

}  // namespace afz
