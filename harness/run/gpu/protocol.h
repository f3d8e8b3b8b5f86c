// The messages between the harness and its worker process (one socket, one
// request at a time):
//   worker -> harness, once:  Hello { magic, has_device, device name or why not }
//   harness -> worker:        Request { magic, pass, kernel address, problem (problem_wire.h) }
//   worker -> harness:        Reply { magic, status, message, seconds, fatal, oob, o bytes, lse bytes,
//                                     the extra output tensors' bytes }
// A backward request (RequestPass::Backward) names a backward kernel and carries
// dO, O, LSE, dQ, dK, dV as the problem's extra tensors, in that order.
// `fatal` says the worker exits after this reply (a sticky CUDA error poisons
// its context); the harness then starts a fresh one for the next case.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace afz::gpu {

inline constexpr uint32_t kHelloMagic = 0x41465a48;    // "AFZH"
inline constexpr uint32_t kRequestMagic = 0x41465a52;  // "AFZR"
inline constexpr uint32_t kReplyMagic = 0x41465a50;    // "AFZP"

// Mirrors RunStatus (harness/run/isolate.h) on the wire.
enum class RequestPass : uint8_t { Forward = 0, Backward = 1 };
// The extra tensors of a backward request, in order.
enum BackwardExtra : int { kDout, kOut, kLseIn, kDq, kDk, kDv, kBackwardExtraCount };

enum class ReplyStatus : uint8_t { Ok = 0, Error = 1, Crash = 2, Unsupported = 3, Hang = 4 };

struct Reply {
  ReplyStatus status = ReplyStatus::Ok;
  std::string message;      // one line
  double seconds = 0;       // the kernel's own time (device events for GPU kernels)
  bool fatal = false;
  std::string oob;          // first out-of-bounds damage, "" if none
  std::vector<uint8_t> o, lse;  // output spans
  std::vector<std::vector<uint8_t>> extra;  // the extra output tensors' spans, in request order
};

std::vector<uint8_t> encode_reply(const Reply& r);
Reply decode_reply(const std::vector<uint8_t>& frame);  // throws WireError

}  // namespace afz::gpu
