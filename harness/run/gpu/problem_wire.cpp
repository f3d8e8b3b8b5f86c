#include "harness/run/gpu/problem_wire.h"

#include <algorithm>

#include "harness/case/materialize.h"
#include "kernels/abi/dtype.h"

namespace afz::gpu {

void encode_problem(WireWriter& w, const std::string& kernel_name, const std::string& kernel_library,
                    const afz_problem& p, const std::vector<ExtraTensor>& extra) {
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
  w.put<uint32_t>(uint32_t(extra.size()));
  for (const ExtraTensor& x : extra) {
    const Span span = tensor_span(x.ref);
    w.str(x.name);
    w.put(x.ref);
    w.put(span);
    w.put<uint8_t>(x.output);
    if (!x.output) w.bytes(static_cast<const uint8_t*>(x.ref.data) + span.lo_bytes(), size_t(span.bytes()));
  }
}

namespace {

// Output bytes as the kernel must find them before it runs.
void poison(std::vector<uint8_t>& b, afz_dtype t) {
  const int sz = size_of(t);
  for (size_t at = 0; at + sz <= b.size(); at += sz) store_bits(t, b.data() + at, output_poison_bits(t));
}

// More extra tensors than any pass sends: a corrupt message.
constexpr uint32_t kMaxExtraTensors = 16;

}  // namespace

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
      poison(b, w.ref[s].dtype);
    } else {
      const uint64_t n = uint64_t(w.span[s].bytes());
      const uint8_t* src = r.raw(n);
      b.assign(src, src + n);
    }
    data[s] = w.data(s);
  }
  rebase(w.p, data);
  const uint32_t n_extra = r.get<uint32_t>();
  if (n_extra > kMaxExtraTensors) throw WireError("too many extra tensors");
  w.extra.resize(n_extra);
  for (WireExtra& x : w.extra) {
    x.name = r.str();
    x.ref = r.get<TensorRef>();
    x.span = r.get<Span>();
    x.output = r.get<uint8_t>() != 0;
    if (x.span.bytes() < 0 || x.span.lo > 0 || !x.ref.present) throw WireError("bad extra tensor");
    x.bytes.resize(size_t(x.span.bytes()));
    if (x.output) {
      poison(x.bytes, x.ref.dtype);
    } else {
      const uint8_t* src = r.raw(uint64_t(x.span.bytes()));
      std::copy(src, src + x.span.bytes(), x.bytes.begin());
    }
  }
  if (!r.done()) throw WireError("trailing bytes in a request");
}

}  // namespace afz::gpu
