#include "kernels/abi/tensor_span.h"

#include <algorithm>

#include "kernels/abi/dtype.h"

namespace afz {

const char* slot_name(int slot) {
  static const char* const kNames[kSlotCount] = {"q", "k", "v", "bool_mask", "add_mask", "o", "lse"};
  return slot >= 0 && slot < kSlotCount ? kNames[slot] : "?";
}

TensorRef tensor_ref_of(const afz_tensor& t, int64_t e0, int64_t e1, int64_t e2, int64_t e3) {
  TensorRef r;
  r.present = t.data != nullptr;
  r.data = t.data;
  r.dtype = t.dtype;
  std::copy(t.stride, t.stride + 4, r.stride);
  r.extent[0] = e0;
  r.extent[1] = e1;
  r.extent[2] = e2;
  r.extent[3] = e3;
  return r;
}

TensorRef tensor_ref(const afz_problem& p, int slot) {
  TensorRef t;
  auto from = [&](const afz_tensor& x, int64_t b, int64_t h, int64_t s, int64_t d) { t = tensor_ref_of(x, b, h, s, d); };
  switch (slot) {
    case kQ: from(p.q, p.batch, p.heads_q, p.max_seqlen_q, p.head_dim); break;
    case kK: from(p.k, p.batch, p.heads_kv, p.max_seqlen_k, p.head_dim); break;
    case kV: from(p.v, p.batch, p.heads_kv, p.max_seqlen_k, p.head_dim_v); break;
    case kBoolMask: from(p.bool_mask, p.batch, p.heads_q, p.max_seqlen_q, p.max_seqlen_k); break;
    case kAddMask: from(p.add_mask, p.batch, p.heads_q, p.max_seqlen_q, p.max_seqlen_k); break;
    case kO: from(p.o, p.batch, p.heads_q, p.max_seqlen_q, p.head_dim_v); break;
    case kLse: {
      afz_tensor l{};
      l.data = p.lse;
      l.dtype = AFZ_F32;
      std::copy(p.lse_stride, p.lse_stride + 3, l.stride + 1);
      from(l, 1, p.batch, p.heads_q, p.max_seqlen_q);
      break;
    }
    default: break;
  }
  return t;
}

Span tensor_span(const TensorRef& t) {
  Span s;
  s.elem_bytes = size_of(t.dtype);
  if (!t.present) return s;
  for (int a = 0; a < 4; ++a)
    if (t.extent[a] <= 0) return s;  // no element at all
  s.hi = 1;
  for (int a = 0; a < 4; ++a) {
    const int64_t reach = (t.extent[a] - 1) * t.stride[a];
    if (reach < 0) s.lo += reach;
    else s.hi += reach;
  }
  return s;
}

}  // namespace afz
