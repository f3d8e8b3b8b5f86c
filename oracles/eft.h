// Error-free transformations in double: the building blocks of the fast
// oracle tier (Ogita, Rump and Oishi, "Accurate sum and dot product", SIAM
// J. Sci. Comput. 26(6), 2005).  Each one returns a rounded result together
// with the exact rounding error, so a pair (hi, lo) carries about 106 bits.
//
// They rely on IEEE round-to-nearest and on the compiler keeping every
// operation as written: the build passes -ffp-contract=off (a contracted
// a*b - p would no longer be the product's error) and never -ffast-math
// (which would simplify (a - (s - b)) to 0).
#pragma once
#include <cmath>

// The same code runs on the host and, compiled by nvcc, on the GPU
// (oracles/gpu): there --fmad=false keeps every operation as written.
#include "kernels/abi/host_device.h"

namespace afz::eft {

// s + e == a + b exactly, s = fl(a + b).  Knuth's branch-free TwoSum: no
// assumption on the magnitudes (6 flops).  T is double or a vector of
// doubles (GCC/Clang vector extensions), element by element; vectors go by
// reference, since a 32-byte vector by value has a different ABI with and
// without AVX.  The inputs are copied first: s may be the same object as a.
template <class T>
AFZ_HOST_DEVICE inline void two_sum(const T& a, const T& b, T& s, T& e) {
  const T x = a, y = b;
  s = x + y;
  const T bb = s - x;
  e = (x - (s - bb)) + (y - bb);
}

// Same when |a| >= |b| (or a == 0): Dekker's FastTwoSum (3 flops).
template <class T>
AFZ_HOST_DEVICE inline void fast_two_sum(const T& a, const T& b, T& s, T& e) {
  const T x = a, y = b;
  s = x + y;
  e = y - (s - x);
}

// p + e == a * b exactly unless a * b underflows (then |error| <= 2^-1075):
// the FMA computes a * b - p with a single rounding, and that difference is
// representable.
AFZ_HOST_DEVICE inline void two_prod(double a, double b, double& p, double& e) {
  p = a * b;
  e = fma(a, b, -p);  // ::fma: glibc's on the host, the device's under nvcc
}

// hi + lo == a exactly with hi holding at most 26 significant bits and lo at
// most 27 (Veltkamp's split, exact even with underflow; a must be below
// 2^996 so that the multiplication cannot overflow).  A product of either
// part with a value of at most 24 significant bits (every fp32, fp16 or
// bf16 number) is then exact in double, so a * v == hi * v + lo * v without
// an FMA.
AFZ_HOST_DEVICE inline void split(double a, double& hi, double& lo) {
  constexpr double kSplitter = 0x1p27 + 1;
  const double c = kSplitter * a;
  hi = c - (c - a);
  lo = a - hi;
}

// An unevaluated sum hi + lo, normalized so that hi = fl(hi + lo).
struct Pair {
  double hi = 0, lo = 0;
};

AFZ_HOST_DEVICE inline Pair normalize(double a, double b) {
  Pair r;
  two_sum(a, b, r.hi, r.lo);
  return r;
}

// (a.hi + a.lo) * b, relative error <= 3.1 u^2 (plus 2^-1074 on underflow):
// the product of the high parts is exact, the rest is two roundings of terms
// already u times smaller.
AFZ_HOST_DEVICE inline Pair mul(Pair a, double b) {
  double p, e;
  two_prod(a.hi, b, p, e);
  return normalize(p, e + a.lo * b);
}

// (a.hi + a.lo) / (b.hi + b.lo), relative error <= 16 u^2 (Dekker's long
// division: one quotient, the exact remainder through TwoProd, a correction).
// a.hi - p is exact by Sterbenz's lemma: p = q1 * b.hi is within a few ulps of a.hi.
AFZ_HOST_DEVICE inline Pair div(Pair a, Pair b) {
  const double q1 = a.hi / b.hi;
  double p, pe;
  two_prod(q1, b.hi, p, pe);
  const double r = ((a.hi - p) - pe) + (a.lo - q1 * b.lo);
  const double q2 = r / b.hi;
  Pair out;
  fast_two_sum(q1, q2, out.hi, out.lo);
  return out;
}

}  // namespace afz::eft
