#include "harness/run/gpu/protocol.h"

#include "harness/run/gpu/wire.h"

namespace afz::gpu {

std::vector<uint8_t> encode_reply(const Reply& r) {
  WireWriter w;
  w.put(kReplyMagic);
  w.put(uint8_t(r.status));
  w.str(r.message);
  w.put(r.seconds);
  w.put<uint8_t>(r.fatal);
  w.str(r.oob);
  w.blob(r.o.data(), r.o.size());
  w.blob(r.lse.data(), r.lse.size());
  w.put<uint32_t>(uint32_t(r.extra.size()));
  for (const auto& x : r.extra) w.blob(x.data(), x.size());
  return std::move(w.data());
}

Reply decode_reply(const std::vector<uint8_t>& frame) {
  WireReader rd(frame.data(), frame.size());
  if (rd.get<uint32_t>() != kReplyMagic) throw WireError("not a worker reply");
  Reply r;
  const uint8_t status = rd.get<uint8_t>();
  if (status > uint8_t(ReplyStatus::Hang)) throw WireError("bad reply status");
  r.status = ReplyStatus(status);
  r.message = rd.str();
  r.seconds = rd.get<double>();
  r.fatal = rd.get<uint8_t>() != 0;
  r.oob = rd.str();
  uint64_t n = 0;
  const uint8_t* o = rd.blob(&n);
  r.o.assign(o, o + n);
  const uint8_t* l = rd.blob(&n);
  r.lse.assign(l, l + n);
  const uint32_t n_extra = rd.get<uint32_t>();
  if (n_extra > kBackwardExtraCount) throw WireError("too many extra outputs in a reply");
  r.extra.resize(n_extra);
  for (auto& x : r.extra) {
    const uint8_t* at = rd.blob(&n);
    x.assign(at, at + n);
  }
  if (!rd.done()) throw WireError("trailing bytes in a reply");
  return r;
}

}  // namespace afz::gpu
