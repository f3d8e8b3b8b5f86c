// Tiny afz_kernel fakes for harness tests: each writes its outputs from the
// oracle (so it is exactly right) and then applies one planted defect.
#pragma once
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "harness/case/materialize.h"
#include "kernels/abi/attnfuzz_kernel.h"
#include "kernels/abi/dtype.h"
#include "oracles/oracle.h"

namespace afz::testing {

struct FakeKernel {
  afz_kernel k{};
  // Called per valid element and row; return the value to store.
  std::function<double(int b, int h, int i, int x, double exact)> o_value;
  std::function<double(int b, int h, int i, double exact)> lse_value;
  std::function<bool(int b, int h, int i, int x)> skip;  // leave unwritten
  std::function<int()> before;  // may crash or hang, or return a nonzero code
  std::string error;             // the message written with a nonzero code
  const OracleResult* oracle = nullptr;

  static int run(const afz_kernel* self, const afz_problem* p, char* error, size_t error_len) {
    auto* f = static_cast<FakeKernel*>(self->user);
    if (f->before) {
      if (int rc = f->before(); rc != 0) {
        if (error && error_len) std::snprintf(error, error_len, "%s", f->error.c_str());
        return rc;
      }
    }
    const OracleResult& r = *f->oracle;
    for (int b = 0; b < p->batch; ++b)
      for (int h = 0; h < p->heads_q; ++h)
        for (int i = 0; i < p->seqlens_q[b]; ++i) {
          const int64_t ri = r.row_index(b, h, i);
          for (int x = 0; x < p->head_dim_v; ++x) {
            const DD e = r.o[ri * r.dv + x];
            const double exact = e.hi + e.lo;
            auto* at = static_cast<uint8_t*>(p->o.data) +
                       (b * p->o.stride[0] + h * p->o.stride[1] + i * p->o.stride[2] + x * p->o.stride[3]) *
                           size_of(p->o.dtype);
            if (f->skip && f->skip(b, h, i, x)) continue;
            // Exact value correctly rounded, or the defect's value rounded.
            const uint32_t bits = f->o_value ? round_bits(format_of(p->o.dtype), f->o_value(b, h, i, x, exact))
                                             : round_bits(format_of(p->o.dtype), e.hi, e.lo);
            store_bits(p->o.dtype, at, bits);
          }
          if (p->lse) {
            const double exact = r.lse[ri].hi;
            const double v = f->lse_value ? f->lse_value(b, h, i, exact) : exact;
            p->lse[b * p->lse_stride[0] + h * p->lse_stride[1] + i * p->lse_stride[2]] = float(v);
          }
        }
    return 0;
  }

  FakeKernel(afz_dtype in, afz_dtype out) {
    k.name = "fake";
    k.description = "oracle-exact fake with planted defects";
    k.caps.flags = ~uint32_t(AFZ_CAP_GPU | AFZ_CAP_NONDETERMINISTIC);
    k.caps.in_dtypes = 1u << in;
    k.caps.out_dtypes = 1u << out;
    k.caps.min_head_dim = 1;
    k.caps.max_head_dim = 1024;
    k.caps.head_dim_multiple = 1;
    k.precision = {AFZ_F32, in, AFZ_F32, 2.0f, 0, /*l_from_unrounded_p=*/0};
    k.conventions = {AFZ_MASKED_ROW_ZERO, AFZ_EMPTY_LSE_NEG_INF};
    k.run = &FakeKernel::run;
    k.user = this;
  }
  FakeKernel(const FakeKernel&) = delete;
};

}  // namespace afz::testing
