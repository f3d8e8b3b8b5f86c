#include "harness/judge/verdict_inputs.h"

#include <algorithm>
#include <cmath>

#include "kernels/abi/dtype.h"

namespace afz {

namespace {
template <class T>
const T* data_or_null(const std::vector<T>& v) {
  return v.empty() ? nullptr : v.data();
}
}  // namespace

verdict_steps::Inputs host_inputs(const afz_kernel& k, const Materialized& m, const OracleResult& r,
                                  const bound_steps::Model& model) {
  const afz_problem& p = m.problem();
  verdict_steps::Inputs in{};
  verdict_steps::Outputs& o = in.out;
  o.o = static_cast<const unsigned char*>(p.o.data);
  o.o_dtype = p.o.dtype;
  o.o_format = format_of(p.o.dtype);
  o.o_bytes = size_of(p.o.dtype);
  std::copy_n(p.o.stride, 4, o.o_stride);
  o.o_poison = output_poison_bits(p.o.dtype);
  // The ABI's promise: an LSE only from a kernel that declares it.
  o.lse = p.lse && (k.caps.flags & AFZ_CAP_LSE) ? p.lse : nullptr;
  std::copy_n(p.lse_stride, 3, o.lse_stride);
  verdict_steps::Reference& ref = in.ref;
  ref.o = r.o.data();
  ref.cond = r.cond.data();
  ref.cond_score = r.cond_score.data();
  ref.cond_tiny = r.cond_tiny.data();
  ref.o_err = data_or_null(r.o_err);
  ref.lse = r.lse.data();
  ref.empty = r.empty.data();
  ref.max_abs_score = r.max_abs_score.data();
  ref.lse_err = data_or_null(r.lse_err);
  ref.visible_keys = data_or_null(r.visible_keys);
  ref.max_key = data_or_null(r.max_key);
  in.heads_q = r.heads_q;
  in.max_sq = r.max_sq;
  in.dv = r.dv;
  in.masked_row_nan = k.conventions.masked_row_output == AFZ_MASKED_ROW_NAN;
  in.empty_lse = k.conventions.empty_lse;
  in.lse_poison = kPoisonF32;
  in.model = model;
  return in;
}

bound_steps::Model bound_model(const afz_kernel& k, const afz_problem& p) {
  return ErrorBound(k.precision, p.q.dtype, p.o.dtype, p.head_dim).model();
}

RowTerms row_terms(const afz_problem& p, const OracleResult& r, int64_t ri) {
  const int b = int(ri / r.max_sq / r.heads_q);
  const int n = r.visible_keys.empty() ? p.seqlens_k[b] : r.visible_keys[ri];
  const double max_sigma = r.max_sigma.empty() ? r.max_abs_score[ri] : r.max_sigma[ri];
  // ln l <= ln N: l sums N terms each at most 1.
  return {n, r.lse_cond_score[ri], max_sigma, std::log(double(std::max(n, 1)))};
}

}  // namespace afz
