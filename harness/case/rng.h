// Counter-based random numbers and exactly-built values.
//
// Input generation must give the same bits on every compiler and machine, so
// nothing here touches std:: distributions or libm: every value is an integer
// scaled by a power of two, and the only floating-point operations are single
// IEEE-exact multiplications/additions (the build passes -ffp-contract=off so
// no compiler fuses them into an FMA).
#pragma once
#include <cstdint>

#include "kernels/abi/dtype.h"

namespace afz {

// A keyed 64-bit hash of (key, counter): stream `stream` of seed `seed`
// yields value n as mix(seed, stream, n).  Two rounds of the SplitMix64
// finalizer; independent of call order, so any element can be regenerated
// alone (the minimizer and the GPU path rely on that).
struct CounterRng {
  uint64_t key;

  static constexpr uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  constexpr CounterRng(uint64_t seed, uint64_t stream)
      : key(mix(seed ^ mix(stream + 0x9e3779b97f4a7c15ULL))) {}
  constexpr uint64_t bits(uint64_t counter) const {
    return mix(key + mix(counter ^ 0xd1b54a32d192ed03ULL));
  }
  // Uniform in [0, n) (n > 0); the modulo bias is below 2^-40 for n < 2^24.
  constexpr uint64_t below(uint64_t counter, uint64_t n) const { return bits(counter) % n; }
  // Uniform on the grid k * 2^-52 in [-1, 1).
  double symmetric(uint64_t counter) const {
    const int64_t k = int64_t(bits(counter) >> 11) - (int64_t{1} << 52);
    return double(k) * exp2i(-52);
  }
  // Zero mean, unit variance, bell-shaped: the Irwin-Hall sum of four
  // uniforms on a 2^-30 grid, times sqrt(3).  The sum is an exact integer;
  // one multiplication by a correctly rounded constant follows.
  double normal(uint64_t counter) const {
    const uint64_t r0 = bits(counter * 2), r1 = bits(counter * 2 + 1);
    const int64_t s = int64_t(r0 & 0x3fffffff) + int64_t((r0 >> 32) & 0x3fffffff) +
                      int64_t(r1 & 0x3fffffff) + int64_t((r1 >> 32) & 0x3fffffff) -
                      (int64_t{1} << 31);
    constexpr double kSqrt3 = 0x1.bb67ae8584caap+0;
    return double(s) * exp2i(-30) * kSqrt3;  // var of sum of 4 U(-1/2,1/2) is 1/3
  }
};

}  // namespace afz
