#include "kernels/cudnn/mask_bias.h"

#include <limits>

namespace afz::cudnn {
namespace {
constexpr int kAxes = 4;
}  // namespace

Dims MaskBias::strides() const {
  Dims s = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
  for (int a = 0; a < kAxes; ++a)
    if (dims[a] == 1) s[a] = 0;
  return s;
}

int64_t mask_span_elements(const afz_tensor& t, const Dims& extent) {
  int64_t last = 0;
  for (int a = 0; a < kAxes; ++a) last += (extent[a] - 1) * t.stride[a];
  return last + 1;
}

MaskBias merge_masks(const afz_problem& p, const uint8_t* keep, const float* add_values) {
  const Dims full = {p.batch, p.heads_q, p.max_seqlen_q, p.max_seqlen_k};
  MaskBias out;
  for (int a = 0; a < kAxes; ++a) {
    const bool bool_broadcast = p.bool_mask.stride[a] == 0;
    const bool add_broadcast = !add_values || p.add_mask.stride[a] == 0;
    out.dims[a] = bool_broadcast && add_broadcast ? 1 : full[a];
  }
  const Dims& d = out.dims;
  out.values.resize(size_t(d[0] * d[1] * d[2] * d[3]));
  const float masked = -std::numeric_limits<float>::infinity();
  size_t e = 0;
  for (int64_t b = 0; b < d[0]; ++b)
    for (int64_t h = 0; h < d[1]; ++h)
      for (int64_t i = 0; i < d[2]; ++i)
        for (int64_t j = 0; j < d[3]; ++j, ++e) {
          const int64_t idx[kAxes] = {b, h, i, j};
          int64_t mo = 0, ao = 0;
          for (int a = 0; a < kAxes; ++a) {
            mo += idx[a] * p.bool_mask.stride[a];
            if (add_values) ao += idx[a] * p.add_mask.stride[a];
          }
          out.values[e] = keep[mo] ? (add_values ? add_values[ao] : 0.0f) : masked;
        }
  return out;
}

}  // namespace afz::cudnn
