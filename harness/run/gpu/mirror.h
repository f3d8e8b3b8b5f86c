// The problem a kernel actually runs on: every tensor of a WireProblem copied
// into GuardedMemory between two guard margins, [front guard | span | back
// guard], with the span placed so that each pointer keeps its alignment
// modulo 256 (a kernel that needs aligned rows sees the same layout it would
// have seen on the host).  Input margins hold NaN of the input dtype, so a
// read past a tensor shows up in the output; output margins and every output
// element hold the poison pattern before the run.  After the run a changed
// margin byte, or a changed output byte that is no valid element (padding
// rows past seqlen_q, row gaps), is an out-of-bounds write.
#pragma once
#include <array>
#include <string>

#include "harness/run/gpu/guarded_memory.h"
#include "harness/run/gpu/problem_wire.h"

namespace afz::gpu {

class Mirror {
 public:
  static constexpr size_t kGuardBytes = size_t(1) << 20;
  static constexpr size_t kAlignment = 256;

  explicit Mirror(GuardedMemory& memory) : mem_(memory) {}
  // Copies the inputs in, poisons the outputs; `out` gets w.p with the
  // mirror's pointers (stream left unset).  "" or the memory's error.
  std::string upload(const WireProblem& w, afz_problem* out);
  // Copies the outputs back into w.bytes and checks every margin and every
  // output byte that is no valid element; *oob names the first damage ("" if none).
  std::string download_and_check(WireProblem& w, std::string* oob);

 private:
  Pattern guard_pattern(const WireProblem& w, int slot, const uint8_t* region_start) const;
  GuardedMemory& mem_;
  std::array<uint8_t*, kSlotCount> span_{};
  std::array<uint8_t*, kSlotCount> data_{};
  std::array<size_t, kSlotCount> front_{};
};

// Host-side part of the check, on the downloaded spans: every output element
// that is not a valid element must still hold the poison.  "" when untouched.
std::string check_outputs_outside_valid(const WireProblem& w);

}  // namespace afz::gpu
