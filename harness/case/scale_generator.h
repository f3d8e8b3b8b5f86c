// The scale class (issue 15): shapes past where narrow index arithmetic
// wraps.  Every other class stays below 16,384 keys and a few million
// elements per tensor, so a kernel whose key counter is 16 bits wide, whose
// `int` products of rows by strides pass 2^31, or whose flat offsets into K
// or V are 32-bit, passes all of them.  This class's cases are:
//   threshold  key lengths just below and just above 2^15, 2^16 and 2^17;
//   long_row   causal masks and sliding windows, both alignments, whose rows
//              see keys past 32,768 (2^15) and further;
//   huge_kv    a decode batch whose K and V each hold more than 2^31
//              elements: a flat int32 offset wraps inside one tensor;
//   decode     one to four queries over 128K keys (2^17 +- a few), the
//              split-KV kernels' shape.
// The largest scores arrive late, past the thresholds (late_max in the last
// keys, or growing_max stepping up every 2^15 keys), so a wrapped index that
// reads an earlier key misses the row's maximum and the output moves.
//
// These cases cost seconds to minutes each: the class is opt-in (never in a
// default mix; `--classes scale` takes it) and runs where it is affordable,
// GPU kernels judged with `--oracle gpu`.  Host kernels and the CPU oracle
// tiers decline it before its inputs are built (harness/run/case_budget.h).
#pragma once
#include <cstdint>

#include "harness/case/case.h"
#include "harness/case/generators.h"

namespace afz {

// Key counts where narrow index arithmetic wraps: a signed 16-bit key
// counter at 2^15, an unsigned one at 2^16, and 2^17 = 128K keys, the
// decode length of long-context serving (and a wrap of 17-bit packed fields).
inline constexpr int kWrapExponents[] = {15, 16, 17};
inline constexpr int kKeys2p15 = 1 << kWrapExponents[0];
inline constexpr int kKeys2p17 = 1 << kWrapExponents[2];
// How far below or above a threshold the "just below / just above" lengths
// lie: one key, two, and the three lengths around one 64-key block.
inline constexpr int kThresholdOffsets[] = {1, 2, 63, 64, 65};
// Elements in one tensor past which a flat int32 offset wraps.
inline constexpr int64_t kElements2p31 = int64_t{1} << 31;

// The most work (generators.h case_work: multiply-adds over every pair,
// visible or not) one scale case costs.  The fp64 GPU oracle did 2^40 in
// 5.7 s on the H200 (reports/gpu_oracle), and a causal or windowed case
// computes only its visible half or band: a scale case stays within a few
// tens of seconds of oracle time.
inline constexpr int64_t kScaleWorkBudget = int64_t{1} << 42;

// The scale class's generator (registered in opt_in_generator_table()).
Case gen_scale(Dice& d);

}  // namespace afz
