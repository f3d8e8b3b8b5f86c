// Exact conversions between double and the dtypes kernels consume.
//
// Everything here is integer arithmetic on IEEE bit patterns: no libm, no
// host float conversions, so a value rounds to the same bits under g++, clang
// and nvcc host code, with or without FMA contraction or x87.  Narrowing is
// round-to-nearest-even straight from the source value; going through float
// first (double -> float -> half) would round twice and is wrong on ties.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <optional>

#include "kernels/abi/attnfuzz_kernel.h"
#include "kernels/abi/host_device.h"

namespace afz {

struct FloatFormat {
  int precision;      // significand bits, implicit bit included
  int min_exponent;   // exponent of the smallest normal: 2^min_exponent
  int max_exponent;   // exponent of the largest binade
  int bias;
  int exponent_bits;
  bool has_inf;       // e4m3 has none: overflow saturates to NaN
};

inline constexpr FloatFormat kF32{24, -126, 127, 127, 8, true};
inline constexpr FloatFormat kF16{11, -14, 15, 15, 5, true};
inline constexpr FloatFormat kBF16{8, -126, 127, 127, 8, true};
inline constexpr FloatFormat kE4M3{4, -6, 8, 7, 4, false};

const FloatFormat& format_of(afz_dtype t);
int size_of(afz_dtype t);  // bytes per element
std::string_view dtype_name(afz_dtype t);
std::optional<afz_dtype> parse_dtype(std::string_view s);

inline uint64_t bits_of(double x) { uint64_t b; std::memcpy(&b, &x, 8); return b; }
inline double double_of(uint64_t b) { double x; std::memcpy(&x, &b, 8); return x; }
inline uint32_t bits_of(float x) { uint32_t b; std::memcpy(&b, &x, 4); return b; }
inline float float_of(uint32_t b) { float x; std::memcpy(&x, &b, 4); return x; }

// 2^k exactly, for k in [-1074, 1023].
double exp2i(int k);

// What the host and the device (the GPU verdict) both run: bit operations
// and exact products only, so both give the same doubles.
namespace bits_steps {
constexpr int kDoubleBias = 1023, kDoubleMantissaBits = 52;
AFZ_HOST_DEVICE inline double double_from(uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double((long long)b);
#else
  double x;
  std::memcpy(&x, &b, sizeof x);
  return x;
#endif
}
AFZ_HOST_DEVICE inline uint64_t bits_from(double x) {
#if defined(__CUDA_ARCH__)
  return (uint64_t)__double_as_longlong(x);
#else
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
#endif
}
// exp2i.
AFZ_HOST_DEVICE inline double pow2(int k) {
  if (k >= 1 - kDoubleBias) return double_from(uint64_t(k + kDoubleBias) << kDoubleMantissaBits);
  return double_from(uint64_t{1} << (k + 1074));  // subnormal
}
// decode_bits: a value of format f (passed by value: the device cannot
// read the host's kF32 and friends) as a double.
AFZ_HOST_DEVICE inline double decode(FloatFormat f, uint32_t bits) {
  const int field_bits = f.exponent_bits + f.precision - 1;
  const bool neg = (bits >> field_bits) & 1;
  const uint32_t exp_all_ones = (1u << f.exponent_bits) - 1;
  const uint32_t biased = (bits >> (f.precision - 1)) & exp_all_ones;
  const uint32_t implicit = 1u << (f.precision - 1);
  const uint32_t mant = bits & (implicit - 1);
  double v;
  if (f.has_inf && biased == exp_all_ones) {
    v = mant ? double(NAN) : double(INFINITY);
  } else if (!f.has_inf && biased == exp_all_ones && mant == implicit - 1) {
    v = double(NAN);
  } else if (biased == 0) {
    v = double(mant) * pow2(f.min_exponent - (f.precision - 1));
  } else {
    v = double(mant | implicit) * pow2(int(biased) - f.bias - (f.precision - 1));
  }
  return neg ? -v : v;
}
// ulp() for a format of `precision` significand bits whose smallest normal
// is 2^min_exponent.
AFZ_HOST_DEVICE inline double ulp(int precision, int min_exponent, double x) {
  const double a = x < 0 ? -x : x;
  if (!(a <= 0x1.fffffffffffffp1023)) return a;  // inf and NaN give themselves
  if (a < pow2(min_exponent)) return pow2(min_exponent - (precision - 1));
  return pow2(int((bits_from(a) >> kDoubleMantissaBits) & 0x7ff) - kDoubleBias - (precision - 1));
}
}  // namespace bits_steps

// Round x (or the double-double x_hi + x_lo, |x_lo| <= ulp(x_hi)/2) to the
// nearest value of `f`, ties to even, returning the encoded bits.  x_lo only
// breaks ties: the one case where x_hi alone would round the wrong way is
// x_hi exactly halfway between two values of `f`.
uint32_t round_bits_general(const FloatFormat& f, double x_hi, double x_lo);
double decode_bits(const FloatFormat& f, uint32_t bits);

// The common case of round_bits, inline (input generation rounds every
// element of every tensor): a finite x_hi in one of f's normal binades, no
// x_lo.  Adding half an ulp of f less one, plus the last kept bit, to the
// magnitude's bits rounds to nearest with ties to even; a carry out of the
// mantissa lands in the exponent, which is the correctly rounded result.
// Sets *rounded to the rounded value's double bits (sign included, dropped
// bits zero) and returns true; false where the general path must decide:
// zeros, doubles below f's smallest normal (f's subnormals and underflow),
// results past f's largest binade (Inf), NaN, Inf, e4m3 (no Inf: its
// saturation rule), and a nonzero x_lo (it breaks exact ties).
inline bool round_normal(const FloatFormat& f, double x_hi, double x_lo, uint64_t* rounded) {
  constexpr int kDoubleMantBits = 52, kDoubleBias = 1023;
  constexpr uint64_t kSign = uint64_t{1} << 63;
  if (!f.has_inf || x_lo != 0.0) return false;
  const uint64_t xb = bits_of(x_hi), magnitude = xb & ~kSign;
  const int dexp = int(magnitude >> kDoubleMantBits);
  if (dexp - kDoubleBias < f.min_exponent || dexp == 2 * kDoubleBias + 1) return false;  // 0x7ff: NaN, Inf
  const int drop = kDoubleMantBits - (f.precision - 1);
  const uint64_t kept_lsb = (magnitude >> drop) & 1;
  const uint64_t sum = magnitude + ((uint64_t{1} << (drop - 1)) - 1) + kept_lsb;
  if (int(sum >> kDoubleMantBits) - kDoubleBias > f.max_exponent) return false;  // overflows to Inf
  *rounded = (sum & ~((uint64_t{1} << drop) - 1)) | (xb & kSign);
  return true;
}

// f's encoding of a double that round_normal produced (a normal value of f).
inline uint32_t encode_normal(const FloatFormat& f, uint64_t rounded) {
  constexpr int kDoubleMantBits = 52, kDoubleBias = 1023;
  const int drop = kDoubleMantBits - (f.precision - 1);
  const int field_bits = f.exponent_bits + f.precision - 1;
  const uint32_t sign = uint32_t(rounded >> 63) << field_bits;
  const int exponent = int((rounded >> kDoubleMantBits) & (2 * kDoubleBias + 1)) - kDoubleBias;
  const uint32_t mant = uint32_t((rounded >> drop) & ((uint64_t{1} << (f.precision - 1)) - 1));
  return sign | (uint32_t(exponent + f.bias) << (f.precision - 1)) | mant;
}

inline uint32_t round_bits(const FloatFormat& f, double x_hi, double x_lo = 0.0) {
  uint64_t rounded;
  if (round_normal(f, x_hi, x_lo, &rounded)) return encode_normal(f, rounded);
  return round_bits_general(f, x_hi, x_lo);
}

// The value of x after rounding to dtype t, as a double (exact).
inline double round_to(afz_dtype t, double hi, double lo = 0.0) {
  const FloatFormat& f = format_of(t);
  uint64_t rounded;
  if (round_normal(f, hi, lo, &rounded)) return double_of(rounded);
  return decode_bits(f, round_bits_general(f, hi, lo));
}

// Store / load one element of dtype t at p.
void store(afz_dtype t, void* p, double value);  // rounds (RNE)
double load(afz_dtype t, const void* p);
void store_bits(afz_dtype t, void* p, uint32_t bits);

// Unit roundoff 2^-precision, and the gap between x and its neighbour away
// from zero in format f (the smallest subnormal step below the normals).
double unit_roundoff(afz_dtype t);
double ulp(afz_dtype t, double x);

double max_finite(afz_dtype t);
double lowest_finite(afz_dtype t);   // -max_finite
double min_subnormal(afz_dtype t);
double min_normal(afz_dtype t);
uint32_t quiet_nan_bits(afz_dtype t);
uint32_t inf_bits(afz_dtype t, bool negative);

}  // namespace afz
