#include "kernels/cpu/common.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace afz::cpu {

afz_kernel emulating_kernel(const char* name, const char* description, RunFn run,
                            const void* config) {
  afz_kernel k{};
  k.name = name;
  k.description = description;
  k.caps = kEmulatedCaps;
  k.precision = kEmulatedPrecision;
  k.conventions = kEmulatedConventions;
  k.supports = nullptr;  // the caps say it all
  k.run = run;
  k.user = const_cast<void*>(config);
  return k;
}

void write_message(char* buf, size_t len, const std::string& msg) {
  if (!buf || len == 0) return;
  size_t n = 0;
  for (; n + 1 < len && n < msg.size(); ++n) buf[n] = (msg[n] == '\n' || msg[n] == '\r') ? ' ' : msg[n];
  buf[n] = '\0';
}

namespace {

bool is_input_dtype(afz_dtype t) { return t == AFZ_F32 || t == AFZ_F16 || t == AFZ_BF16; }

std::string tensor_error(const char* name, const afz_tensor& t, bool output) {
  if (!t.data) return std::string(name) + ": null data pointer";
  if (!is_input_dtype(t.dtype))
    return std::string(name) + ": dtype " + std::string(dtype_name(t.dtype)) +
           (output ? " is not an output dtype" : " is not an input dtype") + " (fp32, fp16, bf16)";
  return "";
}

}  // namespace

std::string problem_error(const afz_problem& p) {
  if (p.abi_version != AFZ_ABI_VERSION)
    return "problem has ABI version " + std::to_string(p.abi_version) + ", kernel expects " +
           std::to_string(AFZ_ABI_VERSION);
  if (p.batch < 0) return "negative batch";
  if (p.heads_q < 1 || p.heads_kv < 1) return "heads_q and heads_kv must be at least 1";
  if (p.heads_q % p.heads_kv != 0)
    return "heads_q " + std::to_string(p.heads_q) + " is not a multiple of heads_kv " +
           std::to_string(p.heads_kv);
  if (p.head_dim < 1 || p.head_dim_v < 1) return "head dims must be at least 1";
  if (p.max_seqlen_q < 0 || p.max_seqlen_k < 0) return "negative max seqlen";
  if (p.batch > 0 && (!p.seqlens_q || !p.seqlens_k)) return "null seqlens";
  for (int b = 0; b < p.batch; ++b) {
    if (p.seqlens_q[b] < 0 || p.seqlens_q[b] > p.max_seqlen_q)
      return "seqlens_q[" + std::to_string(b) + "] = " + std::to_string(p.seqlens_q[b]) +
             " outside [0, " + std::to_string(p.max_seqlen_q) + "]";
    if (p.seqlens_k[b] < 0 || p.seqlens_k[b] > p.max_seqlen_k)
      return "seqlens_k[" + std::to_string(b) + "] = " + std::to_string(p.seqlens_k[b]) +
             " outside [0, " + std::to_string(p.max_seqlen_k) + "]";
  }
  if (!std::isfinite(p.scale)) return "softmax scale is not finite";
  if (!std::isfinite(p.softcap) || p.softcap < 0) return "softcap must be finite and >= 0";
  struct Named { const char* name; const afz_tensor* t; bool output; };
  for (const Named& n : {Named{"q", &p.q, false}, Named{"k", &p.k, false}, Named{"v", &p.v, false},
                         Named{"o", &p.o, true}})
    if (std::string e = tensor_error(n.name, *n.t, n.output); !e.empty()) return e;
  if (p.bool_mask.data && p.bool_mask.dtype != AFZ_U8) return "bool_mask must be u8";
  if (p.add_mask.data && p.add_mask.dtype != AFZ_F32) return "add_mask must be fp32";
  return "";
}

