#include "kernels/python/bridge_protocol.h"

#include <stdexcept>

#include "kernels/abi/wire_format.h"

namespace afz::python {
namespace {

uint64_t align_up(uint64_t n) { return (n + kSpanAlignment - 1) / kSpanAlignment * kSpanAlignment; }

}  // namespace

Layout layout_of(const afz_problem& p) {
  Layout l;
  for (int s = 0; s < kSlotCount; ++s) {
    l.ref[s] = tensor_ref(p, s);
    l.span[s] = tensor_span(l.ref[s]);
    l.offset[s] = align_up(l.bytes);
    l.bytes = l.offset[s] + uint64_t(l.span[s].bytes());
  }
  return l;
}

std::vector<uint8_t> encode_request(uint32_t kernel_index, uint64_t shm_size, const afz_problem& p,
                                    const Layout& layout) {
  WireWriter w;
  w.put(kRequestMagic);
  w.put(kernel_index);
  w.put(shm_size);
  for (int32_t v : {p.batch, p.heads_q, p.heads_kv, p.head_dim, p.head_dim_v, p.max_seqlen_q, p.max_seqlen_k})
    w.put(v);
  w.put(p.scale);
  w.put(p.softcap);
  for (int32_t v : {p.window_left, p.window_right, p.has_window, int32_t(p.align)}) w.put(v);
  w.bytes(p.seqlens_q, sizeof(int32_t) * size_t(p.batch));
  w.bytes(p.seqlens_k, sizeof(int32_t) * size_t(p.batch));
  for (int s = 0; s < kSlotCount; ++s) {
    const TensorRef& t = layout.ref[s];
    w.put(uint8_t(t.present));
    w.put(uint8_t(t.dtype));
    for (int64_t e : t.extent) w.put(e);
    for (int64_t st : t.stride) w.put(st);
    // The view's element [0,0,0,0]: the span's start less its reach below the pointer.
    w.put(uint64_t(int64_t(layout.offset[s]) - layout.span[s].lo_bytes()));
  }
  return std::move(w.data());
}

Hello decode_hello(const std::vector<uint8_t>& frame) {
  WireReader c(frame.data(), frame.size());
  Hello h;
  if (c.get<uint32_t>() != kHelloMagic) throw std::runtime_error("the Python worker sent no greeting");
  if (const uint32_t v = c.get<uint32_t>(); v != kProtocolVersion)
    throw std::runtime_error("the Python package speaks bridge protocol " + std::to_string(v) +
                             ", this plugin speaks " + std::to_string(kProtocolVersion) +
                             " (an attnfuzz package from another checkout on PYTHONPATH?)");
  h.ok = c.get<uint8_t>() != 0;
  if (!h.ok) {
    h.error = c.str();
    return h;
  }
  h.library_version = c.str();
  const uint32_t n = c.get<uint32_t>();
  for (uint32_t i = 0; i < n; ++i) {
    Declaration d;
    d.name = c.str();
    d.description = c.str();
    d.caps.flags = c.get<uint32_t>();
    d.caps.in_dtypes = c.get<uint32_t>();
    d.caps.out_dtypes = c.get<uint32_t>();
    d.caps.min_head_dim = c.get<int32_t>();
    d.caps.max_head_dim = c.get<int32_t>();
    d.caps.head_dim_multiple = c.get<int32_t>();
    d.caps.max_seqlen = c.get<int32_t>();
    d.precision.score_dtype = afz_dtype(c.get<int32_t>());
    d.precision.p_dtype = afz_dtype(c.get<int32_t>());
    d.precision.acc_dtype = afz_dtype(c.get<int32_t>());
    d.precision.exp_ulps = c.get<float>();
    d.precision.flush_subnormals = c.get<int32_t>();
    d.precision.l_from_unrounded_p = c.get<int32_t>();
    d.conventions.masked_row_output = afz_masked_row_output(c.get<int32_t>());
    d.conventions.empty_lse = afz_empty_lse(c.get<int32_t>());
    h.kernels.push_back(std::move(d));
  }
  if (!c.done()) throw std::runtime_error("trailing bytes in the Python worker's greeting");
  return h;
}

Reply decode_reply(const std::vector<uint8_t>& frame) {
  WireReader c(frame.data(), frame.size());
  Reply r;
  if (c.get<uint32_t>() != kReplyMagic) throw std::runtime_error("not a reply from the Python worker");
  const uint8_t status = c.get<uint8_t>();
  if (status > uint8_t(ReplyStatus::Fatal)) throw std::runtime_error("bad reply status from the Python worker");
  r.status = ReplyStatus(status);
  r.message = c.str();
  r.call_s = c.get<double>();
  r.copy_in_s = c.get<double>();
  r.copy_out_s = c.get<double>();
  r.first_of_shape = c.get<uint8_t>() != 0;
  if (!c.done()) throw std::runtime_error("trailing bytes in a reply from the Python worker");
  return r;
}

}  // namespace afz::python
