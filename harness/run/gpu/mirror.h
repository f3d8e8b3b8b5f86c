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
#include <vector>

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
  // The extra tensors go in the same way; extra_data(i) is where each lives.
  std::string upload(const WireProblem& w, afz_problem* out);
  uint8_t* extra_data(size_t i) const { return extra_[i].data; }
  // Copies the outputs back into w.bytes (and the extra outputs into their
  // bytes) and checks every margin and every output byte of the problem's
  // own slots that is no valid element; *oob names the first damage ("" if none).
  std::string download_and_check(WireProblem& w, std::string* oob);

 private:
  struct Placed {
    uint8_t* span = nullptr;  // first byte of the span
    uint8_t* data = nullptr;  // the tensor's element 0
    size_t front = 0;         // guard bytes before the span
  };
  // One tensor into buffer `id`: [front guard | span | back guard], inputs
  // copied, outputs and output guards poisoned.
  Placed place(int id, const TensorRef& ref, const Span& sp, bool output, const uint8_t* bytes, afz_dtype dtype);
  // The first damaged guard byte of a placed tensor, as a message ("" if none).
  std::string guard_damage(const char* name, const Placed& at, size_t span_bytes, const Pattern& front,
                           const Pattern& back);
  static Pattern pattern_for(afz_dtype t, bool output, const uint8_t* region_start, const uint8_t* data);
  Pattern guard_pattern(const WireProblem& w, int slot, const uint8_t* region_start) const;
  GuardedMemory& mem_;
  std::array<uint8_t*, kSlotCount> span_{};
  std::array<uint8_t*, kSlotCount> data_{};
  std::array<size_t, kSlotCount> front_{};
  std::vector<Placed> extra_;
};

// Host-side part of the check, on the downloaded spans: every output element
// that is not a valid element must still hold the poison.  "" when untouched.
std::string check_outputs_outside_valid(const WireProblem& w);

}  // namespace afz::gpu
