#include "kernels/abi/dtype.h"

#include <limits>

namespace afz {

namespace {
constexpr uint64_t kDoubleMantMask = (uint64_t{1} << 52) - 1;
using bits_steps::kDoubleBias;
}  // namespace

const FloatFormat& format_of(afz_dtype t) {
  switch (t) {
    case AFZ_F16: return kF16;
    case AFZ_BF16: return kBF16;
    case AFZ_F8E4M3: return kE4M3;
    default: return kF32;
  }
}

int size_of(afz_dtype t) {
  switch (t) {
    case AFZ_F32: return 4;
    case AFZ_F16: case AFZ_BF16: return 2;
    default: return 1;
  }
}

std::string_view dtype_name(afz_dtype t) {
  switch (t) {
    case AFZ_F32: return "fp32";
    case AFZ_F16: return "fp16";
    case AFZ_BF16: return "bf16";
    case AFZ_F8E4M3: return "fp8e4m3";
    case AFZ_U8: return "u8";
    default: return "?";
  }
}

std::optional<afz_dtype> parse_dtype(std::string_view s) {
  if (s == "fp32" || s == "f32" || s == "float32") return AFZ_F32;
  if (s == "fp16" || s == "f16" || s == "float16" || s == "half") return AFZ_F16;
  if (s == "bf16" || s == "bfloat16") return AFZ_BF16;
  if (s == "fp8e4m3" || s == "e4m3") return AFZ_F8E4M3;
  return std::nullopt;
}

double exp2i(int k) { return bits_steps::pow2(k); }

uint32_t round_bits_general(const FloatFormat& f, double x_hi, double x_lo) {
  const uint64_t xb = bits_of(x_hi);
  const uint32_t sign = uint32_t(xb >> 63);
  const int field_bits = f.exponent_bits + f.precision - 1;
  const uint32_t sign_bit = sign << field_bits;
  const uint32_t exp_all_ones = (1u << f.exponent_bits) - 1;
  const uint32_t nan = f.has_inf ? (exp_all_ones << (f.precision - 1)) | (1u << (f.precision - 2))
                                 : (1u << field_bits) - 1;  // e4m3: S.1111.111
  const int dexp = int((xb >> 52) & 0x7ff);
  uint64_t mant = xb & kDoubleMantMask;
  if (dexp == 0x7ff) {
    if (mant) return sign_bit | nan;
    return f.has_inf ? sign_bit | (exp_all_ones << (f.precision - 1)) : sign_bit | nan;
  }
  if (dexp == 0 && mant == 0) return sign_bit;
  // x = mant * 2^e with mant an integer of up to 53 bits.
  int e;
  if (dexp == 0) { e = -1074; } else { mant |= uint64_t{1} << 52; e = dexp - kDoubleBias - 52; }
  int top = 63 - __builtin_clzll(mant);       // floor(log2 |x|) = top + e
  int xexp = top + e;
  // Quantum of the target binade; subnormals share the smallest normal's.
  int quantum = (xexp < f.min_exponent ? f.min_exponent : xexp) - (f.precision - 1);
  int shift = quantum - e;                    // drop `shift` low bits of mant
  uint64_t sig;
  if (shift <= 0) {
    sig = mant << (-shift);                   // exact, no rounding
  } else if (shift > 62) {
    // Below half the smallest step: rounds to zero, unless exactly... it cannot
    // be exactly half with shift > 62 since mant < 2^53.
    sig = 0;
  } else {
    sig = mant >> shift;
    uint64_t rem = mant & ((uint64_t{1} << shift) - 1);
    uint64_t half = uint64_t{1} << (shift - 1);
    bool up;
    if (rem > half) up = true;
    else if (rem < half) up = false;
    else if (x_lo != 0.0) up = (x_lo < 0) == (sign != 0);  // true value lies beyond the midpoint
    else up = (sig & 1) != 0;                               // tie: to even
    sig += up ? 1 : 0;
  }
  if (sig == 0) return sign_bit;
  const uint64_t implicit = uint64_t{1} << (f.precision - 1);
  if (sig >= (implicit << 1)) { sig >>= 1; ++quantum; }  // carry into the next binade (exact)
  uint32_t biased;
  if (sig < implicit) biased = 0;                         // subnormal
  else biased = uint32_t(quantum + (f.precision - 1) + f.bias);
  uint32_t mant_field = uint32_t(sig & (implicit - 1));
  if (f.has_inf) {
    if (biased >= exp_all_ones) return sign_bit | (exp_all_ones << (f.precision - 1));
  } else {
    // e4m3: the all-ones pattern is NaN; 448 is the largest finite value.
    if (biased > exp_all_ones || (biased == exp_all_ones && mant_field == implicit - 1)) return sign_bit | nan;
  }
  return sign_bit | (biased << (f.precision - 1)) | mant_field;
}

double decode_bits(const FloatFormat& f, uint32_t bits) { return bits_steps::decode(f, bits); }

void store_bits(afz_dtype t, void* p, uint32_t bits) {
  switch (size_of(t)) {
    case 4: std::memcpy(p, &bits, 4); break;
    case 2: { uint16_t h = uint16_t(bits); std::memcpy(p, &h, 2); break; }
    default: { uint8_t b = uint8_t(bits); std::memcpy(p, &b, 1); break; }
  }
}

void store(afz_dtype t, void* p, double value) {
  if (t == AFZ_U8) { uint8_t b = value != 0.0; std::memcpy(p, &b, 1); return; }
  store_bits(t, p, round_bits(format_of(t), value));
}

double load(afz_dtype t, const void* p) {
  switch (t) {
    case AFZ_U8: { uint8_t b; std::memcpy(&b, p, 1); return b; }
    case AFZ_F32: { uint32_t b; std::memcpy(&b, p, 4); return decode_bits(kF32, b); }
    case AFZ_F8E4M3: { uint8_t b; std::memcpy(&b, p, 1); return decode_bits(kE4M3, b); }
    default: { uint16_t h; std::memcpy(&h, p, 2); return decode_bits(format_of(t), h); }
  }
}

double unit_roundoff(afz_dtype t) { return exp2i(-format_of(t).precision); }

double min_subnormal(afz_dtype t) {
  const FloatFormat& f = format_of(t);
  return exp2i(f.min_exponent - (f.precision - 1));
}

double min_normal(afz_dtype t) { return exp2i(format_of(t).min_exponent); }

double max_finite(afz_dtype t) {
  const FloatFormat& f = format_of(t);
  if (!f.has_inf) return 448.0;  // e4m3
  // (2 - 2^(1-p)) * 2^emax
  return (2.0 - exp2i(1 - f.precision)) * exp2i(f.max_exponent);
}

double lowest_finite(afz_dtype t) { return -max_finite(t); }

double ulp(afz_dtype t, double x) {
  const FloatFormat& f = format_of(t);
  return bits_steps::ulp(f.precision, f.min_exponent, x);
}

uint32_t quiet_nan_bits(afz_dtype t) {
  return round_bits(format_of(t), std::numeric_limits<double>::quiet_NaN());
}

uint32_t inf_bits(afz_dtype t, bool negative) {
  return round_bits(format_of(t), negative ? -std::numeric_limits<double>::infinity()
                                           : std::numeric_limits<double>::infinity());
}

}  // namespace afz
