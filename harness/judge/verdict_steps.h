// One query row of the verdict: what judge() decides for each element of a
// row and for its LSE, on the host (verdict.cpp) and, compiled by nvcc, on
// the GPU (harness/judge/gpu), so that both run the same code (as the fast
// oracle tier and its GPU twin share oracles/fast_steps.h).
//
// The row reads raw memory through the views below (host vectors or their
// device copies) and reports to a Sink, which is what differs between the
// two sides: the CPU judge's sink writes the detail line and the worst
// element; the GPU's counts, bins and keeps each class's first row.  The
// bound is bound_steps.h's (only +, *, / and ulp here), with the row's libm
// terms (ErrorBound::begin_row) computed on the host and passed in: so every
// error, bound and ratio is the same double on both sides and the verdicts
// agree bit for bit.
//
// A Sink provides:
//   raise(Event)                    an element raised a verdict class
//   track(Tracked)                  an element has an error / bound (worst, maxima)
//   o_element(over, ulps), o_row(row_over, key_bin, max_abs_score)
//   lse_element(over, ulps), lse_row(over, key_bin, max_abs_score)
//                                   ErrorSeries::add_element / add_row
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "harness/judge/bound_steps.h"
#include "harness/judge/error_stats.h"
#include "harness/judge/verdict_class.h"
#include "kernels/abi/attnfuzz_kernel.h"
#include "kernels/abi/dtype.h"
#include "kernels/abi/host_device.h"
#include "oracles/oracle.h"

