#include "harness/run/gpu/mirror.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "harness/case/materialize.h"
#include "kernels/abi/dtype.h"

namespace afz::gpu {
namespace {

// Buffer ids in the GuardedMemory: one per tensor slot, then the seqlens.
constexpr int kSeqlensQBuffer = kSlotCount;
constexpr int kSeqlensKBuffer = kSlotCount + 1;
constexpr int kFirstExtraBuffer = kSlotCount + 2;
constexpr uint8_t kMaskGuardByte = 0xa5;  // neither 0 nor 1: no boolean-mask value

int64_t floor_mod(int64_t a, int64_t m) { return ((a % m) + m) % m; }

uint32_t element_bits(const uint8_t* at, int bytes) {
  if (bytes == 4) { uint32_t w; std::memcpy(&w, at, 4); return w; }
  if (bytes == 2) { uint16_t w; std::memcpy(&w, at, 2); return w; }
  return *at;
}

}  // namespace

Pattern Mirror::pattern_for(afz_dtype t, bool output, const uint8_t* region_start, const uint8_t* data) {
  Pattern p;
  p.bytes = size_of(t);
  if (output) p.bits = output_poison_bits(t);
  else if (t == AFZ_U8) p.bits = kMaskGuardByte;
  else p.bits = quiet_nan_bits(t);
  p.phase = int(floor_mod(region_start - data, p.bytes));
  return p;
}

Pattern Mirror::guard_pattern(const WireProblem& w, int slot, const uint8_t* region_start) const {
  return pattern_for(w.ref[slot].dtype, is_output(slot), region_start, data_[slot]);
}

Mirror::Placed Mirror::place(int id, const TensorRef& ref, const Span& sp, bool output, const uint8_t* bytes,
                             afz_dtype dtype) {
  Placed at;
  const size_t n = size_t(sp.bytes());
  // Keep the sender's alignment modulo kAlignment (buffers are kAlignment-aligned).
  const auto sender_start = reinterpret_cast<uintptr_t>(ref.data) + uintptr_t(sp.lo_bytes());
  at.front = kGuardBytes + sender_start % kAlignment;
  uint8_t* base = mem_.buffer(id, at.front + n + kGuardBytes);
  if (!base) return at;
  at.span = base + at.front;
  at.data = at.span - sp.lo_bytes();
  if (output) {
    mem_.fill(base, at.front + n + kGuardBytes, pattern_for(dtype, true, base, at.data));
  } else {
    mem_.fill(base, at.front, pattern_for(dtype, false, base, at.data));
    mem_.put(at.span, bytes, n);
    mem_.fill(at.span + n, kGuardBytes, pattern_for(dtype, false, at.span + n, at.data));
  }
  return at;
}

std::string Mirror::guard_damage(const char* name, const Placed& at, size_t span_bytes, const Pattern& front,
                                 const Pattern& back) {
  uint8_t* start = at.span - at.front;
  if (int64_t off = mem_.first_mismatch(start, at.front, front); off >= 0)
    return fmt::format("{} guard margin written {} bytes before the tensor's first element", name,
                       int64_t(at.front) - off);
  if (int64_t off = mem_.first_mismatch(at.span + span_bytes, kGuardBytes, back); off >= 0)
    return fmt::format("{} guard margin written {} bytes past the tensor's last element", name, off);
  return "";
}

std::string Mirror::upload(const WireProblem& w, afz_problem* out) {
  for (int s = 0; s < kSlotCount; ++s) {
    span_[s] = data_[s] = nullptr;
    if (!w.ref[s].present) continue;
    const Placed at = place(s, w.ref[s], w.span[s], is_output(s), w.bytes[s].data(), w.ref[s].dtype);
    if (!at.span) return mem_.error();
    span_[s] = at.span;
    data_[s] = at.data;
    front_[s] = at.front;
  }
  const size_t seq_bytes = sizeof(int32_t) * w.seqlens_q.size();
  auto* sq = reinterpret_cast<int32_t*>(mem_.buffer(kSeqlensQBuffer, std::max<size_t>(seq_bytes, 4)));
  auto* sk = reinterpret_cast<int32_t*>(mem_.buffer(kSeqlensKBuffer, std::max<size_t>(seq_bytes, 4)));
  if (!sq || !sk) return mem_.error();
  mem_.put(reinterpret_cast<uint8_t*>(sq), reinterpret_cast<const uint8_t*>(w.seqlens_q.data()), seq_bytes);
  mem_.put(reinterpret_cast<uint8_t*>(sk), reinterpret_cast<const uint8_t*>(w.seqlens_k.data()), seq_bytes);
  extra_.assign(w.extra.size(), Placed{});
  for (size_t i = 0; i < w.extra.size(); ++i) {
    const WireExtra& x = w.extra[i];
    extra_[i] = place(kFirstExtraBuffer + int(i), x.ref, x.span, x.output, x.bytes.data(), x.ref.dtype);
    if (!extra_[i].span) return mem_.error();
  }
  *out = w.p;
  rebase(*out, data_);
  out->seqlens_q = sq;
  out->seqlens_k = sk;
  out->stream = nullptr;
  return mem_.error();
}

std::string Mirror::download_and_check(WireProblem& w, std::string* oob) {
  oob->clear();
  for (int s = kO; s <= kLse; ++s)
    if (w.ref[s].present) mem_.get(w.bytes[s].data(), span_[s], size_t(w.span[s].bytes()));
  for (size_t i = 0; i < w.extra.size(); ++i)
    if (w.extra[i].output) mem_.get(w.extra[i].bytes.data(), extra_[i].span, w.extra[i].bytes.size());
  std::vector<std::string> damage;
  for (int s = 0; s < kSlotCount; ++s) {
    if (!w.ref[s].present) continue;
    const Placed at{span_[s], data_[s], front_[s]};
    const size_t n = size_t(w.span[s].bytes());
    if (std::string d = guard_damage(slot_name(s), at, n, guard_pattern(w, s, span_[s] - front_[s]),
                                     guard_pattern(w, s, span_[s] + n));
        !d.empty())
      damage.push_back(d);
  }
  for (size_t i = 0; i < w.extra.size(); ++i) {
    const WireExtra& x = w.extra[i];
    const Placed& at = extra_[i];
    const size_t n = x.bytes.size();
    if (std::string d = guard_damage(x.name.c_str(), at, n, pattern_for(x.ref.dtype, x.output, at.span - at.front, at.data),
                                     pattern_for(x.ref.dtype, x.output, at.span + n, at.data));
        !d.empty())
      damage.push_back(d);
  }
  if (std::string e = mem_.error(); !e.empty()) return e;
  if (std::string inside = check_outputs_outside_valid(w); !inside.empty()) damage.push_back(inside);
  if (!damage.empty())
    *oob = damage.size() == 1 ? damage[0]
                              : fmt::format("{} (and {} more damaged regions)", damage[0], damage.size() - 1);
  return "";
}

std::string check_outputs_outside_valid(const WireProblem& w) {
  for (int s = kO; s <= kLse; ++s) {
    if (!w.ref[s].present) continue;
    const TensorRef& t = w.ref[s];
    const Span& sp = w.span[s];
    const int esz = sp.elem_bytes;
    const uint32_t poison = output_poison_bits(t.dtype);
    const uint8_t* bytes = w.bytes[s].data();
    const int64_t elems = sp.hi - sp.lo;
    // The valid elements, as positions in the span: [1][b][h][i] for the LSE,
    // [b][h][i][x] for O; i < seqlen_q of the row's sequence.
    std::vector<uint8_t> valid(size_t(elems), 0);
    const bool lse = s == kLse;
    const int64_t n_b = lse ? t.extent[1] : t.extent[0];
    const int64_t n_h = lse ? t.extent[2] : t.extent[1];
    const int64_t n_x = lse ? 1 : t.extent[3];
    const int64_t sb = lse ? t.stride[1] : t.stride[0], sh = lse ? t.stride[2] : t.stride[1];
    const int64_t si = lse ? t.stride[3] : t.stride[2], sx = lse ? 0 : t.stride[3];
    const int64_t max_sq = lse ? t.extent[3] : t.extent[2];
    for (int64_t b = 0; b < n_b; ++b)
      for (int64_t h = 0; h < n_h; ++h)
        for (int64_t i = 0; i < max_sq; ++i)
          for (int64_t x = 0; x < n_x; ++x) {
            const int64_t e = b * sb + h * sh + i * si + x * sx - sp.lo;
            if (i < w.seqlens_q[size_t(b)]) {
              valid[size_t(e)] = 1;
            } else if (element_bits(bytes + e * esz, esz) != poison) {
              return fmt::format("{}[b={} h={} i={}] written: a padding row past seqlen_q = {}", slot_name(s), b, h,
                                 i, w.seqlens_q[size_t(b)]);
            }
          }
    for (int64_t e = 0; e < elems; ++e)
      if (!valid[size_t(e)] && element_bits(bytes + e * esz, esz) != poison)
        return fmt::format("{} written at element offset {} from its start: a row gap, no valid element",
                           slot_name(s), e + sp.lo);
  }
  return "";
}

}  // namespace afz::gpu
