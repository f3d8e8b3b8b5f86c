// Determinism without a flag: a seeded share of a campaign's cases runs each
// kernel twice and must give identical output bits (Runner::run's rerun),
// unless the kernel declares AFZ_CAP_NONDETERMINISTIC.  Which cases is a
// function of (seed, index) alone, like the cases themselves, so shards,
// --jobs and resumed runs rerun the same ones.  `attnfuzz audit` and
// `--determinism` rerun every case.
#pragma once
#include <cstdint>

namespace afz {

// 1 in kDefaultRerunShare cases: a kernel whose bits differ between runs
// differs on most inputs, so a small share catches it within a few dozen
// cases while adding an eighth of the kernel time (never the oracle's).
inline constexpr int kDefaultRerunShare = 8;

// Whether case `index` of the campaign with `seed` reruns: 1 in `share`
// (0: none, 1: all).
bool reruns_case(uint64_t seed, uint64_t index, int share);

}  // namespace afz