float f16_to_float(uint16_t h) {
  constexpr int kF16Bias = 15, kF32Bias = 127;
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return float_of(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent == 0) {
    // Subnormal (or zero): mantissa * 2^-24, exact in fp32.
    const float magnitude = float(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return float_of(sign | ((exponent - kF16Bias + kF32Bias) << 23) | (mantissa << 13));
}

float round_float_to_bf16(float x) {
  uint32_t b = bits_of(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) return x;  // NaN stays NaN
  // Add just under half of the dropped 16 bits, plus the kept lsb: ties go
  // to even, and a carry into the exponent is the correct next binade (inf
  // past bf16's max).
  b += 0x7fffu + ((b >> 16) & 1u);
  return float_of(b & 0xffff0000u);
}

float round_float_to_f16(float x) {
  constexpr float kOverflowTie = 65520.0f;  // halfway between 65504 and 2^16: rounds to inf
  constexpr float kMinNormal = 0x1p-14f;
  constexpr float kSubnormalShift = 0.5f;   // ulp(0.5) in fp32 = 2^-24, fp16's subnormal step
  const float a = std::fabs(x);
  if (std::isnan(x)) return x;
  if (!(a < kOverflowTie)) return std::copysign(std::numeric_limits<float>::infinity(), x);
  float r;
  if (a < kMinNormal) {
    // One fp32 addition rounds a to a multiple of 2^-24 (ties to even: 0.5 is
    // an even multiple); subtracting 0.5 back is exact.
    r = (a + kSubnormalShift) - kSubnormalShift;
  } else {
    // Keep 10 of fp32's 23 fraction bits, ties to even, as for bf16.
    uint32_t b = bits_of(a);
    b += 0xfffu + ((b >> 13) & 1u);
    r = float_of(b & ~0x1fffu);
  }
  return std::copysign(r, x);
}

void load_row(const afz_tensor& t, int64_t b, int64_t h, int64_t s, int n, float* out) {
  const int64_t base = element_offset(t, b, h, s, 0);
  const int64_t step = t.stride[3];
  const char* data = static_cast<const char*>(t.data);
  uint16_t bits;
  switch (t.dtype) {
    case AFZ_F32:
      for (int x = 0; x < n; ++x) std::memcpy(&out[x], data + (base + x * step) * 4, 4);
      return;
    case AFZ_BF16:
      for (int x = 0; x < n; ++x) {
        std::memcpy(&bits, data + (base + x * step) * 2, 2);
        out[x] = bf16_to_float(bits);
      }
      return;
    case AFZ_F16:
      for (int x = 0; x < n; ++x) {
        std::memcpy(&bits, data + (base + x * step) * 2, 2);
        out[x] = f16_to_float(bits);
      }
      return;
    default: {
      const int size = size_of(t.dtype);
      for (int x = 0; x < n; ++x) out[x] = float(load(t.dtype, data + (base + x * step) * size));
    }
  }
}

HeadView::HeadView(const afz_problem& p_, int b_, int h_)
    : p(p_), b(b_), h(h_), kv_head(h_ / (p_.heads_q / p_.heads_kv)),
      seqlen_q(p_.seqlens_q[b_]), seqlen_k(p_.seqlens_k[b_]),
      offset(p_.align == AFZ_ALIGN_BOTTOM_RIGHT ? int64_t(seqlen_k) - seqlen_q : 0) {}

void HeadView::load_q_rows(int i0, int count, float* out) const {
  for (int r = 0; r < count; ++r) load_q(i0 + r, out + int64_t(r) * p.head_dim);
}

void HeadView::load_kv_rows(int64_t j0, int count, float* k_out, float* v_out) const {
  for (int c = 0; c < count; ++c) {
    load_k(j0 + c, k_out + int64_t(c) * p.head_dim);
    load_v(j0 + c, v_out + int64_t(c) * p.head_dim_v);
  }
}

bool HeadView::mask_keeps(int64_t i, int64_t j) const {
  const uint8_t* m = static_cast<const uint8_t*>(p.bool_mask.data);
  return m[element_offset(p.bool_mask, b, h, i, j)] != 0;
}

float HeadView::add_mask(int64_t i, int64_t j) const {
  float a;
  const char* m = static_cast<const char*>(p.add_mask.data);
  std::memcpy(&a, m + element_offset(p.add_mask, b, h, i, j) * 4, 4);
  return a;
}

void HeadView::store_row(int i, const float* o, float lse) const {
  char* data = static_cast<char*>(p.o.data);
  const int size = size_of(p.o.dtype);
  for (int x = 0; x < p.head_dim_v; ++x)
    store(p.o.dtype, data + element_offset(p.o, b, h, i, x) * size, double(o[x]));
  if (p.lse) p.lse[b * p.lse_stride[0] + h * p.lse_stride[1] + i * p.lse_stride[2]] = lse;
}

}  // namespace afz::cpu
