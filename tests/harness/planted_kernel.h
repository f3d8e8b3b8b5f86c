// A correct attention kernel in double (every mask, alignment, layout and
// dtype the ABI has) with an optional planted defect, for campaign,
// minimizer and corpus tests that must not depend on the real CPU kernels.
#pragma once
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "kernels/abi/attnfuzz_kernel.h"
#include "kernels/abi/dtype.h"

namespace afz::testing {

struct PlantedKernel {
  afz_kernel k{};
  // When it returns true for sequence b, every non-empty row of b gets
  // o[..., 0] += 1: a numeric mismatch the minimizer has to corner.
  std::function<bool(const afz_problem& p, int b)> defect;
  // Every other run writes each LSE one fp32 ulp up: well inside its bound,
  // so each run alone passes, but two runs on the same inputs differ.
  bool jitter = false;
  mutable std::atomic<uint64_t> runs{0};

  static const uint8_t* at(const afz_tensor& t, int b, int h, int s, int d) {
    return static_cast<const uint8_t*>(t.data) +
           (b * t.stride[0] + h * t.stride[1] + s * t.stride[2] + d * t.stride[3]) * size_of(t.dtype);
  }

  static int run(const afz_kernel* self, const afz_problem* pp, char*, size_t) {
    const auto* me = static_cast<const PlantedKernel*>(self->user);
    const afz_problem& p = *pp;
    const bool jitter_now = me->jitter && me->runs.fetch_add(1) % 2 == 1;
    const int group = p.heads_q / p.heads_kv;
    std::vector<double> s(size_t(p.max_seqlen_k));
    for (int b = 0; b < p.batch; ++b) {
      const bool broken = me->defect && me->defect(p, b);
      const int sq = p.seqlens_q[b], sk = p.seqlens_k[b];
      const int64_t offset = p.align == AFZ_ALIGN_BOTTOM_RIGHT ? int64_t(sk) - sq : 0;
      for (int h = 0; h < p.heads_q; ++h)
        for (int i = 0; i < sq; ++i) {
          double m = -std::numeric_limits<double>::infinity();
          for (int j = 0; j < sk; ++j) {
            s[j] = -std::numeric_limits<double>::infinity();
            if (p.has_window && ((p.window_left >= 0 && j < i + offset - p.window_left) ||
                                 (p.window_right >= 0 && j > i + offset + p.window_right)))
              continue;
            if (p.bool_mask.data && *at(p.bool_mask, b, h, i, j) == 0) continue;
            double dot = 0;
            for (int x = 0; x < p.head_dim; ++x)
              dot += load(p.q.dtype, at(p.q, b, h, i, x)) * load(p.k.dtype, at(p.k, b, h / group, j, x));
            double v = double(p.scale) * dot;
            if (p.softcap != 0) v = double(p.softcap) * std::tanh(v / double(p.softcap));
            if (p.add_mask.data) v += load(AFZ_F32, at(p.add_mask, b, h, i, j));
            s[j] = v;
            m = std::max(m, v);
          }
          double l = 0;
          std::vector<double> o(size_t(p.head_dim_v), 0.0);
          if (m != -std::numeric_limits<double>::infinity()) {
            for (int j = 0; j < sk; ++j) {
              const double w = std::exp(s[j] - m);
              l += w;
              for (int x = 0; x < p.head_dim_v; ++x) o[x] += w * load(p.v.dtype, at(p.v, b, h / group, j, x));
            }
            for (double& x : o) x /= l;
            if (broken) o[0] += 1.0;
          }
          for (int x = 0; x < p.head_dim_v; ++x)
            store(p.o.dtype, const_cast<uint8_t*>(at(p.o, b, h, i, x)), o[x]);
          if (p.lse) {
            float lse = float(l > 0 ? m + std::log(l) : -std::numeric_limits<double>::infinity());
            if (jitter_now && l > 0) lse = std::nextafter(lse, std::numeric_limits<float>::infinity());
            p.lse[b * p.lse_stride[0] + h * p.lse_stride[1] + i * p.lse_stride[2]] = lse;
          }
        }
    }
    return 0;
  }

  explicit PlantedKernel(const char* name, uint32_t flags = ~uint32_t(AFZ_CAP_GPU | AFZ_CAP_NONDETERMINISTIC)) {
    k.name = name;
    k.description = "attention in double with a planted defect";
    k.caps.flags = flags;
    k.caps.in_dtypes = (1u << AFZ_F32) | (1u << AFZ_F16) | (1u << AFZ_BF16);
    k.caps.out_dtypes = k.caps.in_dtypes;
    k.caps.min_head_dim = 1;
    k.caps.max_head_dim = 1024;
    k.caps.head_dim_multiple = 1;
    // Everything in double: tighter than any fp32 model the bound allows.
    k.precision = {AFZ_F32, AFZ_F32, AFZ_F32, 1.0f, 0, /*l_from_unrounded_p=*/1};
    k.conventions = {AFZ_MASKED_ROW_ZERO, AFZ_EMPTY_LSE_NEG_INF};
    k.run = &PlantedKernel::run;
    k.user = this;
  }
  PlantedKernel(const PlantedKernel&) = delete;
};

// The defect the minimizer tests corner: any sequence longer than 37 keys.
inline bool more_than_37_keys(const afz_problem& p, int b) { return p.seqlens_k[b] > 37; }

}  // namespace afz::testing
