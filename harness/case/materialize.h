// Case -> tensors, bit-identical on every machine.
//
// Values are generated logically ([b][h][s][d] doubles built from integers,
// then transformed) and then rounded to the input dtype with round_bits as
// they are scattered into the case's memory layout (one pass).  The logical
// tensors are not kept: logical() rebuilds them, rounded, on first use, so a
// case past 2^31 elements holds its inputs once, in the input dtype.  Padding past each sequence
// length and the gaps between rows hold poison (NaN or Inf), which a correct
// kernel never reads.  Outputs are filled with a signalling-NaN pattern
// before every run, so an element the kernel never wrote is recognisable.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "harness/case/case.h"
#include "harness/case/distribution_fill.h"
#include "kernels/abi/attnfuzz_kernel.h"

namespace afz {

// Logical tensors in double, already rounded to the input dtype.
struct LogicalTensors {
  int batch = 0, heads_q = 0, heads_kv = 0, sq = 0, sk = 0, d = 0, dv = 0;
  std::vector<double> q;  // [b][heads_q][sq][d]
  std::vector<double> k;  // [b][heads_kv][sk][d]
  std::vector<double> v;  // [b][heads_kv][sk][dv]
  double& Q(int b, int h, int i, int x) { return q[((int64_t(b) * heads_q + h) * sq + i) * d + x]; }
  double& K(int b, int h, int j, int x) { return k[((int64_t(b) * heads_kv + h) * sk + j) * d + x]; }
  double& V(int b, int h, int j, int x) { return v[((int64_t(b) * heads_kv + h) * sk + j) * dv + x]; }
  double V(int b, int h, int j, int x) const { return v[((int64_t(b) * heads_kv + h) * sk + j) * dv + x]; }
};

// Poison patterns for unwritten outputs: signalling NaNs with a payload that
// no arithmetic produces (arithmetic only ever yields quiet NaNs).
inline constexpr uint32_t kPoisonF32 = 0x7fa5a5a5u;
inline constexpr uint16_t kPoisonF16 = 0x7d5a;
inline constexpr uint16_t kPoisonBF16 = 0x7fa5;
uint32_t output_poison_bits(afz_dtype t);

class Materialized {
 public:
  // Throws std::runtime_error with a one-line message for cases that are
  // valid text but cannot be built (validate_case first to avoid that).
  explicit Materialized(const Case& c);
  Materialized(const Materialized&) = delete;
  Materialized& operator=(const Materialized&) = delete;

  const Case& spec() const { return case_; }
  const afz_problem& problem() const { return problem_; }
  afz_problem& problem() { return problem_; }
  // The logical tensors, rounded to the input dtype: built on first use
  // (thread-safe), then kept.
  const LogicalTensors& logical() const;

  // Refill O and LSE with poison (before each run).
  void poison_outputs();
  // Read the kernel's outputs at logical indices.
  double o_at(int b, int h, int i, int x) const;
  uint32_t o_bits_at(int b, int h, int i, int x) const;
  float lse_at(int b, int h, int i) const;
  // Visible(b, i, j): the key takes part for query i of sequence b, under
  // seqlens, causal/window, and the boolean mask (head-independent).
  bool visible(int b, int h, int i, int j) const;
  double add_mask_at(int b, int h, int i, int j) const;  // 0 without one

  // FNV-1a over the bits of every valid input element, in logical order:
  // pinned in tests so materialization stays bit-identical.
  uint64_t input_hash() const;
  // Snapshot / compare of the output bits (nondeterminism check).
  std::vector<uint8_t> output_bytes() const;
  // Restores outputs from output_bytes() taken elsewhere (an isolated child).
  bool set_output_bytes(const std::vector<uint8_t>& bytes);

 private:
  Case case_;
  mutable std::once_flag logical_built_;
  mutable LogicalTensors logical_;
  std::vector<int32_t> seqlens_q_, seqlens_k_;
  // Input buffers, left uninitialized by the allocation: the scatter writes
  // every byte (values, padding and gap poison).
  std::unique_ptr<uint8_t[]> qkv_storage_, q_storage_, k_storage_, v_storage_;
  std::vector<uint8_t> bool_storage_;
  std::vector<float> add_storage_;
  std::vector<uint8_t> o_storage_;
  std::vector<float> lse_storage_;
  afz_problem problem_{};
};

// Applies the case's value recipe: base distributions, transforms, K and V
// broadcast; the values are not yet rounded to the input dtype.
void generate_unrounded(const Case& c, LogicalTensors& t);
// generate_unrounded, then every value rounded to the input dtype.
void generate_logical(const Case& c, LogicalTensors& t);

}  // namespace afz
