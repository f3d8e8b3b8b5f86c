#include "harness/run/gpu/problem_wire.h"

#include <algorithm>

#include "harness/case/materialize.h"
#include "kernels/abi/dtype.h"

namespace afz::gpu {

const char* slot_name(int slot) {
  static const char* const kNames[kSlotCount] = {"q", "k", "v", "bool_mask", "add_mask", "o", "lse"};
  return slot >= 0 && slot < kSlotCount ? kNames[slot] : "?";
}

TensorRef tensor_ref(const afz_problem& p, int slot) {
  TensorRef t;
  auto from = [&](const afz_tensor& x, int64_t b, int64_t h, int64_t s, int64_t d) {
    t.present = x.data != nullptr;
    t.data = x.data;
    t.dtype = x.dtype;
    std::copy(x.stride, x.stride + 4, t.stride);
    t.extent[0] = b;
    t.extent[1] = h;
    t.extent[2] = s;
    t.extent[3] = d;
  };
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

void encode_problem(WireWriter& w, const std::string& kernel_name, const std::string& kernel_library,
                    const afz_problem& p) {
  w.str(kernel_name);
  w.str(kernel_library);
  // The scalars travel as the struct itself; its pointers are rebuilt on the other side.
  w.put(p);
  w.bytes(p.seqlens_q, sizeof(int32_t) * size_t(p.batch));
  w.bytes(p.seqlens_k, sizeof(int32_t) * size_t(p.batch));
  for (int s = 0; s < kSlotCount; ++s) {
    const TensorRef t = tensor_ref(p, s);
    const Span span = tensor_span(t);
    w.put<uint8_t>(t.present);
    w.put(span);
    // Inputs travel whole, padding and gaps with their poison; outputs are poisoned there.
    if (t.present && !is_output(s))
      w.bytes(static_cast<const uint8_t*>(t.data) + span.lo_bytes(), size_t(span.bytes()));
  }
}

void rebase(afz_problem& p, const std::array<uint8_t*, kSlotCount>& data) {
  p.q.data = data[kQ];
  p.k.data = data[kK];
  p.v.data = data[kV];
  p.bool_mask.data = data[kBoolMask];
  p.add_mask.data = data[kAddMask];
  p.o.data = data[kO];
  p.lse = reinterpret_cast<float*>(data[kLse]);
}

void decode_problem(WireReader& r, WireProblem* out) {
  WireProblem& w = *out;
  w.kernel_name = r.str();
  w.kernel_library = r.str();
  w.p = r.get<afz_problem>();
  if (w.p.batch < 0 || w.p.batch > (1 << 20)) throw WireError("batch out of range");
  w.seqlens_q.resize(size_t(w.p.batch));
  w.seqlens_k.resize(size_t(w.p.batch));
  for (auto& v : w.seqlens_q) v = r.get<int32_t>();
  for (auto& v : w.seqlens_k) v = r.get<int32_t>();
  w.p.seqlens_q = w.seqlens_q.data();
  w.p.seqlens_k = w.seqlens_k.data();
  w.p.stream = nullptr;
  std::array<uint8_t*, kSlotCount> data{};
  for (int s = 0; s < kSlotCount; ++s) {
    const bool present = r.get<uint8_t>() != 0;
    w.span[s] = r.get<Span>();
    if (w.span[s].bytes() < 0 || w.span[s].lo > 0) throw WireError("bad span");
    // The sender's pointers are meaningless here: only dtypes, strides and extents count.
    w.ref[s] = tensor_ref(w.p, s);
    w.ref[s].present = present;
    std::vector<uint8_t>& b = w.bytes[s];
    if (!present) {
      b.clear();
      data[s] = nullptr;
      continue;
    }
    if (is_output(s)) {
      b.resize(size_t(w.span[s].bytes()));
      const afz_dtype t = w.ref[s].dtype;
      const int sz = size_of(t);
      for (size_t at = 0; at + sz <= b.size(); at += sz) store_bits(t, b.data() + at, output_poison_bits(t));
    } else {
      const uint64_t n = uint64_t(w.span[s].bytes());
      const uint8_t* src = r.raw(n);
      b.assign(src, src + n);
    }
    data[s] = w.data(s);
  }
  rebase(w.p, data);
  if (!r.done()) throw WireError("trailing bytes in a request");
}

}  // namespace afz::gpu