namespace afz::verdict_steps {

// The classification functions by name on both sides (nvcc declares the
// std:: ones for the device too).
using std::isfinite;
using std::isinf;
using std::isnan;

// The kernel's outputs: o[b][h][s][x] at element strides, lse[b][h][s].
struct Outputs {
  const unsigned char* o;
  afz_dtype o_dtype;
  FloatFormat o_format;     // format_of(o_dtype)
  int o_bytes;              // bytes per element: 4 (fp32) or 2 (fp16, bf16)
  int64_t o_stride[4];
  uint32_t o_poison;        // output_poison_bits(o_dtype)
  const float* lse;         // null: the kernel's LSE is not judged
  int64_t lse_stride[3];
};

// The oracle's arrays (OracleResult's vectors, or copies of them); the
// optional ones are null where the tier left them empty.
struct Reference {
  const DD* o;
  const double *cond, *cond_score, *cond_tiny;
  const double* o_err;      // optional: the tier's own bound
  const DD* lse;
  const uint8_t* empty;
  const double* max_abs_score;
  const double* lse_err;    // optional
  const int32_t* visible_keys;  // optional (key position bins)
  const int32_t* max_key;       // optional
};

struct Inputs {
  Outputs out;
  Reference ref;
  int heads_q, max_sq, dv;
  bool masked_row_nan;      // conventions.masked_row_output == AFZ_MASKED_ROW_NAN
  int empty_lse;            // conventions.empty_lse
  uint32_t lse_poison;      // kPoisonF32
  bound_steps::Model model;
};

// Row r's coordinates (OracleResult: r = (b * heads_q + h) * max_sq + i).
struct Where {
  int b, h, i;
};
AFZ_HOST_DEVICE inline Where where(const Inputs& in, int64_t r) {
  return {int(r / in.max_sq / in.heads_q), int(r / in.max_sq % in.heads_q), int(r % in.max_sq)};
}

AFZ_HOST_DEVICE inline uint32_t bits_of_float(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
#endif
}

// An output element's bits, and its value (decode_bits, shared with the host).
AFZ_HOST_DEVICE inline uint32_t o_bits(const Inputs& in, Where w, int x) {
  const Outputs& o = in.out;
  const unsigned char* at =
      o.o + (w.b * o.o_stride[0] + w.h * o.o_stride[1] + w.i * o.o_stride[2] + x * o.o_stride[3]) * o.o_bytes;
  // Little-endian, as the host's memcpy reads it (materialize.cpp).
  if (o.o_bytes == 4) return uint32_t(at[0]) | uint32_t(at[1]) << 8 | uint32_t(at[2]) << 16 | uint32_t(at[3]) << 24;
  return uint32_t(at[0]) | uint32_t(at[1]) << 8;
}
AFZ_HOST_DEVICE inline double o_value(const Inputs& in, uint32_t bits) { return bits_steps::decode(in.out.o_format, bits); }
AFZ_HOST_DEVICE inline float lse_at(const Inputs& in, Where w) {
  const Outputs& o = in.out;
  return o.lse[w.b * o.lse_stride[0] + w.h * o.lse_stride[1] + w.i * o.lse_stride[2]];
}

// An element's error in units of its bound; a zero (or NaN) bound makes any
// error infinitely many bounds away, and no error none.
AFZ_HOST_DEVICE inline double over_bound(double err, double bound) {
  return bound > 0 ? err / bound : (err > 0 ? double(INFINITY) : 0.0);
}
// std::max(a, b) exactly: b only when a < b, so a NaN b never replaces a.
AFZ_HOST_DEVICE inline double max_kept(double a, double b) { return a < b ? b : a; }

// ln 2's inverse: an LSE in log2 is the ln LSE times this.
inline constexpr double kLog2e = 0x1.71547652b82fep0;

enum class What {
  MaskedRowUnwritten,   // an element of a fully masked row kept its poison
  MaskedRowConvention,  // ... or is not the convention's 0 or NaN
  MaskedLseUnwritten,
  MaskedLseConvention,
  Unwritten,            // o element never written
  NanInf,               // o element not finite
  Beyond,               // o element beyond its bound
  LseUnwritten,
  LseNanInf,
  LseLog2,              // the LSE follows the base-2 convention
  LseBeyond,
};

struct Event {
  VerdictClass cls;
  What what;
  int64_t row;
  Where w;
  int x;                // O's column (O events)
  double kernel;        // the kernel's value (an LSE's float, widened)
  double oracle;        // the oracle's (O and non-finite LSE events)
};

struct Tracked {
  bool is_lse;
  int64_t row;
  Where w;
  int x;
  double kernel, oracle, err, bound, over;
  afz_dtype dtype;      // for ulps: O's dtype, fp32 for the LSE
};

struct RowCounts {
  int64_t elements = 0, failing = 0;
};

// A row with no visible key: o must be the convention's 0 or NaN, the LSE
// the convention's value (Judge::empty_row).  The LSE is never counted.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable  // the GPU's Sink is __device__ only, the host's __host__ only
#endif
template <class Sink>
AFZ_HOST_DEVICE RowCounts masked_row(const Inputs& in, int64_t r, Sink& sink) {
  RowCounts n;
  const Where w = where(in, r);
  for (int x = 0; x < in.dv; ++x) {
    ++n.elements;
    const uint32_t bits = o_bits(in, w, x);
    const double o = o_value(in, bits);
    if (bits == in.out.o_poison) {
      ++n.failing;
      sink.raise({VerdictClass::Unwritten, What::MaskedRowUnwritten, r, w, x, o, 0});
      continue;
    }
    if (!(in.masked_row_nan ? isnan(o) : o == 0.0)) {
      ++n.failing;
      sink.raise({VerdictClass::SemanticMismatch, What::MaskedRowConvention, r, w, x, o, 0});
    }
  }
  if (!in.out.lse) return n;
  const float l = lse_at(in, w);
  if (bits_of_float(l) == in.lse_poison) {
    sink.raise({VerdictClass::Unwritten, What::MaskedLseUnwritten, r, w, 0, l, 0});
    return n;
  }
  bool ok = false;
  switch (in.empty_lse) {
    case AFZ_EMPTY_LSE_NEG_INF: ok = isinf(l) && l < 0; break;
    case AFZ_EMPTY_LSE_POS_INF: ok = isinf(l) && l > 0; break;
    case AFZ_EMPTY_LSE_NAN: ok = isnan(l); break;
    case AFZ_EMPTY_LSE_ZERO: ok = l == 0; break;
  }
  if (!ok) sink.raise({VerdictClass::SemanticMismatch, What::MaskedLseConvention, r, w, 0, l, 0});
  return n;
}

AFZ_HOST_DEVICE inline int key_bin(const Inputs& in, int64_t r) {
  if (!in.ref.max_key || !in.ref.visible_keys) return -1;
  return key_position_bin(in.ref.max_key[r], in.ref.visible_keys[r]);
}

AFZ_HOST_DEVICE inline ElementTerms element_terms(const Inputs& in, int64_t e) {
  const DD o = in.ref.o[e];
  return {o.hi + o.lo, in.ref.cond[e], in.ref.cond_score[e], in.ref.cond_tiny[e]};
}

// The row's LSE against the oracle's (Judge::lse): never counted among the
// failing elements, but it raises its class and has its own statistics.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable  // the GPU's Sink is __device__ only, the host's __host__ only
#endif
template <class Sink>
AFZ_HOST_DEVICE void lse(const Inputs& in, int64_t r, Where w, const bound_steps::RowFactors& f, Sink& sink) {
  const float kl = lse_at(in, w);
  const double exact = in.ref.lse[r].hi;
  if (bits_of_float(kl) == in.lse_poison) {
    sink.raise({VerdictClass::Unwritten, What::LseUnwritten, r, w, 0, kl, exact});
    return;
  }
  if (!isfinite(kl)) {
    sink.raise({VerdictClass::NanInf, What::LseNanInf, r, w, 0, kl, exact});
    return;
  }
  const double bound = bound_steps::lse(in.model, f, exact);
  const double err = fabs(double(kl) - exact);
  const double oerr = in.ref.lse_err ? in.ref.lse_err[r] : 0.0;
  const double over = over_bound(err, bound);
  sink.track({true, r, w, 0, kl, exact, err, bound, over, AFZ_F32});
  // The LSE is m + ln l: its scale is the row's largest |score| as much as its own value.
  const double scale = max_kept(fabs(exact), in.ref.max_abs_score[r]);
  sink.lse_element(over, err / bits_steps::ulp(in.model.lse_out.precision, in.model.lse_out.min_exponent, scale));
  sink.lse_row(over, key_bin(in, r), in.ref.max_abs_score[r]);
  if (err - oerr <= bound) return;
  // Name the convention a wrong LSE follows, when it follows one.
  if (fabs(double(kl) - exact * kLog2e) <= bound * kLog2e)
    sink.raise({VerdictClass::SemanticMismatch, What::LseLog2, r, w, 0, kl, exact});
  else
    sink.raise({VerdictClass::NumericMismatch, What::LseBeyond, r, w, 0, kl, exact});
}

// A row with visible keys (Judge::row).  f: the row's factors, null where
// the declared precision cannot resolve the row (ErrorBound::begin_row
// returned false): then nothing of it is judged or counted.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable  // the GPU's Sink is __device__ only, the host's __host__ only
#endif
template <class Sink>
AFZ_HOST_DEVICE RowCounts row(const Inputs& in, int64_t r, const bound_steps::RowFactors* f, Sink& sink) {
  RowCounts n;
  if (!f) return n;  // outside the declared precision model
  const Where w = where(in, r);
  const int64_t e0 = r * in.dv;
  // Ulps at the row's scale, its largest exact |o|: an element whose exact
  // value is near zero is judged against a bound set by the row (the sum
  // of w|v| it came from), so ulps at its own tiny value would call a
  // correct kernel billions of ulps off.
  double row_scale = 0;
  for (int x = 0; x < in.dv; ++x) row_scale = max_kept(row_scale, fabs(in.ref.o[e0 + x].hi + in.ref.o[e0 + x].lo));
  const bound_steps::UlpFormat& of = in.model.out;
  const double row_ulp = bits_steps::ulp(of.precision, of.min_exponent, row_scale);
  double row_over = 0;
  bool judged = false;
  for (int x = 0; x < in.dv; ++x) {
    const int64_t e = e0 + x;
    const ElementTerms t = element_terms(in, e);
    const uint32_t bits = o_bits(in, w, x);
    const double kv = o_value(in, bits);
    ++n.elements;
    if (bits == in.out.o_poison) {
      ++n.failing;
      sink.raise({VerdictClass::Unwritten, What::Unwritten, r, w, x, kv, t.o});
      continue;
    }
    if (!isfinite(kv)) {
      ++n.failing;
      sink.raise({VerdictClass::NanInf, What::NanInf, r, w, x, kv, t.o});
      continue;
    }
    const double bound = bound_steps::element(in.model, *f, t);
    const double err = fabs(kv - t.o);
    const double oerr = in.ref.o_err ? in.ref.o_err[e] : 0.0;
    const double over = over_bound(err, bound);
    sink.track({false, r, w, x, kv, t.o, err, bound, over, in.out.o_dtype});
    sink.o_element(over, err / row_ulp);
    row_over = max_kept(row_over, over);
    judged = true;
    if (err - oerr > bound) {
      ++n.failing;
      sink.raise({VerdictClass::NumericMismatch, What::Beyond, r, w, x, kv, t.o});
    }
  }
  if (judged) sink.o_row(row_over, key_bin(in, r), in.ref.max_abs_score[r]);
  if (in.out.lse) lse(in, r, w, *f, sink);
  return n;
}

// Whether the oracle's own error (o_err, lse_err) lets every element of the
// row be judged (Judge::decidable): pass needs err + oerr <= bound, fail
// err - oerr > bound.  A row without the tier's bound, or outside the
// precision model (f null), is decided as it stands.
AFZ_HOST_DEVICE inline bool decidable(const Inputs& in, int64_t r, const bound_steps::RowFactors* f) {
  if (!in.ref.o_err || !f) return true;
  auto open = [](double err, double oerr, double bound) { return err - oerr <= bound && err + oerr > bound; };
  const Where w = where(in, r);
  for (int x = 0; x < in.dv; ++x) {
    const int64_t e = r * in.dv + x;
    const ElementTerms t = element_terms(in, e);
    const double kv = o_value(in, o_bits(in, w, x));
    if (!isfinite(kv)) continue;
    if (open(fabs(kv - t.o), in.ref.o_err[e], bound_steps::element(in.model, *f, t))) return false;
  }
  if (in.out.lse && in.ref.lse_err) {
    const double kl = lse_at(in, w), exact = in.ref.lse[r].hi;
    if (isfinite(kl) && open(fabs(kl - exact), in.ref.lse_err[r], bound_steps::lse(in.model, *f, exact))) return false;
  }
  return true;
}

}  // namespace afz::verdict_steps
